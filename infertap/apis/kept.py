"""The response id in the kept head of an answer the recorder cut (``response_not_kept``).

Past ``--max-response-mb`` only the head of a response is kept, and its answer is unknown. The
answer's id comes first (a chat chunk's ``id``, the Responses API's ``response.created``, the
Messages API's ``message_start``, or a JSON body's leading ``"id"``), so the head still names it:
the analysis's ``exchanges.response_id`` holds it, a later turn that continues it by
``previous_response_id`` is linked to it (analysis) and sent with the target's id (replay). Only
the id is read from the head: the answer itself stays unknown.

Its end is kept too (``response_tail``, the last 64 KiB past the head), and the engine's count of
what it generated is there: ``tail_usage`` reads its usage and final finish reason, of whole events
only, so that the longest answers (a runaway stream) still weigh in token counts and throughput.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .body import decoding, encoded, ended_payloads, framing, head_of
from .completed_tail import CompletedEnd, completed_end
from .converse import stream_events
from .eventstream import messages_after, read_messages
from .generate import batch_prompts, counted_prompts
from .kept_choices import asked_choices, kept_choices
from .read import (
    _NOTHING,
    AMBIGUOUS_GENERATE,
    CHAT,
    COMPLETIONS,
    CONVERSE_STREAM,
    MESSAGES,
    OLLAMA_CHAT,
    RESPONSES,
    SGLANG_GENERATE,
    _by_path,
    _eventstream,
    _loads,
    api_for,
    batch_events,
    fold,
    request_json,
    response_not_kept,
    sniff,
)
from .responses import offers_client_tool
from .shapes import Api, Event, Output

_DECODER = json.JSONDecoder()
_SPACE = " \t\r\n"
_TOP_LEVEL_ID = (CHAT, COMPLETIONS, MESSAGES, RESPONSES)
_START_BYTES = 1 << 20  # the most of a Messages head read for its first event


def kept_response_id(record: Mapping[str, Any]) -> str | None:
    """The id a cut (``response_not_kept``) 2xx answer names in its kept head; None where the head
    holds none (cut before the id arrived), or the answer is whole (``read_response`` reads its id)."""
    if not response_not_kept(record) or not 200 <= (record.get("status") or 0) < 300:
        return None
    api = _by_path(record.get("path")) or api_for(record.get("path"), request_json(record))
    pieces, _ = decoding(record)  # a cut gzip or deflate stream decodes as far as it goes
    if not pieces:
        return None
    how = framing(record, head_of(pieces))
    if how == "json":  # the APIs whose whole answer names its id at its top level
        return leading_id(b"".join(pieces)) if api in _TOP_LEVEL_ID else None
    payloads, _ = ended_payloads(record, pieces, how)  # a last event cut mid-way is no JSON: skipped
    for payload in payloads:  # the id comes first: the events after it are not read
        obj = _loads(payload.data)
        if isinstance(obj, dict) and (rid := api.event(obj).response_id):
            return rid
    return None


def leading_id(head: bytes) -> str | None:
    """The string ``"id"`` among the top-level keys of a JSON object cut short after it, read key by
    key up to the cut; None where the cut comes first, or the head is no JSON object."""
    text = head.decode("utf-8", errors="replace")
    i = _skip(text, 0)
    if not text.startswith("{", i):
        return None
    i += 1
    try:
        while True:
            key, i = _DECODER.raw_decode(text, _skip(text, i))
            i = _skip(text, i)
            if not isinstance(key, str) or not text.startswith(":", i):
                return None
            value, i = _DECODER.raw_decode(text, _skip(text, i + 1))
            if key == "id":
                return value if isinstance(value, str) else None
            i = _skip(text, i)
            if not text.startswith(",", i):
                return None  # the object ended, or the head did, before an id
            i += 1
    except ValueError:  # the head ends mid-value: the id, if any, came later
        return None


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _SPACE:
        i += 1
    return i


@dataclass(frozen=True, slots=True)
class TailUsage:
    """What the end of a cut answer says of it: the engine's counts and why it stopped, nothing else."""

    usage: dict[str, Any] | None  # as sent, merged over the tail's events
    prompt_tokens: int | None
    cached_tokens: int | None
    output_tokens: int | None
    finish_reason: str | None  # in the common vocabulary
    finish_reason_raw: str | None  # the API's own word
    # An n > 1 chat or completions answer's (choices, unfinished after the first), as far as its kept
    # head and tail tell (``apis.kept_choices``; unfinished None: unknown); None of one answer.
    choices: tuple[int, int | None] | None = None


def tail_usage(record: Mapping[str, Any]) -> TailUsage | None:
    """The usage and final finish reason in a cut (``response_not_kept``) answer's ``response_tail``,
    of every API its adapter reads: chat's usage chunk and last finish_reason, Messages'
    message_delta (usage, stop_reason) with the prompt's usage of the message_start the head begins
    with, Responses' response.completed (usage, status), Bedrock ``/converse-stream``'s metadata and
    messageStop. The tail starts mid-event: only the whole events after its first boundary are read
    (of AWS's binary framing, the first whole message that checks). Where the head and
    the tail together are the whole body (it passed the limit by less than the tail), the body is
    read whole, a JSON document too; a JSON document's end alone is not read (its usage can't be
    told from a nested one without its start): so an SGLang ``/generate`` batch answered as a JSON
    array is not read from its tail, which holds the last prompts' answers alone, by no index (which
    prompts is unknown), while the batch's usage is every prompt's summed and its finish reason the
    first prompt's, in the head. A streamed batch's tail gives its usage only where it holds every
    prompt's counts (each prompt's last event says them): one that ended before the tail would be
    left out of the sum. None where the tail holds neither."""
    tail = record.get("response_tail")
    if not isinstance(tail, bytes) or not tail or not response_not_kept(record) or encoded(record):
        return None
    chunks = [c for c in record.get("chunks") or () if isinstance(c, bytes)]
    how = framing(record, head_of(chunks))
    api = _by_path(record.get("path")) or api_for(record.get("path"), request_json(record))
    contiguous = sum(map(len, chunks)) + len(tail) == record.get("response_body_size")
    if api is CONVERSE_STREAM and _eventstream(record):
        return _converse_tail(chunks, tail, contiguous)
    if contiguous:
        pieces = [*chunks, tail]  # contiguous: nothing between the head and the tail
    elif how == "json":
        return None
    else:
        sep = b"\n\n" if how == "sse" else b"\n"
        rest = tail.replace(b"\r\n", b"\n")
        cut = rest.find(sep)
        pieces = [rest[cut + len(sep) :]] if cut >= 0 else []  # none: not one whole event
    payloads, _ = ended_payloads(record, pieces, how) if pieces else ([], b"")  # a last event cut mid-way: skipped
    events = [Event(p.chunk, p.data, _NOTHING, _loads(p.data)) for p in payloads]
    api, events = batch_events(api, events, how)  # a whole batch's array (contiguous): one event per answer
    if api is AMBIGUOUS_GENERATE:
        # A /generate body of both servers' shapes: its answer's shape says which server read it (as
        # read_response reads it); no event of either, no usage read.
        api = sniff(events) or api
    out = fold(api, events, how)
    if api is SGLANG_GENERATE and out.usage is not None and not contiguous:
        asked = batch_prompts(request_json(record))
        if asked > 1 and not counted_prompts(out.usage) >= set(range(asked)):
            # A batch's usage is every prompt's summed: a prompt that ended before the tail has its
            # counts in the middle not kept, and the tail's alone would be taken for the batch's.
            out.usage = out.prompt_tokens = out.cached_tokens = out.output_tokens = None
    choices: tuple[int, int | None] | None = None
    if api in (CHAT, COMPLETIONS) and how == "sse" and ((asked := asked_choices(record, api)) > 1 or out.choices):
        if contiguous:  # the whole body: read as a whole answer is
            choices = out.choice_count, out.choices_unfinished
        else:  # each choice read from both ends; choice 0's finish from its head where the tail has none
            first = _head(api, record, chunks, how)
            choices = kept_choices(first.events, events, asked)
            if out.finish_reason_raw is None and first.finish_reason_raw is not None and out.error_message is None:
                return TailUsage(out.usage, out.prompt_tokens, out.cached_tokens, out.output_tokens, first.finish_reason, first.finish_reason_raw, choices)  # fmt: skip
    if out.usage is None and api is RESPONSES and how == "sse" and not contiguous and record.get("end", "complete") == "complete":
        # A long answer's response.completed restates it whole: larger than the tail, it is no
        # whole event there, but its end is, and the usage and status that end its response.
        end = completed_end(tail)
        if end is not None:
            prompt, cached, output = api.counts(end.usage)
            return TailUsage(end.usage, prompt, cached, output, *_completed_finish(end, record))
    if out.usage is None and out.finish_reason_raw is None and choices is None:
        return None
    usage = out.usage
    if usage is not None and api is MESSAGES and how == "sse" and not contiguous:
        # Messages' usage comes in two parts: the prompt's in message_start, the head's first event,
        # the output's in message_delta; merged as a whole stream's are (fold: later values win).
        start = _message_start(record, chunks)
        if start:
            usage = {**start, **usage}
            prompt, cached, output = api.counts(usage)
            return TailUsage(usage, prompt, cached, output, out.finish_reason, out.finish_reason_raw)
    finish = out.finish_reason
    if api in (CHAT, OLLAMA_CHAT) and finish == "stop" and not out.tool_calls and not contiguous and _may_call(record):
        finish = None  # its calls, if any, came before the tail: stop or tool_calls (Chat.finish, OllamaChat.finish)
    return TailUsage(usage, out.prompt_tokens, out.cached_tokens, out.output_tokens, finish, out.finish_reason_raw, choices)


def _converse_tail(chunks: list[bytes], tail: bytes, contiguous: bool) -> TailUsage | None:
    """A cut ``/converse-stream`` answer's usage (its ``metadata`` event) and stop reason (its
    ``messageStop``), of the whole messages in its tail: AWS's binary framing has no separator to
    start at, so the tail is read from the first whole message that checks (``messages_after``)."""
    framed = read_messages([*chunks, tail]) if contiguous else messages_after(tail)
    events, _ = stream_events([], framed)
    out = fold(CONVERSE_STREAM, events, "eventstream")
    if out.usage is None and out.finish_reason_raw is None:
        return None
    return TailUsage(out.usage, out.prompt_tokens, out.cached_tokens, out.output_tokens, out.finish_reason, out.finish_reason_raw)


def _head(api: Api, record: Mapping[str, Any], chunks: list[bytes], how: str) -> Output:
    """The kept head's whole events, folded: a choice whose finish reason is there ended there, all
    of it (its calls too) before. Read only of an answer asked for several choices."""
    payloads, _ = ended_payloads(record, chunks, how)
    return fold(api, [Event(p.chunk, p.data, _NOTHING, _loads(p.data)) for p in payloads], how)


def _completed_finish(end: CompletedEnd, record: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(finish reason, raw word) of a response read back from its end, as ``Responses.finish`` maps
    its status: a completed one is ``tool_calls`` where its output holds a call its client must make,
    so it is known where the output was read whole, or the request offered no tool but the API's own
    (none of the client's can be called); an incomplete one's reason must be read too. Unknown (None)
    else, the raw word kept where known."""
    if end.status == "incomplete" and not end.details_read:
        return None, "incomplete"
    raw = f"incomplete:{end.reason}" if end.status == "incomplete" and end.reason else end.status
    calls = False if end.calls is None and not _may_call(record, client=True) else end.calls
    if raw == "completed" and calls is None:
        return None, raw
    return RESPONSES.finish(raw, bool(calls)), raw


def _may_call(record: Mapping[str, Any], *, client: bool = False) -> bool:
    """Whether the answer may call a tool: its request offered one (a Responses stored ``prompt``
    may hold some), or is unread. ``client``: a tool its client runs (Responses' ``offers_client_tool``)."""
    body = request_json(record)
    if body is None or body.get("prompt") is not None:
        return True
    return offers_client_tool(body.get("tools")) if client else bool(body.get("tools"))


def _message_start(record: Mapping[str, Any], chunks: list[bytes]) -> dict[str, Any] | None:
    """The usage (its values given) of the message_start a Messages stream's kept head begins with;
    None where its first event is another, or is cut. Read up to that event's end only."""
    first = bytearray()  # grown in place and searched where it grew: a head of tiny chunks stays linear
    for chunk in chunks:
        start = max(len(first) - 2, 0)
        first += chunk
        # A blank line once CRLFs read as LFs: "\n\n" (of "\r\n\n" too) or "\n\r\n" (of "\r\n\r\n" too).
        ends = [at + len(mark) for mark in (b"\n\n", b"\n\r\n") if (at := first.find(mark, start)) >= 0]
        if ends:
            break
        if len(first) > _START_BYTES:
            return None  # no message_start (a few hundred bytes): not read on through the head
    else:
        return None
    event = bytes(first[: min(ends)]).replace(b"\r\n", b"\n")
    payloads, _ = ended_payloads(record, [event], "sse")
    obj = _loads(payloads[0].data) if payloads else None
    if not isinstance(obj, dict) or obj.get("type") != "message_start":
        return None
    usage = MESSAGES.event(obj).usage
    return usage or None


def with_tail_usage(out: Output, record: Mapping[str, Any]) -> Output:
    """``out`` (a cut answer read as unknown) given its tail's usage and finish reason, in place:
    still unreadable, its error ``NOT_KEPT``, its text and calls unknown; what the analysis and the
    enricher count its tokens by."""
    found = tail_usage(record)
    if found is not None:
        out.usage, out.prompt_tokens, out.cached_tokens = found.usage, found.prompt_tokens, found.cached_tokens
        out.output_tokens, out.finish_reason = found.output_tokens, found.finish_reason
        out.finish_reason_raw = found.finish_reason_raw
        out.kept_choices = found.choices
    return out
