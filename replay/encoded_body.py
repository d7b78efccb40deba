"""A request body sent with a content-encoding, taken apart for the body transforms and put back.

The Codex CLI sends its ``/responses`` bodies zstd-compressed (``Content-Encoding: zstd``), other
clients gzip theirs: a ``--set`` or ``--model-map`` edits the JSON inside, and the body goes out
encoded as it came, under the same recorded header, so the target reads what a client of its own
would send. It is read from the recorded headers and undone as the analysis reads the body
(``apis.body.body_encoding``, ``decoded_request``); here it is put back, a ``deflate`` body with the
wrapping it came in (zlib's, or none).
"""

from __future__ import annotations

import gzip
import zlib


def encode(data: bytes, encoding: str, *, raw_deflate: bool = False) -> bytes:
    """``data`` encoded as ``encoding`` (one of ``UNDONE``); a gzip header without a time, so the same
    body encodes to the same bytes on every pass. ``raw_deflate``: a ``deflate`` body as it came
    unwrapped (RFC 1951 alone): a server that took that form may take no other."""
    if encoding in ("gzip", "x-gzip"):
        return gzip.compress(data, mtime=0)
    if encoding == "deflate" and raw_deflate:
        stream = zlib.compressobj(wbits=-zlib.MAX_WBITS)
        return stream.compress(data) + stream.flush()
    if encoding == "deflate":
        return zlib.compress(data)  # zlib-wrapped, as RFC 9110 says deflate is
    if encoding == "zstd":
        import zstandard

        return zstandard.ZstdCompressor().compress(data)
    if encoding == "br":
        import brotli

        return bytes(brotli.compress(data))
    raise ValueError(f"its Content-Encoding {encoding!r} is none infertap encodes")
