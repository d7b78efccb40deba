"""compare on Ollama's native answers (``/api/chat``, ``/api/generate``), shaped as Ollama's
api/types.go and server/routes.go send them: what only the answer's thinking, tool calls, ending
or generated image tells apart must differ; the same answer must match."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infertap.analysis.compare import compare
from tests.helpers import pair_captures

_NDJSON = "application/x-ndjson"
_CHAT = ("/api/chat", {"model": "m", "messages": [{"role": "user", "content": "q"}]}, _NDJSON)
_GENERATE = ("/api/generate", {"model": "m", "prompt": "q"}, _NDJSON)


def _call(arguments: dict[str, Any], index: int = 0) -> dict[str, Any]:
    return {"function": {"index": index, "name": "get_weather", "arguments": arguments}}


def _generate(
    text: str = "",
    *,
    thinking: str = "",
    calls: list[dict[str, Any]] = (),
    reason: str = "stop",
    image: str = "",  # type: ignore[assignment]
) -> list[bytes]:
    """An /api/generate stream: thinking, then text, then the done line (which carries the tool
    calls a builtin parser read, the context and the metrics, as routes.go sends them)."""
    lines: list[dict[str, Any]] = []
    if thinking:
        lines.append({"model": "m", "response": "", "thinking": thinking, "done": False})
    if text:
        lines.append({"model": "m", "response": text, "done": False})
    done: dict[str, Any] = {"model": "m", "response": "", "done": True, "done_reason": reason, "context": [1, 2, 3]}
    done |= {"total_duration": 9_000_000, "load_duration": 1_000_000, "prompt_eval_count": 4}
    done |= {"prompt_eval_duration": 2_000_000, "eval_count": 3, "eval_duration": 6_000_000}
    if calls:
        done["tool_calls"] = calls
    if image:
        done["image"] = image  # v0.14.3 to v0.32.5's experimental image generation
    lines.append(done)
    return [json.dumps(line).encode() + b"\n" for line in lines]


def _chat(text: str = "", *, thinking: str = "", calls: list[dict[str, Any]] = (), reason: str = "stop") -> list[bytes]:  # type: ignore[assignment]
    message = {"role": "assistant", "content": text, "thinking": thinking} if thinking else {"role": "assistant", "content": text}
    lines: list[dict[str, Any]] = [{"model": "m", "message": message, "done": False}]
    for call in calls:
        lines.append({"model": "m", "message": {"role": "assistant", "content": "", "tool_calls": [call]}, "done": False})
    lines.append(
        {"model": "m", "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": reason, "eval_count": 3}
    )
    return [json.dumps(line).encode() + b"\n" for line in lines]


_RAIN, _SUN = _call({"city": "Paris"}), _call({"city": "Rome"})

#: name -> (API, A's chunks, B's chunks): each pair differs only where its name says.
DIFFER: dict[str, Any] = {
    "generate thinking": (_GENERATE, _generate("Hi", thinking="a"), _generate("Hi", thinking="b")),
    "generate tool call arguments": (_GENERATE, _generate(calls=[_RAIN]), _generate(calls=[_SUN])),
    "generate stop vs length": (_GENERATE, _generate("Hi"), _generate("Hi", reason="length")),
    "generate image": (_GENERATE, _generate(image="iVBORa"), _generate(image="iVBORb")),
    "chat thinking": (_CHAT, _chat("Hi", thinking="a"), _chat("Hi", thinking="b")),
    "chat tool call arguments": (_CHAT, _chat(calls=[_RAIN]), _chat(calls=[_SUN])),
    "chat stop vs length": (_CHAT, _chat("Hi"), _chat("Hi", reason="length")),
}


def _twins(pairs: dict[str, Any]) -> dict[str, Any]:
    return {k: (api, x, x) for k, (api, x, _) in pairs.items()}


def test_ollama_answers_that_differ_only_outside_their_text_differ(tmp_path: Path) -> None:
    """An /api/generate answer's tool calls (top-level ``tool_calls`` on its done line) were not
    read: two answers calling a tool with other arguments were an exact match."""
    a, b = pair_captures(tmp_path, DIFFER)
    d = compare(a, b, top=len(DIFFER))["divergence"]
    assert d["counts"].get("exact", 0) == 0, d["counts"]
    assert len(d["most_divergent"]) == len(DIFFER)


def test_the_same_ollama_answers_match(tmp_path: Path) -> None:
    a, b = pair_captures(tmp_path, _twins(DIFFER))
    d = compare(a, b, top=len(DIFFER))["divergence"]
    assert d["exact_match_rate"] == 1 and d["most_divergent"] == [], d["counts"]


def test_a_generate_answers_tool_calls_are_read() -> None:
    """The calls a builtin parser read, sent on the done line beside ``response``."""
    from infertap.apis import read_response

    record = {"path": "/api/generate", "chunks": _generate(calls=[_RAIN, _call({"city": "Oslo"}, 1)])}
    out = read_response(record | {"response_headers": [["content-type", _NDJSON]]})
    assert [(c["name"], c["arguments"]) for c in out.tool_calls] == [
        ("get_weather", '{"city":"Paris"}'),
        ("get_weather", '{"city":"Oslo"}'),
    ]
    assert out.finish_reason == "stop" and out.output_tokens == 3 and out.prompt_tokens == 4
