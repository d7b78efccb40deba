"""The decoded tables' columns and their Arrow types: one place that says what each column holds.

Every table carries ``capture`` (the capture's path as loaded) so that rows of many captures can be
joined on ``(capture, exchange_id)`` even when two captures are copies of each other. Times named
``*_ns`` are nanoseconds since the exchange's request was sent upstream, except ``start_ns`` and
``sent_ns`` (since the run's start, as in the capture) and ``*_wall_ns`` (Unix epoch ns).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

# Types by the name of their pyarrow factory (``list<t>``: a list of t), so that a command that only
# reads the cache (DuckDB reads the Parquet itself) never imports pyarrow: ``arrow_schema`` builds them.
S, I32, I64, F64, B, BIN = "string", "int32", "int64", "float64", "bool_", "binary"

#: A table's columns: (name, type) in order.
Columns = tuple[tuple[str, str], ...]

#: Engine facts given a column of their own in ``engines`` (all of them are also in ``facts``).
ENGINE_FACTS = (
    "version",
    "models",
    "model_path",
    "model_sha256",
    "quantization",
    "dtype",
    "context_size",
    "parallel_slots",
    "defaults",
    "chat_template_sha256",
    "bos_token",
    "eos_token",
)


def _schema(*fields: tuple[str, str]) -> Columns:
    return fields


CAPTURES = _schema(
    ("capture", S),
    ("capture_id", S),
    ("segments", I32),
    ("bytes_on_disk", I64),
    ("records", I64),
    ("closed_cleanly", B),
    ("torn", S),  # torn: JSON list of the torn-tail warnings
    ("open_runs", S),  # JSON list of the run ids with no final footer: killed, or still being written
)

RUNS = _schema(
    ("capture", S),
    ("capture_id", S),
    ("run_id", S),
    ("recorder", S),
    ("recorder_id", S),
    ("wall", F64),
    ("upstream", S),
    ("labels", S),
    ("host", S),  # JSON
    ("pid", I64),  # the recorder's process, on the host's machine: whether it still writes the run
    ("telemetry_urls", S),  # JSON list of the --telemetry-url exporters it scraped (redacted); null: no telemetry
    ("telemetry", B),  # whether it sampled telemetry (false: --no-telemetry); null: a capture older than the field
    ("telemetry_intervals_s", S),  # JSON {source: seconds between samples asked for}; null: none, or older
    ("importer", S),  # JSON {hostname, wall}: the machine an import was written on and when; null: not an import, or older
)

EXCHANGES = _schema(
    ("capture", S),
    ("capture_id", S),
    ("run_id", S),
    ("recorder", S),
    ("recorder_id", S),  # which recorder process wrote it (host-pid, or a replay shard): shards of one capture
    ("exchange_id", S),
    ("seq", I64),
    ("session", S),
    ("wall", F64),
    ("start_ns", I64),
    ("sent_ns", I64),
    ("sent_wall_ns", I64),  # the run header's wall clock + sent_ns: comparable across runs
    ("method", S),
    ("path", S),
    ("query", S),
    ("status", I32),
    ("end", S),
    ("error", S),
    ("upstream", S),
    ("proxy_generated", B),
    ("request_bytes", I64),
    ("response_bytes", I64),
    ("model", S),
    ("stream", B),  # from the request body
    ("generation", B),  # a request for generated tokens, as its API reads it (messages, prompt or input)
    # Sent with a body that was not kept (capture.records.request_body_unknown): its empty body says
    # nothing, so generation false and model null are unknown there, not a request of no generation.
    ("request_body_unknown", B),
    # A body kept encoded as sent that was not searched for credentials (request_body_unsearched,
    # response_body_unsearched): stats says so, as info does, before a capture is shared.
    ("request_body_unsearched", B),
    ("response_body_unsearched", B),
    ("api", S),  # the API family whose adapter read it: chat, completions, responses, messages, ollama-chat, ...
    ("headers_ns", I64),
    ("end_ns", I64),
    ("n_chunks", I32),
    ("first_chunk_ns", I64),
    ("last_chunk_ns", I64),
    ("response_model", S),
    ("finish_reason", S),  # in the common vocabulary: stop, length, tool_calls, content_filter, error, other
    ("finish_reason_raw", S),  # the API's own word (end_turn, eos, incomplete:max_output_tokens, ...)
    ("tool_calls", I32),  # tool calls in the output
    ("readable", B),  # the API's adapter understood the body (an answer or an error object)
    ("streamed", B),  # the body was an event stream (SSE or NDJSON)
    ("response_id", S),  # the id the engine gave the response (Responses API: what previous_response_id names)
    ("error_message", S),  # an error the body itself reports
    ("stream_done", B),  # the body carried its stream's end marker ([DONE], "done": true, message_stop)
    ("parse_error", S),
    ("usage", S),
    ("usage_prompt_tokens", I64),
    ("usage_completion_tokens", I64),
    ("usage_cached_tokens", I64),
    # Reasoning tokens counted in the output tokens of which no text came (OpenAI's reasoning models):
    # generated before the first token seen, so no part of the spacing of those seen.
    ("usage_hidden_reasoning_tokens", I64),
    ("choices", I32),  # answers in the body (n > 1 asks for several; the events and times are choice 0's)
    ("choices_unfinished", I32),  # of the choices other than 0, those that said no finish reason (in a stream: cut short)
    ("choices_finish_reasons", f"list<{S}>"),  # of the choices other than 0, each's finish reason (common vocabulary)
    ("server_timings", S),
    ("server_timings_source", S),
    ("server_prompt_ms", F64),
    ("server_decode_ms", F64),
    ("server_prompt_tokens", I64),
    ("server_decode_tokens", I64),
    ("server_cached_tokens", I64),
    ("server_load_ns", I64),  # Ollama's load_duration: getting the model ready (a cold load), inside ttft
    ("server_total_ns", I64),  # Ollama's total_duration: the whole request as the server timed it
    ("source_id", S),
    ("repeat", I64),
    ("scheduled_ns", I64),
    ("lag_ns", I64),
    ("queue_ns", I64),
    ("dep_wait_ns", I64),  # replays
    ("client_wait_ns", I64),  # the recording proxy's wait for a slow client: chunk times late by up to it
    # Chunks read from the engine after the client hung up (or waiting for room it never made): in the
    # chunks table, no part of the row's answer, end marker, chunk counts or times.
    ("undelivered_chunks", I32),
    # Its token-bearing events (text, reasoning or a tool-call delta), as the token_chunks view reads
    # them, summed up at decode time so that the metrics view needs no aggregate over every event:
    ("first_token_ns", I64),
    ("last_token_ns", I64),
    ("first_content_ns", I64),  # the first chunk with text
    ("token_chunk_count", I64),
    ("token_event_count", I64),
    ("finish_ns", I64),  # the first event with a finish reason
    # Its output tokens as the answer counts them (infertap.apis.answer_tokens: usage, else a streamed
    # generation answer's token events), and how ("usage", "chunks"): replay's summary counts by the same rule.
    ("answer_tokens", I64),
    ("answer_tokens_source", S),
    # Its text is all it generated (infertap.apis.text_is_output): only then is an enrichment's count
    # of its text (the engine's tokenizer on it) a count of its output tokens.
    ("answer_text_only", B),
)

CHUNKS = _schema(
    ("capture", S),
    ("exchange_id", S),
    ("index", I32),
    ("t_ns", I64),
    ("size", I32),
    ("bytes", BIN),
)

EVENTS = _schema(
    ("capture", S),
    ("exchange_id", S),
    ("index", I32),
    ("chunk", I32),
    ("t_ns", I64),  # the chunk in which the event was complete, and its receive time
    ("data", S),  # the event's payload as sent (SSE data, NDJSON line or whole JSON body)
    ("content", S),
    ("reasoning", S),
    ("tool_calls", I32),
    ("finish_reason", S),
    ("usage", S),
)

REQUESTS = _schema(
    ("capture", S),
    ("exchange_id", S),
    ("api", S),
    ("generation", B),
    ("model", S),
    ("stream", B),
    ("body", S),  # the request body as JSON text, when it is a JSON object: body->>'$.field' in SQL
    ("turns", I32),  # conversation turns it carries, a system prompt included
    ("items", I32),  # messages (or Responses input items) as sent
    ("system", S),
    ("last_user", S),
    ("tools", f"list<{S}>"),  # names of the tools offered
    ("tool_choice", S),  # JSON
    ("max_tokens", I64),
    ("temperature", F64),
    ("top_p", F64),
    ("top_k", I64),
    ("seed", I64),
    ("sampling", S),  # JSON: every sampling setting sent, under its canonical name
    ("previous_response_id", S),
    # A generation or media request's digest (capture/identity.py's request_digest of its exact bytes), for workload
    # and media identities; null for any other request and for one sent with a body not kept.
    ("digest", BIN),
    # The headers that change what it asks and are in its digest (identity.asked_headers), as JSON
    # [[name, value], ...], of a generation, media or embeddings request; null where it sent none.
    ("asked_headers", S),
    # A generation request an older infertap left out of the workload (apis.read.generation_since_wl3): its
    # identity is tagged wl3 (identity.version_of); false for any other.
    ("newer", B),
    # A compressed body recorded cut short inside its content-encoding (a gzip trailer, the JSON's end
    # missing): its columns read what it holds, never the body sent (apis.body.plain_request).
    ("body_cut", B),
)

# One row per token-bearing chunk of an exchange (a chunk whose events carry text, reasoning text or a
# tool-call delta), computed from its events at decode time (analysis/token_chunks.py): the ``itl``
# view is its gaps.
TOKEN_CHUNKS = _schema(
    ("capture", S),
    ("exchange_id", S),
    ("chunk", I32),
    ("t_ns", I64),  # the chunk's arrival (the earliest of its token events' times)
    ("events", I64),  # its token-bearing events
    ("has_content", B),  # one of them carries text (not only reasoning or tool-call deltas)
    ("gap_ns", I64),  # since the exchange's token-bearing chunk before it; null for its first
)

ENGINES = _schema(
    *(("capture", S), ("run_id", S), ("wall", F64), ("url", S), ("kind", S), ("fingerprint", S)),
    *((name, S) for name in ENGINE_FACTS),
    *((n, S) for n in ("facts", "unknown", "labels", "host")),  # JSON
)

ENRICHMENTS = _schema(
    ("capture", S),
    ("exchange_id", S),
    ("run_id", S),
    ("wall", F64),
    ("engine", S),
    ("kind", S),
    ("prompt_tokens", I64),
    ("prompt_ids", f"list<{I64}>"),
    ("prompt_source", S),
    ("prompt_rendered", S),
    ("agrees_with_usage", B),
    ("output_tokens", I64),
    ("output_ids", f"list<{I64}>"),
    ("output_source", S),
    ("settings", S),
    ("server_timings", S),
    ("response", S),  # JSON
    # The record's place in the capture: between enrichments of one exchange and one wall, the
    # later record is taken (views.py's orders, as compare and replay's --pin-defaults take it).
    ("ord", I64),
    # False where more than one exchange of the capture carries its exchange_id (named apart,
    # ``<id>~2``): which one it was written for is unknown, so it is attached to none.
    ("attached", B),
)

PREFIXES = _schema(
    ("capture", S),
    ("exchange_id", S),
    ("unit", S),  # "tokens" (enrichment prompt ids) or "bytes" (request body)
    ("length", I64),  # the request's own length in that unit
    ("shared", I64),  # the longest prefix shared with any earlier request of the capture
)

# One row per generation request: its session and its place in it (infertap.apis.conversation).
TURNS = _schema(
    ("capture", S),
    ("exchange_id", S),
    ("session", S),  # its explicit session (a session header; a replay's own), else its first turn's exchange id
    ("turn", I32),  # 0: a session's first request
    ("parent_id", S),  # the exchange it continues
    ("link", S),  # how that was found: recorded (replays), session, previous_response_id, conversation
    ("think_ns", I64),  # the agent's own time: the parent's end to this request's send (never below 0)
)

# One row per generation request: what linking read of it (infertap.apis.conversation's ``Links``),
# kept so that captures read together are linked as one (analysis/joined_sessions.py) without
# reading their bodies again. ``ord``: its place in the capture's order of sending.
LINKS = _schema(
    ("capture", S),
    ("exchange_id", S),
    ("ord", I64),
    ("sent_wall_ns", I64),
    ("end_wall_ns", I64),
    ("link_id", S),  # the id a recorded parent_id names (the exchange's id before repeats were named apart)
    ("parent_id", S),  # recorded by a replay
    ("session", S),  # the explicit session it was sent in
    ("candidates", f"list<{BIN}>"),  # its conversation's prefixes ending on an assistant turn, longest first
    ("continuation", BIN),  # its conversation plus its reply
    ("response_id", S),
    ("previous_response_id", S),
    ("refused", B),  # refused by infertap, never sent: a leaf of its session (infertap.apis.linking)
)

# One row per telemetry sample (infertap.telemetry): joinable with exchanges on wall time. A source
# that could not be read is one row with name NULL and its reason in `unknown`.
TELEMETRY = _schema(
    ("capture", S),
    ("run_id", S),
    ("wall_ns", I64),  # when the sample was read, ns since the epoch (exchanges: sent_wall_ns)
    ("source", S),  # engine | exporter | gpu | host
    ("device", S),  # the GPU's index for gpu samples (label "gpu"), else NULL
    ("name", S),
    ("labels", S),  # JSON
    ("value", F64),
    ("unknown", S),
)

TABLES: dict[str, Columns] = {
    "captures": CAPTURES,
    "runs": RUNS,
    "exchanges": EXCHANGES,
    "requests": REQUESTS,
    "chunks": CHUNKS,
    "events": EVENTS,
    "token_chunks": TOKEN_CHUNKS,  # after events: the decode writes it from the events' batches
    "engines": ENGINES,
    "enrichments": ENRICHMENTS,
    "prefixes": PREFIXES,
    "turns": TURNS,
    "links": LINKS,
    "telemetry": TELEMETRY,
}


@functools.cache
def arrow_schema(name: str) -> pa.Schema:
    """Table ``name``'s Arrow schema, as the decode writes it."""
    import pyarrow as pa

    return pa.schema([pa.field(column, _arrow_type(t)) for column, t in TABLES[name]])


def _arrow_type(name: str) -> pa.DataType:
    import pyarrow as pa

    if name.startswith("list<"):
        return pa.list_(_arrow_type(name[5:-1]))
    factory = getattr(pa, name)
    return factory()
