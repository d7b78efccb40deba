"""Amazon Bedrock's Converse API: ``POST /model/{modelId}/converse`` and ``/converse-stream``.

Its body holds ``messages`` as OpenAI chat's does, so it was read as chat, which it is not: each
message's ``content`` is a list of blocks (``{"text"}``, ``{"toolUse"}``, ``{"toolResult"}``,
``{"image"}``...), the system prompt a list of ``{"text"}`` blocks, the settings in
``inferenceConfig`` (``maxTokens``, ``temperature``, ``topP``, ``stopSequences``), the tools in
``toolConfig.tools[].toolSpec``. Its answer: ``{"output": {"message": {"role", "content":
[blocks]}}, "stopReason", "usage": {"inputTokens", "outputTokens", "totalTokens",
"cacheReadInputTokens"}, "metrics": {"latencyMs"}}``.

``/converse-stream`` answers in AWS's event-stream binary framing (``application/vnd.amazon.eventstream``),
which no reader here decodes: its answer is unreadable (counted so), never another API's text.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from .shapes import Api, Delta, SettingsPlace, ToolCallPart, Turn, as_dict, as_int, as_list, canonical_arguments

#: ``inferenceConfig``'s names, by the common ones: where a replay's ``--set`` goes, and what ``sampling`` reads
#: (a model's other settings, Anthropic's ``top_k``, go in ``additionalModelRequestFields``: not these).
SETTINGS = SettingsPlace(
    "inferenceConfig", {"max_tokens": "maxTokens", "temperature": "temperature", "top_p": "topP", "stop": "stopSequences"}
)
_COMMON = {own: name for name, own in SETTINGS.names.items()}
#: Why a ``/converse-stream`` answer is not read.
UNREAD_STREAM = "AWS event-stream binary framing (Bedrock's /converse-stream), which infertap does not read"


class Converse(Api):
    name = "bedrock-converse"
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
            return Delta()
        d = Delta(known=True)
        text: list[str] = []
        reasoning: list[str] = []
        calls: list[ToolCallPart] = []
        for block in as_list(message.get("content")):
            block = as_dict(block)
            if isinstance(block.get("text"), str):
                text.append(block["text"])
            elif isinstance(block.get("toolUse"), dict):
                use = block["toolUse"]
                name = use.get("name") if isinstance(use.get("name"), str) else ""
                calls.append(
                    ToolCallPart(len(calls), use.get("toolUseId"), name, canonical_arguments(use.get("input")), whole=True)
                )
            elif isinstance(block.get("reasoningContent"), dict):
                said = as_dict(block["reasoningContent"].get("reasoningText")).get("text")
                reasoning.append(said if isinstance(said, str) else "")
        d.content, d.reasoning, d.tool_calls = "".join(text), "".join(reasoning), calls
        d.finish_reason = obj.get("stopReason") if isinstance(obj.get("stopReason"), str) else None
        usage = as_dict(obj.get("usage"))
        d.usage = {k: v for k, v in usage.items() if as_int(v) is not None} or None
        return d

    def counts(self, usage: dict[str, Any]) -> tuple[int | None, int | None, int | None]:
        return as_int(usage.get("inputTokens")), as_int(usage.get("cacheReadInputTokens")), as_int(usage.get("outputTokens"))

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

    def sampling(self, body: dict[str, Any]) -> dict[str, Any]:
        config = as_dict(body.get("inferenceConfig"))
        return {_COMMON[k]: v for k, v in config.items() if k in _COMMON}


class ConverseStream(Converse):
    """``/converse-stream``: a stream whatever the body says (it has no ``stream`` field)."""

    name = "bedrock-converse-stream"

    def streams(self, body: dict[str, Any]) -> bool:
        return True


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
