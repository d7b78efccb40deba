"""OpenAI chat completions and (legacy) completions: ``choices``, streamed as chunks or whole."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from .shapes import (
    Api,
    Delta,
    ToolCallPart,
    Turn,
    as_dict,
    as_int,
    as_list,
    as_text,
    canonical_arguments,
    content_text,
    error_of,
    position,
    prompt_text,
)

_OBJECTS = ("chat.completion", "chat.completion.chunk", "text_completion")


def choice_zero(choices: list[Any]) -> Delta:
    """Choice 0 of a chat or completions object: its text, reasoning, refusal, tool-call pieces,
    finish reason, token ids (logprobs' or vLLM's return_token_ids), the stop string that ended it
    (vLLM's ``stop_reason``, SGLang's ``matched_stop``), an audio answer's transcript and the
    sources it cites (``annotations``), vLLM's ``stop_reason`` and SGLang's ``matched_stop`` as said
    (``stop_reason_json``). Other choices (n > 1): ``other_choices``."""
    return choice_at(choices, 0)


def choice_at(choices: list[Any], k: int) -> Delta:
    """``choice_zero`` of choice ``k`` (a choice without an index is choice 0)."""
    d = Delta(True)
    content = reasoning = refusal = spoken = ""
    calls: list[ToolCallPart] = []
    ids: list[int] = []
    cited: list[Any] = []
    images: list[Any] = []
    for choice in choices:
        if not isinstance(choice, dict) or choice_index(choice) != k:
            continue
        part = choice.get("delta") or choice.get("message") or {}
        if isinstance(part, dict):
            if isinstance(text := part.get("content"), str):
                content += text
            elif isinstance(text, list):  # parts (Mistral's Magistral: its thinking, then its text)
                content += content_text(text)
                reasoning += "".join(
                    content_text(p.get("thinking")) for p in text if isinstance(p, dict) and p.get("type") == "thinking"
                )
            if isinstance(audio := part.get("audio"), dict) and isinstance(text := audio.get("transcript"), str):
                spoken += text  # an audio answer (modalities: audio): its words are the transcript's
            reasoning += both_reasoning(part.get("reasoning_content"), part.get("reasoning"))
            if isinstance(text := part.get("refusal"), str):
                refusal += text
            calls.extend(_tool_parts(as_list(part.get("tool_calls"))))
            if isinstance(legacy := part.get("function_call"), dict):  # the functions API before tool_calls
                calls.append(ToolCallPart(0, None, as_text(legacy.get("name")), as_text(legacy.get("arguments"))))
            cited.extend(as_list(part.get("annotations")))  # url citations of a search model
            images.extend(as_list(part.get("images")))  # images generated (OpenRouter's image output)
        if isinstance(text := choice.get("text"), str):
            content += text
        if isinstance(word := choice.get("finish_reason"), str) and word:
            d.finish_reason = word
        if "error" in choice and (message := error_of(choice)) is not None:
            d.error = message  # an error of this choice alone
        if stop_value(said := choice.get("stop_reason")) or stop_value(said := choice.get("matched_stop")):
            d.stop_sequence = said
        if "stop_reason" in choice:
            d.stop_reason = stop_reason_json(choice["stop_reason"])
        if "matched_stop" in choice:
            d.matched_stop = stop_reason_json(choice["matched_stop"])
        logprobs = choice.get("logprobs")
        if isinstance(logprobs, dict):
            ids.extend(
                item["id"]
                for item in as_list(logprobs.get("content"))
                if isinstance(item, dict) and isinstance(item.get("id"), int)
            )
        if isinstance(token_ids := choice.get("token_ids"), list):
            ids.extend(t for t in token_ids if isinstance(t, int))
    d.content, d.reasoning, d.refusal, d.audio = content, reasoning, refusal, spoken
    d.tool_calls, d.token_ids, d.citations, d.results = calls, ids or None, cited, images
    return d


def both_reasoning(first: Any, second: Any) -> str:
    """The reasoning of a message or delta that may name it twice (``reasoning_content``, and
    ``reasoning`` as newer servers call it): once when both say the same, else both."""
    a, b = as_text(first), as_text(second)
    return a if a == b else a + b


def choice_index(choice: dict[str, Any]) -> int:
    """A choice's index; one that is not an integer (null, a string) is choice 0, as ``only_zero`` reads it."""
    index = as_int(choice.get("index"))
    return 0 if index is None else index


def stop_value(value: Any) -> bool:
    """A stop string as an engine reports it. A token id is not one: vLLM names an end-of-sequence
    id of the model's generation config (Gemma 3's 106 ends nearly every answer) where another
    engine names none, and the finish reason already says the answer ended there."""
    return isinstance(value, str) and value != ""


def stop_reason_json(value: Any) -> str:
    """vLLM's ``stop_reason`` (SGLang's ``matched_stop``) as sent, as JSON: the stop string ``"106"``
    is not the token id ``106``, and ``null`` (vLLM's end of sequence, either's length) is said, not
    missing."""
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def matched_stop_after(before: str | None, said: str | None) -> str | None:
    """SGLang's ``matched_stop`` of an answer, given what a chunk said after ``before``: a value is
    not undone by a later null, as every chunk of SGLang's carries the key (null before the last,
    and in a hidden-states chunk after it)."""
    return before if said is None or said == "null" and before is not None else said


#: The error an answer reports where a choice ended with the finish reason ``error`` and no error
#: object said why (choice 0's; another's is prefixed ``choice k: ``, as its error object's message is).
FINISHED_IN_ERROR = 'finish_reason "error"'


def choices_error(finish_reason: str | None, choices: list[dict[str, Any]]) -> str | None:
    """The error an n > 1 answer reports in one of its choices where no error object of choice 0
    (nor beside the choices) did: each choice is an answer, and one that failed fails the exchange,
    as choice 0's failure does. ``finish_reason``: choice 0's common word (``error`` said with no
    error object); ``choices``: the others (``read.other_choice``), by index. None: none failed."""
    if finish_reason == "error":
        return FINISHED_IN_ERROR
    for c in choices:
        if c.get("error") is not None:
            return f"choice {c['index']}: {c['error']}"
        if c.get("finish_reason") == "error":
            return f"choice {c['index']}: {FINISHED_IN_ERROR}"
    return None


def only_zero(choices: list[Any]) -> bool:
    """Whether no choice but the first is in ``choices`` (the usual: one choice, index 0)."""
    return all(not isinstance(c, dict) or choice_index(c) == 0 for c in choices)


def other_choices(choices: list[Any]) -> dict[int, Delta] | None:
    """What the choices other than 0 in one object say, by index (n > 1 asks for several answers:
    each is an answer, compared as one)."""
    if only_zero(choices):
        return None
    indexes = {choice_index(c) for c in choices if isinstance(c, dict)} - {0}
    return {k: choice_at(choices, k) for k in sorted(indexes)}


class Chat(Api):
    name = "chat"
    finish_map: ClassVar[dict[str, str]] = {
        "stop": "stop",
        "length": "length",
        "tool_calls": "tool_calls",
        "function_call": "tool_calls",
        "content_filter": "content_filter",
        "eos": "stop",
        "error": "error",
    }

    def finish(self, raw: str | None, tool_calls: bool) -> str | None:
        # OpenAI says "stop" of an answer that calls the function a named tool_choice forced, as
        # older vLLM and Ollama's /v1 say it of any call: in the common vocabulary it ended with
        # tool calls, as the engines that say "tool_calls" have it (and Ollama's /api/chat), so that
        # counts by finish reason hold the same answer alike. The raw word stays.
        if raw == "stop" and tool_calls:
            return "tool_calls"
        return super().finish(raw, tool_calls)

    def event(self, obj: dict[str, Any]) -> Delta:
        # Run once per streamed chunk of every chat exchange decoded: fields set only when present,
        # the usual one-choice delta read with as few lookups as it takes.
        get = obj.get
        choices = get("choices")
        d = choice_zero(choices) if isinstance(choices, list) else Delta()
        d.known = choices is not None or get("object") in _OBJECTS
        if (usage := get("usage")) and isinstance(usage, dict):
            d.usage = usage
        if isinstance(model := get("model"), str):
            d.model = model
        if isinstance(rid := get("id"), str):
            d.response_id = rid
        if fingerprint := get("system_fingerprint"):
            d.system_fingerprint = fingerprint
        if isinstance(timings := get("timings"), dict):  # llama-server adds them
            d.timings = timings
        if "error" in obj and d.known and (message := error_of(obj)) is not None:
            d.error = message  # beside choices: a gateway's error mid-stream (OpenRouter's, finish_reason "error")
        if not isinstance(choices, list):
            return d
        if len(choices) != 1 or not isinstance(c := choices[0], dict) or choice_index(c) != 0:
            d.choices = other_choices(choices)
        return d

    def turns(self, body: dict[str, Any]) -> tuple[tuple[Turn, ...], int | None, str | None]:
        messages = body.get("messages")
        if not isinstance(messages, list):
            return (), None, None
        turns = tuple(message_turn(m) for m in messages if isinstance(m, dict))
        return turns, len(messages), chat_system(turns)


class Completions(Chat):
    name = "completions"

    def turns(self, body: dict[str, Any]) -> tuple[tuple[Turn, ...], int | None, str | None]:
        prompt = body.get("prompt")
        return ((Turn("user", prompt_text(prompt)),) if prompt is not None else ()), None, None


def _tool_parts(tool_calls: list[Any]) -> list[ToolCallPart]:
    """The pieces of tool calls one chat delta (or message) carries."""
    out = []
    for i, call in enumerate(tool_calls):
        if isinstance(call, dict):
            fn = _called(call)
            args = fn.get("arguments") if "arguments" in fn else fn.get("input")
            out.append(
                ToolCallPart(
                    position(call.get("index"), i),
                    call.get("id"),
                    as_text(fn.get("name")),
                    args if isinstance(args, str) else canonical_arguments(args) if args else "",
                    free=not as_dict(call.get("function")) and bool(as_dict(call.get("custom"))),
                )
            )
    return out


def _called(call: dict[str, Any]) -> dict[str, Any]:
    """What a tool call calls: a function (``arguments``) or a custom tool (free-form ``input``)."""
    return as_dict(call.get("function")) or as_dict(call.get("custom"))


def chat_system(turns: tuple[Turn, ...]) -> str | None:
    """A chat conversation's system prompt: its system and developer turns, joined."""
    return "\n".join(t.text for t in turns if t.role in ("system", "developer")) or None


def message_turn(m: dict[str, Any]) -> Turn:
    """A chat message (OpenAI's or Ollama's: arguments as a string or an object) as a turn: its
    words (a refusal's too) and its calls (the functions API's ``function_call`` too), as the
    reply that added it reads (``Output.reply``)."""
    calls = []
    for call in as_list(m.get("tool_calls")):
        if isinstance(call, dict):
            fn = _called(call) or call
            calls.append((as_text(fn.get("name")), canonical_arguments(fn.get("arguments", fn.get("input")) or "")))
    if isinstance(legacy := m.get("function_call"), dict):
        calls.append((as_text(legacy.get("name")), canonical_arguments(legacy.get("arguments") or "")))
    return Turn(str(m.get("role") or "?"), content_text(m.get("content")) + as_text(m.get("refusal")), tuple(calls))
