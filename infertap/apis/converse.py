"""Amazon Bedrock's Converse API: ``POST /model/{modelId}/converse`` and ``/converse-stream``.

Its body holds ``messages`` as OpenAI chat's does, so it was read as chat, which it is not: each
message's ``content`` is a list of blocks (``{"text"}``, ``{"toolUse"}``, ``{"toolResult"}``,
``{"image"}``...), the system prompt a list of ``{"text"}`` blocks, the settings in
``inferenceConfig`` (``maxTokens``, ``temperature``, ``topP``, ``stopSequences``), the tools in
``toolConfig.tools[].toolSpec``. Its answer: ``{"output": {"message": {"role", "content":
[blocks]}}, "stopReason", "usage": {"inputTokens", "outputTokens", "totalTokens",
"cacheReadInputTokens", "cacheWriteInputTokens"}, "metrics": {"latencyMs"}}`` (``inputTokens`` leave
out the cache's reads and writes).

``/converse-stream`` answers in AWS's binary event-stream framing (``application/vnd.amazon.eventstream``,
``eventstream.read_messages``): each message's ``:event-type`` header names its event (``messageStart``,
``contentBlockStart`` with a tool use's id and name, ``contentBlockDelta`` with text, a tool use's
input text or reasoning, ``contentBlockStop``, ``messageStop`` with the ``stopReason``, ``metadata``
with ``usage`` and ``metrics``), its payload the event's JSON; a ``:message-type`` ``exception``
(or ``error``) message is the answer failing. Each is read as the object AWS's SDKs hand their
caller, ``{eventType: payload}``, at the chunk its last byte came in: timed as any stream's events.

The model is in the path alone (``/model/{modelId}/converse``, URL-encoded: an id, an ARN; an ARN's
``/`` sent unencoded is read as part of it too), and a model's own settings in
``additionalModelRequestFields`` (Anthropic's ``top_k`` at its top, Amazon Nova's ``topK`` in an
``inferenceConfig`` nested there): both read here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, ClassVar
from urllib.parse import quote, unquote

from .eventstream import Framed, read_messages
from .fastjson import loads
from .shapes import (
    Api,
    Delta,
    Event,
    SettingsPlace,
    ToolCallPart,
    Turn,
    as_dict,
    as_int,
    as_list,
    canonical_arguments,
    layout_entry,
)

#: ``inferenceConfig``'s names, by the common ones: where a replay's ``--set`` goes, and what ``sampling`` reads
#: (a model's other settings, Anthropic's ``top_k``, go in ``additionalModelRequestFields``: not these).
SETTINGS = SettingsPlace(
    "inferenceConfig", {"max_tokens": "maxTokens", "temperature": "temperature", "top_p": "topP", "stop": "stopSequences"}
)
_COMMON = {own: name for name, own in SETTINGS.names.items()}
#: Amazon Nova's own settings, in ``additionalModelRequestFields.inferenceConfig``, by the common names.
_NOVA = {"topK": "top_k"}
#: Where the model is: the path's ``{modelId}``, whatever comes before ``/model`` (a gateway's prefix): all
#: between the first ``/model/`` and the last ``/converse``, so that an ARN sent with its ``/`` unencoded (by a
#: hand-written client, or a proxy that decoded it) is the whole ARN, not its last segment or none.
_MODEL = re.compile(r"/model/([^?]+)/converse(?:-stream)?/?(?:\?|$)")
#: What an event-stream body cut short, or damaged, is said to be (``Output.error``), before why.
CUT = "the event stream was cut"
#: A payload that is not a JSON object (``read.fold``'s words for each framing).
NOT_JSON = "an event-stream message's payload is not JSON"
#: The events a stream ends on: its stop reason, then its usage.
_LAST = ("messageStop", "metadata")
#: Where a Converse answer's ``metrics.latencyMs`` is said to come from, beside other servers' timings.
LATENCY_SOURCE = "Bedrock metrics.latencyMs (server-measured)"


def latency_ns(timings: dict[str, Any] | None) -> int | None:
    """Bedrock's ``latencyMs`` among an answer's ``timings`` (``Converse``'s), in ns; None where none."""
    ms = as_int((timings or {}).get("latencyMs"))
    return ms * 1_000_000 if ms is not None and ms >= 0 else None


def _metrics(obj: dict[str, Any]) -> dict[str, Any] | None:
    """An answer's ``metrics`` where they hold its ``latencyMs``: the whole request as Bedrock timed it."""
    metrics = as_dict(obj.get("metrics"))
    return {"latencyMs": metrics["latencyMs"]} if as_int(metrics.get("latencyMs")) is not None else None


def model_in_path(path: str | None) -> str | None:
    """The ``{modelId}`` of a Converse path, decoded (``anthropic.claude-3-haiku-20240307-v1:0``, an
    ARN whose ``/`` came as ``%2F`` or as itself); None where the path holds none."""
    found = _MODEL.search(path or "")
    return unquote(found.group(1)) if found else None


def with_model(path: str, rename: Callable[[str], str | None]) -> str:
    """``path`` with its ``{modelId}`` renamed by ``rename`` (None: kept), quoted as the recorded one
    was: the characters it sent unescaped (``:``, ``.``, an unencoded ARN's ``/``) stay so, any other is
    escaped (an encoded ARN's ``/``)."""
    found = _MODEL.search(path)
    if found is None:
        return path
    sent = found.group(1)
    new = rename(unquote(sent))
    if new is None:
        return path
    kept = "".join(sorted({c for c in sent if not c.isalnum() and c != "%"}))
    return path[: found.start(1)] + quote(new, safe=kept) + path[found.end(1) :]


class Converse(Api):
    name = "bedrock-converse"
    model_in_path = True
    finish_map: ClassVar[dict[str, str]] = {
        "end_turn": "stop",
        "stop_sequence": "stop",
        "tool_use": "tool_calls",
        "max_tokens": "length",
        "model_context_window_exceeded": "length",
        "guardrail_intervened": "content_filter",
        "content_filtered": "content_filter",
    }
    inputs: ClassVar[tuple[str, ...]] = ("messages",)
    settings_place = SETTINGS

    def event(self, obj: dict[str, Any]) -> Delta:
        message = as_dict(as_dict(obj.get("output")).get("message"))
        if not message and "stopReason" not in obj:
            return _refused(obj)
        d = Delta(known=True)
        layout: list[str] = []
        sources: list[Any] = []
        others: list[Any] = []
        text: list[str] = []
        reasoning: list[str] = []
        calls: list[ToolCallPart] = []
        for block in as_list(message.get("content")):
            block = as_dict(block)
            kind, chars = next(iter(block), "?"), 0
            if isinstance(block.get("text"), str):
                text.append(block["text"])
                chars = len(block["text"])
            elif isinstance(block.get("toolUse"), dict):
                use = block["toolUse"]
                name = use.get("name") if isinstance(use.get("name"), str) else ""
                given = canonical_arguments(use.get("input"))
                calls.append(ToolCallPart(len(calls), use.get("toolUseId"), name, given, whole=True, server=_ran(use)))
            elif isinstance(block.get("reasoningContent"), dict):
                said = as_dict(block["reasoningContent"].get("reasoningText")).get("text")
                reasoning.append(said if isinstance(said, str) else "")
                chars = len(reasoning[-1])
                d.encrypted += int("redactedContent" in block["reasoningContent"])
            elif isinstance(block.get("citationsContent"), dict):
                # text that cites its sources (a document's, with citations enabled): a text block streamed
                cited = block["citationsContent"]
                said = "".join(t for t in (as_dict(c).get("text") for c in as_list(cited.get("content"))) if isinstance(t, str))
                text.append(said)
                sources.extend(as_list(cited.get("citations")))
                layout.append(layout_entry("text", len(said), len(as_list(cited.get("citations")))))
                continue
            else:  # an image, a tool's result, a block added since: compared whole
                others.append(block)
            layout.append(layout_entry(kind, chars))
        d.content, d.reasoning, d.tool_calls = "".join(text), "".join(reasoning), calls
        d.layout, d.citations, d.others = layout, sources, others
        d.finish_reason = obj.get("stopReason") if isinstance(obj.get("stopReason"), str) else None
        d.stop_sequence = _stop_sequence(obj)
        d.served = served(obj)
        usage = as_dict(obj.get("usage"))
        d.usage = {k: v for k, v in usage.items() if as_int(v) is not None} or None
        d.timings = _metrics(obj)
        return d

    def counts(self, usage: dict[str, Any]) -> tuple[int | None, int | None, int | None]:
        """(prompt, read from the cache, output): Bedrock's ``inputTokens`` are the prompt's tokens
        neither read from nor written to its cache (its ``totalTokens`` adds both back), so the
        prompt is the three together, as Anthropic's ``input_tokens`` are."""
        fresh, read = as_int(usage.get("inputTokens")), as_int(usage.get("cacheReadInputTokens"))
        prompt = None if fresh is None else fresh + (read or 0) + (as_int(usage.get("cacheWriteInputTokens")) or 0)
        return prompt, read, as_int(usage.get("outputTokens"))

    def streams(self, body: dict[str, Any]) -> bool:
        return False

    def turns(self, body: dict[str, Any]) -> tuple[tuple[Turn, ...], int | None, str | None]:
        system = "\n".join(b["text"] for b in map(as_dict, as_list(body.get("system"))) if isinstance(b.get("text"), str))
        messages = as_list(body.get("messages"))
        turns = tuple(_turn(m) for m in messages if isinstance(m, dict))
        return ((Turn("system", system),) if system else ()) + turns, len(messages), system or None

    def tools(self, body: dict[str, Any]) -> tuple[str, ...]:
        specs = (as_dict(as_dict(t).get("toolSpec")) for t in as_list(as_dict(body.get("toolConfig")).get("tools")))
        return tuple(str(s.get("name") or "?") for s in specs)

    def model(self, body: dict[str, Any], path: str | None) -> str | None:
        return model_in_path(path)

    def sampling(self, body: dict[str, Any]) -> dict[str, Any]:
        """``inferenceConfig``'s settings, and the model's own in ``additionalModelRequestFields``:
        Anthropic's at its top (``top_k``), Amazon Nova's in an ``inferenceConfig`` nested there
        (``topK``, as Bedrock documents Nova's). One ``inferenceConfig`` names too is
        ``inferenceConfig``'s, which Bedrock reads."""
        config = as_dict(body.get("inferenceConfig"))
        extra = as_dict(body.get("additionalModelRequestFields"))
        nova = {_NOVA.get(k, k): v for k, v in as_dict(extra.get("inferenceConfig")).items()}
        return {**nova, **extra, **{_COMMON[k]: v for k, v in config.items() if k in _COMMON}}


class ConverseStream(Converse):
    """``/converse-stream``: a stream whatever the body says (it has no ``stream`` field), each event
    ``{eventType: payload}`` (``stream_events``)."""

    name = "bedrock-converse-stream"

    def streams(self, body: dict[str, Any]) -> bool:
        return True

    def event(self, obj: dict[str, Any]) -> Delta:
        if len(obj) != 1:
            return Delta()
        ((kind, payload),) = obj.items()
        if not isinstance(payload, dict):
            return _refused(obj)
        at = as_int(payload.get("contentBlockIndex"))
        at = 0 if at is None or at < 0 else at
        if kind == "contentBlockDelta":
            d = _delta(as_dict(payload.get("delta")), at)
            d.block = at
            return d
        if kind == "contentBlockStart":
            start = as_dict(payload.get("start"))
            use = as_dict(start.get("toolUse"))
            if not use:  # a block of another type (a tool's result, an image) kept whole, its deltas merged in
                opened = next(iter(start), None)
                return Delta(known=True, block=at, opened=opened, unread=dict(start) if opened else None)
            name, key = use.get("name"), use.get("toolUseId")
            part = ToolCallPart(
                at, key if isinstance(key, str) else None, name if isinstance(name, str) else "", server=_ran(use)
            )
            return Delta(known=True, tool_calls=[part], block=at, opened="toolUse")
        if kind == "messageStop":
            stop = payload.get("stopReason")
            return Delta(
                known=True,
                finish_reason=stop if isinstance(stop, str) else None,
                stop_sequence=_stop_sequence(payload),
                served=served(payload),
            )
        if kind == "metadata":
            usage = {k: v for k, v in as_dict(payload.get("usage")).items() if as_int(v) is not None}
            return Delta(known=True, usage=usage or None, timings=_metrics(payload), served=served(payload))
        if kind == "exception":
            said = payload.get("message")
            return Delta(known=True, error=f"{payload.get('type')}: {said if isinstance(said, str) else json.dumps(payload)}")
        return Delta(known=kind in ("messageStart", "contentBlockStop"))


def _refused(obj: dict[str, Any]) -> Delta:
    """Bedrock's error body (a request refused before any answer: a validation error, throttling;
    its type in the ``x-amzn-ErrorType`` header): ``{"message": ...}``, ``Message`` in some: the
    error it reports, not a body of no shape."""
    said = obj.get("message", obj.get("Message"))
    if isinstance(said, str) and set(obj) <= {"message", "Message", "__type"}:
        return Delta(known=True, error=said)
    return Delta()


def _ran(use: dict[str, Any]) -> bool:
    """Whether a tool use is one Bedrock ran itself (``"type": "server_tool_use"``, its result in the
    answer): no call its client must make."""
    return use.get("type") == "server_tool_use"


def _stop_sequence(obj: dict[str, Any]) -> str | None:
    """The stop sequence that ended the answer, where the request asked for it
    (``additionalModelResponseFieldPaths``: Anthropic's models answer it in
    ``additionalModelResponseFields``, as ``stop_sequence`` or, streamed, ``delta.stop_sequence``)."""
    fields = as_dict(obj.get("additionalModelResponseFields"))
    said = fields.get("stop_sequence", as_dict(fields.get("delta")).get("stop_sequence"))
    return said if isinstance(said, str) else None


#: Where a Converse answer says how it was served, beyond its words: a guardrail's assessment and the
#: model a prompt router chose (``trace``), the latency tier (``performanceConfig``), a model's own
#: response fields (``additionalModelResponseFields``, past the stop sequence read on its own).
_SERVED = ("additionalModelResponseFields", "trace", "performanceConfig")


def served(obj: dict[str, Any]) -> dict[str, Any] | None:
    """How an answer (a ``messageStop`` or ``metadata`` event, a whole answer) says it was served
    (``_SERVED``), less its timings (a guardrail's ``guardrailProcessingLatency``: new every request)
    and the stop sequence (``stop_sequence``, compared as such); None where it says nothing else."""
    found = {key: _timeless(obj[key]) for key in _SERVED if obj.get(key) is not None}
    fields = as_dict(found.get("additionalModelResponseFields"))
    if fields:
        fields = {k: v for k, v in fields.items() if k != "stop_sequence"}
        delta = {k: v for k, v in as_dict(fields.get("delta")).items() if k != "stop_sequence"}
        fields = {**fields, "delta": delta} if delta else {k: v for k, v in fields.items() if k != "delta"}
        found["additionalModelResponseFields"] = fields
    found = {k: v for k, v in found.items() if v not in ({}, [])}
    return found or None


def _timeless(value: Any) -> Any:
    """``value`` without the members that time it (a name holding ``Latency``, ``latencyMs``), which
    differ on every request; ``performanceConfig``'s ``latency`` (a tier: ``optimized``) is kept."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if k == "latency" or "latency" not in k.lower()}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


def _delta(delta: dict[str, Any], at: int) -> Delta:
    """A ``contentBlockDelta``'s text, a tool use's input text (its call's ``at``) or reasoning: its
    text; reasoning sent redacted (``redactedContent``) counted as encrypted (once per block: ``fold``); a signature no words; a
    source the text cites (``citation``) among the citations; any other (an image's, a tool result's)
    kept whole (``Delta.unread``), so that two answers differing there differ."""
    d = Delta(known=True)
    if isinstance(delta.get("text"), str):
        d.content, d.opened = delta["text"], "text"
    elif isinstance(delta.get("toolUse"), dict):
        said = delta["toolUse"].get("input")
        d.tool_calls = [ToolCallPart(at, arguments=said if isinstance(said, str) else "")]
        d.opened = "toolUse"
    elif isinstance(delta.get("reasoningContent"), dict):
        said = delta["reasoningContent"].get("text")
        d.reasoning = said if isinstance(said, str) else ""
        d.encrypted = int("redactedContent" in delta["reasoningContent"])
        d.opened = "reasoningContent"
    elif "citation" in delta:
        d.citations = [delta["citation"]]
    elif delta:
        d.unread = dict(delta)
    return d


def stream_events(pieces: list[bytes], framed: Framed | None = None) -> tuple[list[Event], Framed]:
    """A ``/converse-stream`` body's events, each ``{eventType: payload}`` as AWS's SDKs hand them
    (an exception message ``{"exception": {"type", ...payload}}``; an event whose payload is not a
    JSON object has no object, read as an unparsed payload), and its framing (what was cut).
    ``framed``: its messages already read (a cut answer's kept tail's), ``pieces`` then unread."""
    framed = read_messages(pieces) if framed is None else framed
    events = []
    for message in framed.messages:
        data = message.payload.decode("utf-8", errors="replace")
        try:
            payload = loads(data) if data.strip() else {}
        except ValueError:
            payload = None
        kind = _said(message.headers, ":message-type")
        obj: Any = None
        if isinstance(payload, dict):
            if kind == "event":
                obj = {str(_said(message.headers, ":event-type")): payload}
            elif kind == "exception":
                obj = {"exception": {"type": _said(message.headers, ":exception-type"), **payload}}
        if kind == "error":  # the framing's own error: its code and message in headers
            said = _said(message.headers, ":error-message")
            obj = {"exception": {"type": _said(message.headers, ":error-code"), "message": said}}
        events.append(Event(message.chunk, data, Delta(), obj))
    return events, framed


def _said(headers: dict[str, Any], name: str) -> str | None:
    """A header AWS sends as a string, as text: one of another value type (bytes, a number, a UUID)
    as its text too, so that an odd header reads as words, never as a value no JSON holds."""
    value = headers.get(name)
    if value is None or isinstance(value, str):
        return value
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def stream_ended(last: Any, error: str | None) -> bool:
    """Whether a read ``/converse-stream`` body carried its end: its last event its stop reason or
    usage (``_LAST``), none of its bytes cut (``error``: ``Output.error``)."""
    return isinstance(last, dict) and len(last) == 1 and next(iter(last)) in _LAST and not (error or "").startswith(CUT)


def _turn(message: dict[str, Any]) -> Turn:
    """A message as a turn: its text blocks as its text, any other block (an image, a tool's
    result) as canonical JSON beside it, its tool uses as calls: two conversations that differ in
    a block are not one."""
    role = message["role"] if isinstance(message.get("role"), str) else "?"
    text: list[str] = []
    calls: list[tuple[str, str]] = []
    for block in as_list(message.get("content")):
        block = as_dict(block)
        if isinstance(block.get("text"), str) and len(block) == 1:
            text.append(block["text"])
        elif isinstance(block.get("toolUse"), dict):
            use = block["toolUse"]
            calls.append((str(use.get("name") or "?"), canonical_arguments(use.get("input"))))
        else:
            text.append(json.dumps(block, sort_keys=True, ensure_ascii=False))
    return Turn(role, "".join(text), tuple(calls))
