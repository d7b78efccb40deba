"""``read_chat_stream``: the usual streamed chat completion read in one pass, for the decode of large captures.

Agent traffic is mostly this: ``/chat/completions`` answered as SSE, each event one ``data: {json}``
line. ``read_response`` reads it through general steps (payloads, events, one ``Delta`` each, then
the fold); here the same reading is one loop that keeps what the decoded tables need: the
``Output``, and per event its chunk, payload, text, reasoning, tool-call pieces, finish reason and
usage. Anything else (another API or framing, a content-encoding, a ``\\r``, an event of several
lines or fields, a payload that msgspec won't parse or that is not an object, a body no event of
which reads as chat) returns None, and the caller reads the exchange with ``read_response``: this
path only ever answers where it answers exactly as that one does (tests/apis/test_chat_stream.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from .body import _wbits, framing, head_of
from .fastjson import _decode
from .openai import _OBJECTS, choice_zero
from .read import CHAT, _by_path, ended
from .shapes import Output, error_of


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
    if _by_path(record.get("path")) is not CHAT or _wbits(record):
        return None
    pieces: list[bytes] = list(record.get("chunks") or ())
    if not pieces or framing(record, head_of(pieces)) != "sse":
        return None
    body = b"".join(pieces)
    if b"\r" in body:
        return None
    ends = list(itertools.accumulate(map(len, pieces)))
    at: list[int] = []
    datas: list[str] = []
    contents: list[str] = []
    reasonings: list[str] = []
    tools: list[int] = []
    finishes: list[str | None] = []
    usages: list[dict[str, Any] | None] = []
    text: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    merged: dict[str, Any] = {}
    ids: list[int] = []
    finish: str | None = None
    model = response_id = fingerprint = error_message = None
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
            continue
        try:
            obj = _decode(data)
        except (msgspec.MsgspecError, ValueError):
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
        content = thought = ""
        parts: list[Any] = []
        event_finish = None
        if isinstance(choices, list):
            content, thought, parts, event_finish, more = choice_zero(choices)
            ids.extend(more)
        if not known and (message := error_of(obj)) is not None:
            known = True
            error_message = message or error_message
        readable = readable or known
        if content:
            text.append(content)
        if thought:
            reasoning.append(thought)
        for p in parts:
            slot = calls.setdefault(p.index, {"id": None, "name": "", "arguments": ""})
            slot["id"] = p.id or slot["id"]
            slot["name"] += p.name
            slot["arguments"] += p.arguments
        if usage:
            merged.update((k, v) for k, v in usage.items() if v is not None)
        finish = event_finish or finish
        at.append(chunk)
        datas.append(data)
        contents.append(content)
        reasonings.append(thought)
        tools.append(len(parts))
        finishes.append(event_finish)
        usages.append(usage)
    if body[pos:].strip() or not readable:
        return None  # a last event without its blank line; or no chat event (read_response sniffs)
    out = Output(CHAT.name, streamed=True, readable=True)
    out.model, out.response_id, out.system_fingerprint, out.error_message = model, response_id, fingerprint, error_message
    out.timings = timings
    out.text, out.reasoning = "".join(text), "".join(reasoning)
    out.tool_calls = [calls[k] for k in sorted(calls)]
    out.finish_reason_raw = finish
    out.finish_reason = CHAT.finish(finish, bool(out.tool_calls))
    if error_message is not None and out.finish_reason is None:
        out.finish_reason = "error"
    out.usage = merged or None
    if merged:
        out.prompt_tokens, out.cached_tokens, out.output_tokens = CHAT.counts(merged)
    out.token_ids = ids or None
    return ChatStream(out, ended(pieces, obj), at, datas, contents, reasonings, tools, finishes, usages)


__all__ = ["ChatStream", "read_chat_stream"]
