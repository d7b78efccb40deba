"""A request body sent with a content-encoding, taken apart for the body transforms and put back.

The Codex CLI sends its ``/responses`` bodies zstd-compressed (``Content-Encoding: zstd``), other
clients gzip theirs: a ``--set`` or ``--model-map`` edits the JSON inside, and the body goes out
encoded as it came, under the same recorded header, so the target reads what a client of its own
would send. It is read from the recorded headers and undone as the analysis reads the body
(``apis.body.body_encoding``, ``decoded_body``); here it is put back.
"""

from __future__ import annotations

import gzip
import zlib


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
