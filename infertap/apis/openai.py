"""OpenAI chat completions and (legacy) completions: ``choices``, streamed as chunks or whole."""

from __future__ import annotations

from typing import Any, ClassVar

from .shapes import Api, Delta, ToolCallPart, Turn, as_dict, as_text, canonical_arguments, content_text

_OBJECTS = ("chat.completion", "chat.completion.chunk", "text_completion")


class Chat(Api):
    name = "chat"
    finish_map: ClassVar[dict[str, str]] = {
        "stop": "stop",
        "length": "length",
        "tool_calls": "tool_calls",
        "function_call": "tool_calls",
        "content_filter": "content_filter",
        "eos": "stop",
    }

    def event(self, obj: dict[str, Any]) -> Delta:
        # Run once per streamed chunk of every chat exchange decoded: fields set only when present.
        choices = obj.get("choices")
        d = Delta(known=choices is not None or obj.get("object") in _OBJECTS)
        if (usage := obj.get("usage")) and isinstance(usage, dict):
            d.usage = usage
        if isinstance(model := obj.get("model"), str):
            d.model = model
        if isinstance(rid := obj.get("id"), str):
            d.response_id = rid
        if fingerprint := obj.get("system_fingerprint"):
            d.system_fingerprint = fingerprint
        if isinstance(timings := obj.get("timings"), dict):  # llama-server adds them
            d.timings = timings
        if not isinstance(choices, list):
            return d
        calls: list[ToolCallPart] = []
        ids: list[int] = []
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # choice 0 only: n > 1 is a different question
            part = choice.get("delta") or choice.get("message") or {}
            if isinstance(part, dict):
                d.content += as_text(part.get("content"))
                d.reasoning += as_text(part.get("reasoning_content") or part.get("reasoning"))
                for i, call in enumerate(part.get("tool_calls") or ()):
                    if isinstance(call, dict):
                        fn = as_dict(call.get("function"))
                        args = fn.get("arguments")
                        calls.append(
                            ToolCallPart(
                                call.get("index", i),
                                call.get("id"),
                                as_text(fn.get("name")),
                                args if isinstance(args, str) else canonical_arguments(args) if args else "",
                            )
                        )
            d.content += as_text(choice.get("text"))
            d.finish_reason = choice.get("finish_reason") or d.finish_reason
            logprobs = choice.get("logprobs")
            if isinstance(logprobs, dict):
                ids.extend(
                    item["id"]
                    for item in logprobs.get("content") or ()
                    if isinstance(item, dict) and isinstance(item.get("id"), int)
                )
            if isinstance(choice.get("token_ids"), list):  # vLLM's return_token_ids
                ids.extend(t for t in choice["token_ids"] if isinstance(t, int))
        d.tool_calls = calls
        d.token_ids = ids or None
        return d

    def turns(self, body: dict[str, Any]) -> tuple[tuple[Turn, ...], int | None, str | None]:
        messages = body.get("messages")
        if not isinstance(messages, list):
            return (), None, None
        turns = tuple(message_turn(m) for m in messages if isinstance(m, dict))
        system = "\n".join(t.text for t in turns if t.role in ("system", "developer")) or None
        return turns, len(messages), system


class Completions(Chat):
    name = "completions"

    def turns(self, body: dict[str, Any]) -> tuple[tuple[Turn, ...], int | None, str | None]:
        prompt = body.get("prompt")
        return ((Turn("user", content_text(prompt)),) if prompt is not None else ()), None, None


def message_turn(m: dict[str, Any]) -> Turn:
    """A chat message (OpenAI's or Ollama's: arguments as a string or an object) as a turn."""
    calls = []
    for call in m.get("tool_calls") or ():
        if isinstance(call, dict):
            fn = as_dict(call.get("function")) or call
            calls.append((as_text(fn.get("name")), canonical_arguments(fn.get("arguments") or "")))
    return Turn(str(m.get("role") or "?"), content_text(m.get("content")), tuple(calls))
