"""One side of a comparison reduced to what ``compare`` needs of each exchange, streamed to Parquet.

``compare`` pairs and diffs runs of any size without holding either in Python: one pass over a
capture's records reads each response once (``read_response``) and keeps, per exchange, its pairing
keys (id, replay link, a digest of the exact request bytes) and a small summary of its output
(text, reasoning, tool calls, token ids, logprob positions, finish reason, stop sequence, other
choices, status and ending); an embeddings answer's vectors go to a file of their own
(``VECTORS_SCHEMA``), which compare reads by pair, outside DuckDB.
Rows go to Parquet in batches, so that DuckDB can pair the two sides and hand pairs back in
bounded batches (compare.py).

A summary is pickled: a value of any shape the adapters read (a tool call's arguments, a logprob
keyed by token id or text, text with lone surrogates) comes back exactly as it was. The files are
written to compare's private temporary folder, or kept beside the capture's decoded tables in the
cache (``cached_side``) when every folder of that entry is the user's own and writable by no one
else, so that comparing the same run again doesn't read its capture again.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from infertap.apis import NOT_IN_FILE, NOT_KEPT, TOO_LARGE, Output, decoded_chunks, read_request, read_response, stream_done
from infertap.apis.chat_stream import read_plainest_chat_stream
from infertap.apis.embeddings import read_embeddings
from infertap.apis.media import is_embeddings
from infertap.apis.read import not_in_file, response_not_kept
from infertap.capture.identity import asked_body, asked_headers, asked_query
from infertap.capture.reader import CaptureReader
from infertap.capture.records import delivered, request_body_unknown

from .cache import CachedCapture
from .completed_at_limit import completed_at_limit
from .decode import enrichment_attached, enrichment_keys, name_apart
from .decoding import repeated_ids, repeats, repeats_warning, unattached_warning
from .divergence import Position, logprob_positions, post_sampling
from .media_output import MediaOutput, media_output

#: Rows per Parquet row group and per batch held before writing.
BATCH_ROWS = 5_000
#: Bytes of blobs a batch holds at most before it is written, whatever its rows: DuckDB reads a row
#: group's column whole, and 5,000 embeddings answers of a few vectors of 4,096 floats are gigabytes.
BATCH_BYTES = 8 << 20
#: Changes whenever what a summary holds changes: summaries cached by another version are not read.
#: 2: repeated ids named apart, and said; 3: values of another type read as none (tool-call indexes,
#: logprobs); 4: each logprob position with the token chosen; 5: whether a stream carried its end
#: marker, and a refusal apart from the text; 6: the stop sequence that ended it, encrypted reasoning
#: blocks and choices other than the first; 7: an MCP tool named with its server, an error's message
#: without its request id; 8: whether an enrichment's rebuilt prompt disagreed with usage; 9: tool-call
#: arguments canonical only where nothing is lost, a custom tool's input as text, what server tools gave
#: back, every finish reason said, payloads not read, bytes not UTF-8 and data after the end marker; a
#: request id only a token with a digit; 10: arguments sent as an object keep digits past a double;
#: 11: the layout of an answer made of blocks (items), blocks of a type not read, errors beside choices.
#: 12: the engine configurations a side ran under, each one's, not only its last snapshot.
#: 13: a Responses built-in call that did not complete (failed, incomplete) says so in its result;
#: 14: vLLM's stop_reason as said (null too), of each choice; 15: Anthropic's stop_details; 16: a
#: completion's prompt of token ids as its JSON (last_user); 17: an Ollama prompt's images in its last_user;
#: 18: an imported answer whose body is not in the file unread with that reason (compare leaves it out).
#: 19: SGLang's matched_stop as said (null too), of each choice; 20: a zstd or br answer read decoded;
#: 21: an answer as its client got it, its chunks cut at delivered_chunks;
#: 22: an answer decoded past apis.body.DECODED_LIMIT unread with that reason (compare leaves it out);
#: 23: a completion's prompt sent as a list of one (["ab"]) is that prompt's last_user, as "ab" is.
#: 24: whether the answer was streamed (a JSON body carries no end marker to compare).
#: 25: a request whose body was not kept (request_body_size) pairs by no identical request (its request_key its own).
#: 26: an answer the recorder kept only the head of (response_body_size) unread with that reason (compare leaves it out).
#: 27: a Responses stream whose response.completed holds output items is that output, where its deltas disagree.
#: 28: an error status's body no adapter reads kept as its digest (error_body): an error, not an unreadable answer;
#: 29: so is an exchange the upstream never answered (no status, no byte): a failure, not an unreadable body.
#: 30: an Ollama answer's logprobs (top-level ``logprobs`` of each object), as a chat completion's are read.
#: 31: an exchange of bytes but no status (no response head): a failure by its ending, its bytes kept as error_body.
#: 32: an imported WebSocket (websocket_messages) unread as not in the file, under NOT_IN_FILE's new words.
#: 33: the kinds of the side's recorders (why it may hold no engine snapshot).
#: 34: an Ollama answer that calls a tool finishes as tool_calls (its done_reason "stop" the raw word).
#: 35: so does a chat answer that calls a tool and says "stop" (its finish_reason the raw word).
#: 36: a Responses answer finishes as tool_calls only where its output holds a call its client makes, not the API's
#: built-in tools' alone (those calls marked "server").
#: 37: Anthropic's server and MCP tool calls (server_tool_use, mcp_tool_use) marked "server", as the Responses built-in calls are.
#: 38: an error of a choice other than 0 (n > 1), or a finish_reason "error" of any choice, is the answer's
#: error_message (each choice its "error"): a failed answer, not an ok one.
#: 39: so does a Responses answer failed or cancelled with no error object (its error_message "response failed").
#: 40: an Anthropic call made by code run in its code execution (programmatic tool calling) keeps its "caller".
#: 41: an Anthropic call of a toolset's tool (browser, computer) keeps its "toolset" (``toolset_name``).
#: 42: a Responses call keeps its namespace ("toolset") and caller (a program's), a program item is a call, and a
#: message's phase is in the layout (``message(commentary)``).
#: 43: the runs that hold the side's exchanges (an import among them) and the run that took its last snapshot.
#: 44: a Responses shell, apply patch or tool search call's arguments leave out its ``created_by`` (an id).
#: 45: a Responses audio answer's transcript is read.
#: 46: what Anthropic did to the input before the model read it (context edits applied, thinking
#: blocks dropped), "input_changes".
#: 47: a Responses built-in call cut before its item's end keeps the code or commands streamed into it.
#: 48: an item kept whole, and what a server's tool gave back, leave out ``created_by``, a caller's
#: ``caller_id`` and ``approval_request_id`` (ids new per request).
#: 49: a Responses answer's logprobs (its text deltas', its output_text parts') are its logprob positions.
#: 50: the tools an MCP server listed to the Responses API (``mcp_list_tools``) are "input_changes".
#: 51: citations leave out the ids new per request (``container_id``, a container file's ``file_id``,
#: ``encrypted_index``).
#: 52: every MCP server's tool list is kept where a Responses stream's final event restates no output.
#: 53: a failed MCP listing's ``error`` is in "input_changes", not among what a tool gave back.
#: 54: a ``file_path`` citation leaves out its ``file_id`` (a file the code interpreter generated).
#: 55: "input_changes" keeps each MCP listing (two from one server are two) and merges a stream's
#: listings with its final event's.
#: 56: a caller's ``caller_id`` in an item kept whole or a tool's result is its program's place (``call N``).
#: 57: "input_changes" keeps each MCP listing of an id another listing shares (a server that reuses ids).
#: 58: a request body cut short in a capture recorded before request_body_cut (its error says the
#: client's hang-up or the recorder's shutdown came while it arrived) is of unknown body: its own key.
#: 59: a legacy completion's logprobs (``tokens``, ``top_logprobs``) and llama.cpp's ``completion_probabilities``
#: are its logprob positions.
#: 60: llama.cpp's post-sampling probabilities (``prob``, ``top_probs``) are logprob positions, as their logs.
#: 61: each other choice's logprob positions (n > 1: compare's KL takes every choice).
#: 62: every enrichment with its wall, engine kind and counts, its prompt and output apart: compare takes
#: each field from the enrichment that ``enrichment_latest`` takes it from, not the newest one whole.
#: 63: an older llama.cpp's ``completion_probabilities`` (``probs`` of ``tok_str``/``prob``; a stream's
#: last event restating them) are logprob positions.
#: 64: request_key holds the headers that change what a request asks (identity.ASKED_HEADERS) where sent:
#: two requests of one body and another anthropic-beta are no identical request.
#: 65: an enrichment naming an id several exchanges carry is attached to none (decode.enrichment_unattached),
#: and the side's repeated-ids warning counts it.
#: 66: request_key holds the query (less a redacted credential parameter) where there is one: two
#: requests of one body to another ?api-version= are no identical request.
#: 67: an embeddings answer's place in the side's vectors file (float32), or why it was not read: compare's cosine.
#: 68: request_key takes a multipart body with its boundary written as one (identity.asked_body).
#: 69: whether the logprob positions are post-sampling probabilities (``post_sampling``): compare takes no
#: KL of them against the model's own logprobs, and says where its KL is over them.
#: 70: an enrichment naming an id several exchanges carry is attached to the exchange its ``occurrence``
#: names (decode.enrichment_attached); to none only where it has none.
#: 71: request_key and last_user of a request body sent with a content-encoding are its decoded JSON's.
#: 72: SGLang's and TGI's native ``/generate`` answers (and TGI's ``/generate_stream``) are read (SGLang's
#: cumulative stream as its new text per event), as their requests are generation requests.
#: 73: a ``/v1/responses/compact`` answer is read (a generation request's, counted and compared).
#: 74: request_key holds Bedrock's guardrail and trace headers (identity.ASKED_HEADERS) where sent.
#: 75: an SGLang ``/generate`` stream trimmed at its stop string answers its last event's text.
#: 76: an enrichment whose ``occurrence`` is past its repeated id's exchanges is attached to none.
#: 77: Bedrock Converse answers are read (text, tool calls, stop reason, usage), not unreadable chat.
#: 78: SGLang's batch answer (a JSON array) is read as several choices, not unreadable.
#: 79: an SGLang batch's stream is read per prompt (each prompt's answer a choice), not run together.
#: 80: Bedrock's /converse-stream answers are read (text, tool calls, reasoning, stop reason, usage), not unreadable.
#: 81: an enrichment whose ``occurrence`` is past the first of an id one exchange carries is left out, and said.
#: 82: Bedrock Converse answers carry their citations (and citationsContent text), blocks of other types whole, and their layout.
#: 83: a Bedrock Converse answer carries the stop sequence that ended it (additionalModelResponseFields).
#: 84: a Bedrock Converse tool use of type server_tool_use is a call Bedrock ran (``server``), no client call.
#: 85: a request Bedrock's Converse refused (a JSON ``{"message"}``) reads as that error, not unreadable.
#: 86: an image, video or speech answer's output as digests of what it made (media_output), compared byte for byte.
#: 87: a /converse-stream reasoning block sent redacted across several deltas counts as one encrypted block, not one per delta.
#: 88: how a Bedrock Converse answer was served (its trace, performanceConfig, other additionalModelResponseFields): "served".
#: 89: a Responses answer that said "completed" with its request's max_output_tokens of output carries that limit
#: (completed_at_limit): compare tells llama-server's word for a cut answer from a real finish difference.
#: 90: an SGLang batch answer (a JSON array) to a /generate body of both TGI's and SGLang's shapes read as SGLang's, not unreadable.
#: 91: a streamed block of a type not read (a /converse-stream image) is its start and every delta's pieces joined
#: member by member, not the start's members replaced by its last delta's (two answers differing early were one).
SUMMARY_VERSION = 91

#: A request id a server writes into its error's message (OpenAI's "Please include the request ID
#: req_... in your message"): new on every request, so two equal errors would differ by it.
#: An id has a digit ("req_abc123"): a word after "request id:" ("expired", "conflict") is the message.
_REQUEST_ID = re.compile(r"(?i)(\brequest[ _-]?id\b[\s:=#\"']*)(?=[\w-]*\d)[\w-]{8,}")

EXCHANGE_SCHEMA = pa.schema(
    [
        ("ord", pa.int64()),  # the exchange's place among the capture's exchanges, in record order
        ("id", pa.string()),
        ("source_id", pa.string()),  # the exchange a replay replays (only when set and non-empty)
        ("repeat_key", pa.string()),  # repr of the record's ``repeat`` (0 when absent), as pairing compares it
        ("request_key", pa.binary()),  # digest of method, path, asked headers and the exact request body bytes
        ("summary", pa.binary()),  # pickled ``Summary``
    ]
)

#: Each embeddings answer's vectors (float32 little-endian, in input order), by its exchange's
#: ``ord``, ascending: compare reads them a row group at a time (embedding_divergence.VectorFile).
VECTORS_SCHEMA = pa.schema([("ord", pa.int64()), ("vectors", pa.list_(pa.binary()))])

#: Every enrichment of the capture attached to an exchange: compare takes each field of an exchange's
#: from the one ``enrichment_latest`` takes it from (views.py's orders, over ``wall``, ``kind``, the
#: counts and ``ord``); one naming an id several exchanges carry and no occurrence is left out (``enrichment_attached``).
ENRICHMENT_SCHEMA = pa.schema(
    [
        ("ord", pa.int64()),  # record order: between enrichments of one wall, the later is taken
        ("exchange_id", pa.string()),
        ("wall", pa.float64()),
        ("kind", pa.string()),  # the engine's kind; null where its probe failed (engine unknown)
        ("output_tokens", pa.int64()),  # the output's count; null where it was not counted
        ("prompt_tokens", pa.int64()),  # the prompt's count; null where it was not counted
        ("settings", pa.binary()),  # pickled ``settings``: equal bytes, equal settings (grouped in SQL)
        ("prompt", pa.binary()),  # pickled ``prompt_tokens`` (ids, rendered text, ...)
        ("output", pa.binary()),  # pickled ``output_tokens`` (ids, ...)
        # The rebuilt prompt's count disagreed with the engine's own (usage): the engine renders
        # prompts otherwise than its probed template says (a chat format it was started with).
        ("prompt_disagrees", pa.bool_()),
    ]
)


@dataclass(slots=True)
class Summary:
    """What divergence reads of one exchange: its record's own fields and its response as read."""

    id: str
    method: str
    path: str
    status: Any
    end: Any
    error: Any
    api: str
    readable: bool
    parse_error: str | None  # Output.error: why the body could not be read
    error_message: str | None
    text: str
    reasoning: str
    refusal: str
    audio: str  # an audio answer's transcript
    citations: list[str]  # sources the text cites, as canonical JSON
    tool_calls: list[dict[str, Any]]
    token_ids: list[int] | None
    finish_reason: str | None
    finish_reason_raw: str | None
    done: bool  # the body carried its stream's end marker (stream_done): a stream cut short has not
    streamed: bool  # sent as events (SSE, NDJSON), not one JSON body: only a stream has an end marker to carry
    logprobs: list[Position] | None  # per output position, the token chosen and the top-k the engine reported
    stop_sequence: str | None  # the stop string that ended it, where the engine said
    stop_reason: str | None  # vLLM's stop_reason as JSON where the answer carried it (Output.stop_reason)
    matched_stop: str | None  # SGLang's matched_stop as JSON where the answer carried it (Output.matched_stop)
    stop_details: str | None  # Anthropic's stop_details: a refusal's category (Output.stop_details)
    input_changes: str | None  # what the API did to the input before the model read it (Output.input_changes)
    served: str | None  # how the server served the answer beyond its words: Bedrock's trace... (Output.served)
    encrypted_reasoning: int  # blocks of encrypted reasoning (Output.encrypted_reasoning)
    choices: list[dict[str, Any]]  # choices other than the first (n > 1), as Output.choices
    last_user: str | None  # the request's last user message (only read when references are given)
    tool_results: list[str]  # what server tools gave back, images generated (Output.tool_results)
    finish_reasons: list[str]  # every finish reason said, in order (Output.finish_reasons)
    unparsed: tuple[int, bytes] | None  # payloads that are not JSON objects: how many, and their digest
    invalid_utf8: list[bytes]  # the body's bytes that are not UTF-8 (Output.invalid_utf8)
    after_end: bytes | None  # digest of what followed the first [DONE], None when nothing did
    layout: list[str]  # the answer's blocks (items) in order (Output.layout)
    others: list[str]  # blocks (items) of a type not read, whole (Output.others)
    # Digest of an error status's body that no adapter reads (a FastAPI {"detail": "Not Found"}):
    # the exchange failed as its status says, so it is an error, not an unreadable answer.
    error_body: bytes | None = None
    # Each other choice's logprob positions (n > 1), by its index, where it carried any: compare's KL
    # takes each choice against the other side's choice of that index.
    choice_logprobs: dict[int, list[Position]] = field(default_factory=dict)
    # An embeddings answer: why its vectors were not read (None: read), and its exchange's ``ord``,
    # under which its vectors are in the side's vectors file (``Side.vectors_file``; -1 where none
    # are); None for another route, or an answer whose body is unknown (not in the file, not kept).
    # Its vectors are kept apart: in the summaries, DuckDB's pairing of them took gigabytes.
    embeddings: tuple[str | None, int] | None = None
    # Whether its logprob positions are probabilities after the sampler chain (llama.cpp's
    # ``post_sampling_probs``, an older llama-server's ``probs``), not the model's own: compare takes
    # no KL of them against the model's (``divergence.post_sampling``).
    post_sampling: bool = False
    # An image, video or speech answer (media_output.py): its kind, why its output was not read, and
    # each thing it made's digest and size; None for another route, or an answer whose body is unknown.
    media: MediaOutput | None = None
    # A Responses answer that said "completed" with as many output tokens as its request's
    # max_output_tokens: that limit (completed_at_limit.py: llama-server's word for an answer cut there).
    completed_at_limit: int | None = None


def _without_request_id(message: str | None) -> str | None:
    return _REQUEST_ID.sub(r"\1<id>", message) if message else message


def summarize(record: dict[str, Any], *, last_user: bool = False, vectors: list[bytes] | None = None) -> Summary:
    """The exchange ``record`` reduced to its ``Summary``: its answer as its client got it (``delivered``);
    an embeddings answer's vectors go to ``vectors`` (``embeddings``' place is -1 until the caller files them)."""
    record = delivered(record)
    embeddings: tuple[str | None, int] | None = None
    if is_embeddings(record["path"]) and not (not_in_file(record) or response_not_kept(record)):
        why, read = read_embeddings(record)
        embeddings = (why, -1)
        if vectors is not None:
            vectors.extend(read)
    plain = read_plainest_chat_stream(record)  # most chat answers: no event dicts, no fold
    out: Output = plain.output if plain is not None else read_response(record)
    return Summary(
        id=record["id"],
        method=record["method"],
        path=record["path"],
        status=record.get("status"),
        end=record.get("end"),
        error=record.get("error"),
        api=out.api,
        readable=out.readable,
        parse_error=out.error,
        error_message=_without_request_id(out.error_message),
        text=out.text,
        reasoning=out.reasoning,
        refusal=out.refusal,
        audio=out.audio,
        citations=out.citations,
        tool_calls=out.tool_calls,
        token_ids=out.token_ids,
        finish_reason=out.finish_reason,
        finish_reason_raw=out.finish_reason_raw,
        done=plain.done if plain is not None else stream_done(decoded_chunks(record) or record.get("chunks") or [], out),
        streamed=out.streamed,
        logprobs=None if plain is not None else logprob_positions(out.objects, out.api) or None,
        stop_sequence=out.stop_sequence,
        stop_reason=out.stop_reason,
        matched_stop=out.matched_stop,
        stop_details=out.stop_details,
        input_changes=out.input_changes,
        served=out.served,
        encrypted_reasoning=out.encrypted_reasoning,
        choices=out.choices,
        last_user=read_request(record).last_user if last_user else None,
        tool_results=out.tool_results,
        finish_reasons=out.finish_reasons,
        unparsed=(len(out.unparsed), _digest("\0".join(out.unparsed).encode("utf-8", "surrogatepass"))) if out.unparsed else None,
        invalid_utf8=out.invalid_utf8,
        after_end=_digest(out.after_end) if out.after_end else None,
        layout=out.layout,
        others=out.others,
        error_body=_digest(b"".join(decoded_chunks(record) or record.get("chunks") or [])) if error_unread(record, out) else None,
        choice_logprobs={} if plain is not None else _choice_logprobs(out),
        embeddings=None if embeddings is not None and out.error == TOO_LARGE else embeddings,
        post_sampling=plain is None and post_sampling(out.objects, out.api),
        media=None if not_in_file(record) or response_not_kept(record) or out.error == TOO_LARGE else media_output(record),
        completed_at_limit=completed_at_limit(record, out),
    )


def _choice_logprobs(out: Output) -> dict[int, list[Position]]:
    """The logprob positions of each choice after the first that carried any."""
    by_choice = {c["index"]: logprob_positions(out.objects, out.api, c["index"]) for c in out.choices}
    return {k: positions for k, positions in by_choice.items() if positions}


def error_unread(record: dict[str, Any], out: Output) -> bool:
    """Whether ``out`` is an error status's body that no adapter read, or no response head at all (the
    upstream failed, or timed out, before a status: no byte, or bytes no head came with, as a HAR's
    failed request keeps them): an error as its status or ending says, not an answer infertap failed
    to read (a 2xx body no adapter reads is that), nor one whose body is unknown."""
    status = record.get("status")
    failed = isinstance(status, int) and not 200 <= status <= 299
    return not out.readable and (failed or status is None) and out.error not in (NOT_IN_FILE, NOT_KEPT, TOO_LARGE)


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def request_key(record: dict[str, Any]) -> bytes:
    """Equal for equal (method, path, query, the headers that change what it asks, request bytes): what
    the identical-request rule matches on. The query and the asked headers (``anthropic-beta``, ...)
    are read as the workload identity reads them (``asked_query``: a redacted credential parameter
    left out; ``asked_headers``); a request without them keys as before. A body not kept
    (``request_body_unknown``) is equal to no other request's: its exchange's own key. A multipart
    body's boundary counts as none (``asked_body``)."""
    if request_body_unknown(record):
        own = repr(("unknown body", record.get("id"), record.get("seq"), record.get("wall"), record.get("start_ns")))
        return _digest(own.encode("utf-8", "surrogatepass"))
    body = record["request_body"]
    body = body if body is None else asked_body(body, record.get("request_headers"))
    asked = asked_headers(record.get("request_headers"))
    query = asked_query(record.get("query"))
    fields = (record["method"], record["path"], body is None, *([tuple(asked)] if asked else []), *([query] if query else []))
    head = repr(fields).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(head + b"\0" + (body or b""), digest_size=16).digest()


def load(blob: bytes) -> Any:
    """An enrichment's field (settings, prompt or output tokens) written here, as it was."""
    return pickle.loads(blob)


def load_enrichment(blobs: list[bytes]) -> dict[str, Any]:
    """An exchange's enrichment as compare chose it (``Run``'s ``enrichment``: its prompt, output and
    settings blobs, each of the enrichment it is taken from), as one record holds them."""
    prompt, output, settings = blobs
    return {"prompt_tokens": load(prompt), "output_tokens": load(output), "settings": load(settings)}


def load_summary(blob: bytes) -> Summary:
    return Summary(*pickle.loads(blob))


def _dump_summary(s: Summary) -> bytes:
    return _dump(tuple(getattr(s, name) for name in Summary.__slots__))  # a tuple: smaller and faster than the object


def _dump(value: Any) -> bytes:
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


class _Rows:
    def __init__(self, path: Path, schema: pa.Schema) -> None:
        self.schema = schema
        self.rows: list[tuple[Any, ...]] = []
        self.bytes = 0
        self.writer = pq.ParquetWriter(path, schema, compression="zstd")

    def add(self, row: tuple[Any, ...]) -> None:
        self.rows.append(row)
        self.bytes += sum(len(v) if isinstance(v, bytes) else sum(map(len, v)) for v in row if isinstance(v, (bytes, list)))
        if len(self.rows) >= BATCH_ROWS or self.bytes >= BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            columns = [pa.array(c, type=f.type) for c, f in zip(zip(*self.rows, strict=True), self.schema, strict=True)]
            self.writer.write_table(pa.Table.from_arrays(columns, schema=self.schema))
            self.rows = []
            self.bytes = 0

    def close(self) -> None:
        self.flush()
        self.writer.close()


@dataclass
class Side:
    """One capture summarized: where its rows are and what else compare reports of it."""

    path: str
    exchanges_file: Path
    enrichments_file: Path
    exchanges: int
    snapshot: dict[str, Any] | None  # the last engine snapshot
    torn: list[str]
    repeated: str | None = None  # said when exchanges repeat an earlier one's id (named apart)
    # Each engine configuration (fingerprint) its snapshots hold, first seen first: its ``fingerprint``,
    # ``kind`` and ``url``. More than one: the last snapshot is not the configuration of every exchange.
    configurations: list[dict[str, Any]] = field(default_factory=list)
    recorders: list[str] = field(default_factory=list)  # its runs' recorder kinds: why no snapshot, where none
    # The runs that hold its exchanges (id -> recorder kind), in order: whether its traffic was all
    # imported (``machines.imported_only``); and the (run id, recorder kind) that took its last snapshot.
    carried: dict[str, str] = field(default_factory=dict)
    snapshot_run: tuple[str, str] | None = None
    vectors_file: Path | None = None  # its embeddings answers' vectors (VECTORS_SCHEMA)


def summarize_capture(path: str | os.PathLike[str], folder: Path, *, last_user: bool = False) -> Side:
    """Read the capture at ``path`` once and write its exchanges' and enrichments' rows under
    ``folder``; a corrupt capture raises as reading it does anywhere (CaptureCorruptError).

    Exchanges that repeat an earlier one's id are named ``<id>~2``, ``<id>~3``, ... as the decoded
    tables name them (decode.py), read again only when there are any: their metrics join as theirs."""
    side = _summarize(path, folder, last_user, {})
    repeated = repeated_ids([side.exchanges_file], "id")
    return _summarize(path, folder, last_user, repeated) if repeated else side


def _summarize(path: str | os.PathLike[str], folder: Path, last_user: bool, repeated: Mapping[str, int]) -> Side:
    folder.mkdir(parents=True, exist_ok=True)
    seen: dict[str, int] = {}
    reader = CaptureReader(path)
    exchanges = _Rows(folder / "exchanges.parquet", EXCHANGE_SCHEMA)
    enrichments = _Rows(folder / "enrichments.parquet", ENRICHMENT_SCHEMA)
    vectors = _Rows(folder / "vectors.parquet", VECTORS_SCHEMA)
    snapshot: dict[str, Any] | None = None
    configurations: dict[Any, dict[str, Any]] = {}
    recorders: set[str] = set()
    carried: dict[str, str] = {}
    run: tuple[str, str] = ("", "")  # the run whose records these are: its header's
    snapshot_run: tuple[str, str] | None = None
    n = e = unattached = 0
    try:
        for record in reader.records():
            kind = record["type"]
            if kind == "exchange":
                if repeated:
                    name_apart(record, repeated, seen)
                source = record.get("source_id")
                read: list[bytes] = []
                summary = summarize(record, last_user=last_user, vectors=read)
                if summary.embeddings is not None and read:
                    summary.embeddings = (summary.embeddings[0], n)
                    vectors.add((n, read))
                exchanges.add(
                    (
                        n,
                        record["id"],
                        source if source else None,
                        repr(record.get("repeat", 0)),
                        request_key(record),
                        _dump_summary(summary),
                    )
                )
                n += 1
                carried.setdefault(*run)
            elif kind == "enrichment" and not enrichment_attached(record, repeated):
                unattached += 1  # no occurrence of a repeated id (which is unknown), or one past the id's exchanges
            elif kind == "enrichment":
                wall, engine, output_count, prompt_count = enrichment_keys(record)
                disagrees = (record.get("prompt_tokens") or {}).get("agrees_with_usage") is False
                enrichments.add(
                    (
                        e,
                        record["exchange_id"],
                        wall,
                        None if engine is None else str(engine),
                        output_count,
                        prompt_count,
                        _dump(record.get("settings")),
                        _dump(record.get("prompt_tokens")),
                        _dump(record.get("output_tokens")),
                        disagrees,
                    )
                )
                e += 1
            elif kind == "header":
                recorders.add(str((record.get("recorder") or {}).get("kind", "?")))
                run = (str(record.get("run_id")), str((record.get("recorder") or {}).get("kind", "?")))
            elif kind == "engine":
                snapshot, snapshot_run = record, run
                fingerprint = record.get("fingerprint")
                configurations.setdefault(
                    fingerprint, {"fingerprint": fingerprint, "kind": record.get("kind"), "url": record.get("url")}
                )
    finally:
        exchanges.close()
        enrichments.close()
        vectors.close()
    said = (
        repeats_warning(path, repeats(repeated, sum(k - 1 for k in seen.values()), unattached))
        if repeated
        else (unattached_warning(path, unattached) if unattached else None)
    )
    torn = [str(t) for t in reader.torn]
    return Side(
        str(path),
        folder / "exchanges.parquet",
        folder / "enrichments.parquet",
        n,
        snapshot,
        torn,
        said,
        list(configurations.values()),
        sorted(recorders),
        carried,
        snapshot_run,
        folder / "vectors.parquet",
    )


def cached_side(path: str | os.PathLike[str], entry: CachedCapture | None, scratch: Path, *, last_user: bool = False) -> Side:
    """``summarize_capture`` of the capture at ``path``, kept in its cache ``entry`` (its decoded
    tables' folder, which goes when the capture changes) and read from there next time; in
    ``scratch`` when there is no entry or it is not private (``CachedCapture.private``)."""
    if entry is None or not entry.private():
        return summarize_capture(path, scratch, last_user=last_user)
    folder = entry.folder / f"summary-v{SUMMARY_VERSION}{'-last-user' if last_user else ''}"
    side = _kept(path, folder)
    if side is not None:
        return side
    tmp = entry.folder / f".tmp-summary-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        tmp.mkdir(mode=0o700)  # owner-only, as the cache is: it holds prompts and outputs
        side = summarize_capture(path, tmp, last_user=last_user)
        (tmp / "side.pickle").write_bytes(
            _dump(
                (
                    side.exchanges,
                    side.snapshot,
                    side.torn,
                    side.repeated,
                    side.configurations,
                    side.recorders,
                    side.carried,
                    side.snapshot_run,
                )
            )
        )
        try:
            os.rename(tmp, folder)
        except OSError:  # another compare put it in place first, or the cache can't take it: this one will do
            return _kept(path, folder) or summarize_capture(path, scratch, last_user=last_user)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return _kept(path, folder) or summarize_capture(path, scratch, last_user=last_user)


def _kept(path: str | os.PathLike[str], folder: Path) -> Side | None:
    """The side kept in ``folder``, or None (and the folder gone) when it is missing or damaged."""
    meta = folder / "side.pickle"
    if not meta.exists():
        return None
    try:
        exchanges, snapshot, torn, repeated, configurations, recorders, carried, snapshot_run = load(meta.read_bytes())
        if pq.read_metadata(folder / "exchanges.parquet").num_rows != exchanges:
            raise ValueError("row count")
        pq.read_metadata(folder / "enrichments.parquet")
        pq.read_metadata(folder / "vectors.parquet")
    except (OSError, EOFError, ValueError, TypeError, pickle.UnpicklingError, pa.ArrowException):  # damaged: summarized again
        shutil.rmtree(folder, ignore_errors=True)
        return None
    return Side(
        str(path),
        folder / "exchanges.parquet",
        folder / "enrichments.parquet",
        exchanges,
        snapshot,
        list(torn),
        repeated,
        list(configurations),
        list(recorders),
        dict(carried),
        tuple(snapshot_run) if snapshot_run else None,
        folder / "vectors.parquet",
    )
