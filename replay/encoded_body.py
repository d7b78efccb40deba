"""A request body sent with a content-encoding, taken apart for the body transforms and put back.

The Codex CLI sends its ``/responses`` bodies zstd-compressed (``Content-Encoding: zstd``), other
clients gzip theirs: a ``--set`` or ``--model-map`` edits the JSON inside, and the body goes out
encoded as it came, under the same recorded header, so the target reads what a client of its own
would send.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterable

from infertap.apis.body import DECODED_LIMIT, UNDONE, undone


def body_encoding(headers: Iterable[Iterable[str]] | None) -> str | None:
    """The content-encoding a request's recorded ``[name, value]`` headers name, lower case; None
    where they name none (or ``identity``)."""
    for pair in headers or ():
        name, value = (list(pair) + ["", ""])[:2]
        if isinstance(name, str) and name.lower() == "content-encoding" and isinstance(value, str):
            encoding = value.strip().lower()
            return encoding if encoding not in ("", "identity") else None
    return None


def decode(raw: bytes, encoding: str) -> bytes:
    """``raw`` with ``encoding`` undone: ValueError naming why not (an encoding infertap doesn't
    decode, bytes that aren't it, more than ``DECODED_LIMIT``)."""
    if encoding not in UNDONE:
        raise ValueError(f"its Content-Encoding {encoding!r} is none infertap decodes ({', '.join(UNDONE)})")
    try:
        (whole,) = undone([raw], encoding, DECODED_LIMIT)
    except Exception as exc:  # TooLarge, or each library's own error for bytes that aren't its format
        raise ValueError(f"its bytes don't decode as its Content-Encoding {encoding!r}: {exc or type(exc).__name__}") from exc
    return whole


def encode(data: bytes, encoding: str) -> bytes:
    """``data`` encoded as ``encoding`` (one of ``UNDONE``); a gzip header without a time, so the same
    body encodes to the same bytes on every pass."""
    if encoding in ("gzip", "x-gzip"):
        return gzip.compress(data, mtime=0)
    if encoding == "deflate":
        return zlib.compress(data)  # zlib-wrapped, as RFC 9110 says deflate is
    if encoding == "zstd":
        import zstandard

        return zstandard.ZstdCompressor().compress(data)
    if encoding == "br":
        import brotli

        return bytes(brotli.compress(data))
    raise ValueError(f"its Content-Encoding {encoding!r} is none infertap encodes")
