"""A recorded response body as its API framed it: decoded, split into payloads, each with its time.

Always computed from the recorded bytes, never stored instead of them. An SSE event's time is the
receive time of the chunk in which its terminating blank line arrived (an NDJSON line's, the chunk
holding its newline); a non-streamed body is one payload, complete with its last chunk.
"""

from __future__ import annotations

import itertools
import re
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


def header(pairs: Sequence[Sequence[str]] | None, name: str) -> str | None:
    """The first value of header ``name`` (lower case) in recorded ``[name, value]`` pairs."""
    for n, v in pairs or ():
        if n.lower() == name:
            return v
    return None


def _encoding(record: Mapping[str, Any]) -> str:
    return (header(record.get("response_headers"), "content-encoding") or "").lower().strip()


def encoded(record: Mapping[str, Any]) -> bool:
    """Whether the response came with a content-encoding (its bytes are not the body's text)."""
    return _encoding(record) not in ("", "identity")


#: The most bytes a body is decoded to (its content-encoding undone), for a reader of a response and
#: for the recorder's search of a request (``capture.encoding``): a few KiB of gzip or zstd may
#: inflate to GiB (a "zip bomb"), which would take the memory of a reader of the whole capture. Past
#: it a response is not read: its answer unknown (``TOO_LARGE``), every other exchange read as ever.
DECODED_LIMIT = 64 * 1024 * 1024
#: How much one step decodes. A body is decoded a step at a time and its pieces joined at the end,
#: which CPython does without the GIL: decoded at once, its copy into one object held the GIL, from
#: a worker thread too, for 40 ms at 48 MiB (python -m bench.redaction_encoded); and no step holds
#: much more than the limit.
STEP = 1 << 20
#: zstd's streaming object has no output bound: its input is given this much at a time (a byte of
#: zstd yields at most ~32 KiB, one RLE block's 128 KiB per 4 bytes of input).
_ZSTD_SLICE = 1024
#: The content-encodings ``undone`` undoes.
UNDONE = ("gzip", "x-gzip", "deflate", "zstd", "br")

#: Why an answer is unread where its body decodes to more than ``DECODED_LIMIT``.
TOO_LARGE = "the response body decodes to more than analysis reads of one answer (apis.body.DECODED_LIMIT, 64 MiB)"
#: Why an answer is unread where the file it was imported from said a body was sent and held none of it
#: (or only its head: a text shorter than the size the file gives).
NOT_IN_FILE = (
    "the response body is not in the file it was imported from (saved without content, or only its head; "
    "or a WebSocket's messages, not imported)"
)
#: Why an answer is unread where the recorder kept only the head of its body (over its response limit).
NOT_KEPT = "the response body was not kept whole (over the recorder's response limit, --max-response-mb: response_body_size)"


class TooLarge(Exception):
    """A body decodes to more than its limit."""


def decoded_chunks(record: Mapping[str, Any]) -> list[bytes] | None:
    """Each chunk's share of the decoded body, decoded incrementally so that chunk times still
    apply; None when the content-encoding can't be undone, or not to the body's end (bytes after a
    stream that are no stream: a caller then reads the bytes as they are), or to more than
    ``DECODED_LIMIT`` bytes (``decoding`` says which)."""
    return decoding(record)[0]


def decoding(record: Mapping[str, Any]) -> tuple[list[bytes] | None, str | None]:
    """``decoded_chunks``, and ``TOO_LARGE`` where the body decodes to more than ``DECODED_LIMIT``."""
    chunks: list[bytes] = list(record.get("chunks") or ())
    encoding = _encoding(record)
    if encoding not in UNDONE:
        return chunks, None  # identity, or one not undone here (compress): read as it is
    try:
        return undone(chunks, encoding, DECODED_LIMIT), None
    except TooLarge:
        return None, TOO_LARGE
    except Exception:  # each library's own error for bytes that aren't its format
        return None, None


def body_encoding(headers: Iterable[Iterable[str]] | None) -> str | None:
    """The content-encoding a request's recorded ``[name, value]`` headers name, lower case; None
    where they name none (or ``identity``)."""
    for pair in headers or ():
        name, value = (list(pair) + ["", ""])[:2]
        if isinstance(name, str) and name.lower() == "content-encoding" and isinstance(value, str):
            encoding = value.strip().lower()
            return encoding if encoding not in ("", "identity") else None
    return None


def decoded_body(raw: bytes, encoding: str) -> bytes:
    """``raw`` with ``encoding`` undone, as far as its bytes go: ValueError naming why not (an
    encoding infertap doesn't decode, bytes that aren't it, more than ``DECODED_LIMIT``)."""
    return decoded_request(raw, encoding).data


@dataclass(frozen=True, slots=True)
class Decoded:
    """A request body with its content-encoding undone, and what re-encoding it as it came needs."""

    data: bytes
    whole: bool  # its stream ended: False where the recorded bytes stop inside it (a body cut short)
    raw_deflate: bool = False  # ``deflate`` with no zlib wrapping (RFC 1951 alone), as some clients send it


def decoded_request(raw: bytes, encoding: str) -> Decoded:
    """``decoded_body``, saying whether the stream ended and how a ``deflate`` one was wrapped.
    Its ValueError says where the bytes are plain JSON under the encoding's label, which a server
    that undoes the encoding refuses while a reader of JSON takes it."""
    if encoding not in UNDONE:
        raise ValueError(f"its Content-Encoding {encoding!r} is none infertap decodes ({', '.join(UNDONE)})")
    try:
        got = _undo([raw], encoding, DECODED_LIMIT)
    except Exception as exc:  # TooLarge, or each library's own error for bytes that aren't its format
        if raw.lstrip()[:1] in (b"{", b"["):
            raise ValueError(
                f"its bytes are plain JSON, not the {encoding} its Content-Encoding says (a server that undoes "
                f"the encoding refuses them)"
            ) from exc
        raise ValueError(f"its bytes don't decode as its Content-Encoding {encoding!r}: {exc or type(exc).__name__}") from exc
    return Decoded(got.pieces[0], got.ended, got.raw_deflate)


def mislabelled(raw: bytes, headers: Iterable[Iterable[str]] | None, plain: bytes | None = None) -> bool:
    """Whether a request body is plain JSON under a content-encoding its bytes aren't in: ``unencoded``
    reads it as JSON, while a server that undoes the encoding refuses it, and replay sends it as
    recorded and refuses to edit it. Only a body that starts as JSON is decoded to tell; ``plain``,
    what ``unencoded`` gave for it already, says without decoding it again."""
    if raw.lstrip()[:1] not in (b"{", b"["):
        return False
    encoding = body_encoding(headers)
    if encoding is None or encoding not in UNDONE:
        return False
    if plain is not None:
        return plain is raw  # ``unencoded`` keeps the very bytes it could not decode
    try:
        decoded_request(raw, encoding)  # raw deflate and brotli may start with a "{" too
    except ValueError:
        return True
    return False


def unencoded(body: bytes, headers: Iterable[Iterable[str]] | None) -> bytes:
    """A request body as its API reads it: with the content-encoding its headers name undone (the
    Codex CLI sends its /responses bodies zstd-compressed, ``Content-Encoding: zstd``). Read raw, a
    compressed body was no JSON, so no generation request: in no figure and no workload identity.
    One that can't be decoded (an encoding not in ``UNDONE``, bytes that aren't it, more than
    ``DECODED_LIMIT``) stays as it is: the same object, so ``plain is body`` says it was not undone.
    A reader of one exchange undoes it once and hands the result on (the ``plain`` arguments of
    ``read_request``, ``exchange_digest``, ``generation_since_wl3``, ``mislabelled``): a zstd body
    decompressed for each was most of a cold decode's time on Codex traffic (bench.compressed_requests)."""
    return plain_request(body, headers)[0]


def plain_request(body: bytes, headers: Iterable[Iterable[str]] | None) -> tuple[bytes, bool]:
    """``unencoded``, and whether its bytes stop inside their content-encoding's stream (a gzip body
    recorded without its trailer, or cut mid-JSON): what it holds reads as a request its client never
    sent whole, which replay refuses to edit and the analysis says (``requests.body_cut``)."""
    encoding = body_encoding(headers) if body else None
    if encoding is None or encoding not in UNDONE:
        return body, False
    try:
        decoded = decoded_request(body, encoding)
    except ValueError:
        return body, False
    return decoded.data, not decoded.whole


def undone(chunks: Sequence[bytes], encoding: str, limit: int) -> list[bytes]:
    """``chunks`` with ``encoding`` (one of ``UNDONE``) undone, each chunk to its share of the body,
    a step at a time; a stream cut short gives what it holds, as a reader reads it. Raises
    ``TooLarge`` past ``limit`` bytes, and the library's own error for bytes not of that encoding."""
    return _undo(chunks, encoding, limit).pieces


@dataclass(frozen=True, slots=True)
class _Undone:
    pieces: list[bytes]
    ended: bool  # the stream (its last member or frame) ended: its bytes weren't cut short inside it
    raw_deflate: bool = False


def _undo(chunks: Sequence[bytes], encoding: str, limit: int) -> _Undone:
    if encoding in ("gzip", "x-gzip"):
        return _Undone(*_inflated(chunks, 16 + zlib.MAX_WBITS, _Budget(limit)))
    if encoding == "deflate":  # zlib-wrapped as the RFC says, or raw deflate as some peers send
        try:
            return _Undone(*_inflated(chunks, zlib.MAX_WBITS, _Budget(limit)))
        except zlib.error:
            return _Undone(*_inflated(chunks, -zlib.MAX_WBITS, _Budget(limit)), raw_deflate=True)
    if encoding == "zstd":
        return _Undone(*_unzstd(chunks, _Budget(limit)))
    if encoding == "br":
        return _Undone(*_unbrotli(chunks, _Budget(limit)))
    raise ValueError(f"{encoding or 'an empty content-encoding'} is no encoding infertap decodes")


class _Budget:
    """Decoded bytes so far, against the limit."""

    def __init__(self, limit: int) -> None:
        self.left = limit

    def take(self, piece: bytes) -> bytes:
        self.left -= len(piece)
        if self.left < 0:
            raise TooLarge
        return piece


def _inflated(chunks: Sequence[bytes], wbits: int, budget: _Budget) -> tuple[list[bytes], bool]:
    """A zlib stream's chunks decoded, and whether it ended; a stream that ends is followed by the
    next (a gzip body of several members, as ``gzip`` writes when appending: its readers read them
    all, and so must a search for credentials), the NUL bytes gzip allows between members skipped."""
    gzip = wbits > zlib.MAX_WBITS
    stream = zlib.decompressobj(wbits)
    out = []
    for chunk in chunks:
        pieces = []
        while chunk:
            if stream.eof:
                chunk = chunk.lstrip(b"\0") if gzip else chunk
                if not chunk:
                    break
                stream = zlib.decompressobj(wbits)
            while True:  # a full step may leave output inside zlib with no input left: asked again
                piece = budget.take(stream.decompress(chunk, STEP))
                pieces.append(piece)
                chunk = stream.unconsumed_tail
                if stream.eof or (not chunk and len(piece) < STEP):
                    break
            chunk = stream.unused_data if stream.eof else b""
        out.append(b"".join(pieces))
    return out, stream.eof


def _unzstd(chunks: Sequence[bytes], budget: _Budget) -> tuple[list[bytes], bool]:
    """A zstd stream's chunks decoded, frame after frame, as its readers read them; and whether its last frame ended."""
    import zstandard

    decompressor = zstandard.ZstdDecompressor()
    stream = decompressor.decompressobj()
    out = []
    for chunk in chunks:
        pieces = []
        view = memoryview(chunk)  # sliced without copies: a chunk of MiB is many slices
        for at in range(0, len(view), _ZSTD_SLICE):
            rest: bytes | memoryview = view[at : at + _ZSTD_SLICE]
            while rest:
                if stream.eof:  # frame after frame
                    stream = decompressor.decompressobj()
                pieces.append(budget.take(stream.decompress(rest)))
                rest = stream.unused_data if stream.eof else b""
        out.append(b"".join(pieces))
    return out, stream.eof


def _unbrotli(chunks: Sequence[bytes], budget: _Budget) -> tuple[list[bytes], bool]:
    """A brotli stream's chunks decoded, a step of output at a time: asked for all of it at once,
    the decoder grew one buffer past the limit (79 MiB for 64) and held the GIL for 60 ms of it."""
    import brotli  # a dependency, >= 1.2 for output_buffer_limit

    decoder = brotli.Decompressor()
    out = []
    for chunk in chunks:
        pieces = [budget.take(bytes(decoder.process(chunk, output_buffer_limit=STEP)))]
        while not decoder.is_finished():  # output held back at the step: asked for with no input, until none
            piece = budget.take(bytes(decoder.process(b"", output_buffer_limit=STEP)))
            if not piece:
                break
            pieces.append(piece)
        out.append(b"".join(pieces))
    return out, decoder.is_finished()


def sse_events(body: bytes) -> list[str]:
    """The data payloads of a text/event-stream body, in order (comments and other fields skipped).

    An ``error:`` field is read as a payload ``{"error": ...}``: llama.cpp's server before its HTTP
    rewrite (late 2025) sent a stream's error so (``server_sent_event(sink, "error", ...)``: a field
    no SSE client reads, holding its bare ``{"code", "message", "type"}``), and skipping it read a
    failed answer as one cut short with no error."""
    out = []
    for block in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        lines = block.split(b"\n")
        data = [line[5:].removeprefix(b" ") for line in lines if line.startswith(b"data:")]
        if data:
            out.append(b"\n".join(data).decode("utf-8", errors="replace"))
        elif error := [line[6:].strip() for line in lines if line.startswith(b"error:")]:
            out.append('{"error": ' + b"\n".join(error).decode("utf-8", errors="replace") + "}")
    return out


def framing(record: Mapping[str, Any], head: bytes) -> str:
    """How the body is framed: "sse", "ndjson" or "json" (one document)."""
    ctype = (header(record.get("response_headers"), "content-type") or "").lower()
    if "event-stream" in ctype or head.startswith(b"data:") or head.startswith(b"event:"):
        return "sse"
    return "ndjson" if "ndjson" in ctype else "json"


@dataclass(slots=True)
class Payload:
    chunk: int  # index of the chunk in which the payload was complete
    data: str


def timed_payloads(record: Mapping[str, Any], pieces: list[bytes], how: str) -> list[Payload]:
    """The payloads of a response in order, each with the chunk that completed it, up to the first
    ``[DONE]`` (``ended_payloads`` says what followed it)."""
    return ended_payloads(record, pieces, how)[0]


def ended_payloads(record: Mapping[str, Any], pieces: list[bytes], how: str) -> tuple[list[Payload], bytes]:
    """``timed_payloads``, and the bytes after the first ``[DONE]`` (b"" when none): a client stops
    reading at the first, so what follows is no part of the answer it got, though sent."""
    last = len(pieces) - 1
    if how == "json":
        body = b"".join(pieces)
        return ([Payload(last, body.decode("utf-8", errors="replace"))] if body.strip() else []), b""
    if not any(b"\r" in piece for piece in pieces):
        return _payloads_lf(pieces, how)
    out: list[Payload] = []
    buf = b""
    sep = b"\n\n" if how == "sse" else b"\n"
    for index, piece in enumerate(pieces):
        if not piece:
            continue
        buf = (buf + piece).replace(b"\r\n", b"\n")  # a "\r" left at the end pairs with the next chunk's "\n"
        while (cut := buf.find(sep)) >= 0:
            if _emit(out, how, buf[:cut], index):
                return out, (buf[cut + len(sep) :] + b"".join(pieces[index + 1 :])).replace(b"\r\n", b"\n")
            buf = buf[cut + len(sep) :]
    if buf.strip():
        _emit(out, how, buf, last)  # a last event without its terminator: complete when the body was
    return out, b""


def _payloads_lf(pieces: list[bytes], how: str) -> tuple[list[Payload], bytes]:
    """``ended_payloads`` of a body without a carriage return (nothing to normalize), as the loop above
    finds them, in one pass over the whole body: a payload is complete in the chunk that holds the
    last byte of its terminator."""
    body = b"".join(pieces)
    ends = list(itertools.accumulate(map(len, pieces)))  # the body offset each chunk ends at
    sep = b"\n\n" if how == "sse" else b"\n"
    out: list[Payload] = []
    pos = chunk = 0
    while (cut := body.find(sep, pos)) >= 0:
        last = cut + len(sep) - 1
        while ends[chunk] <= last:
            chunk += 1
        block = body[pos:cut]
        pos = cut + len(sep)
        if how == "sse" and block.startswith(b"data: ") and b"\n" not in block:
            data = block[6:].decode("utf-8", errors="replace")  # one data line: the usual event
            if data.strip() == "[DONE]":
                return out, body[pos:]
            out.append(Payload(chunk, data))
        elif _emit(out, how, block, chunk):
            return out, body[pos:]
    if body[pos:].strip():
        _emit(out, how, body[pos:], len(pieces) - 1)
    return out, b""


def _emit(out: list[Payload], how: str, block: bytes, index: int) -> bool:
    """Add the payloads of ``block``; True where it is the stream's end marker (``[DONE]``)."""
    if how == "sse":
        for data in sse_events(block):
            if data.strip() == "[DONE]":
                return True
            out.append(Payload(index, data))
    elif block.strip():
        out.append(Payload(index, block.decode("utf-8", errors="replace")))
    return False


def invalid_utf8(body: bytes) -> list[bytes]:
    """Each run of bytes in ``body`` that is not UTF-8, in order ([] for most bodies: ASCII, or
    UTF-8 throughout). A reader shows each as U+FFFD: these say which bytes they were."""
    if body.isascii():
        return []
    try:
        body.decode()
    except UnicodeDecodeError:
        text = body.decode("utf-8", errors="surrogateescape")
        return [run.encode("utf-8", errors="surrogateescape") for run in _ESCAPED.findall(text)]
    return []


_ESCAPED = re.compile("[\udc80-\udcff]+")


def head_of(pieces: list[bytes]) -> bytes:
    """Enough of the body to tell an SSE stream by its first bytes."""
    head = b""
    for piece in pieces:
        head += piece
        if len(head) >= 6:
            break
    return head


#: How far from a stream's end ``ended_by_marker`` looks for the Responses API's end event (a
#: recorder holds that much of the last chunks past its response limit, ``capture.records.MARKER_BYTES``).
MARKER_WINDOW = 256 * 1024
_END_MARKERS = (b"data: [DONE]", b"data:[DONE]", b"event: message_stop", b'"done":true', b'"done": true')
# The Responses API ends on an event that holds the whole response, so its marker can sit far from
# the end; quoted this way it can't come from generated text (that would be escaped JSON).
_RESPONSES_END = tuple(
    marker
    for ending in (b"completed", b"incomplete", b"failed")  # the events a Responses stream ends on
    for marker in (b'"type":"response.' + ending + b'"', b'"type": "response.' + ending + b'"', b"\nevent: response." + ending)
)


def ended_by_marker(chunks: list[bytes]) -> bool:
    """Whether a stream's last bytes carry its protocol's end marker (OpenAI's ``[DONE]``,
    Anthropic's ``message_stop``, Ollama's ``"done": true``, the Responses API's
    ``response.completed``, ``.incomplete`` or ``.failed``): the client has had all of it. Run once
    per exchange, at its end or at the client's hang-up."""
    last = b"".join(chunks[-2:])
    tail = last[-512:].rstrip()
    if any(marker in tail[-(len(marker) + 200) :] for marker in _END_MARKERS):
        return True
    return any(marker in last[-MARKER_WINDOW:] for marker in _RESPONSES_END)
