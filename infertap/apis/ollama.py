"""Ollama's native API: ``/api/chat`` and ``/api/generate``, NDJSON lines or one object.

Token counts come as ``prompt_eval_count`` and ``eval_count`` next to the server's durations (ns);
sampling settings sit under ``options``.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from .openai import message_turn
from .shapes import (
    NEXT,
    Api,
    Delta,
    ToolCallPart,
    Turn,
    as_dict,
    as_int,
    as_list,
    as_text,
    canonical_arguments,
    position,
    prompt_text,
)

DURATIONS = ("total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count", "eval_duration")
_COUNTS = ("prompt_eval_count", "eval_count")


class OllamaChat(Api):
    name = "ollama-chat"
    finish_map: ClassVar[dict[str, str]] = {"stop": "stop", "length": "length"}

    def finish(self, raw: str | None, tool_calls: bool) -> str | None:
        # Ollama says "stop" of an answer that calls a tool (server/routes.go; its /v1 API alone says
        # "tool_calls"): in the common vocabulary it ended with tool calls, as an OpenAI engine's
        # answer does, so that counts by finish reason hold the same answer alike. The raw word stays.
        if raw == "stop" and tool_calls:
            return "tool_calls"
        return super().finish(raw, tool_calls)

    def event(self, obj: dict[str, Any]) -> Delta:
        message = obj.get("message")
        d = _common(obj, known=isinstance(message, dict) or "done" in obj)
        if isinstance(message, dict):
            d.content = as_text(message.get("content"))
            d.reasoning = as_text(message.get("thinking"))
            d.tool_calls = _calls(message.get("tool_calls"))
            d.results = as_list(message.get("images"))  # images generated
        return d

    def counts(self, usage: dict[str, Any]) -> tuple[int | None, int | None, int | None]:
        return as_int(usage.get("prompt_eval_count")), None, as_int(usage.get("eval_count"))

    def turns(self, body: dict[str, Any]) -> tuple[tuple[Turn, ...], int | None, str | None]:
        messages = body.get("messages")
        if not isinstance(messages, list):
            return (), None, None
        turns = tuple(_message_turn(m) for m in messages if isinstance(m, dict))
        return turns, len(messages), "\n".join(t.text for t in turns if t.role == "system") or None

    def sampling(self, body: dict[str, Any]) -> dict[str, Any]:
        """Ollama's native API reads sampling settings from ``options`` only (a top-level
        ``temperature`` is no setting of the request)."""
        options = body.get("options")
        return dict(options) if isinstance(options, dict) else {}


class OllamaGenerate(OllamaChat):
    name = "ollama-generate"

    def event(self, obj: dict[str, Any]) -> Delta:
        d = _common(obj, known=isinstance(obj.get("response"), str) or "done" in obj)
        d.content = as_text(obj.get("response"))
        d.reasoning = as_text(obj.get("thinking"))
        # A builtin parser's calls come on the done line, beside ``response`` (not in a message).
        d.tool_calls = _calls(obj.get("tool_calls"))
        # An image generated: ``image``, base64, on the done line (experimental, Ollama v0.14.3 to
        # v0.32.5; ``images`` is read as a chat message names them).
        d.results = ([obj["image"]] if obj.get("image") is not None else []) + as_list(obj.get("images"))
        return d

    def turns(self, body: dict[str, Any]) -> tuple[tuple[Turn, ...], int | None, str | None]:
        system = body.get("system") if isinstance(body.get("system"), str) else None
        text = prompt_text(body.get("prompt")) + _images(body.get("images"))
        prompt = (Turn("user", text),) if body.get("prompt") is not None else ()
        return ((Turn("system", system),) if system else ()) + prompt, None, system


def _calls(calls: Any) -> list[ToolCallPart]:
    """Ollama's tool calls, each whole (arguments an object), in the slot its ``index`` names."""
    parts = []
    for call in as_list(calls):
        fn = as_dict(as_dict(call).get("function"))
        arguments = canonical_arguments(fn.get("arguments") or {})
        parts.append(ToolCallPart(position(fn.get("index"), NEXT), as_dict(call).get("id"), as_text(fn.get("name")), arguments))
    return parts


def _message_turn(m: dict[str, Any]) -> Turn:
    """A message as a turn, its ``images`` part of what it says (as an OpenAI image part is, in
    ``content_text``): two conversations that differ only in an image are not one. An assistant's
    are left out, as its reply's turn leaves out the images it generated (``Output.reply``)."""
    turn = message_turn(m)
    if turn.role == "assistant" or not m.get("images"):
        return turn
    return Turn(turn.role, turn.text + _images(m["images"]), turn.calls)


def _images(images: Any) -> str:
    """Images sent (base64 strings) as canonical JSON, none as nothing."""
    return json.dumps({"images": images}, sort_keys=True, ensure_ascii=False) if images else ""


def _common(obj: dict[str, Any], *, known: bool) -> Delta:
    counts = {k: obj[k] for k in _COUNTS if k in obj}
    return Delta(
        known=known,
        model=obj.get("model") if isinstance(obj.get("model"), str) else None,
        finish_reason=obj.get("done_reason") or None,
        usage=counts or None,
        durations={k: obj[k] for k in DURATIONS if k in obj} or None,
    )
