"""A request body's content-encoding undone, within a bound, so that redaction can search it.

A client may compress what it sends (``Content-Encoding: gzip``); a credential in such a body is
invisible to a scan of its bytes. The bound keeps a small body that inflates without end (a
"zip bomb") from taking the recorder's memory: past it the body is said to be unsearched.
"""

from __future__ import annotations

import io
import zlib

#: The most bytes a body is decoded to for a search.
DECODED_LIMIT = 64 * 1024 * 1024


class _TooLarge(Exception):
    pass


def decoded(raw: bytes, encoding: str, limit: int | None = None) -> tuple[bytes | None, str]:
    """``raw`` with its content-encoding (gzip, deflate, zstd, br) undone, and "" ; or None and why
    it could not be (an encoding infertap doesn't decode, bytes that don't decode, more than
    ``limit``, by default ``DECODED_LIMIT``). A stream cut short gives what it holds, as a reader
    would read it."""
    limit = DECODED_LIMIT if limit is None else limit
    name = encoding.strip().lower()
    try:
        if name in ("gzip", "x-gzip"):
            return _inflated(raw, 16 + zlib.MAX_WBITS, limit), ""
        if name == "deflate":  # zlib-wrapped as the RFC says, or raw deflate as some clients send
            try:
                return _inflated(raw, zlib.MAX_WBITS, limit), ""
            except zlib.error:
                return _inflated(raw, -zlib.MAX_WBITS, limit), ""
        if name == "zstd":
            return _unzstd(raw, limit), ""
        if name == "br":
            return _unbrotli(raw, limit), ""
    except _TooLarge:
        return None, f"{name} decodes to more than {limit} bytes"
    except Exception as exc:  # each library's own error for bytes that aren't its format
        return None, f"{name} does not decode ({type(exc).__name__}: {exc})"
    return None, f"{name or 'an empty content-encoding'} is no encoding infertap decodes"


#: How much one step decodes. A body is decoded a step at a time and its pieces joined at the end,
#: which CPython does without the GIL: decoded at once, its copy into one object held the GIL, from
#: a worker thread too, for 40 ms at 48 MiB (python -m bench.redaction_encoded).
STEP = 1 << 20


def _inflated(raw: bytes, wbits: int, limit: int) -> bytes:
    """A zlib stream (gzip: each member, as gzip readers read them all, NUL padding skipped)."""
    pieces: list[bytes] = []
    size = 0
    data = raw
    while data:
        stream = zlib.decompressobj(wbits)
        while True:  # a full step may leave output inside zlib with no input left: asked again
            piece = stream.decompress(data, STEP)
            pieces.append(piece)
            size += len(piece)
            if size > limit:
                raise _TooLarge
            data = stream.unconsumed_tail
            if stream.eof or (not data and len(piece) < STEP):
                break
        if not stream.eof:
            break  # cut short: what it held
        data = stream.unused_data.lstrip(b"\0") if wbits > zlib.MAX_WBITS else b""
    return b"".join(pieces)


def _unzstd(raw: bytes, limit: int) -> bytes:
    import zstandard

    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw), read_across_frames=True)
    pieces: list[bytes] = []
    size = 0
    while piece := reader.read(STEP):
        pieces.append(piece)
        size += len(piece)
        if size > limit:
            raise _TooLarge
    return b"".join(pieces)


def _unbrotli(raw: bytes, limit: int) -> bytes:
    """A brotli stream, a step at a time as the others: asked for all of it at once (its output
    bounded only by the limit), the decoder grew one buffer past the limit (79 MiB for 64) and held
    the GIL for 60 ms of it."""
    import brotli  # mitmproxy's dependency, so there wherever infertap is installed

    stream = brotli.Decompressor()
    pieces: list[bytes] = []
    size = 0
    data = raw
    while True:  # the input is given once; then output is asked for until there is none
        piece = stream.process(data, output_buffer_limit=STEP)
        data = b""
        pieces.append(piece)
        size += len(piece)
        if size > limit:
            raise _TooLarge
        if stream.is_finished() or (not piece and stream.can_accept_more_data()):
            return b"".join(pieces)  # its end, or cut short: what it held
