"""``read_chat_stream``: the usual streamed chat completion read in one pass, for the decode of large captures.

Agent traffic is mostly this: ``/chat/completions`` answered as SSE, each event one ``data: {json}``
line. ``read_response`` reads it through general steps (payloads, events, one ``Delta`` each, then
the fold); here the same reading is one loop that keeps what the decoded tables need: the
``Output``, and per event its chunk, payload, text, reasoning, tool-call pieces, finish reason and
usage. Anything else (another API or framing, a content-encoding, a ``\\r``, an event of several
lines or fields, a payload that msgspec won't parse or that is not an object, a body no event of
which reads as chat) returns None, and the caller reads the exchange with ``read_response``: this
path only ever answers where it answers exactly as that one does (tests/apis/test_chat_stream.py).

The plainest of these bodies (valid UTF-8, ended by one ``[DONE]``, every payload a chat chunk of
the types the loop reads) skip even the loop's per-event dict: msgspec decodes each payload into
typed structs, which refuse any other shape (``_typed``; the loop reads what they refuse). Where the
optional C reader is built (``infertap._chatsse``, native/chatsse.c; setup.py builds it where a C
compiler is), it reads those bodies first, several times faster, and folds them with ``_typed``'s own
tail (``_plainest``); whatever it can't read exactly as ``_typed`` does, it declines, and ``_typed``
reads it (tests/apis/test_chat_stream_native.py).
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from .body import encoded, framing, head_of
from .fastjson import NOT_JSON, _decode, utf8
from .openai import (
    _OBJECTS,
    FINISHED_IN_ERROR,
    both_reasoning,
    choice_index,
    choice_zero,
    matched_stop_after,
    only_zero,
    stop_reason_json,
)
from .read import CHAT, _by_path, ended, not_in_file, response_not_kept
from .shapes import Output, ToolCallPart, error_of, finish_words

try:  # the optional C reader of the plainest bodies (_native), built where a C compiler was at install
    from infertap._chatsse import read as _read_c
except ImportError:
    _read_c = None


@dataclass(slots=True)
class ChatStream:
    """A streamed chat answer as ``read_response`` reads it, with its events as columns."""

    output: Output  # as read_response's, except that ``events`` is left empty: the columns hold them
    done: bool  # stream_done(...) of the body
    chunk: list[int]  # per event: the chunk it was complete in
    data: list[str]
    content: list[str]
    reasoning: list[str]
    tool_calls: list[int]  # tool-call pieces (Delta.tool_deltas)
    finish_reason: list[str | None]
    usage: list[dict[str, Any] | None]


def read_chat_stream(record: Mapping[str, Any]) -> ChatStream | None:
    """The exchange's streamed chat answer, or None when it is not the plain kind (see above)."""
    body = _sse_body(record)
    return None if body is None else _native(*body) or _typed(*body) or _looped(*body)


def read_plainest_chat_stream(record: Mapping[str, Any]) -> ChatStream | None:
    """``read_chat_stream`` of the plainest bodies only (``_typed``'s): those carry no logprobs
    and no event but chat chunks, so the answer is all that ``read_response`` would say of them."""
    body = _sse_body(record)
    return None if body is None else _native(*body) or _typed(*body)


def _sse_body(record: Mapping[str, Any]) -> tuple[list[bytes], bytes, list[int]] | None:
    """A chat exchange's SSE body without ``\\r`` or encoding: its chunks, their bytes, where each ends."""
    if _by_path(record.get("path")) is not CHAT or encoded(record) or response_not_kept(record) or not_in_file(record):
        return None  # unknown (read_response says why): a head of its events is not its answer
    pieces: list[bytes] = list(record.get("chunks") or ())
    if not pieces or framing(record, head_of(pieces)) != "sse":
        return None
    body = b"".join(pieces)
    if b"\r" in body:
        return None
    return pieces, body, list(itertools.accumulate(map(len, pieces)))


def _looped(pieces: list[bytes], body: bytes, ends: list[int]) -> ChatStream | None:
    """``read_chat_stream`` of any SSE body without ``\\r``, event by event (in UTF-8: the bytes
    that are not, and what follows a first ``[DONE]``, read_response keeps)."""
    if not utf8(body):
        return None
    at: list[int] = []
    datas: list[str] = []
    contents: list[str] = []
    reasonings: list[str] = []
    tools: list[int] = []
    finishes: list[str | None] = []
    usages: list[dict[str, Any] | None] = []
    text: list[str] = []
    reasoning: list[str] = []
    refused: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    merged: dict[str, Any] = {}
    ids: list[int] = []
    finish: str | None = None
    model = response_id = fingerprint = error_message = stop = stop_reason = matched = None
    timings: dict[str, Any] | None = None
    readable = False
    obj: Any = None
    pos = chunk = 0
    while (cut := body.find(b"\n\n", pos)) >= 0:
        while ends[chunk] <= cut + 1:
            chunk += 1
        block = body[pos:cut]
        pos = cut + 2
        if not block.startswith(b"data: ") or b"\n" in block:
            return None  # comments, named events, several data lines: the general split
        data = block[6:].decode("utf-8", errors="replace")
        if data.strip() == "[DONE]":
            if body[pos:].strip():
                return None  # more after the end marker: the general read says what
            continue
        try:
            obj = _decode(data)
        except NOT_JSON:
            return None  # json.loads may still read it (NaN, lone surrogates): the general path
        if type(obj) is not dict:
            return None
        # Chat.event, then fold's step, for one event.
        get = obj.get
        choices = get("choices")
        known = choices is not None or get("object") in _OBJECTS
        usage = get("usage")
        if not (usage and isinstance(usage, dict)):
            usage = None
        if isinstance(m := get("model"), str):
            model = m or model
        response_id = response_id or (rid if isinstance(rid := get("id"), str) else None)
        fingerprint = get("system_fingerprint") or fingerprint
        if isinstance(t := get("timings"), dict):
            timings = t or timings
        content = thought = refusal = ""
        parts: Sequence[ToolCallPart] = []
        event_finish = None
        if isinstance(choices, list):
            if len(choices) != 1 or type(c := choices[0]) is not dict or choice_index(c) != 0:
                if not only_zero(choices):
                    return None  # several answers (n > 1): the general fold keeps each
            c = choice_zero(choices)
            if c.audio or c.citations or c.results or c.error is not None or "error" in obj:
                return None  # an audio answer, citations, images, an error beside the answer: the general fold keeps them
            content, thought, refusal, parts, event_finish = c.content, c.reasoning, c.refusal, c.tool_calls, c.finish_reason
            if c.token_ids:
                ids.extend(c.token_ids)
            stop = c.stop_sequence if c.stop_sequence is not None else stop
            stop_reason = c.stop_reason if c.stop_reason is not None else stop_reason
            matched = matched_stop_after(matched, c.matched_stop)
        if not known and (message := error_of(obj)) is not None:
            known = True
            error_message = message or error_message
        readable = readable or known
        if content:
            text.append(content)
        if thought:
            reasoning.append(thought)
        if refusal:
            refused.append(refusal)
        for p in parts:
            slot = calls.setdefault(p.index, {"id": None, "name": "", "arguments": ""})
            slot["id"] = p.id or slot["id"]
            if p.free:
                slot["free"] = True
            slot["name"] += p.name
            slot["arguments"] += p.arguments
        if usage:
            merged.update((k, v) for k, v in usage.items() if v is not None)
        finish = event_finish or finish
        at.append(chunk)
        datas.append(data)
        contents.append(content + refusal)  # the events' text column: a refusal is generated text too
        reasonings.append(thought)
        tools.append(sum(p.carries for p in parts))  # an empty piece carries no token (Delta.tool_deltas)
        finishes.append(event_finish)
        usages.append(usage)
    if body[pos:].strip() or not readable:
        return None  # a last event without its blank line; or no chat event (read_response sniffs)
    out = Output(CHAT.name, streamed=True, readable=True)
    out.model, out.response_id, out.system_fingerprint, out.error_message = model, response_id, fingerprint, error_message
    out.timings = timings
    out.text, out.reasoning, out.refusal = "".join(text), "".join(reasoning), "".join(refused)
    out.tool_calls = [calls[k] for k in sorted(calls)]
    out.finish_reason_raw = finish
    out.finish_reasons = finish_words([f for f in finishes if f])
    out.finish_reason = CHAT.finish(finish, bool(out.tool_calls))
    if error_message is None and out.finish_reason == "error":
        out.error_message = FINISHED_IN_ERROR  # as fold reads it (choices_error)
    if error_message is not None and out.finish_reason is None:
        out.finish_reason = "error"
    out.usage = merged or None
    if merged:
        out.prompt_tokens, out.cached_tokens, out.output_tokens = CHAT.counts(merged)
    out.token_ids = ids or None
    out.stop_sequence, out.stop_reason, out.matched_stop = stop, stop_reason, matched
    return ChatStream(out, ended(pieces, obj), at, datas, contents, reasonings, tools, finishes, usages)


# -- the plainest of them, each event decoded into these types (no dict, no key looked up) -------------
# A payload that any field's type refuses (an index that is a string, arguments sent as an object,
# logprobs, a message instead of a delta, an event of no chat shape) fails to decode and the stream
# is read by the loop above: the types admit only what that loop reads as they read it.


class _Function(msgspec.Struct):
    name: str | None = None
    arguments: str | None = None


class _Call(msgspec.Struct):
    index: int | msgspec.UnsetType = msgspec.UNSET
    id: str | None = None
    function: _Function | None = None


class _Delta(msgspec.Struct):
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[_Call] | None = None


class _Choice(msgspec.Struct):
    index: int = 0
    delta: _Delta | None = None
    text: str | None = None
    finish_reason: str | None = None
    # vLLM's: the stop string (or token id) that ended it; null said (an end of sequence) is not unsaid
    stop_reason: int | str | None | msgspec.UnsetType = msgspec.UNSET
    matched_stop: int | str | None | msgspec.UnsetType = msgspec.UNSET  # SGLang's: its end of sequence's id too
    message: msgspec.UnsetType = msgspec.UNSET  # read only where the delta is empty: the loop's case
    logprobs: None = None  # token ids: the loop's case
    token_ids: None = None


class _Event(msgspec.Struct):
    id: str | None = None
    object: str | None = None
    model: str | None = None
    choices: list[_Choice] | None = None
    usage: dict[str, Any] | None = None
    system_fingerprint: Any = None
    timings: dict[str, Any] | None = None


_decode_event = msgspec.json.Decoder(_Event).decode
# What the structs have no field for, read by the loop: a refusal with text (OpenAI sends "refusal":
# null in every stream), a call of the functions API (before tool_calls), a custom tool's call, an
# audio answer, citations, images generated, an error beside the answer (a gateway's, mid-stream).
LOOP_ONLY = re.compile(
    rb'"(?:refusal"\s*:\s*"|function_call"\s*:\s*\{|custom"\s*:\s*\{|audio"\s*:\s*\{|annotations"\s*:\s*\[\s*\{'
    rb'|images"\s*:\s*\[\s*[^\s\]]|error"\s*:\s*(?:\{|"[^"]))'
)
_DONE = b"data: [DONE]"


def _typed(pieces: list[bytes], body: bytes, ends: list[int]) -> ChatStream | None:
    """``read_chat_stream`` of a body in UTF-8 whose events are each one ``data:`` line of a chat
    chunk, ended by one ``[DONE]``: its lines split and its payloads decoded by C, a few
    comprehensions for the rest. None where it is not that body (the loop reads it)."""
    blocks = body.split(b"\n\n")
    rest = blocks.pop()
    if (
        not blocks
        or blocks[-1] != _DONE
        or body.count(b"[DONE]") != 1
        or rest.strip()
        or body.count(b"\n") != 2 * len(blocks) + rest.count(b"\n")  # no block of two lines
        or body.count(b"\n\ndata: ") != len(blocks) - 1  # every block a data line
        or not body.startswith(b"data: ")
        or not b"".join(pieces[-3:]).rstrip().endswith(b"[DONE]")
        or LOOP_ONLY.search(body) is not None
    ):
        return None
    try:
        text = body.decode()
        datas = [t[6:] for t in text.split("\n\n", len(blocks) - 1)[:-1]]
        events = [_decode_event(d) for d in datas]
    except NOT_JSON:  # UnicodeDecodeError is a ValueError
        return None
    if not events or any(e.choices is None and e.object not in _OBJECTS for e in events):
        return None  # no event, or one the loop reads for an error message
    cuts = itertools.accumulate(len(b) + 2 for b in blocks)
    at = [bisect.bisect_right(ends, cut - 1) for cut in cuts]
    at.pop()  # [DONE]'s
    contents, reasonings, tools, finishes = [], [], [], []
    calls: dict[int, dict[str, Any]] = {}
    stop: str | None = None
    stop_reason: str | None = None
    matched: str | None = None
    for e in events:
        content = thought = ""
        n = 0
        finish = None
        for choice in e.choices or ():
            if choice.index != 0:
                return None  # several answers (n > 1): the general fold keeps each
            if isinstance(said := choice.stop_reason, str) and said or isinstance(said := choice.matched_stop, str) and said:
                stop = said
            if choice.stop_reason is not msgspec.UNSET:
                stop_reason = stop_reason_json(choice.stop_reason)
            if choice.matched_stop is not msgspec.UNSET:
                matched = matched_stop_after(matched, stop_reason_json(choice.matched_stop))
            delta = choice.delta
            if delta is not None:
                if delta.content is not None:
                    content += delta.content
                if delta.reasoning_content is not None or delta.reasoning is not None:  # most deltas: neither
                    thought += both_reasoning(delta.reasoning_content, delta.reasoning)
                for i, call in enumerate(delta.tool_calls or ()):
                    fn = call.function
                    slot = calls.setdefault(
                        i if call.index is msgspec.UNSET else call.index, {"id": None, "name": "", "arguments": ""}
                    )
                    slot["id"] = call.id or slot["id"]
                    if fn is not None:
                        slot["name"] += fn.name or ""
                        slot["arguments"] += fn.arguments or ""
                        n += bool(fn.name or fn.arguments)  # an empty piece carries no token (ToolCallPart.carries)
            if choice.text is not None:
                content += choice.text
            finish = choice.finish_reason or finish
        contents.append(content)
        reasonings.append(thought)
        tools.append(n)
        finishes.append(finish)
    usages = [e.usage or None for e in events]
    model = response_id = fingerprint = timings = None
    for e in events:
        model = e.model or model
        response_id = response_id or e.id
        fingerprint = e.system_fingerprint or fingerprint
        timings = e.timings or timings
    columns = (at, datas, contents, reasonings, tools, finishes, usages, calls)
    last = (model, response_id, fingerprint, timings, stop)
    return _plainest(*columns, *last, stop_reason=stop_reason, matched=matched)


def _plainest(
    at: list[int],
    datas: list[str],
    contents: list[str],
    reasonings: list[str],
    tools: list[int],
    finishes: list[str | None],
    usages: list[dict[str, Any] | None],
    calls: dict[int, dict[str, Any]],
    model: str | None,
    response_id: str | None,
    fingerprint: Any,
    timings: dict[str, Any] | None,
    stop: str | None,
    *,
    stop_reason: str | None,
    matched: str | None,
) -> ChatStream:
    """The answer of a plainest body from its events' columns and what its events said last
    (``_typed``'s and the C reader's alike, so that what they mean is said once)."""
    merged: dict[str, Any] = {}
    for usage in usages:
        if usage:
            merged.update((k, v) for k, v in usage.items() if v is not None)
    out = Output(CHAT.name, streamed=True, readable=True)
    out.model, out.response_id, out.system_fingerprint = model, response_id, fingerprint
    out.timings = timings
    out.text, out.reasoning = "".join(contents), "".join(reasonings)
    out.tool_calls = [calls[k] for k in sorted(calls)]
    finish = next((f for f in reversed(finishes) if f), None)
    out.finish_reason_raw = finish
    out.finish_reasons = finish_words([f for f in finishes if f])
    out.finish_reason = CHAT.finish(finish, bool(out.tool_calls))
    if out.finish_reason == "error":
        out.error_message = FINISHED_IN_ERROR  # as fold reads it (choices_error)
    out.usage = merged or None
    if merged:
        out.prompt_tokens, out.cached_tokens, out.output_tokens = CHAT.counts(merged)
    out.stop_sequence, out.stop_reason, out.matched_stop = stop, stop_reason, matched
    return ChatStream(out, True, at, datas, contents, reasonings, tools, finishes, usages)


def _native(pieces: list[bytes], body: bytes, ends: list[int]) -> ChatStream | None:
    """``_typed`` by the C reader (``infertap._chatsse``, native/chatsse.c), which reads the same
    bodies as ``_typed`` reads them several times faster, and declines (None) whatever it can't read
    exactly so: a shape the structs above refuse, a field said twice, a number beyond 64 bits or a
    double. Where it is not built (it is optional), None: the Python readers read every body."""
    said: tuple[Any, ...] | None = None if _read_c is None else _read_c(body, ends)  # LOOP_ONLY's bodies declined too
    if said is None:
        return None
    # Its columns, calls and what was said last, as _typed's; stop_reason and matched_stop each as
    # the last value said, in a 1-tuple (None: never said), written as JSON here.
    return _plainest(*said[:13], stop_reason=_said_json(said[13]), matched=_said_json(said[14]))


def _said_json(said: tuple[Any] | None) -> str | None:
    return None if said is None else stop_reason_json(said[0])


__all__ = ["ChatStream", "read_chat_stream", "read_plainest_chat_stream"]
