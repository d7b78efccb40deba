"""Record types of the capture format (see docs/capture-format.md).

Records are plain dicts on the wire (msgpack maps); these TypedDicts document their keys and let
type checkers follow them. Times: ``wall`` fields are Unix epoch seconds (float); ``*_ns`` fields
are monotonic nanoseconds, either since the run's start (``start_ns``, ``sent_ns``) or since the
exchange's request was sent upstream (``headers_ns``, ``chunk_ns``, ``end_ns``).
"""

from __future__ import annotations

from random import getrandbits as _random_bits
from typing import Any, Literal, NotRequired, TypedDict

#: Major versions are incompatible; a reader refuses a major it doesn't know. Minor versions
#: only add keys or record types, which readers pass through.
FORMAT_MAJOR = 1
FORMAT_MINOR = 1  # 1.1: the ``dictionary`` record (frames after it in a segment are compressed with it)

#: The one kind of ``dictionary`` record: zstd raw content (the run's first records, packed).
DICTIONARY_KIND = "zstd-raw-content"

End = Literal[
    "complete",  # the whole response reached the client
    "client_disconnected",  # the client went away; the upstream request was cancelled
    "upstream_error",  # refused, reset or protocol error upstream
    "timeout",  # upstream connect or read timeout
    "refused",  # the proxy refused the request itself (e.g. body over the size limit)
    "cancelled",  # the proxy was shut down while the exchange was in flight
    "proxy_error",  # infertap itself failed (a bug); the error text says how
]
END_REASONS: tuple[str, ...] = End.__args__  # type: ignore[attr-defined]

RecordType = Literal["header", "engine", "exchange", "enrichment", "footer"]


class Header(TypedDict):
    type: Literal["header"]
    format: list[int]  # [major, minor]
    tool: str
    tool_version: str
    capture_id: str  # one per capture directory
    run_id: str  # one per process that wrote into it
    segment: int
    wall: float  # the run's start; start_ns of exchanges count from here
    recorder: dict[str, Any]  # kind ("proxy", "mitm", "replay"), upstream, listen, pid, ...
    host: dict[str, Any]
    labels: dict[str, str]


class Exchange(TypedDict):
    type: Literal["exchange"]
    id: str
    seq: int
    session: str | None
    wall: float  # request arrival, epoch seconds: the exchange's wall-clock anchor
    start_ns: int  # request arrival, since the run's start
    sent_ns: int  # request handed to the upstream, since the run's start
    client: str | None
    method: str
    path: str
    query: str
    http_version: str
    request_headers: list[list[str]]  # [name, value] pairs in order, redacted
    request_body: bytes  # exact bytes
    status: int | None
    response_headers: list[list[str]] | None
    headers_ns: int | None  # since sent
    chunk_ns: list[int]  # receive time of each chunk, since sent
    chunks: list[bytes]  # raw response body chunks, as the upstream sent them (not decoded)
    end_ns: int  # since sent
    end: End
    error: str | None
    upstream: str
    request_body_size: NotRequired[int]  # set when the body was not kept (refused)
    closed_after_end: NotRequired[bool]  # the client hung up after the stream's end marker, before the upstream's close
    proxy_generated: NotRequired[bool]  # the response was written by infertap (502/504/413), not the upstream


class Footer(TypedDict):
    type: Literal["footer"]
    final: bool  # False at the end of a rotated segment, True when the run closed cleanly
    wall: float
    records: int
    exchanges: int
    dropped: int


def new_id() -> str:
    """A random 128-bit exchange id as 32 hex digits, like ``uuid4().hex`` without its syscall
    (``random`` is seeded from the OS once per process)."""
    return f"{_random_bits(128):032x}"
