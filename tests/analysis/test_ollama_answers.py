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
    assert (out.finish_reason, out.finish_reason_raw) == ("tool_calls", "stop")
    assert out.output_tokens == 3 and out.prompt_tokens == 4


def _logprob(token: str, top: dict[str, float]) -> dict[str, Any]:
    """One position as api/types.go's ``Logprob`` sends it: the token chosen, its bytes, its top-k."""
    alternatives = [{"token": t, "logprob": v, "bytes": list(t.encode())} for t, v in top.items()]
    return {"token": token, "logprob": top[token], "bytes": list(token.encode()), "top_logprobs": alternatives}


_CAT = [_logprob("The", {"The": -0.1, "A": -2.4}), _logprob(" cat", {" cat": -0.5, " dog": -0.9})]
_DOG = [_logprob("The", {"The": -0.1, "A": -2.4}), _logprob(" cat", {" cat": -1.2, " dog": -0.4})]


def _streamed(path: str, positions: list[dict[str, Any]]) -> list[bytes]:
    """An NDJSON answer, one line per token, each with its own ``logprobs`` (as routes.go streams them)."""
    key = "response" if path == "/api/generate" else "message"
    lines: list[dict[str, Any]] = []
    for p in positions:
        said = p["token"] if key == "response" else {"role": "assistant", "content": p["token"]}
        lines.append({"model": "m", key: said, "done": False, "logprobs": [p]})
    last = "" if key == "response" else {"role": "assistant", "content": ""}
    lines.append({"model": "m", key: last, "done": True, "done_reason": "stop", "eval_count": len(positions)})
    return [json.dumps(line).encode() + b"\n" for line in lines]


def _whole(path: str, positions: list[dict[str, Any]]) -> list[bytes]:
    """A ``"stream": false`` answer: one object, every position in its ``logprobs``."""
    text = "".join(p["token"] for p in positions)
    said: Any = text if path == "/api/generate" else {"role": "assistant", "content": text}
    key = "response" if path == "/api/generate" else "message"
    return [json.dumps({"model": "m", key: said, "done": True, "done_reason": "stop", "logprobs": positions}).encode()]


def _logprob_pairs(b_positions: list[dict[str, Any]]) -> dict[str, Any]:
    pairs: dict[str, Any] = {}
    for path, body in (_CHAT[:2], _GENERATE[:2]):
        ask = {**body, "logprobs": True, "top_logprobs": 2}
        pairs[f"{path} streamed"] = ((path, ask, _NDJSON), _streamed(path, _CAT), _streamed(path, b_positions))
        whole = (path, {**ask, "stream": False}, "application/json")
        pairs[f"{path} whole"] = (whole, _whole(path, _CAT), _whole(path, b_positions))
    return pairs


def test_ollama_logprobs_are_read_a_changed_one_differs_and_the_same_ones_match(tmp_path: Path) -> None:
    """Ollama's logprobs (v0.12.11+: top-level ``logprobs`` of each object) were not read: compare
    took no KL of Ollama answers, so a changed distribution behind the same text went unseen."""
    changed, same = tmp_path / "changed", tmp_path / "same"
    for folder, positions in ((changed, _DOG), (same, _CAT)):
        folder.mkdir()
        a, b = pair_captures(folder, _logprob_pairs(positions))
        d = compare(a, b, top=4)["divergence"]
        assert d["exact_match_rate"] == 1, d["counts"]  # the same text: the logprobs alone tell them apart
        assert d["logprobs"]["pairs"] == 4, d.get("logprobs")
        if folder is changed:
            assert d["logprobs"]["kl_mean"] > 0 and d["logprobs"]["top1_agreement"] == 0.5
        else:
            assert d["logprobs"]["kl_mean"] == 0 and d["logprobs"]["top1_agreement"] == 1


def test_each_ollama_position_is_read_once_streamed_or_whole() -> None:
    from infertap.analysis.divergence import logprob_positions
    from infertap.apis import read_response

    for (path, _body, ctype), *chunks in _logprob_pairs(_CAT).values():
        out = read_response({"path": path, "chunks": chunks[0], "response_headers": [["content-type", ctype]]})
        assert logprob_positions(out.objects, out.api) == [
            ("The", {"The": -0.1, "A": -2.4}),
            (" cat", {" cat": -0.5, " dog": -0.9}),
        ]


def _chat_calls_stream() -> list[bytes]:
    """The same call as an OpenAI engine (vLLM) streams it: finish_reason tool_calls."""
    call = {"index": 0, "id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
    chunks = [{"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}, {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]  # fmt: skip
    return [b"".join(b"data: " + json.dumps({"id": "x", **c}).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"]


def test_an_ollama_answer_that_calls_a_tool_counts_as_a_tool_call_finish_as_an_openai_engines_does(tmp_path: Path) -> None:
    """Ollama's done_reason is "stop" on an answer that calls a tool: stats counted it a stop where
    vLLM's same call counted tool_calls. The raw word is kept; the common one says tool_calls."""
    from infertap.analysis import Analysis, speed_stats
    from infertap.apis import read_response
    from tests.helpers import write_capture

    chat_body = {"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": True}
    answers = [
        ("/api/chat", _CHAT[1], _chat(calls=[_RAIN]), _NDJSON),
        ("/api/generate", _GENERATE[1], _generate(calls=[_RAIN]), _NDJSON),
        ("/v1/chat/completions", chat_body, _chat_calls_stream(), "text/event-stream"),
        ("/api/chat", _CHAT[1], _chat("Hi"), _NDJSON),  # no call: a stop it stays
    ]
    records = write_capture(
        tmp_path / "cap",
        [{"path": p, "body": {**b, "tag": i}, "chunks": c, "content_type": t} for i, (p, b, c, t) in enumerate(answers)],
    )
    reads = [read_response(r) for r in records]
    assert [(o.finish_reason, o.finish_reason_raw) for o in reads] == [
        ("tool_calls", "stop"),
        ("tool_calls", "stop"),
        ("tool_calls", "tool_calls"),
        ("stop", "stop"),
    ]
    with Analysis([tmp_path / "cap"], cache_dir=tmp_path / "cache") as a:
        (group,) = speed_stats(a)["groups"]
    assert group["finish_reasons"] == {"tool_calls": 3, "stop": 1}
    # compare: the same Ollama call matches; a call against a text answer ends otherwise.
    a, b = pair_captures(tmp_path / "pairs", {"call vs text": (_CHAT, _chat(calls=[_RAIN]), _chat("Hi"))})
    (item,) = compare(a, b, top=1)["divergence"]["most_divergent"]
    assert item["finish_reason"] == ["tool_calls", "stop"] and item["finish_reason_raw"] == ["stop", "stop"]
