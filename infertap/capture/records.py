"""Record types of the capture format (see docs/capture-format.md).

Records are plain dicts on the wire (msgpack maps); these TypedDicts document their keys and let
type checkers follow them. Times: ``wall`` fields are Unix epoch seconds (float); ``*_ns`` fields
are monotonic nanoseconds, either since the run's start (``start_ns``, ``sent_ns``) or since the
exchange's request was sent upstream (``headers_ns``, ``chunk_ns``, ``end_ns``).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from random import getrandbits as _random_bits
from typing import Any, Literal, NotRequired, TypedDict, Unpack

from infertap.apis.body import encoded

from .redact_json import REDACTED

#: Major versions are incompatible; a reader refuses a major it doesn't know. Minor versions
#: only add keys or record types, which readers pass through.
FORMAT_MAJOR = 1
FORMAT_MINOR = 2  # 1.1: the ``dictionary`` record (frames after it in a segment are compressed with it); 1.2: ``telemetry``

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
    "unknown",  # it ended early by a side that can't be told (an imported HTTP/2 flow's CANCEL reset)
]
END_REASONS: tuple[str, ...] = End.__args__  # type: ignore[attr-defined]

RecordType = Literal["header", "engine", "exchange", "enrichment", "telemetry", "footer"]


class Header(TypedDict):
    type: Literal["header"]
    format: list[int]  # [major, minor]
    tool: str
    tool_version: str
    capture_id: str  # one per capture directory
    run_id: str  # one per process that wrote into it
    segment: int
    wall: float  # the run's start; start_ns of exchanges count from here
    recorder: dict[str, Any]  # kind ("proxy", "mitm", "replay", "import"), upstream, listen, pid, ...
    host: dict[str, Any]
    labels: dict[str, str]


class InterimResponse(TypedDict):
    """An interim (1xx) response the upstream sent before its response: 103 Early Hints."""

    status: int
    headers: list[list[str]]  # as the response's headers are kept
    ns: int  # received, since sent
    forwarded: bool  # passed on to the proxy's client (an HTTP/1.0 client can't be sent one)


class ExchangeExtras(TypedDict, total=False):
    """The keys only some exchanges have."""

    request_body_size: int  # set when the body was not kept (request_body_unknown)
    request_body_cut: bool  # its body not whole: cut short by a refusal or a close (request_body_unknown)
    request_body_not_kept: str  # why a body sent was not kept, its size unknown (mitmproxy streamed it unseen)
    request_body_unsearched: str  # why a body sent encoded was not searched for credentials (see Redactor.request)
    response_body_unsearched: str  # why a response sent encoded was not searched decoded for its request's credentials
    # A response over the recorder's response limit: relayed whole, its chunks kept only up to the limit.
    response_body_size: int  # the body's real size in bytes: its chunks hold only its head (apis.response_not_kept)
    response_body_chunks: int  # how many chunks it came in
    response_last_ns: int  # when its last chunk came, since sent
    response_tail: bytes  # its last bytes past the head, RESPONSE_TAIL_BYTES at most: its usage (apis.tail_usage)
    closed_after_end: bool  # the client hung up after the stream's end marker, before the upstream's close
    delivered_chunks: int  # the client hung up with only this many chunks written to it: the rest never were
    proxy_generated: bool  # the response was written by infertap (400/401/413/502/503/504), not the upstream
    refused_head: bytes  # the head its HTTP parser refused, every read of it: its first KiB, credentials redacted
    refused_body: bytes  # a chunked body its HTTP parser refused: the refused read's bytes past the data, its first KiB
    imported: str  # "har" or "mitmproxy": converted from a file, chunk times coarse
    body_not_in_file: list[str]  # imported: "request", "response": a body sent that the file doesn't hold (kept empty)
    websocket_messages: int  # imported: a WebSocket's upgrade, kept; how many messages it had, none of them imported
    client_wait_ns: int  # the proxy's wait for its client to take the body: later chunks' times late by up to it
    retried: str  # sent a second time, on a new connection, after the first broke before any response: why
    request_trailers: list[list[str]]  # the trailer fields after a chunked request body, as the headers are kept
    response_trailers: list[list[str]]  # the trailer fields after a chunked body, as the headers are kept
    interim: list[InterimResponse]  # the interim responses before the response, in order
    # A replayed exchange: its source and its schedule fidelity (replay/runner.py).
    source_id: str  # the id of the exchange it replays
    repeat: int  # which pass of a --repeat workload
    scheduled_ns: int  # when it was due, since the run's start
    lag_ns: int  # how late the dispatcher sent it, intentional waits not counted
    queue_ns: int  # waiting for a --max-concurrency slot
    dep_wait_ns: int  # waiting for the request its conversation continues
    think_ns: int  # --sessions closed: the think time kept after the parent's end on the target (scaled)
    turn: int  # its place in its conversation (0: the first request)
    parent_id: str  # the exchange (of this capture) that it continues
    rechained_from: str  # its previous_response_id as recorded, replaced by the target's id for that response


class Exchange(ExchangeExtras):
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


class EngineSnapshot(TypedDict):
    """An engine snapshot ("fingerprint"), made by infertap.engines.probe.snapshot."""

    type: Literal["engine"]
    url: str
    wall: float
    kind: str
    facts: dict[str, dict[str, Any]]  # name -> {"value": ..., "source": ...}
    unknown: list[str]  # facts the engine didn't tell
    notes: list[str]
    raw: dict[str, Any]  # the engine's own answers, as received
    host: dict[str, Any]
    host_is_engine_host: bool
    labels: dict[str, str]
    fingerprint: str  # changes when the engine's configuration does


class Enrichment(TypedDict):
    """What the engine really ran for one exchange, made by infertap.engines.enrich.enrichment."""

    type: Literal["enrichment"]
    exchange_id: str
    wall: float
    engine: str | None  # the snapshot's fingerprint
    kind: str | None
    response: dict[str, Any]  # api, model, finish reason, usage, parse error
    settings: dict[str, dict[str, Any]]  # effective sampling settings with their sources
    server_timings: dict[str, Any] | None
    prompt_tokens: dict[str, Any]  # ids, count, source (agrees_with_usage when known)
    output_tokens: dict[str, Any]
    # Which exchange of its id, from 1 in record order (``infertap enrich``): an id several exchanges
    # carry (a segment copied in twice) names one of them. Absent from the recorder's own.
    occurrence: NotRequired[int]


def settings_rank(enrichment: dict[str, Any]) -> tuple[bool, float]:
    """Which of an exchange's enrichments its settings are read from: the highest rank, the later
    record among equals. Its engine known first (one whose probe failed, "engine unknown", knows
    none of the engine's defaults), then the newest; analysis' ``enrichment_latest`` orders so in SQL
    (analysis/views.py ``SETTINGS_FROM``)."""
    wall = enrichment.get("wall")
    try:
        when = float(wall) if isinstance(wall, (int, float)) and not isinstance(wall, bool) else math.nan
    except OverflowError:  # an integer past a double's range
        when = math.nan
    return enrichment.get("kind") is not None, when if math.isfinite(when) else -math.inf  # unknown: oldest (NULLS LAST)


class Telemetry(TypedDict):
    """One round of one telemetry source (infertap.telemetry): what the engine or the machine did
    while traffic flowed. Format 1.2; older readers pass it by."""

    type: Literal["telemetry"]
    source: str  # "engine" (its /metrics), "exporter" (--telemetry-url), "gpu", "host"
    wall: float  # when the round was read, epoch seconds
    samples: list[list[Any]]  # [name, labels (dict), value]: Prometheus names as exposed, counters raw
    unknown: NotRequired[str]  # the source can't be read, and why (recorded once, then on a change)


class Footer(TypedDict):
    type: Literal["footer"]
    final: bool  # False at the end of a rotated segment, True when the run closed cleanly
    wall: float
    records: int
    exchanges: int
    dropped: int


Record = Header | Exchange | EngineSnapshot | Enrichment | Telemetry | Footer


#: The request headers a client names its session by (``Exchange.session``), in order of
#: precedence: the user's own for infertap, the generic one, then those agent clients send of
#: themselves (docs/capture-format.md says which client sends which, read from its source).
SESSION_HEADERS = (
    b"x-infertap-session",
    b"x-session-id",  # opencode (to any provider but its own), and what session routers key on
    b"x-claude-code-session-id",  # Claude Code, from 2.1.86
    b"session_id",  # OpenAI Codex CLI, on the Responses and chat wire APIs alike
    b"x-opencode-session",  # opencode, to its own providers (OpenCode Zen)
)
_PRECEDENCE = {name: rank for rank, name in enumerate(SESSION_HEADERS)}


def session_of(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """A request's session: that of the first of ``SESSION_HEADERS`` it names one by, whatever
    their order on the wire, so that an ``x-infertap-session`` the user adds wins over the id the
    client sends of itself; of repeats of one name, the last (mitmproxy's ``get`` would join them
    with commas). Any casing; what every recorder (proxy, mitm, import) reads."""
    sent: dict[int, str] = {}
    for name, value in headers:
        rank = _PRECEDENCE.get(name.lower())
        if rank is not None:
            sent[rank] = value.decode("latin-1")
    return _first_named(sent)


def _first_named(sent: dict[int, str]) -> str | None:
    for rank in sorted(sent):
        session = named_session(sent[rank])
        if session is not None:
            return session
    return None


def recorded_session(record: dict[str, Any]) -> str | None:
    """An exchange's session as its capture says: its ``session``, else the one its kept request
    headers name by ``session_of``'s rule, so that a capture recorded before a client's own header
    was read (Claude Code's, Codex's, opencode's) has its sessions as a new one. A redacted header
    names none (its id never reached the capture, and ``[REDACTED]`` would put every request in one
    session), as ``Redactor.session`` reads it when recording. What analysis and replay both read."""
    session = named_session(record.get("session"))
    headers = record.get("request_headers")
    if session is not None or not isinstance(headers, list):
        return session
    sent: dict[int, str] = {}
    for pair in headers:
        if isinstance(pair, (list, tuple)) and len(pair) == 2 and isinstance(pair[0], str) and isinstance(pair[1], str):
            rank = _PRECEDENCE.get(pair[0].lower().encode("latin-1", "replace"))
            if rank is not None and REDACTED not in pair[1]:
                sent[rank] = pair[1]
    return _first_named(sent)


def apart(xid: str, k: int) -> str:
    """The name of the ``k``-th exchange (from 1) of a capture to carry the id ``xid``: the first keeps
    it, later ones are ``<id>~k``, as the analysis's tables and replay's sessions both name them."""
    return xid if k == 1 else f"{xid}~{k}"


def delivered(record: dict[str, Any]) -> dict[str, Any]:
    """The exchange as its client got it: its chunks (and their times) cut to the ``delivered_chunks``
    the recorder handed on before the client hung up. The rest were read from the engine and kept, but
    no client saw them: its answer, its end marker and its last byte are in the first ones. ``record``
    itself when it was all handed on."""
    n = record.get("delivered_chunks")
    chunks = record.get("chunks") or []
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n < len(chunks):
        return record
    return {**record, "chunks": chunks[:n], "chunk_ns": (record.get("chunk_ns") or [])[:n]}


#: What a recorder wrote, before it marked ``request_body_cut``, of a body its client's hang-up or its
#: shutdown cut short (and still writes, with how many bytes came): in such a record the part that came
#: is not the request. Its length against Content-Length can't tell: redaction changes the length.
CUT_BODY_ERRORS = ("client disconnected while sending the request body", "proxy shut down while the request body was arriving")


def request_body_cut(record: dict[str, Any]) -> bool:
    """Whether the request's body came cut short: marked so, or, in a capture recorded before the
    mark, ended by the client's hang-up or the recorder's shutdown while it arrived (its error)."""
    if record.get("request_body_cut"):
        return True
    error = record.get("error")
    return (
        record.get("end") in ("client_disconnected", "cancelled") and isinstance(error, str) and error.startswith(CUT_BODY_ERRORS)
    )


def request_body_unknown(record: dict[str, Any]) -> bool:
    """Whether the request was sent with a body that was not kept (``request_body_size``: refused over
    ``--max-body-mb``, its search for credentials failed, over ``infertap_max_body``;
    ``request_body_not_kept``: mitmproxy streamed it unseen; an imported file's ``body_not_in_file``). Its empty ``request_body`` is then unknown: an empty body is another
    request, never to be sent, hashed or paired in its place. ``request_body_not_kept`` says so
    whatever the body holds: a body it marks is not the one sent, and so does ``request_body_cut``
    (a body cut short: the part that came is not the request)."""
    if record.get("request_body_not_kept") or request_body_cut(record):
        return True
    if record.get("request_body"):
        return False
    size = record.get("request_body_size")
    return (isinstance(size, int) and size > 0) or "request" in (record.get("body_not_in_file") or ())


#: The response bytes a recorder keeps of one exchange by default (``--max-response-mb``,
#: ``infertap_max_response``): past it the response is still relayed whole, its chunks kept only up to it.
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
_TAIL_CHUNKS = 8  # the chunks past that limit a ResponseKept holds, for the end marker
#: The bytes of each of those chunks it holds, their last: as many as ``apis.ended_by_marker`` reads
#: of the last two chunks together (a Responses stream's marker may sit that far from its end).
MARKER_BYTES = 256 * 1024
#: The last bytes of such a response kept in its record (``response_tail``): where an answer's usage
#: and final finish reason are (a chat stream's usage chunk, Messages' message_delta, response.completed).
RESPONSE_TAIL_BYTES = 64 * 1024


class ResponseKept:
    """A response's chunks (and their times) kept up to ``limit`` bytes, as they stream: past it
    only counted, so that one huge answer (a runaway stream, a large embeddings batch) can't grow a
    recorder's memory until it is killed with every exchange in flight. What is kept is a head of
    the body, its first ``limit`` bytes (the chunk that crosses it cut there); ``mark`` says in the
    record that it is no more (``apis.response_not_kept``). The last few chunks past the limit are
    held too (``tail``), for ``last``: whether a client that hung up had the stream's end marker is
    read from them, as from an uncut stream's chunks; only their last ``MARKER_BYTES``, all that is
    read, so that a few 100 MiB chunks past the limit aren't held until the exchange ends. The body's last ``RESPONSE_TAIL_BYTES`` past the
    head go into the record (``response_tail``), where its usage is, bounded in bytes: one chunk may
    be 100 MiB, of which only the end is copied."""

    __slots__ = ("chunk_ns", "chunks", "limit", "size", "count", "whole", "last_ns", "tail", "end", "end_size")

    def __init__(self, chunk_ns: list[int], chunks: list[bytes], limit: int | None) -> None:
        self.chunk_ns = chunk_ns
        self.chunks = chunks
        self.limit = limit if limit is not None else 1 << 62
        self.size = 0
        self.count = 0
        self.whole = 0  # the chunks kept whole: the head's first ones (the last may be cut at the limit)
        self.last_ns = 0
        # Bounded: ended_by_marker reads two chunks; the rest leave room for chunks read after the
        # last one a client was handed (a proxy's client gone, the upstream still sending).
        self.tail: deque[bytes] = deque(maxlen=_TAIL_CHUNKS)
        self.end: deque[bytes] = deque()  # the bytes past the head, RESPONSE_TAIL_BYTES and less than a piece more
        self.end_size = 0

    def add(self, ns: int, chunk: bytes) -> None:
        before = self.size
        self.size += len(chunk)
        self.count += 1
        self.last_ns = ns
        if self.size <= self.limit:  # the size only grows: what is kept stays a head of the body
            self.chunk_ns.append(ns)
            self.chunks.append(chunk)
            self.whole += 1
            return
        if before < self.limit:
            # The chunk that crosses the limit: its first bytes up to it end the head (a one-chunk
            # answer, a whole JSON body, would keep nothing). A copy of at most the limit, never
            # a view that would hold the whole chunk in the record.
            self.chunk_ns.append(ns)
            self.chunks.append(chunk[: self.limit - before])
        # For last(): its end, no part of the head. A chunk up to MARKER_BYTES is held as it is (a
        # slice of it whole is the chunk itself, no copy), a larger one by a copy of its end alone.
        self.tail.append(chunk[-MARKER_BYTES:])
        # Past the head, only the last RESPONSE_TAIL_BYTES of the chunk are copied; pieces that the
        # later ones leave outside the bound go (a deque: O(1) a chunk, however small the chunks).
        piece = chunk[max(self.limit - before, len(chunk) - RESPONSE_TAIL_BYTES, 0) :]
        if piece:
            end = self.end
            end.append(piece)
            self.end_size += len(piece)
            while self.end_size - len(end[0]) >= RESPONSE_TAIL_BYTES:
                self.end_size -= len(end.popleft())

    def last(self, end: int | None = None) -> list[bytes]:
        """The two chunks before chunk number ``end`` (the last two by default), kept or in the tail
        (there, their last ``MARKER_BYTES``): what ``apis.ended_by_marker`` reads. Empty where the one just before ``end`` is held by
        neither (more chunks came after it than the tail holds): no end marker is claimed unseen."""
        end = self.count if end is None else end
        first_in_tail = self.count - len(self.tail)
        out = []
        for i in range(max(0, end - 2), end):
            if i < self.whole:
                out.append(self.chunks[i])
            elif first_in_tail <= i < self.count:  # the chunk cut at the limit too: its end here
                out.append(self.tail[i - first_in_tail])
            elif i == end - 1:
                return []
        return out

    def mark(self, record: Exchange) -> None:
        """The record says its body is cut, with the real size, chunk count and last chunk's time, and
        its tail past the head. Not the tail of an encoded body (gzip, br, ...): a compressed stream's
        end can't be decoded without its start, nor searched for the credentials a response may echo."""
        if self.size > self.limit:
            record["response_body_size"] = self.size
            record["response_body_chunks"] = self.count
            record["response_last_ns"] = self.last_ns
            if self.end and not encoded(record):
                record["response_tail"] = b"".join(self.end)[-RESPONSE_TAIL_BYTES:]


def named_session(value: object) -> str | None:
    """A session as recorded, or None where it names none: a header sent empty (or blank) would put
    every request that sends it, however unrelated, in one session."""
    return value if isinstance(value, str) and value.strip() else None


def new_exchange(
    *,
    method: str,
    path: str,
    upstream: str,
    wall: float,
    start_ns: int,
    sent_ns: int | None = None,
    query: str = "",
    request_headers: list[list[str]] | None = None,
    request_body: bytes = b"",
    seq: int = 0,
    session: str | None = None,
    client: str | None = None,
    http_version: str = "1.1",
    id: str | None = None,
    status: int | None = None,
    response_headers: list[list[str]] | None = None,
    headers_ns: int | None = None,
    chunk_ns: list[int] | None = None,
    chunks: list[bytes] | None = None,
    end_ns: int = 0,
    end: End = "complete",
    error: str | None = None,
    **extras: Unpack[ExchangeExtras],
) -> Exchange:
    """The one constructor of exchange records (proxy, mitm addon, importer, replay, tests): the
    request as given, the response side empty until the response arrives. Values are stored as
    passed: redaction is the caller's, before this (see ``Redactor``)."""
    return {
        "type": "exchange",
        "id": id or new_id(),
        "seq": seq,
        "session": session,
        "wall": wall,
        "start_ns": start_ns,
        "sent_ns": start_ns if sent_ns is None else sent_ns,
        "client": client,
        "method": method,
        "path": path,
        "query": query,
        "http_version": http_version,
        "request_headers": request_headers if request_headers is not None else [],
        "request_body": request_body,
        "status": status,
        "response_headers": response_headers,
        "headers_ns": headers_ns,
        "chunk_ns": chunk_ns if chunk_ns is not None else [],
        "chunks": chunks if chunks is not None else [],
        "end_ns": end_ns,
        "end": end,
        "error": error,
        "upstream": upstream,
        **extras,
    }


def new_header(
    *,
    capture_id: str,
    run_id: str,
    segment: int,
    wall: float,
    tool_version: str,
    recorder: dict[str, Any],
    host: dict[str, Any],
    labels: dict[str, str],
) -> Header:
    """A segment's first record: the format version it was written in, and who wrote it where."""
    return {
        "type": "header",
        "format": [FORMAT_MAJOR, FORMAT_MINOR],
        "tool": "infertap",
        "tool_version": tool_version,
        "capture_id": capture_id,
        "run_id": run_id,
        "segment": segment,
        "wall": wall,
        "recorder": recorder,
        "host": host,
        "labels": labels,
    }


def new_telemetry(source: str, wall: float, samples: list[list[Any]], *, unknown: str | None = None) -> Telemetry:
    """A telemetry record: one source's samples at one time, or why the source can't be read."""
    record: Telemetry = {"type": "telemetry", "source": source, "wall": wall, "samples": samples}
    if unknown is not None:
        record["unknown"] = unknown
    return record


def new_footer(*, final: bool, wall: float, records: int, exchanges: int, dropped: int) -> Footer:
    """A segment's last record; ``final`` only when the run closed cleanly."""
    return {"type": "footer", "final": final, "wall": wall, "records": records, "exchanges": exchanges, "dropped": dropped}


def new_id() -> str:
    """A random 128-bit exchange id as 32 hex digits, like ``uuid4().hex`` without its syscall
    (``random`` is seeded from the OS once per process)."""
    return f"{_random_bits(128):032x}"
