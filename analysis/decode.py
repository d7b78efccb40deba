"""One capture decoded into Parquet tables (see schema.py): the slow part, done once per version of a
capture (cache.py decides when), so that every later query reads columns instead of msgpack."""

from __future__ import annotations

import json
import math
import os
import re
from array import array
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from infertap.apis import (
    Links,
    Output,
    Request,
    answer_tokens,
    carries_token,
    decoded_chunks,
    event_text,
    kept_response_id,
    link,
    links_of,
    not_in_file,
    read_request,
    read_response,
    response_not_kept,
    sessions_of,
    stream_done,
    text_is_output,
    think_times,
    tool_deltas,
    turns_of,
    with_tail_usage,
)
from infertap.apis.body import mislabelled, plain_request
from infertap.apis.chat_request import ChatRequests
from infertap.apis.chat_stream import ChatStream, read_chat_stream
from infertap.apis.converse import LATENCY_SOURCE, latency_ns
from infertap.capture.identity import apart_kind, asked_headers, exchange_digest, generation_since_wl3
from infertap.capture.jsonable import jsonable
from infertap.capture.reader import CaptureReader
from infertap.capture.records import apart, delivered, recorded_session, request_body_unknown
from infertap.collector import no_cyclic_gc

from .decode_version import DECODE_VERSION
from .prefix import PrefixIndex
from .schema import ENGINE_FACTS, TABLES, arrow_schema

if TYPE_CHECKING:  # numpy and pyarrow are imported where a decode needs them: reading the cache needs neither
    import pyarrow as pa
    import pyarrow.parquet as pq


#: What a part leaves to the pass over the whole capture: these need every generation request, in order.
SEQUENTIAL_TABLES = ("prefixes", "turns", "links", "captures")

_BATCH_ROWS = 10_000  # a row group; small enough that buffered rows (ids lists, chunk bytes) stay small
# Agent requests carry their whole conversation (tens of KiB each): 10,000 of them would make
# arrays of hundreds of MiB, which the allocator maps afresh (page faults) at every doubling. The
# same holds for chunks and events: an embeddings answer is one chunk of hundreds of KiB (8 vectors
# of 4,096 floats as JSON: 650 KiB), and 10,000 of them held a decode worker at gigabytes.
_BATCH_BYTES = 8 << 20
# String columns given as UTF-8 bytes (known valid: ASCII, or re-encoded after a lenient decode), so
# that a request body reaches Arrow without becoming a Python string first.
_UTF8_BYTES = ("body",)
_COLUMNAR = ("chunks", "events")  # many rows an exchange: kept as columns
_PLAIN = ("body", "bytes", "data")  # nearly all distinct: no dictionary


def parquet_writer(path: Path, schema: pa.Schema) -> pq.ParquetWriter:
    """How the cache's tables are written. Columns whose values are nearly all distinct (bodies,
    chunk bytes, event payloads) skip the dictionary Parquet would try, then drop, for each of them."""
    import pyarrow.parquet as pq

    plain = {name for name in schema.names if name in _PLAIN}
    return pq.ParquetWriter(path, schema, compression="zstd", use_dictionary=[n for n in schema.names if n not in plain])


class _Sink:
    """Rows of one table, written to Parquet in batches so that a large capture never sits in memory."""

    def __init__(self, path: Path, schema: pa.Schema) -> None:
        self.schema = schema
        self.rows: list[tuple[Any, ...]] = []
        self.count = 0
        self.size = 0  # bytes of the large values (request bodies) in the rows held
        self.writer = parquet_writer(path, schema)

    def add(self, row: tuple[Any, ...], size: int = 0) -> None:
        self.rows.append(row)
        self.size += size
        if len(self.rows) >= _BATCH_ROWS or self.size >= _BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        import pyarrow as pa

        if self.rows:
            columns = [
                pa.array(col, type=pa.binary()).view(pa.string()) if field.name in _UTF8_BYTES else _array(col, field.type)
                for col, field in zip(zip(*self.rows, strict=True), self.schema, strict=True)
            ]
            self._write(columns, len(self.rows))
            self.rows = []
            self.size = 0

    def _write(self, columns: list[pa.Array], n: int) -> None:
        import pyarrow as pa

        self.writer.write_table(pa.Table.from_arrays(columns, schema=self.schema))
        self.count += n

    def close(self) -> int:
        self.flush()
        self.writer.close()
        return self.count


class _ColumnSink(_Sink):
    """A table of many rows an exchange (its chunks, its events), kept as columns: each exchange
    extends them with whole lists, and Arrow builds its arrays from them without a row in between.
    ``capture`` is one value for the whole table, so it is not kept per row."""

    def __init__(self, path: Path, schema: pa.Schema, capture: str) -> None:
        super().__init__(path, schema)
        assert schema.names[0] == "capture"
        self.capture = capture
        self.columns: list[list[Any]] = [[] for _ in schema.names[1:]]

    def pending(self) -> int:
        return len(self.columns[0])

    def extended(self, size: int) -> None:
        """Counts ``size`` bytes of payload just added to the columns, and writes the batch once it
        holds ``_BATCH_ROWS`` rows or ``_BATCH_BYTES`` bytes, whichever comes first."""
        self.size += size
        if self.pending() >= _BATCH_ROWS or self.size >= _BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        import pyarrow as pa

        n = self.pending()
        if n:
            arrays = [pa.repeat(pa.scalar(self.capture, pa.string()), n)]
            arrays += [_array(col, f.type) for col, f in zip(self.columns, list(self.schema)[1:], strict=True)]
            self._write(arrays, n)
            self.columns = [[] for _ in self.columns]
            self.size = 0


class _EventSink(_ColumnSink):
    """The events, and from each batch of them its token chunks, written to ``token_chunks``
    (analysis/token_chunks.py): a batch holds whole exchanges, the decode flushing between them."""

    def __init__(self, path: Path, schema: pa.Schema, capture: str, token_chunks: _Sink) -> None:
        super().__init__(path, schema, capture)
        self.token_chunks = token_chunks

    def _write(self, columns: list[pa.Array], n: int) -> None:
        import pyarrow as pa

        from .token_chunks import token_chunks

        super()._write(columns, n)
        _, ids, _, chunk, t_ns, _, content, reasoning, tools, _, _ = columns
        rows = token_chunks(ids, chunk, t_ns, content, reasoning, tools)
        if m := len(rows[0]):
            self.token_chunks._write([pa.repeat(pa.scalar(self.capture, pa.string()), m), *rows], m)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _array(values: Sequence[Any], dtype: pa.DataType) -> pa.Array:
    """An Arrow column of ``values``. A JSON ``\\ud800`` escape parses to a lone surrogate, which
    UTF-8 (hence Arrow) has no bytes for: such a text is kept with U+FFFD in its place, as a
    lenient UTF-8 decode keeps bytes it can't read, instead of failing the capture's decode. An
    integer the column's type can't hold (JSON has no bound) is unknown, for the same reason."""
    import pyarrow as pa

    try:
        return pa.array(values, type=dtype)
    except UnicodeEncodeError:
        return pa.array([_without_surrogates(v) for v in values], type=dtype)
    except OverflowError:
        return pa.array([_within(v, dtype) for v in values], type=dtype)


def _within(value: Any, dtype: pa.DataType) -> Any:
    """``value`` with each integer the Arrow type ``dtype`` can't hold as None."""
    import numpy as np
    import pyarrow as pa

    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return value if not isinstance(value, (list, tuple)) else [_within(v, dtype.value_type) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and pa.types.is_integer(dtype):
        info = np.iinfo(dtype.to_pandas_dtype())
        return value if info.min <= value <= info.max else None
    return value


def _without_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, (list, tuple)):
        return [_without_surrogates(v) for v in value]
    return value


def _dump(value: Any) -> str | None:
    return None if value is None else json.dumps(jsonable(value), ensure_ascii=False)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) or value is None else _dump(value)


_INT64 = (-(1 << 63), (1 << 63) - 1)


def _int(value: Any) -> int | None:
    """An integer a BIGINT column holds; any other (JSON's integers are unbounded) is unknown."""
    if isinstance(value, int) and not isinstance(value, bool) and _INT64[0] <= value <= _INT64[1]:
        return value
    return None


def enrichment_keys(rec: dict[str, Any]) -> tuple[float | None, Any, int | None, int | None]:
    """An enrichment record's ``wall``, ``kind``, output and prompt counts as the ``enrichments`` table
    holds them: what each field of an exchange's enrichments is chosen by (views.py's ``SETTINGS_FROM``,
    ``OUTPUT_FROM``, ``PROMPT_FROM``), in the decoded tables and in compare's summaries alike."""
    pt = rec.get("prompt_tokens") or {}
    ot = rec.get("output_tokens") or {}
    return _num(rec.get("wall")), rec.get("kind"), _int(ot.get("count")), _int(pt.get("count"))


def _num(value: Any) -> float | None:
    """A finite number: NaN or an infinity (an engine's timing of 1e309) is unknown, not a value
    that poisons every mean and sum over it."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer past a double's range
        return None
    return number if math.isfinite(number) else None


def _server_timings(parsed: Output) -> tuple[Any, ...]:
    """(json, source, prompt_ms, decode_ms, prompt_tokens, decode_tokens, cached_tokens, load_ns, total_ns),
    all server-measured. Only Ollama times its model load and the whole request (``load_duration``,
    ``total_duration``): a cold start its client waited through, which is not the engine's speed;
    Bedrock its whole request alone (``metrics.latencyMs``)."""
    if (total := latency_ns(parsed.timings)) is not None:
        return (_dump(parsed.timings), LATENCY_SOURCE, None, None, None, None, None, None, total)
    if parsed.timings:
        t = parsed.timings
        return (
            _dump(t),
            "llama.cpp timings (server-measured)",
            _num(t.get("prompt_ms")),
            _num(t.get("predicted_ms")),
            _int(t.get("prompt_n")),
            _int(t.get("predicted_n")),
            _int(t.get("cache_n")),
            None,
            None,
        )
    if parsed.durations:
        d = parsed.durations
        ns = {k: _duration(d.get(k)) for k in ("prompt_eval_duration", "eval_duration", "load_duration", "total_duration")}
        return (
            _dump(d),
            "Ollama durations (server-measured)",
            _ms(ns["prompt_eval_duration"]),
            _ms(ns["eval_duration"]),
            _int(d.get("prompt_eval_count")),
            _int(d.get("eval_count")),
            None,
            ns["load_duration"],
            ns["total_duration"],
        )
    return (None,) * 9


def _duration(value: Any) -> int | None:
    """An Ollama duration in ns (Go's ``time.Duration``, never negative); a string, a negative time
    or one past a BIGINT (from a proxy that rewrote it) is unknown, the exchange's other figures and
    its ``server_timings`` JSON kept as they were."""
    number = _num(value)
    return _int(round(number)) if number is not None and number >= 0 else None


def _ms(ns: int | None) -> float | None:
    return None if ns is None else ns / 1e6


def _hidden_reasoning(parsed: Output) -> int | None:
    """The reasoning tokens an engine counted in its output tokens and sent no text of (OpenAI's
    ``completion_tokens_details`` / ``output_tokens_details``), where the answer carried none of the
    reasoning's own text (at most a summary of it, which is not those tokens)."""
    if not parsed.usage or not parsed.readable or (parsed.reasoning and not parsed.reasoning_summarized):
        return None
    details = parsed.usage.get("completion_tokens_details") or parsed.usage.get("output_tokens_details")
    return (_int(details.get("reasoning_tokens")) or None) if isinstance(details, dict) else None


def _recorder_id(header: dict[str, Any]) -> str | None:
    """The recorder's id; captures older than the field get host-pid from the header's facts."""
    recorder = header.get("recorder") or {}
    if recorder.get("id"):
        return str(recorder["id"])
    host, pid = (header.get("host") or {}).get("hostname"), recorder.get("pid")
    return f"{host}-{pid}" if host and pid else header.get("run_id")


#: An exchange's token-bearing events summed up (schema.py, exchanges): first, last and first-text
#: chunk times, token chunks and events, the first finish; None where the token_chunks view has no row.
_Tokens = tuple[int | None, int | None, int | None, int | None, int | None, int | None]
_NO_TOKENS: _Tokens = (None, None, None, None, None, None)


def _token_times(
    chunks: list[int],
    times: list[int | None],
    content: list[str],
    reasoning: list[str],
    tools: list[int],
    finishes: list[Any],
) -> _Tokens:
    """What the views token_chunks and metrics (``tok``, ``fin``) compute from an exchange's events,
    with SQL's NULLs: an event carries a token when its text or reasoning is not empty or it holds
    tool-call deltas; times are the chunk's arrival, None beyond the recorded ones."""
    finish = [t for t, f in zip(times, finishes, strict=True) if f is not None and t is not None]
    token = [i for i, (c, r, k) in enumerate(zip(content, reasoning, tools, strict=True)) if carries_token(c, r, k)]
    if not token:
        return (None, None, None, None, None, min(finish) if finish else None)
    at = [t for i in token if (t := times[i]) is not None]
    text = [t for i in token if content[i] and (t := times[i]) is not None]
    return (
        min(at) if at else None,
        max(at) if at else None,
        min(text) if text else None,
        len({chunks[i] for i in token}),
        len(token),
        min(finish) if finish else None,
    )


class Decoder:
    """A capture's records, one at a time, to rows. ``part`` (p, k, run): only the exchanges of part
    p of k (the p-th, (p+k)-th ... run of ``run`` exchanges), and the capture-wide tables (runs,
    engines, enrichments, telemetry) in part 0 only; the generation requests' bodies are not kept
    (the pass over the whole reads them, decoding.py)."""

    def __init__(
        self,
        capture: str,
        sinks: dict[str, _Sink],
        repeated: Mapping[str, int] = MappingProxyType({}),
        part: tuple[int, int, int] | None = None,
    ) -> None:
        self.capture = capture
        self.sinks = sinks
        self.repeated = repeated  # ids that more than one exchange carries (how many): the second is named "<id>~2", ...
        self.seen: dict[str, int] = {}
        self.unattached = 0  # enrichments naming no exchange the capture holds, attached to none (enrichment_attached)
        self.mislabelled = 0  # request bodies of plain JSON under a content-encoding they aren't in (apis.body.mislabelled)
        self.cut_requests = 0  # compressed request bodies recorded cut short inside their stream (apis.body.plain_request)
        # The capture's ids (``id_seen``; a part sees only its own), so that those carried twice are
        # known without a query over the exchanges table after the decode; ``twice`` is None once an
        # id is not a string (the table's text of it is what the query would compare).
        self.ids: dict[str, int] = {}  # each id's exchanges
        self.twice: set[str] | None = set()
        self.part = part
        self.lead = part is None or part[0] == 0  # writes the capture-wide tables
        self.exchange_number = 0
        self.numbers = array("q")  # in a part: each generation request's exchange number in the capture
        self.capture_id: str | None = None
        self.run: dict[str, Any] = {"run_id": None, "recorder": None, "recorder_id": None, "wall_ns": None}
        self.runs_seen: set[str] = set()
        self.records = 0
        self.generations = Generations()
        self.chat = ChatRequests()  # the usual chat request, each message read once (else read_request)
        # Prompt token ids, packed 4 bytes a token, kept as prefixes (see enrichment()): exchange id -> number.
        self.prompt_ids: dict[str, int] = {}
        self.tokens = PrefixIndex()

    def header(self, rec: dict[str, Any]) -> None:
        self.capture_id = self.capture_id or rec.get("capture_id")
        recorder = rec.get("recorder") or {}
        wall = _num(rec.get("wall"))
        recorder_id = _recorder_id(rec)
        self.run = {
            "run_id": rec.get("run_id"),
            "recorder": recorder.get("kind"),
            "recorder_id": recorder_id,
            "wall_ns": round(wall * 1e9) if wall else None,
        }
        if self.lead and rec.get("run_id") not in self.runs_seen:
            self.runs_seen.add(str(rec.get("run_id")))
            self.sinks["runs"].add(
                (
                    self.capture,
                    rec.get("capture_id"),
                    rec.get("run_id"),
                    recorder.get("kind"),
                    recorder_id,
                    wall,
                    recorder.get("upstream"),
                    _dump(rec.get("labels")),
                    _dump(rec.get("host")),
                    _int(recorder.get("pid")),
                    _dump(recorder.get("telemetry_urls")),
                    recorder.get("telemetry") if isinstance(recorder.get("telemetry"), bool) else None,
                    _dump(recorder.get("telemetry_intervals_s")),
                    _dump(recorder.get("importer")),
                )
            )

    def exchange(self, rec: dict[str, Any]) -> None:
        number = self.exchange_number
        self.exchange_number += 1
        if self.part is not None and (number // self.part[2]) % self.part[1] != self.part[0]:
            return
        rec["session"] = recorded_session(rec)  # blank, or read from its headers (older recorders)
        if self.repeated:
            name_apart(rec, self.repeated, self.seen)
        xid = rec.get("id")
        if self.part is None and not self.repeated:
            self.id_seen(xid)
        wire: list[bytes] = rec.get("chunks") or []
        wire_ns: list[int] = rec.get("chunk_ns") or []
        # The answer is what the client got: chunks the engine sent after it hung up (or that waited
        # for room it never made) stay in the chunks table, no part of its answer, end or last byte.
        rec = delivered(rec)
        chunks: list[bytes] = rec.get("chunks") or []
        chunk_ns: list[int] = rec.get("chunk_ns") or []
        # An imported exchange's one chunk is timed at the response's end: no token's time is known.
        token_ns: list[int] = [] if rec.get("imported") else chunk_ns
        body = rec.get("request_body") or b""
        # Its content-encoding undone once (zstd from the Codex CLI, gzip...): read, hashed and told
        # newer from these same bytes, never decompressed again.
        plain, cut = plain_request(body, rec.get("request_headers"))
        fast = self.chat.read(rec)
        request, prefixes = fast if fast is not None else (read_request(rec, plain), None)
        wall_ns = self.run["wall_ns"]
        if wall_ns is None:  # no header seen: anchor on the exchange's own wall clock
            wall_ns = round(rec.get("wall", 0.0) * 1e9) - rec.get("start_ns", 0)
        sent_wall_ns = wall_ns + rec.get("sent_ns", 0)
        # read as JSON: said (decoding.mislabelled_warning)
        self.mislabelled += mislabelled(body, rec.get("request_headers"), plain)
        self.cut_requests += cut  # read as far as it goes, never as the body sent: said (decoding.cut_requests_warning)
        # The media and embeddings requests' too (no text to time): the traffic's media and embeddings identities
        # hash them, their asked headers with them (compare names those that kept two apart).
        apart = bool(apart_kind(rec))
        asked = asked_headers(rec.get("request_headers")) if request.generation or apart else []
        digest = exchange_digest(rec, None, plain) if request.generation or (apart and not request_body_unknown(rec)) else None
        newer = request.generation and generation_since_wl3(rec, plain)
        # The JSON as its API read it (a compressed body's decoded: SQL's body->>'$.field' reads it).
        self._request_row(xid, request, plain, digest, _dump([list(h) for h in asked]) if asked else None, newer, cut)
        # The usual streamed chat answer in one pass (read_chat_stream), anything else through its adapter.
        stream = read_chat_stream(rec) if chunks else None
        if stream is not None:
            parsed, done = stream.output, stream.done
            tokens = self._stream_rows(xid, stream, token_ns)
        else:
            unread = chunks or not_in_file(rec) or response_not_kept(rec)
            parsed = read_response(rec, None, plain) if unread else Output(request.api, error="no response body")
            if response_not_kept(rec):  # unknown, but its kept head may name its id (only the id is read)
                parsed.response_id = kept_response_id(rec)
                with_tail_usage(parsed, rec)  # and its kept tail its usage and finish reason (only those)
            done = stream_done(decoded_chunks(rec) or chunks, parsed)
            tokens = self._event_rows(xid, parsed, token_ns)
        if request.generation:
            end_wall_ns = sent_wall_ns + (rec.get("end_ns") or 0)
            kept = plain if self.part is None else None  # byte prefixes of what was asked, not of its compression
            self.generations.add(
                sent_wall_ns, _int(rec.get("seq")) or 0, str(xid), end_wall_ns, kept, links_of(rec, request, parsed, prefixes)
            )
            if self.part is not None:
                self.numbers.append(number)
        self._chunk_rows(xid, wire, wire_ns)
        self._exchange_row(rec, request, parsed, sent_wall_ns, body, chunks, token_ns, done, tokens, len(wire) - len(chunks))

    def id_seen(self, xid: Any) -> None:
        """Counts an exchange's id (every exchange of the capture, in record order) into ``twice``."""
        if self.twice is None:
            return
        if isinstance(xid, str):
            if xid in self.ids:
                self.twice.add(xid)
            self.ids[xid] = self.ids.get(xid, 0) + 1
        elif xid is not None:
            self.twice = None

    def _event_rows(self, xid: str | None, parsed: Output, chunk_ns: list[int]) -> _Tokens:
        """One row per event the adapter read, at its chunk's arrival: each column extended at once."""
        events = parsed.events
        if not events:
            return _NO_TOKENS
        sink = self.sinks["events"]
        assert isinstance(sink, _ColumnSink)
        ids, index, chunk, t_ns, data, content, reasoning, tools, finish, usage = sink.columns
        n, n_times = len(events), len(chunk_ns)
        at = [e.chunk for e in events]
        deltas = [e.delta for e in events]
        times = [chunk_ns[c] if c < n_times else None for c in at]
        # A refusal (an audio answer's transcript) is generated text too: its events are token events,
        # as the chat stream reader keeps them.
        texts = [event_text(d) for d in deltas]
        thoughts = [d.reasoning for d in deltas]
        calls, finishes = [tool_deltas(d) for d in deltas], [d.finish_reason for d in deltas]
        ids.extend([xid] * n)
        index.extend(range(n))
        chunk.extend(at)
        t_ns.extend(times)
        payloads = [e.data for e in events]
        data.extend(payloads)
        content.extend(texts)
        reasoning.extend(thoughts)
        tools.extend(calls)
        finish.extend(finishes)
        usage.extend([None if d.usage is None else _dump(d.usage) for d in deltas])
        sink.extended(_lengths(payloads) + _lengths(texts))
        return _token_times(at, times, texts, thoughts, calls, finishes)

    def _stream_rows(self, xid: str | None, s: ChatStream, chunk_ns: list[int]) -> _Tokens:
        """``_event_rows`` of an answer read by ``read_chat_stream``: its columns as they come."""
        sink = self.sinks["events"]
        assert isinstance(sink, _ColumnSink)
        ids, index, chunk, t_ns, data, content, reasoning, tools, finish, usage = sink.columns
        n, n_times = len(s.chunk), len(chunk_ns)
        times = [chunk_ns[c] if c < n_times else None for c in s.chunk]
        ids.extend([xid] * n)
        index.extend(range(n))
        chunk.extend(s.chunk)
        t_ns.extend(times)
        data.extend(s.data)
        content.extend(s.content)
        reasoning.extend(s.reasoning)
        tools.extend(s.tool_calls)
        finish.extend(s.finish_reason)
        # Parsed JSON holds no bytes and no keys but strings: jsonable() would give it back unchanged.
        usage.extend([None if u is None else json.dumps(u, ensure_ascii=False) for u in s.usage])
        sink.extended(_lengths(s.data) + _lengths(s.content))
        return _token_times(s.chunk, times, s.content, s.reasoning, s.tool_calls, s.finish_reason)

    def _chunk_rows(self, xid: str | None, chunks: list[bytes], chunk_ns: list[int]) -> None:
        """Each chunk as the wire carried it (bytes and arrival), for SQL that needs more than the adapters read."""
        n = min(len(chunks), len(chunk_ns))
        if not n:
            return
        sink = self.sinks["chunks"]
        assert isinstance(sink, _ColumnSink)
        ids, index, t_ns, size, data = sink.columns
        if n < len(chunks):
            chunks = chunks[:n]
        ids.extend([xid] * n)
        index.extend(range(n))
        t_ns.extend(chunk_ns[:n] if n < len(chunk_ns) else chunk_ns)
        sizes = list(map(len, chunks))
        size.extend(sizes)
        data.extend(chunks)
        sink.extended(sum(sizes))

    def _exchange_row(
        self,
        rec: dict[str, Any],
        request: Request,
        parsed: Output,
        sent_wall_ns: int,
        body: bytes,
        chunks: list[bytes],
        chunk_ns: list[int],
        done: bool,
        tokens: _Tokens,
        undelivered: int,
    ) -> None:
        """The exchange's one row: the record's own fields, then what its request and response say
        (as its client got them: ``undelivered`` chunks more were read from the engine)."""
        run = self.run
        self.sinks["exchanges"].add(
            (
                self.capture,
                self.capture_id,
                run["run_id"],
                run["recorder"],
                run["recorder_id"],
                rec.get("id"),
                rec.get("seq"),
                rec.get("session"),
                rec.get("wall"),
                rec.get("start_ns"),
                rec.get("sent_ns"),
                sent_wall_ns,
                rec.get("method"),
                rec.get("path") or "",
                rec.get("query"),
                rec.get("status"),
                rec.get("end"),
                rec.get("error"),
                rec.get("upstream"),
                bool(rec.get("proxy_generated")),
                len(body) if body else rec.get("request_body_size", 0),
                rec.get("response_body_size") if response_not_kept(rec) else sum(len(c) for c in chunks),
                request.model,
                request.stream,
                request.generation,
                request_body_unknown(rec),
                "request_body_unsearched" in rec,
                "response_body_unsearched" in rec,
                parsed.api,
                rec.get("headers_ns"),
                rec.get("end_ns"),
                # A response kept only in part (response_body_size): its real count and last chunk's time.
                _int(rec.get("response_body_chunks")) if response_not_kept(rec) else len(chunks),
                chunk_ns[0] if chunk_ns else None,
                _int(rec.get("response_last_ns")) if response_not_kept(rec) else chunk_ns[-1] if chunk_ns else None,
                parsed.model,
                parsed.finish_reason,
                parsed.finish_reason_raw,
                len(parsed.tool_calls),
                parsed.readable,
                parsed.streamed,
                parsed.response_id,
                parsed.error_message,
                done,
                parsed.error,
                _dump(parsed.usage),
                _int(parsed.prompt_tokens),
                _int(parsed.output_tokens),
                _int(parsed.cached_tokens),
                _hidden_reasoning(parsed),
                parsed.choice_count,
                parsed.choices_unfinished,
                parsed.choices_finish,
                *_server_timings(parsed),
                rec.get("source_id"),
                _int(rec.get("repeat")),
                *(_int(rec.get(k)) for k in ("scheduled_ns", "lag_ns", "queue_ns", "dep_wait_ns", "client_wait_ns")),
                undelivered or None,
                *tokens,
                # its output tokens as the answer counts them (apis.answer_tokens, replay's rule too)
                *answer_tokens(
                    _int(parsed.output_tokens), streamed_generation=request.generation and parsed.streamed, token_events=tokens[4]
                ),
                text_is_output(parsed),
            )
        )

    def _request_row(
        self,
        xid: str | None,
        r: Request,
        body: bytes,
        digest: bytes | None,
        asked: str | None,
        newer: bool = False,
        cut: bool = False,
    ) -> None:
        s = r.sampling
        self.sinks["requests"].add(
            (
                self.capture,
                xid,
                r.api,
                r.generation,
                r.model,
                r.stream,
                (body if body.isascii() else body.decode("utf-8", errors="replace").encode()) if r.body is not None else None,
                len(r.turns) if r.body is not None else None,
                r.items,
                r.system,
                r.last_user,
                list(r.tools),
                _dump(r.tool_choice),
                _int(r.max_tokens),
                _num(s.get("temperature")),
                _num(s.get("top_p")),
                _int(s.get("top_k")),
                _int(s.get("seed")),
                _dump(s) if s else None,
                r.previous_response_id,
                digest,
                asked,
                newer,
                cut,
            ),
            len(body),
        )

    def engine(self, rec: dict[str, Any]) -> None:
        facts: dict[str, Any] = rec["facts"] if isinstance(rec.get("facts"), dict) else {}
        values = {k: (f.get("value") if isinstance(f, dict) else f) for k, f in facts.items()}
        values.setdefault("version", rec.get("version"))
        self.sinks["engines"].add(
            (
                self.capture,
                self.run["run_id"],
                _num(rec.get("wall")),
                rec.get("url"),
                rec.get("kind"),
                rec.get("fingerprint"),
                *(_text(values.get(name)) for name in ENGINE_FACTS),
                _dump(facts),
                _dump(rec.get("unknown")),
                _dump(rec.get("labels")),
                _dump(rec.get("host")),
            )
        )

    def prompt_tokens(self, rec: dict[str, Any]) -> None:
        """An enrichment's prompt token ids, kept for prefix reuse in tokens (``prefixes``)."""
        pt = rec.get("prompt_tokens") or {}
        ids = pt.get("ids") if isinstance(pt.get("ids"), list) else None
        if ids is not None:
            try:  # 4 bytes a token instead of a list of ints: a capture's prompts stay small in memory
                self.prompt_ids[str(rec.get("exchange_id"))] = self.tokens.add(array("I", ids).tobytes())
            except (OverflowError, TypeError):
                pass  # not token ids as any tokenizer makes them: this request has none

    def enrichment(self, rec: dict[str, Any]) -> None:
        pt = rec.get("prompt_tokens") or {}
        ot = rec.get("output_tokens") or {}
        ids = pt.get("ids") if isinstance(pt.get("ids"), list) else None
        # Of an id several exchanges carry, attached to the one its ``occurrence`` names (renamed to
        # it), else (written before infertap enrich wrote one) to none, counted.
        attached = enrichment_attached(rec, self.repeated)
        self.unattached += not attached
        if self.part is None and attached:
            self.prompt_tokens(rec)
        wall, kind, output_count, prompt_count = enrichment_keys(rec)
        self.sinks["enrichments"].add(
            (
                self.capture,
                rec.get("exchange_id"),
                self.run["run_id"],
                wall,
                rec.get("engine"),
                kind,
                prompt_count,
                ids,
                _text(pt.get("source")),
                _text(pt.get("rendered")),
                pt.get("agrees_with_usage"),
                output_count,
                ot.get("ids") if isinstance(ot.get("ids"), list) else None,
                _text(ot.get("source")),
                _dump(rec.get("settings")),
                _dump(rec.get("server_timings")),
                _dump(rec.get("response")),
                self.records - 1,  # counted before its handler: this record's place, from 0
                attached,
            )
        )

    def telemetry(self, rec: dict[str, Any]) -> None:
        sink, run_id, source = self.sinks["telemetry"], self.run["run_id"], _text(rec.get("source"))
        wall = _num(rec.get("wall"))
        wall_ns = round(wall * 1e9) if wall is not None else None
        if rec.get("unknown") is not None:
            sink.add((self.capture, run_id, wall_ns, source, None, None, None, None, _text(rec.get("unknown"))))
        for sample in rec.get("samples") or ():
            if not (isinstance(sample, (list, tuple)) and len(sample) == 3):
                continue  # not [name, labels, value]: passed by, as any unknown shape is
            name, labels, value = sample
            labels = labels if isinstance(labels, dict) else {}
            device = _text(labels.get("gpu")) if source == "gpu" else None
            sink.add(
                (
                    self.capture,
                    run_id,
                    wall_ns,
                    source,
                    device,
                    _text(name),
                    json.dumps(labels, sort_keys=True),
                    _num(value),
                    None,
                )
            )

    def capture_row(self, reader: CaptureReader, torn: list[str]) -> None:
        """The ``captures`` row, once every record was read."""
        self.sinks["captures"].add(
            (
                self.capture,
                self.capture_id,
                len(reader.segments),
                sum(os.path.getsize(s) for s in reader.segments),
                self.records,
                reader.closed_cleanly,
                json.dumps(torn),
                json.dumps(sorted(str(run) for run in reader.open_runs)),
            )
        )

    def prefixes(self) -> None:
        """Prefix reuse within the capture: in tokens when every generation request has prompt ids, else in bytes."""
        g = self.generations
        order = g.order()
        tokens = bool(order) and all(g.ids[i] in self.prompt_ids for i in order)
        bodies = order if g.items is None else [g.items[i] for i in order]
        index, items = (self.tokens, [self.prompt_ids[g.ids[i]] for i in order]) if tokens else (g.bodies, bodies)
        # Ids packed 4 bytes each: a common prefix of k tokens is one of 4k bytes (plus < 4 of the next).
        size = 4 if tokens else 1
        add = self.sinks["prefixes"].add
        for i, item, shared in zip(order, items, index.longest_earlier(items), strict=True):
            add((self.capture, g.ids[i], "tokens" if tokens else "bytes", index.length(item) // size, shared // size))
        g.bodies = self.tokens = PrefixIndex()  # what turns() needs is the rest

    def turns(self) -> None:
        """Each generation request's session, turn and think time, linked in order of sending."""
        g = self.generations
        order = g.order()
        links = [g.links[i] for i in order]
        sent, ended = [g.sent[i] for i in order], [g.end[i] for i in order]
        found = link(links, sent, ended)
        parents = [None if f is None else f[0] for f in found]
        ids = [g.ids[i] for i in order]
        refused = [x.refused for x in links]
        sessions = sessions_of(parents, [x.session for x in links], ids, refused)
        thinks = think_times(parents, sessions, sent, ended, refused)
        add = self.sinks["turns"].add
        for xid, f, session, turn, think in zip(ids, found, sessions, turns_of(parents), thinks, strict=True):
            if f is None:
                add((self.capture, xid, session, turn, None, None, None))
            else:
                add((self.capture, xid, session, turn, ids[f[0]], f[1], think))
        # What linking read, for captures read together to be linked as one (joined_sessions.py).
        add = self.sinks["links"].add
        for k, (xid, x) in enumerate(zip(ids, links, strict=True)):
            row = (
                x.id,
                x.parent_id,
                x.session,
                list(x.candidates),
                x.continuation,
                x.response_id,
                x.previous_response_id,
                x.refused,
            )
            add((self.capture, xid, k, sent[k], ended[k], *row))
        self.generations = Generations()


class Generations:
    """A capture's generation requests, kept for the two passes that need them all (prefix reuse and
    session linking) as parallel arrays: at ten million requests, a tuple of five objects each would
    be gigabytes more."""

    def __init__(self) -> None:
        self.sent, self.seq, self.end = array("q"), array("q"), array("q")  # send and end (wall ns), seq
        self.ids: list[str] = []
        self.bodies = PrefixIndex()  # request bodies as prefixes: agent requests share most of theirs
        self.items: array[int] | None = None  # each one's body in ``bodies``, where not added in this order
        self.links: list[Links] = []

    def add(self, sent: int, seq: int, xid: str, end: int, body: bytes | None, links: Links) -> None:
        self.sent.append(int(sent))
        self.seq.append(seq)
        self.end.append(int(end))
        self.ids.append(xid)
        if body is not None:  # None: added to ``bodies`` apart, ``items`` says where (decoding.py's parts)
            self.bodies.add(body)
        self.links.append(links)

    def order(self) -> list[int]:
        """Indexes in order of sending (ties by seq, then as recorded)."""
        import numpy as np

        if not self.ids:
            return []
        return np.lexsort((np.frombuffer(self.seq, np.int64), np.frombuffer(self.sent, np.int64))).tolist()


def _lengths(values: Sequence[str | None]) -> int:
    """The characters of the values given (None: none), what a batch of events holds of them."""
    return sum(len(v) for v in values if v)


def table_sink(out: Path, name: str, capture: str) -> _Sink:
    """Where the rows of table ``name`` go: ``out/<name>.parquet``."""
    schema = arrow_schema(name)
    return _ColumnSink(out / f"{name}.parquet", schema, capture) if name in _COLUMNAR else _Sink(out / f"{name}.parquet", schema)


def decode_records(
    path: Path,
    out: Path,
    capture: str,
    repeated: Mapping[str, int] = MappingProxyType({}),
    part: tuple[int, int, int] | None = None,
    sizes: Mapping[str, int] | None = None,
) -> tuple[dict[str, Any], Decoder]:
    """One pass over the capture at ``path`` (up to ``sizes``, ``CaptureReader``'s): its tables written
    to ``out/<table>.parquet`` (a part's: all but ``SEQUENTIAL_TABLES``); what the cache keeps about
    it, and the decoder (its generations)."""
    reader = CaptureReader(path, sizes)
    out.mkdir(parents=True, exist_ok=True)
    # The events' sink writes the token chunks of each batch; it comes before them in TABLES, so that
    # it is closed (its last batch flushed) before the token chunks' sink.
    tokens = table_sink(out, "token_chunks", capture)
    sinks = {
        name: tokens
        if name == "token_chunks"
        else _EventSink(out / "events.parquet", arrow_schema("events"), capture, tokens)
        if name == "events"
        else table_sink(out, name, capture)
        for name in TABLES
        if part is None or name not in SEQUENTIAL_TABLES
    }
    decoder = Decoder(capture, sinks, repeated, part)
    handlers = {"header": decoder.header, "exchange": decoder.exchange}
    if decoder.lead:
        handlers.update(engine=decoder.engine, enrichment=decoder.enrichment, telemetry=decoder.telemetry)
    try:
        with no_cyclic_gc():
            for record in reader.records():
                decoder.records += 1
                handler = handlers.get(record["type"])
                if handler is not None:
                    handler(record)
            torn = [str(t) for t in reader.torn]
            if part is None:
                decoder.prefixes()
                decoder.turns()
                decoder.capture_row(reader, torn)
    finally:
        rows = {name: sink.close() for name, sink in sinks.items()}
    meta = {
        "capture": capture,
        "capture_id": decoder.capture_id,
        "decode_version": DECODE_VERSION,
        "closed_cleanly": reader.closed_cleanly,
        "torn": torn,
        "rows": rows,
        "unattached_enrichments": decoder.unattached,  # a part's: its lead's alone (the others read none)
        "mislabelled_requests": decoder.mislabelled,  # a part's: of its own exchanges (``_in_parts`` sums them)
        "cut_requests": decoder.cut_requests,  # as mislabelled_requests
    }
    return meta, decoder


def enrichment_attached(record: dict[str, Any], repeated: Mapping[str, int]) -> bool:
    """Whether an enrichment attaches to an exchange. One naming an id more than one exchange carries
    (``repeated``, each id's count) attaches to the one its ``occurrence`` names (``infertap enrich``
    writes which of them, in record order), its ``exchange_id`` renamed in place to that exchange's
    name (``<id>~k``, as ``name_apart`` names it); one with none (an older infertap's, the recorder's
    own) can't be told to be the first's or a copy's, and one naming an occurrence past the id's count
    (of an id one exchange carries: any past the first) names an exchange the capture doesn't hold, so
    the decoded tables and compare's summaries attach either to none. ``replay.workload`` pins the same."""
    xid = record.get("exchange_id")
    raw = record.get("occurrence")
    k = raw if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 1 else None  # None: it names none
    if not isinstance(xid, str) or xid not in repeated:
        return k is None or k == 1  # enriched as the k-th exchange of its id: a copy this capture lacks
    if k is None or k > repeated[xid]:
        return False
    record["exchange_id"] = apart(xid, k)
    return True


def name_apart(record: dict[str, Any], repeated: Mapping[str, int], seen: dict[str, int]) -> None:
    """Names the ``k``-th exchange (k > 1) of an id in ``repeated`` ``<id>~k``, in place; ``seen``
    counts each id's exchanges so far. The decoded tables and compare's summaries both name them so."""
    xid = record.get("id")
    if isinstance(xid, str) and xid in repeated:
        k = seen[xid] = seen.get(xid, 0) + 1
        if k > 1:
            record["id"] = apart(xid, k)
