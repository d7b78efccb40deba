"""compare on outputs that differ outside their text: tool calls, reasoning, errors and logprobs.
Each change must make a pair inexact, less than perfectly similar and give it a first divergence;
what is the same (arguments' key order, one call sent whole or empty) must still match."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from infertap.analysis.compare import compare
from infertap.analysis.divergence import kl_shared_prefix, output_text, tool_call_diff
from tests import sdk_shapes
from tests.helpers import pair_captures, write_capture


def _answer(text: str = "", *, reasoning: str | None = None, calls: list[tuple[str, str]] = (), logprobs: Any = None) -> bytes:  # type: ignore[assignment]
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = [
            {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": a}} for i, (n, a) in enumerate(calls)
        ]
    choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
    if logprobs is not None:
        choice["logprobs"] = {"content": logprobs}
    body = {"id": "r", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]}
    return json.dumps(sdk_shapes.chat_completion(body)).encode()


def _error(message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": "server_error"}}).encode()


def _tokens(*positions: tuple[str, dict[str, float]]) -> list[dict[str, Any]]:
    """OpenAI's logprobs: each chosen token with its top-k, no token ids (vLLM's and OpenAI's default)."""
    return [
        {"token": t, "logprob": top[t], "top_logprobs": [{"token": k, "logprob": v} for k, v in top.items()]}
        for t, top in positions
    ]


OOPS = "The server had an error while processing your request. (Please include the request ID"
PLEASE = "in your message.)"
P0 = {"The": math.log(0.7), "A": math.log(0.3)}
SAME_START = ("The", P0)

#: name -> (A's response, B's response, their statuses)
PAIRS: dict[str, tuple[bytes, bytes, tuple[int, int]]] = {
    "arguments": (_answer(calls=[("f", '{"a": 1}')]), _answer(calls=[("f", '{"a": 2}')]), (200, 200)),
    "true for 1": (_answer(calls=[("f", '{"a": true}')]), _answer(calls=[("f", '{"a": 1}')]), (200, 200)),
    "name": (_answer(calls=[("f", "{}")]), _answer(calls=[("g", "{}")]), (200, 200)),
    "order": (_answer(calls=[("f", "{}"), ("g", "{}")]), _answer(calls=[("g", "{}"), ("f", "{}")]), (200, 200)),
    "reasoning": (_answer("42", reasoning="add them"), _answer("42", reasoning="multiply them"), (200, 200)),
    "moved": (_answer("", reasoning="42"), _answer("42"), (200, 200)),
    "errors": (_error("rate limited"), _error("internal error"), (500, 500)),
    "errors quoting their requests": (_error(f"{OOPS} req_abc123 {PLEASE}"), _error(f"{OOPS} req_abc123"), (500, 500)),
    "cut short": (_answer("Hello"), _answer("Hello"), (200, 200)),  # B's stream reset after the same text
    "logprobs": (
        _answer("The cat", logprobs=_tokens(SAME_START, (" cat", {" cat": math.log(0.6), " dog": math.log(0.4)}))),
        _answer("The dog", logprobs=_tokens(SAME_START, (" dog", {" cat": math.log(0.1), " dog": math.log(0.9)}))),
        (200, 200),
    ),
}
SAME: dict[str, tuple[bytes, bytes, tuple[int, int]]] = {
    "key order": (_answer(calls=[("f", '{"a": 1, "b": [2]}')]), _answer(calls=[("f", '{"b": [2], "a": 1}')]), (200, 200)),
    "empty arguments": (_answer(calls=[("f", "")]), _answer(calls=[("f", "{}")]), (200, 200)),
    "same error": (_error("rate limited"), _error("rate limited"), (429, 429)),
    # OpenAI's: the same error, each with its own request id
    "same error, other request ids": (_error(f"{OOPS} req_abc123 {PLEASE}"), _error(f"{OOPS} req_9f8e7d6c {PLEASE}"), (500, 500)),
    "same reasoning": (_answer("42", reasoning="add"), _answer("42", reasoning="add"), (200, 200)),
}


def _captures(tmp_path: Path, pairs: dict[str, tuple[bytes, bytes, tuple[int, int]]]) -> tuple[Path, Path]:
    for side in (0, 1):
        write_capture(
            tmp_path / "ab"[side],
            [
                {
                    "body": {"model": "m", "messages": [{"role": "user", "content": name}]},
                    "chunks": [pair[side]],
                    "status": pair[2][side],
                    "end": "reset" if name == "cut short" and side else "complete",
                }
                for name, pair in pairs.items()
            ],
        )
    return tmp_path / "a", tmp_path / "b"


def _by_question(result: dict[str, Any], pairs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    items = result["divergence"]["most_divergent"]
    order = list(pairs)
    return {order[int(item["a_id"].split("-")[1])]: item for item in items}


def test_a_change_outside_the_text_is_a_divergence(tmp_path: Path) -> None:
    a, b = _captures(tmp_path, PAIRS)
    result = compare(a, b, top=len(PAIRS))
    d = result["divergence"]
    assert d["counts"].get("exact", 0) == 0  # not one of them is the same answer
    assert d["counts"]["tool_calls_differ"] == 4
    # Two other errors, and a stream cut short after the same text: no exact match, yet no output
    # to compare on a failed side; counted apart from the outputs that differ (its status with them).
    assert d["failed"] == {"pairs": 3, "a_only": 0, "b_only": 1, "both": 2, "both_same": 0, "both_differ": 2, "not_generation": 0}
    assert "status_or_end_differs" not in d["counts"]
    items = _by_question(result, PAIRS)
    assert set(items) == set(PAIRS) - {"errors", "errors quoting their requests", "cut short"}
    for name, item in items.items():
        assert not item["exact"] and item["similarity"] < 1, name
        assert item["first_divergence"]["at"] is not None, name
        assert item["diff"] != item["diff"].replace("[-", "").replace("{+", ""), (name, item["diff"])  # it shows the change
    assert items["arguments"]["first_divergence"] == {"at": len('\x1ef({"a":'), "unit": "character"}
    assert items["true for 1"]["tool_calls"]["arguments_equal"] is False
    # Logprobs: the text diverges at its second token, so KL is taken over the first only.
    kl = items["logprobs"]["kl"]
    assert kl == kl_shared_prefix([P0], [P0], 1)
    assert kl["positions"] == 1 and kl["kl_mean"] == 0 and kl["top1_agreement"] == 1


def test_what_is_the_same_outside_the_text_still_matches(tmp_path: Path) -> None:
    a, b = _captures(tmp_path, SAME)
    d = compare(a, b, top=len(SAME))["divergence"]
    assert d["exact_match_rate"] == 1 and d["similarity_mean"] == 1
    assert d["counts"].get("tool_calls_differ", 0) == 0 and d["most_divergent"] == []
    assert d["first_divergence_median"] is None


def test_the_output_compared_is_the_text_alone_when_it_is_all_there_is() -> None:
    assert output_text("", "hello", []) == "hello"  # character positions stay positions in the text
    assert output_text("", "", [{"name": "f", "arguments": '{"b":1,"a":true}'}]) == '\x1ef({"a":true,"b":1})'
    assert tool_call_diff([{"name": "f", "arguments": "[1]"}], [{"name": "f", "arguments": "[1.0]"}])["arguments_equal"] is False
    assert tool_call_diff([{"name": "f", "arguments": "not json"}], [{"name": "f", "arguments": "not json"}])["arguments_equal"]


# -- how an answer ended: its stream's end marker and its finish reason -----------------------------


def _chat_sse(text: str, finish: str = "stop", done: bool = True) -> list[bytes]:
    def chunk(delta: dict[str, Any], f: str | None = None) -> bytes:
        event = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": f}]}  # fmt: skip
        return b"data: " + json.dumps(sdk_shapes.chat_chunk(event)).encode() + b"\n\n"

    return [chunk({"content": text}), chunk({}, finish), *([b"data: [DONE]\n\n"] if done else [])]


def _anthropic_sse(text: str, stop: str = "end_turn", done: bool = True) -> list[bytes]:
    events = [
        ("message_start", {"type": "message_start", "message": _ANTHROPIC_START}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 2}}),
        *([("message_stop", {"type": "message_stop"})] if done else []),
    ]
    return [f"event: {name}\ndata: {json.dumps(sdk_shapes.message_event(data))}\n\n".encode() for name, data in events]


_ANTHROPIC_START = {"id": "m", "type": "message", "role": "assistant", "content": [], "model": "m", "stop_reason": None,
                    "usage": {"input_tokens": 5, "output_tokens": 1}}  # fmt: skip


def _ollama(text: str, reason: str = "stop", done: bool = True) -> list[bytes]:
    lines = [{"model": "m", "message": {"role": "assistant", "content": text}, "done": False}]
    if done:
        lines.append({"model": "m", "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": reason})
    return [json.dumps(line).encode() + b"\n" for line in lines]


def _llamacpp(text: str, stop_type: str = "eos", done: bool = True) -> list[bytes]:
    events = [{"content": text, "stop": False}, *([{"content": "", "stop": True, "stop_type": stop_type}] if done else [])]
    return [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events]


_CHAT = (
    "/v1/chat/completions",
    {"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": True},
    "text/event-stream",
)
_MESSAGES = ("/v1/messages", {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "q"}], "stream": True}, "text/event-stream")  # fmt: skip
_OLLAMA = ("/api/chat", {"model": "m", "messages": [{"role": "user", "content": "q"}]}, "application/x-ndjson")
_LLAMACPP = ("/completion", {"prompt": "q", "stream": True}, "text/event-stream")

#: name -> (API, A's chunks, B's chunks): each pair has the same text and ends otherwise.
ENDINGS: dict[str, tuple[tuple[str, dict[str, Any], str], list[bytes], list[bytes]]] = {
    "chat without [DONE]": (_CHAT, _chat_sse("Hello"), _chat_sse("Hello", done=False)),
    "chat stop vs length": (_CHAT, _chat_sse("Hello"), _chat_sse("Hello", "length")),
    "chat stop vs content_filter": (_CHAT, _chat_sse("Hello"), _chat_sse("Hello", "content_filter")),
    "messages without message_stop": (_MESSAGES, _anthropic_sse("Hello"), _anthropic_sse("Hello", done=False)),
    "messages end_turn vs max_tokens": (_MESSAGES, _anthropic_sse("Hello"), _anthropic_sse("Hello", "max_tokens")),
    "messages end_turn vs stop_sequence": (_MESSAGES, _anthropic_sse("Hello"), _anthropic_sse("Hello", "stop_sequence")),
    "ollama without done": (_OLLAMA, _ollama("Hello"), _ollama("Hello", done=False)),
    "ollama stop vs length": (_OLLAMA, _ollama("Hello"), _ollama("Hello", "length")),
    "llama.cpp without stop": (_LLAMACPP, _llamacpp("Hello"), _llamacpp("Hello", done=False)),
    "llama.cpp eos vs limit": (_LLAMACPP, _llamacpp("Hello"), _llamacpp("Hello", "limit")),
}
#: The same answers, sent in other chunks: must match.
ENDINGS_SAME = {
    "chat rechunked": (_CHAT, _chat_sse("Hello"), [b"".join(_chat_sse("Hello"))[:17], b"".join(_chat_sse("Hello"))[17:]]),
    "messages rechunked": (_MESSAGES, _anthropic_sse("Hello"), [b"".join(_anthropic_sse("Hello"))]),
    "ollama rechunked": (_OLLAMA, _ollama("Hello"), [b"".join(_ollama("Hello"))]),
}


def _all_differ(tmp_path: Path, pairs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A's and B's answers of each pair compared: none may be an exact match, and every pair is
    among the most divergent. The divergence, and each pair's item by name."""
    a, b = pair_captures(tmp_path, pairs)
    result = compare(a, b, top=len(pairs))
    d = result["divergence"]
    assert d["counts"].get("exact", 0) == 0, d["counts"]
    items = _by_question(result, pairs)
    assert set(items) == set(pairs)
    return d, items


def _all_match(tmp_path: Path, pairs: dict[str, Any]) -> dict[str, Any]:
    """A's and B's answers of each pair compared: every one an exact match. The divergence."""
    folder = tmp_path / "same"
    folder.mkdir()
    a, b = pair_captures(folder, pairs)
    d = compare(a, b, top=len(pairs))["divergence"]
    assert d["exact_match_rate"] == 1 and d["most_divergent"] == [], d["counts"]
    return d


def _twins(pairs: dict[str, Any]) -> dict[str, Any]:
    """Each pair with A's answer on both sides."""
    return {k: (api, x, x) for k, (api, x, _) in pairs.items()}


def test_an_answer_that_ended_otherwise_is_no_exact_match(tmp_path: Path) -> None:
    """A stream closed before its end marker, or stopped for another reason (length, a filter, a stop
    sequence), with the same text so far: compare called each pair exact (a perfect score). An Ollama
    or llama.cpp stream closed before its end marker (its finish) is no answer at all: B failed,
    unfinished, a failed pair and no output that differs."""
    a, b = pair_captures(tmp_path, ENDINGS)
    result = compare(a, b, top=len(ENDINGS))
    d = result["divergence"]
    assert d["counts"].get("exact", 0) == 0 and d["exact_match_rate"] == 0, d["counts"]
    cut = {"ollama without done", "llama.cpp without stop"}
    items = _by_question(result, ENDINGS)
    assert set(items) == set(ENDINGS) - cut
    for name, item in items.items():
        assert not item["exact"] and item["similarity"] == 1, name  # the same text: similar, not the same answer
        assert ("stream_done" in item) == ("without" in name), (name, item)
        assert "finish_reason" in item or "without" in name, (name, item)  # a stream cut short may say no reason
    assert d["counts"]["end_marker_differs"] == 2
    assert d["failed"]["b_only"] == len(cut) and [(p["a"], p["b"]) for p in d["failed_pairs"]] == [(None, "unfinished")] * len(
        cut
    )


def test_the_same_answer_in_other_chunks_still_matches(tmp_path: Path) -> None:
    a, b = pair_captures(tmp_path, ENDINGS_SAME)
    d = compare(a, b, top=len(ENDINGS_SAME))["divergence"]
    assert d["exact_match_rate"] == 1 and d["most_divergent"] == [] and "end_marker_differs" not in d["counts"]


def _with_ids(text: str, ids: list[int], calls: list[tuple[str, str]] = ()) -> bytes:  # type: ignore[assignment]
    """A whole chat answer carrying the engine's token ids (vLLM's ``return_token_ids``)."""
    answer = json.loads(_answer(text, calls=calls))
    answer["choices"][0]["token_ids"] = ids
    return json.dumps(answer).encode()


def test_token_ids_place_a_divergence_only_where_the_outputs_differ(tmp_path: Path) -> None:
    """The same text in other token ids was an exact pair with a divergence at 0 (in the median and
    the histogram); equal ids with other tool-call arguments were an inexact pair with no position."""
    pairs = {
        "other ids, same text": (_with_ids("ab", [7]), _with_ids("ab", [5, 6]), (200, 200)),
        "same ids, other arguments": (
            _with_ids("ab", [7], [("f", '{"a": 1}')]),
            _with_ids("ab", [7], [("f", '{"a": 2}')]),
            (200, 200),
        ),
        "other text": (_with_ids("ab", [7, 8]), _with_ids("ax", [7, 9]), (200, 200)),
    }
    a, b = _captures(tmp_path, pairs)
    result = compare(a, b, top=len(pairs))
    d = result["divergence"]
    items = _by_question(result, pairs)
    assert "other ids, same text" not in items and d["counts"]["exact"] == 1  # exact, and no position anywhere
    args = items["same ids, other arguments"]["first_divergence"]
    assert args == {"at": len('ab\x1ef({"a":'), "unit": "character"}
    assert items["other text"]["first_divergence"] == {"at": 1, "unit": "token (engine ids)"}
    assert sum(d["first_divergence_histogram"].values()) == 2  # the two inexact pairs only


# -- refusals and the calls other item types make ------------------------------------------------------

_RESPONSES = ("/v1/responses", {"model": "m", "input": "q"}, "application/json")


def _chat_body(choices: list[dict[str, Any]]) -> dict[str, Any]:
    """A whole chat answer of ``choices`` with what every real one carries beside them."""
    return {"id": "r", "object": "chat.completion", "created": 0, "model": "m", "choices": choices}


def _chunk(choices: list[dict[str, Any]]) -> dict[str, Any]:
    """A chat stream chunk of ``choices`` with what every real one carries beside them."""
    return {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": choices}


def _sse(*chunks: dict[str, Any]) -> list[bytes]:
    """Checked chat chunks, framed, then ``[DONE]``."""
    return [b"data: " + json.dumps(sdk_shapes.chat_chunk(c)).encode() + b"\n\n" for c in chunks] + [b"data: [DONE]\n\n"]


def _message(content: list[dict[str, Any]], stop: str = "end_turn", word: Any = None, beta: bool = False, **more: Any) -> bytes:
    """A whole Anthropic answer of ``content`` blocks, checked (``beta``: by the beta model, for beta blocks)."""
    body = {"id": "m", "type": "message", "role": "assistant", "model": "m", "content": content, "stop_reason": stop,
            "stop_sequence": word, "usage": {"input_tokens": 5, "output_tokens": 2}}  # fmt: skip
    return json.dumps(sdk_shapes.message(body, beta=beta)).encode()


def _message_event(event: dict[str, Any], beta: bool = False) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(sdk_shapes.message_event(event, beta=beta))}\n\n".encode()


def _chat_refusal(refusal: str | None, text: str = "") -> list[bytes]:
    message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": refusal}
    body = _chat_body([{"index": 0, "message": message, "finish_reason": "stop"}])
    return [json.dumps(sdk_shapes.chat_completion(body)).encode()]


def _chat_refusal_sse(refusal: str) -> list[bytes]:
    first = _chunk([{"index": 0, "delta": {"role": "assistant", "content": None, "refusal": None}, "finish_reason": None}])
    said = _chunk([{"index": 0, "delta": {"refusal": refusal}, "finish_reason": None}])
    end = _chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}])
    return _sse(first, said, end)


def _response(items: Any, status: str = "completed") -> dict[str, Any]:
    """A Responses body of ``items``, as the SDK reads one."""
    return sdk_shapes.response({"object": "response", "id": "r", "model": "m", **sdk_shapes.RESPONSE_REST,
                                "status": status, "output": list(items)})  # fmt: skip


def _responses(*items: dict[str, Any]) -> list[bytes]:
    return [json.dumps(_response(items)).encode()]


def _odd_responses(*items: dict[str, Any]) -> list[bytes]:
    """A body the SDK refuses on purpose: a gateway's, its call's arguments an object where OpenAI sends a string."""
    return [json.dumps({"object": "response", "id": "r", "status": "completed", "output": list(items)}).encode()]


def _message_part(kind: str, text: str) -> dict[str, Any]:
    part = {"type": kind, "refusal": text} if kind == "refusal" else {"type": kind, "text": text, "annotations": []}
    return {"type": "message", "id": "msg", "role": "assistant", "status": "completed", "content": [part]}


def _anthropic_whole_start(arguments: dict[str, Any]) -> list[bytes]:
    events = [
        ("message_start", {"type": "message_start", "message": _ANTHROPIC_START}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": arguments},
            },
        ),  # fmt: skip
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 2}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return [f"event: {name}\ndata: {json.dumps(sdk_shapes.message_event(data))}\n\n".encode() for name, data in events]


_CHAT_WHOLE = ("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "q"}]}, "application/json")
REFUSALS = {
    "chat refusals": (_CHAT_WHOLE, _chat_refusal("I can't help with that."), _chat_refusal("No.")),
    "chat refusal vs nothing": (_CHAT_WHOLE, _chat_refusal("I can't help with that."), _chat_refusal(None)),
    "chat refusals streamed": (_CHAT, _chat_refusal_sse("I can't help with that."), _chat_refusal_sse("No.")),
    "responses refusal vs text": (
        _RESPONSES,
        _responses(_message_part("refusal", "I can't help.")),
        _responses(_message_part("output_text", "I can't help.")),
    ),
    "responses custom tool": (
        _RESPONSES,
        _responses({"type": "custom_tool_call", "call_id": "c", "name": "exec", "input": "ls"}),
        _responses({"type": "custom_tool_call", "call_id": "c", "name": "exec", "input": "rm -rf /"}),
    ),
    "responses arguments as an object": (
        _RESPONSES,
        _odd_responses({"type": "function_call", "call_id": "c", "name": "f", "arguments": {"a": 1}}),
        _odd_responses({"type": "function_call", "call_id": "c", "name": "f", "arguments": {"a": 2}}),
    ),
    "messages input at the block's start": (_MESSAGES, _anthropic_whole_start({"a": 1}), _anthropic_whole_start({"a": 2})),
}


def _legacy_call(arguments: str) -> list[bytes]:
    message = {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": arguments}}
    body = _chat_body([{"index": 0, "message": message, "finish_reason": "function_call"}])
    return [json.dumps(sdk_shapes.chat_completion(body)).encode()]


def _vllm_error_after(text: str, message: str) -> list[bytes]:
    """vLLM's error shape before 0.10.2, mid-stream: ``{"object": "error", "message": ...}`` (no ``error`` key)."""
    error = {"object": "error", "message": message, "type": "InternalServerError", "param": None, "code": 500}
    return _chat_sse(text, done=False)[:1] + [b"data: " + json.dumps(sdk_shapes.vllm_legacy_error(error)).encode() + b"\n\n"]


REFUSALS["functions API call"] = (_CHAT_WHOLE, _legacy_call('{"a": 1}'), _legacy_call('{"a": 2}'))
#: Two errors that each side's stream reported after the same text: other failures, not other outputs.
ERRORS_MID_STREAM = {
    "vllm error mid-stream": (_CHAT, _vllm_error_after("Hello", "engine died"), _vllm_error_after("Hello", "out of memory"))
}
REFUSALS_SAME = {
    "chat refusal": (_CHAT_WHOLE, _chat_refusal("No."), _chat_refusal("No.")),
    "chat refusal streamed": (_CHAT, _chat_refusal_sse("No."), _chat_refusal_sse("No.")),
    "responses custom tool": (
        _RESPONSES,
        _responses({"type": "custom_tool_call", "call_id": "c", "name": "exec", "input": "ls"}),
        _responses({"type": "custom_tool_call", "call_id": "d", "name": "exec", "input": "ls"}),
    ),
}


def test_refusals_and_other_calls_are_part_of_the_answer(tmp_path: Path) -> None:
    """A chat refusal was never read (two different refusals, or a refusal and nothing, matched);
    a Responses refusal read as text matched the same words answered; custom tool calls, arguments
    sent as an object and an Anthropic call whole in its block's start were not read."""
    _, items = _all_differ(tmp_path, REFUSALS)
    for name, item in items.items():
        assert not item["exact"] and item["first_divergence"]["at"] is not None, name
    assert items["responses refusal vs text"]["text"] == ["", "I can't help."]
    _all_match(tmp_path, REFUSALS_SAME)


def test_an_error_mid_stream_is_read_as_the_sides_failure(tmp_path: Path) -> None:
    """vLLM's error shape mid-stream was not read: two streams that died of other errors after the
    same text matched. Read, each side failed; other errors are no exact match, the same error is."""
    d = compare(*pair_captures(tmp_path, ERRORS_MID_STREAM))["divergence"]
    assert d["failed"] == {"pairs": 1, "a_only": 0, "b_only": 0, "both": 1, "both_same": 0, "both_differ": 1, "not_generation": 0}
    assert d["counts"].get("exact", 0) == 0 and d["most_divergent"] == []
    _all_match(tmp_path, _twins(ERRORS_MID_STREAM))


def test_a_refusal_is_read_apart_from_the_text() -> None:
    from infertap.apis import read_response
    from infertap.apis.chat_stream import read_chat_stream

    record = {"path": "/v1/chat/completions", "chunks": _chat_refusal_sse("No."), "response_headers": [["content-type", "text/event-stream"]]}  # fmt: skip
    general, fast = read_response(record), read_chat_stream(record)
    assert general.refusal == "No." and general.text == "" and fast is not None and fast.output.refusal == "No."
    assert fast.content == ["", "No.", ""]  # its events' text column: a refusal is generated text (a token event)


def test_ollama_calls_without_an_index_are_calls_of_their_own() -> None:
    """Two whole calls without ``index``, one per NDJSON line, were merged into one call "fg" with
    arguments '{"a":1}{"b":2}': the same calls sent in one line then compared as different."""
    from infertap.apis import read_response

    def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"function": {"name": name, "arguments": arguments}}

    def record(*lines: list[dict[str, Any]]) -> dict[str, Any]:
        body = [json.dumps({"model": "m", "message": {"role": "assistant", "content": "", "tool_calls": c}, "done": False}) for c in lines]  # fmt: skip
        body.append(
            json.dumps({"model": "m", "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop"})
        )
        return {"path": "/api/chat", "chunks": [line.encode() + b"\n" for line in body], "response_headers": [["content-type", "application/x-ndjson"]]}  # fmt: skip

    f, g = call("f", {"a": 1}), call("g", {"b": 2})
    apart, together = read_response(record([f], [g])), read_response(record([f, g]))
    assert [(c["name"], c["arguments"]) for c in apart.tool_calls] == [("f", '{"a":1}'), ("g", '{"b":2}')]
    assert apart.tool_calls == together.tool_calls
    indexed = read_response(record([{"function": {**f["function"], "index": 0}}], [{"function": {**f["function"], "index": 0}}]))
    assert len(indexed.tool_calls) == 1  # an index given is the slot: pieces of one call, as before


# -- what an answer holds besides its first choice's words --------------------------------------------


def _stopped_at(word: str | int | None, *, api: str) -> list[bytes]:
    """An answer "Hello" that ended at the stop sequence ``word`` (None: by itself), as each engine says it."""
    if api == "messages":
        events = _anthropic_sse("Hello", "stop_sequence" if word else "end_turn")
        delta = {
            "type": "message_delta",
            "delta": {"stop_reason": "stop_sequence" if word else "end_turn", "stop_sequence": word},
            "usage": {"output_tokens": 2},
        }
        return [*events[:4], _message_event(delta), events[-1]]
    if api == "messages whole":
        return [_message([{"type": "text", "text": "Hello"}], "stop_sequence" if word else "end_turn", word)]
    if api == "llama.cpp":
        last = {"content": "", "stop": True, "stop_type": "word" if word else "eos", "stopping_word": word or ""}
        return [b"data: " + json.dumps(e).encode() + b"\n\n" for e in ({"content": "Hello", "stop": False}, last)]
    key = "matched_stop" if api == "sglang" else "stop_reason"  # vLLM's
    end = _chunk([{"index": 0, "delta": {}, "finish_reason": "stop", **({key: word} if word is not None else {})}])
    end = sdk_shapes.engine_shaped(sdk_shapes.chat_chunk, end, key)
    return [_chat_sse("Hello")[0], b"data: " + json.dumps(end).encode() + b"\n\n", b"data: [DONE]\n\n"]


def _redacted(*data: str, stream: bool = True) -> list[bytes]:
    """An Anthropic answer with redacted thinking blocks (their ``data`` encrypted) before its text."""
    blocks = [{"type": "redacted_thinking", "data": d} for d in data]
    if not stream:
        return [_message([*blocks, {"type": "text", "text": "Hello"}])]
    starts = [_message_event({"type": "content_block_start", "index": i, "content_block": b}) for i, b in enumerate(blocks)]
    events = _anthropic_sse("Hello")
    return [events[0], *starts, *events[1:]]


def _choices(*texts: str | tuple[str, str], stream: bool = False) -> list[bytes]:
    """A chat answer with one choice per text (n > 1); a (text, finish reason) pair for another finish."""
    said = [(t, "stop") if isinstance(t, str) else t for t in texts]
    if not stream:
        choices = [
            {"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": f} for i, (t, f) in enumerate(said)
        ]
        return [json.dumps(sdk_shapes.chat_completion(_chat_body(choices))).encode()]
    events = [{"index": i, "delta": {"content": t}, "finish_reason": None} for i, (t, _) in enumerate(said)]
    events += [{"index": i, "delta": {}, "finish_reason": f} for i, (_, f) in enumerate(said)]
    return _sse(*(_chunk([e]) for e in events))


def _completions(*texts: str) -> list[bytes]:
    choices = [{"index": i, "text": t, "logprobs": None, "finish_reason": "stop"} for i, t in enumerate(texts)]
    body = {"id": "cmpl-1", "object": "text_completion", "created": 0, "model": "m", "choices": choices}
    return [json.dumps(sdk_shapes.completion(body)).encode()]


_MESSAGES_WHOLE = ("/v1/messages", {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "q"}]}, "application/json")  # fmt: skip
_COMPLETIONS = ("/v1/completions", {"model": "m", "prompt": "q", "n": 2}, "application/json")
_N2 = {"model": "m", "messages": [{"role": "user", "content": "q"}], "n": 2}
_CHAT_N2 = ("/v1/chat/completions", _N2, "application/json")
_CHAT_N2_SSE = ("/v1/chat/completions", {**_N2, "stream": True}, "text/event-stream")


def _responses_sse(*items: dict[str, Any]) -> list[bytes]:
    """A streamed Responses answer of ``items``: each added (in progress, nothing asked yet) then done."""
    events: list[dict[str, Any]] = [{"type": "response.created", "response": _response([], "in_progress")}]
    for i, item in enumerate(items):
        events += [
            {"type": "response.output_item.added", "output_index": i, "item": _started(item)},
            {"type": "response.output_item.done", "output_index": i, "item": item},
        ]
    events.append({"type": "response.completed", "response": _response(items)})
    events = [sdk_shapes.response_event({**e, "sequence_number": n}) for n, e in enumerate(events)]
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


def _started(item: dict[str, Any]) -> dict[str, Any]:
    """An item as ``response.output_item.added`` sends it: in progress, what it will hold still to come (a
    message's content, a search's action, a call's output), what it is already there (its name, its server)."""
    if item["type"] == "message":
        return {**item, "status": "in_progress", "content": []}
    later = {"output", "action", "result", "error", "arguments", "input"} & set(item)
    empty = {k: "" if k in ("arguments", "input") else None for k in later if k != "action"}
    started = {k: v for k, v in item.items() if k not in later} | empty | {"status": "in_progress"}
    return started if "action" not in later else {**started, "action": item["action"]}


_RESPONSES_SSE = ("/v1/responses", {"model": "m", "input": "q", "stream": True}, "text/event-stream")


BESIDES = {
    "messages stop sequences": (_MESSAGES, _stopped_at("###", api="messages"), _stopped_at("END", api="messages")),
    "messages whole stop sequences": (
        _MESSAGES_WHOLE,
        _stopped_at("###", api="messages whole"),
        _stopped_at("END", api="messages whole"),
    ),  # fmt: skip
    "llama.cpp stop words": (_LLAMACPP, _stopped_at("###", api="llama.cpp"), _stopped_at("END", api="llama.cpp")),
    "vllm stop strings": (_CHAT, _stopped_at("###", api="vllm"), _stopped_at("END", api="vllm")),
    "sglang stop strings": (_CHAT, _stopped_at("###", api="sglang"), _stopped_at("END", api="sglang")),
    "redacted thinking": (_MESSAGES, _redacted("x"), _redacted()),
    "redacted thinking whole": (_MESSAGES_WHOLE, _redacted("x", "y", stream=False), _redacted("x", stream=False)),
    "responses encrypted reasoning": (
        _RESPONSES,
        _responses(
            {"type": "reasoning", "id": "rs", "summary": [], "encrypted_content": "gAAA"}, _message_part("output_text", "Hi")
        ),  # fmt: skip
        _responses(_message_part("output_text", "Hi")),
    ),
    "second choice": (_CHAT_N2, _choices("Hello", "Hi"), _choices("Hello", "Hey")),
    "second choice streamed": (_CHAT_N2_SSE, _choices("Hello", "Hi", stream=True), _choices("Hello", "Hey", stream=True)),
    "second choice's finish": (_CHAT_N2, _choices("Hello", "Hi"), _choices("Hello", ("Hi", "length"))),
    "one choice of two": (_CHAT_N2, _choices("Hello", "Hi"), _choices("Hello")),
    "completions second choice": (_COMPLETIONS, _completions("a", "b"), _completions("a", "c")),
}
BESIDES_SAME = {
    "messages stop sequences": (_MESSAGES, _stopped_at("###", api="messages"), _stopped_at("###", api="messages")),
    "vllm stop strings": (_CHAT, _stopped_at("###", api="vllm"), _stopped_at("###", api="vllm")),
    "vllm and sglang": (_CHAT, _stopped_at("###", api="vllm"), _stopped_at("###", api="sglang")),
    # A stop token id (Gemma 3's end of turn, which vLLM names beside the tokenizer's own) is how the
    # answer ended, not a stop sequence; an engine that names none says nothing of where it stopped.
    "vllm stop token, llama.cpp nothing": (_CHAT, _stopped_at(106, api="vllm"), _stopped_at(None, api="vllm")),
    "vllm stop string, llama.cpp nothing": (_CHAT, _stopped_at("###", api="vllm"), _stopped_at(None, api="vllm")),
    "redacted thinking": (_MESSAGES, _redacted("x"), _redacted("other ciphertext")),  # encrypted: only counted
    "responses encrypted reasoning": (
        _RESPONSES_SSE,
        _responses_sse({"type": "reasoning", "id": "rs", "summary": [], "encrypted_content": "gAAA"}),
        _responses_sse({"type": "reasoning", "id": "rt", "summary": [], "encrypted_content": "gBBB"}),
    ),
    "second choice": (_CHAT_N2, _choices("Hello", "Hi"), _choices("Hello", "Hi", stream=False)),
    "second choice streamed": (
        _CHAT_N2_SSE,
        _choices("Hello", "Hi", stream=True),
        [b"".join(_choices("Hello", "Hi", stream=True))],
    ),  # fmt: skip
}


def test_what_an_answer_holds_besides_its_first_choices_words_is_compared(tmp_path: Path) -> None:
    """The stop sequence that ended an answer (Anthropic's stop_sequence, llama.cpp's stopping_word,
    vLLM's stop_reason), Anthropic's redacted thinking blocks and the choices other than the first
    (n > 1) were never read: pairs that differed only there were exact matches."""
    d, items = _all_differ(tmp_path, BESIDES)
    assert d["counts"]["stop_sequence_differs"] == 5 and d["counts"]["encrypted_reasoning_differs"] == 3
    assert d["counts"]["other_choices_differ"] == 5 and d["counts"]["with_other_choices"] == 5
    assert items["sglang stop strings"]["stop_sequence"] == ["###", "END"]
    assert items["redacted thinking whole"]["encrypted_reasoning"] == [2, 1]
    assert items["one choice of two"]["choices"] == [2, 1]
    for name in ("second choice", "second choice streamed", "completions second choice"):
        item = items[name]  # the other answer's words are part of the output: a position and a diff
        assert item["similarity"] < 1 and item["first_divergence"]["unit"] == "character", name
        assert "choice 1: " in item["diff"] and "[-" in item["diff"], (name, item["diff"])
    d = _all_match(tmp_path, BESIDES_SAME)
    assert d["counts"]["with_other_choices"] == 2 and "other_choices_differ" not in d["counts"]


_UNSAID = object()  # an engine that names no stop_reason (llama.cpp's OpenAI routes, OpenAI's own)


def _vllm(said: Any = None, *, stream: bool = False, second: Any = _UNSAID) -> list[bytes]:
    """A vLLM answer "Hello" whose choice says ``stop_reason`` ``said`` (None: null, as vLLM sends
    at an end of sequence or the length); ``_UNSAID``: no such key. ``second``: a second choice's."""
    choices = [{"index": 0, "finish_reason": "stop", **({} if said is _UNSAID else {"stop_reason": said})}]
    if second is not _UNSAID:
        choices.append({"index": 1, "finish_reason": "stop", "stop_reason": second})
    if stream:
        end = sdk_shapes.engine_shaped(sdk_shapes.chat_chunk, _chunk([{**c, "delta": {}} for c in choices]), "stop_reason")
        return [_chat_sse("Hello")[0], b"data: " + json.dumps(end).encode() + b"\n\n", b"data: [DONE]\n\n"]
    message = {"role": "assistant", "content": "Hello"}
    whole = _chat_body([{**c, "message": message} for c in choices])
    return [json.dumps(sdk_shapes.engine_shaped(sdk_shapes.chat_completion, whole, "stop_reason")).encode()]


_CHAT_WHOLE = ("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "q"}]}, "application/json")
#: name -> (API, A's chunks, B's chunks): each the same text and finish reason, ended otherwise as vLLM says.
STOP_REASONS = {
    "stop string vs end of sequence": (_CHAT_WHOLE, _vllm("###"), _vllm(None)),
    "stop string vs end of sequence, streamed": (_CHAT, _vllm("###", stream=True), _vllm(None, stream=True)),
    "stop token id vs end of sequence": (_CHAT_WHOLE, _vllm(106), _vllm(None)),
    "stop string 106 vs stop token id 106": (_CHAT_WHOLE, _vllm("106"), _vllm(106)),
    "second choice's stop string vs end of sequence": (_CHAT_N2, _vllm(None, second="###"), _vllm(None, second=None)),
}
STOP_REASONS_SAME = {
    "the same stop string": (_CHAT_WHOLE, _vllm("###"), _vllm("###")),
    "both at an end of sequence, streamed": (_CHAT, _vllm(None, stream=True), _vllm(None, stream=True)),
    "the same stop token id": (_CHAT_WHOLE, _vllm(106), _vllm(106)),
    # One engine names no stop_reason: no evidence that it stopped elsewhere (vLLM against llama.cpp).
    "a stop string vs an engine that names none": (_CHAT_WHOLE, _vllm("###"), _vllm(_UNSAID)),
    "an end of sequence vs an engine that names none, streamed": (
        _CHAT,
        _vllm(None, stream=True),
        _vllm(_UNSAID, stream=True),
    ),  # fmt: skip
}


def test_vllms_stop_reason_differs_where_both_answers_carry_it(tmp_path: Path) -> None:
    """A vLLM answer stopped at a stop string (or a stop token id) matched one that ended at its end
    of sequence: the same text, the same finish reason, and the stop sequence compared only where
    both named a string."""
    d, items = _all_differ(tmp_path, STOP_REASONS)
    assert d["counts"]["stop_reason_differs"] == 4 and d["counts"]["other_choices_differ"] == 1, d["counts"]
    assert items["stop string vs end of sequence"]["stop_reason"] == ["###", None]
    assert items["stop string vs end of sequence, streamed"]["stop_reason"] == ["###", None]
    assert items["stop string 106 vs stop token id 106"]["stop_reason"] == ["106", 106]
    assert "stop_sequence" not in items["stop token id vs end of sequence"]  # said once, as the stop reason
    d = _all_match(tmp_path, STOP_REASONS_SAME)
    assert "stop_reason_differs" not in d["counts"]


def _sglang(
    said: Any = None, *, stream: bool = False, second: Any = _UNSAID, finish: str = "stop", hidden: bool = False
) -> list[bytes]:
    """An SGLang answer "Hello" whose choice says ``matched_stop`` ``said`` (a stop string, a token id:
    its end of sequence too; None: null, at the length); ``_UNSAID``: no such key (another engine).
    Streamed as SGLang serialises it: every choice of every chunk carries the key, null until the
    last; ``hidden``: a hidden-states chunk after it, null again. ``second``: a second choice's."""
    key = {} if said is _UNSAID else {"matched_stop": said}
    choices = [{"index": 0, "logprobs": None, "finish_reason": finish, **key}]
    if second is not _UNSAID:
        choices.append({"index": 1, "logprobs": None, "finish_reason": "stop", "matched_stop": second})
    if not stream:
        message = {"role": "assistant", "content": "Hello", "reasoning_content": None, "tool_calls": None}
        whole = _chat_body([{**c, "message": message} for c in choices])
        return [json.dumps(sdk_shapes.engine_shaped(sdk_shapes.chat_completion, whole, "matched_stop")).encode()]
    unsaid = {} if said is _UNSAID else {"matched_stop": None}
    running = {"index": 0, "logprobs": None, "finish_reason": None, **unsaid}
    events = [
        {**running, "delta": {"role": "assistant", "content": ""}},
        {**running, "delta": {"content": "Hello"}},
        {**choices[0], "delta": {}},
        *([{**running, "delta": {"hidden_states": [0.5]}}] if hidden else []),
    ]
    chunks = [sdk_shapes.engine_shaped(sdk_shapes.chat_chunk, _chunk([e]), "matched_stop", "hidden_states") for e in events]
    return [b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks] + [b"data: [DONE]\n\n"]


def _sglang_text(said: Any) -> list[bytes]:
    """SGLang's /v1/completions answer "Hello" whose choice says ``matched_stop`` ``said``."""
    choice = {"index": 0, "text": "Hello", "logprobs": None, "finish_reason": "stop", "matched_stop": said}
    body = {"id": "cmpl-1", "object": "text_completion", "created": 0, "model": "m", "choices": [choice]}
    return [json.dumps(sdk_shapes.engine_shaped(sdk_shapes.completion, body, "matched_stop")).encode()]


_TEXT_WHOLE = ("/v1/completions", {"model": "m", "prompt": "q"}, "application/json")
#: name -> (API, A's chunks, B's chunks): each the same text and finish reason, ended otherwise as SGLang says.
MATCHED_STOPS = {
    "stop string vs end of sequence": (_CHAT_WHOLE, _sglang("###"), _sglang(2)),
    "stop string vs end of sequence, streamed": (_CHAT, _sglang("###", stream=True), _sglang(2, stream=True)),
    "a hidden-states chunk after the end, streamed": (
        _CHAT,
        _sglang("###", stream=True, hidden=True),
        _sglang(2, stream=True, hidden=True),
    ),  # fmt: skip
    "a stop token id vs end of sequence": (_CHAT_WHOLE, _sglang(106), _sglang(2)),
    "stop string 2 vs token id 2": (_CHAT_WHOLE, _sglang("2"), _sglang(2)),
    "completions stop string vs end of sequence": (_TEXT_WHOLE, _sglang_text("###"), _sglang_text(2)),
    "second choice's stop string vs end of sequence": (_CHAT_N2, _sglang(2, second="###"), _sglang(2, second=2)),
}
MATCHED_STOPS_SAME = {
    "the same stop string": (_CHAT_WHOLE, _sglang("###"), _sglang("###")),
    "both at an end of sequence, streamed": (_CHAT, _sglang(2, stream=True), _sglang(2, stream=True, hidden=True)),
    "both at the length": (_CHAT_WHOLE, _sglang(None, finish="length"), _sglang(None, finish="length")),
    "completions, the same end of sequence": (_TEXT_WHOLE, _sglang_text(2), _sglang_text(2)),
    # One engine names no matched_stop: no evidence that it stopped elsewhere (SGLang against llama.cpp).
    "an end of sequence vs an engine that names none": (_CHAT_WHOLE, _sglang(2), _sglang(_UNSAID)),
    # vLLM says null at its end of sequence where SGLang names the token: the keys mean other things,
    # so the two engines' endings are compared only as stop strings (stop_sequence).
    "vLLM's end of sequence vs SGLang's": (_CHAT_WHOLE, _vllm(None), _sglang(2)),
    "vLLM's end of sequence vs SGLang's, streamed": (_CHAT, _vllm(None, stream=True), _sglang(2, stream=True)),
    "vLLM's stop string vs SGLang's": (_CHAT_WHOLE, _vllm("###"), _sglang("###")),
}


def test_sglangs_matched_stop_differs_where_both_answers_carry_it(tmp_path: Path) -> None:
    """An SGLang answer stopped at a stop string matched one that ended at its end of sequence: the
    same text and finish reason, and a token id (SGLang names its end of sequence) no stop sequence."""
    d, items = _all_differ(tmp_path, MATCHED_STOPS)
    assert d["counts"]["matched_stop_differs"] == 6 and d["counts"]["other_choices_differ"] == 1, d["counts"]
    assert items["stop string vs end of sequence"]["matched_stop"] == ["###", 2]
    assert items["a hidden-states chunk after the end, streamed"]["matched_stop"] == ["###", 2]
    assert items["stop string 2 vs token id 2"]["matched_stop"] == ["2", 2]
    assert "stop_sequence" not in items["a stop token id vs end of sequence"]
    d = _all_match(tmp_path, MATCHED_STOPS_SAME)
    assert "matched_stop_differs" not in d["counts"] and "stop_reason_differs" not in d["counts"]


def _refused(category: str | None = None, *, stream: bool = False, token: str = "fct_1", **more: Any) -> list[bytes]:
    """An Anthropic refusal "I can't help" whose ``stop_details`` names ``category`` (no category
    given: ``stop_details`` null), with a fallback credit token (new each refusal) and ``more``.

    Read by the beta models: the fallback credit fields (``fallback_credit_token``, ``fallback_has_prefill_claim``,
    ``recommended_model``) are sent under the ``fallback-credit`` beta, and only ``BetaRefusalStopDetails`` has them."""
    details = None if category is None else {"type": "refusal", "category": category, "explanation": "Cyber harm.", "fallback_credit_token": token, **more}  # fmt: skip
    usage = {"input_tokens": 5, "output_tokens": 2}
    if not stream:
        body = {"type": "message", "id": "m", "role": "assistant", "model": "m", "content": [{"type": "text", "text": "I can't help"}], "usage": usage}  # fmt: skip
        return [json.dumps(sdk_shapes.message({**body, "stop_reason": "refusal", "stop_sequence": None, "stop_details": details}, beta=True)).encode()]  # fmt: skip
    events = _anthropic_sse("I can't help", "refusal")
    delta = {"type": "message_delta", "delta": {"stop_reason": "refusal", "stop_sequence": None, "stop_details": details}, "usage": {"output_tokens": 2}}  # fmt: skip
    return [*events[:4], f"event: message_delta\ndata: {json.dumps(sdk_shapes.message_event(delta, beta=True))}\n\n".encode(), events[-1]]  # fmt: skip


STOP_DETAILS = {
    "refused as cyber vs bio": (_MESSAGES_WHOLE, _refused("cyber"), _refused("bio")),
    "refused as cyber vs bio, streamed": (_MESSAGES, _refused("cyber", stream=True), _refused("bio", stream=True)),
    "refused with details vs none": (_MESSAGES_WHOLE, _refused("cyber"), _refused()),
    "refused with no details vs some, streamed": (_MESSAGES, _refused(None, stream=True), _refused("frontier_llm", stream=True)),
}
STOP_DETAILS_SAME = {
    # a new credit token each refusal, its explanation reworded, another retry target: the same reason
    "the same category": (
        _MESSAGES_WHOLE,
        _refused("cyber"),
        _refused(
            "cyber", token="fct_2", explanation="Reworded.", recommended_model="claude-x", fallback_has_prefill_claim=True
        ),  # fmt: skip
    ),
    "the same category, streamed": (_MESSAGES, _refused("bio", stream=True), _refused("bio", stream=True, token="fct_9")),
    "no details on either": (_MESSAGES_WHOLE, _refused(), _refused()),
}


def test_anthropics_stop_details_say_why_it_refused(tmp_path: Path) -> None:
    """Two refusals of the same words for other policy categories (``stop_details``) compared as
    one answer: the stop reason, refusal, was all that was read of why it stopped."""
    d, items = _all_differ(tmp_path, STOP_DETAILS)
    assert d["counts"]["stop_details_differ"] == len(STOP_DETAILS), d["counts"]
    assert items["refused as cyber vs bio, streamed"]["stop_details"] == [
        '{"category":"cyber","type":"refusal"}',
        '{"category":"bio","type":"refusal"}',
    ]
    assert items["refused with details vs none"]["stop_details"][1] is None
    d = _all_match(tmp_path, STOP_DETAILS_SAME)
    assert "stop_details_differ" not in d["counts"]


def test_the_cli_says_what_differs_besides_the_text(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from infertap.cli import cli

    pairs = {k: BESIDES[k] for k in ("vllm stop strings", "redacted thinking", "one choice of two")}
    a, b = pair_captures(tmp_path, pairs)
    out = CliRunner().invoke(cli, ["compare", str(a), str(b)], catch_exceptions=False).output
    assert "stop sequence '###' → 'END'" in out and "encrypted reasoning blocks 1 → 0" in out and "choices 2 → 1" in out
    assert "stop sequence differs" in out and "exact match" in out and "0.0%" in out


def _shell(*command: str, call: str = "c1") -> dict[str, Any]:
    return {"type": "local_shell_call", "id": f"ls_{call}", "call_id": call, "status": "completed", "action": {"type": "exec", "command": list(command), "env": {}}}  # fmt: skip


def _search(query: str, item: str = "ws1") -> dict[str, Any]:
    return {"type": "web_search_call", "id": item, "status": "completed", "action": {"type": "search", "query": query}}


BUILT_IN = {
    "local shell commands": (_RESPONSES, _responses(_shell("ls")), _responses(_shell("rm", "-rf", "/"))),
    "local shell streamed": (_RESPONSES_SSE, _responses_sse(_shell("ls")), _responses_sse(_shell("rm", "-rf", "/"))),
    "web search queries": (_RESPONSES, _responses(_search("weather")), _responses(_search("stocks"))),
    "a search or none": (_RESPONSES, _responses(_search("weather")), _responses()),
    "apply patch": (
        _RESPONSES,
        _responses(
            {
                "type": "apply_patch_call",
                "id": "ap",
                "call_id": "p",
                "status": "completed",
                "operation": {"type": "update_file", "path": "a.py", "diff": "+1"},
            }
        ),  # fmt: skip
        _responses(
            {
                "type": "apply_patch_call",
                "id": "ap",
                "call_id": "p",
                "status": "completed",
                "operation": {"type": "update_file", "path": "a.py", "diff": "+2"},
            }
        ),  # fmt: skip
    ),
    "mcp arguments": (
        _RESPONSES,
        _responses({"type": "mcp_call", "id": "m", "server_label": "s", "name": "f", "arguments": '{"a": 1}'}),
        _responses({"type": "mcp_call", "id": "m", "server_label": "s", "name": "f", "arguments": '{"a": 2}'}),
    ),
    "mcp servers": (
        _RESPONSES,
        _responses({"type": "mcp_call", "id": "m", "server_label": "prod", "name": "drop", "arguments": "{}"}),
        _responses({"type": "mcp_call", "id": "m", "server_label": "test", "name": "drop", "arguments": "{}"}),
    ),
    "mcp servers streamed": (
        _RESPONSES_SSE,
        _responses_sse({"type": "mcp_call", "id": "m", "server_label": "prod", "name": "drop", "arguments": "{}"}),
        _responses_sse({"type": "mcp_call", "id": "m", "server_label": "test", "name": "drop", "arguments": "{}"}),
    ),
}
BUILT_IN_SAME = {
    "local shell, other ids": (_RESPONSES, _responses(_shell("ls")), _responses(_shell("ls", call="c2"))),
    "local shell streamed, other ids": (_RESPONSES_SSE, _responses_sse(_shell("ls")), _responses_sse(_shell("ls", call="c9"))),
    "web search, other ids": (_RESPONSES, _responses(_search("weather")), _responses(_search("weather", "ws2"))),
    "web search, the same sources found": (
        _RESPONSES,
        _responses(
            {**_search("weather"), "action": {"type": "search", "query": "weather", "sources": [{"type": "url", "url": "a"}]}}
        ),  # fmt: skip
        _responses(
            {
                **_search("weather", "ws2"),
                "action": {"type": "search", "query": "weather", "sources": [{"type": "url", "url": "a"}]},
            }
        ),  # fmt: skip
    ),
    # The tools an MCP server listed are what the model read (the API's change of its input, compared
    # as configuration: config.input_changes, tests/analysis/test_responses_mcp_tools.py), not what it
    # said: the same listing asked of the same server is the same answer.
    "mcp tools listed, other lists": (
        _RESPONSES,
        _responses({"type": "mcp_list_tools", "id": "l1", "server_label": "s", "tools": [{"name": "a", "input_schema": {}}]}),
        _responses({"type": "mcp_list_tools", "id": "l2", "server_label": "s", "tools": [{"name": "b", "input_schema": {}}]}),
    ),
}


def test_the_responses_built_in_tools_calls_are_part_of_the_answer(tmp_path: Path) -> None:
    """A built-in tool's call (local shell, web search, apply patch, MCP) was not read: two answers
    running other commands compared as the same answer, and as an answer with no call at all."""
    d, items = _all_differ(tmp_path, BUILT_IN)
    assert d["counts"]["tool_calls_differ"] == len(BUILT_IN), d["counts"]
    for name, item in items.items():
        assert item["similarity"] < 1 and item["first_divergence"]["at"] is not None, name
    calls = items["a search or none"]["tool_calls"]
    assert (calls["a"], calls["b"]) == (["web_search_call"], [])
    _all_match(tmp_path, BUILT_IN_SAME)


def _ended(status: str, kind: str = "web_search_call", item: str = "ws1") -> dict[str, Any]:
    """A built-in call that asked the same as every other here and ended ``status``."""
    asked = {
        "code_interpreter_call": {"code": "print(1)", "container_id": "cntr_1", "outputs": None},
        "web_search_call": {"action": {"type": "search", "query": "weather"}},
    }.get(kind, {"queries": ["weather"]})
    return {"type": kind, "id": item, "status": status, **asked}


_SAID = _message_part("output_text", "Sunny")
#: name -> (API, A's chunks, B's chunks): the same call asked, ended otherwise.
BUILT_IN_ENDED = {
    "web search failed": (_RESPONSES, _responses(_ended("completed"), _SAID), _responses(_ended("failed"), _SAID)),
    "web search failed, streamed": (
        _RESPONSES_SSE,
        _responses_sse(_ended("completed"), _SAID),
        _responses_sse(_ended("failed"), _SAID),
    ),
    "file search incomplete": (
        _RESPONSES,
        _responses(_ended("completed", "file_search_call")),
        _responses(_ended("incomplete", "file_search_call")),
    ),
    "code interpreter failed, streamed": (
        _RESPONSES_SSE,
        _responses_sse(_ended("incomplete", "code_interpreter_call")),
        _responses_sse(_ended("failed", "code_interpreter_call")),
    ),
}
BUILT_IN_ENDED_SAME = {
    "both failed, other ids": (_RESPONSES, _responses(_ended("failed"), _SAID), _responses(_ended("failed", item="ws2"), _SAID)),
    "both failed, streamed": (
        _RESPONSES_SSE,
        _responses_sse(_ended("failed", "code_interpreter_call")),
        _responses_sse(_ended("failed", "code_interpreter_call", item="ci2")),
    ),
    "both completed": (
        _RESPONSES,
        _responses(_ended("completed", "file_search_call")),
        _responses(_ended("completed", "file_search_call", item="fs2")),
    ),  # fmt: skip
}


def test_a_built_in_call_that_failed_is_not_one_that_completed(tmp_path: Path) -> None:
    """A web search (file search, code interpreter) that failed or stopped incomplete, asked as the
    other side's completed one: compare called the two answers identical (its status was left out
    with the ids, as no part of what the call asks)."""
    d, items = _all_differ(tmp_path, BUILT_IN_ENDED)
    assert d["counts"]["tool_results_differ"] == len(BUILT_IN_ENDED) and d["counts"]["tool_calls_differ"] == 0, d["counts"]
    for name, item in items.items():
        assert item["similarity"] < 1 and item["first_divergence"]["at"] is not None, name
    assert '"status":"failed"' in items["web search failed, streamed"]["diff"]
    _all_match(tmp_path, BUILT_IN_ENDED_SAME)


def test_a_failed_built_in_call_reads_the_same_streamed_and_whole() -> None:
    from infertap.apis import read_response

    def results(chunks: list[bytes], ctype: str) -> list[str]:
        return read_response(
            {"path": "/v1/responses", "chunks": chunks, "response_headers": [["content-type", ctype]]}
        ).tool_results

    streamed = results(_responses_sse(_ended("failed")), "text/event-stream")
    assert streamed == results(_responses(_ended("failed", item="ws9")), "application/json")
    assert streamed == ['{"status":"failed","type":"web_search_call"}']
    assert results(_responses(_ended("completed")), "application/json") == []  # a completed call gave nothing back


def test_a_built_in_call_reads_the_same_streamed_and_whole() -> None:
    from infertap.apis import read_response
    from infertap.apis.shapes import canonical_arguments

    def calls(chunks: list[bytes], ctype: str) -> list[tuple[str, str]]:
        out = read_response({"path": "/v1/responses", "chunks": chunks, "response_headers": [["content-type", ctype]]})
        return [(c["name"], canonical_arguments(c["arguments"])) for c in out.tool_calls]

    asked = '{"action":{"command":["ls"],"env":{},"type":"exec"}}'  # what the call asks: no ids, no status
    assert calls(_responses_sse(_shell("ls")), "text/event-stream") == [("local_shell_call", asked)]
    assert calls(_responses(_shell("ls", call="c2")), "application/json") == [("local_shell_call", asked)]


def _server_search(query: str, *, stream: bool, server: str = "") -> list[bytes]:
    """An Anthropic answer that ran its web search tool for ``query`` (an MCP server's, if named)."""
    block = {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {"query": query}}
    if server:
        block = {**block, "type": "mcp_tool_use", "server_name": server}
    beta = bool(server)  # MCP tool blocks are the beta API's
    if not stream:
        return [_message([block, {"type": "text", "text": "Hello"}], beta=beta)]
    start = {"type": "content_block_start", "index": 0, "content_block": {**block, "input": {}}}
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": json.dumps({"query": query})}}  # fmt: skip
    events = _anthropic_sse("Hello")
    framed = [_message_event(e, beta=beta) for e in (start, delta)]
    return [events[0], *framed, *events[1:]]


def test_anthropic_server_tool_calls_are_calls_streamed_or_whole(tmp_path: Path) -> None:
    """A server tool's call (web search) was no call in a whole answer and a call without a name
    in a streamed one: two whole answers that searched for other things compared as the same."""
    pairs = {
        "whole": (_MESSAGES_WHOLE, _server_search("weather", stream=False), _server_search("stocks", stream=False)),
        "streamed": (_MESSAGES, _server_search("weather", stream=True), _server_search("stocks", stream=True)),
    }
    servers = {  # one query, one tool name, two MCP servers: two tools
        f"mcp {name}": (api, f("q", stream=stream, server="prod"), f("q", stream=stream, server="test"))
        for name, stream, api, f in (
            ("whole", False, _MESSAGES_WHOLE, _server_search),
            ("streamed", True, _MESSAGES, _server_search),
        )
    }
    d, items = _all_differ(tmp_path, pairs | servers)
    assert d["counts"]["tool_calls_differ"] == 4 and all(items[k]["tool_calls"]["a"] == ["web_search"] for k in pairs)
    calls = items["mcp streamed"]["tool_calls"]
    assert (calls["a"], calls["b"]) == (["prod/web_search"], ["test/web_search"]), calls
    _all_match(tmp_path, _twins(pairs))


# -- what other shapes of answer carry ---------------------------------------------------------------


def _chat_whole(message: dict[str, Any]) -> list[bytes]:
    choice = {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "stop"}
    return [json.dumps(sdk_shapes.chat_completion(_chat_body([choice]))).encode()]


def _custom_call(name: str, given: str) -> list[bytes]:
    """GPT-5's custom tool called from chat completions: ``{"type": "custom", "custom": {name, input}}``."""
    return _chat_whole({"content": None, "tool_calls": [{"id": "call_1", "type": "custom", "custom": {"name": name, "input": given}}]})  # fmt: skip


def _spoken(transcript: str, data: str, *, stream: bool = False) -> list[bytes]:
    """An audio answer (modalities: audio): no content, its words in the audio's transcript."""
    if not stream:
        return _chat_whole({"content": None, "audio": {"id": "audio_1", "data": data, "expires_at": 1, "transcript": transcript}})  # fmt: skip
    pieces = [{"role": "assistant", "content": None, "audio": {"id": "a", "transcript": transcript[:3]}}, {"audio": {"transcript": transcript[3:], "data": data}}]  # fmt: skip
    events = [_chunk([{"index": 0, "delta": d, "finish_reason": None}]) for d in pieces]
    events.append(_chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}]))
    return _sse(*events)


def _parts(thinking: str, text: str) -> list[bytes]:
    """Mistral's Magistral: content as parts, its thinking (itself text parts) then its text."""
    content = [{"type": "thinking", "thinking": [{"type": "text", "text": thinking}]}, {"type": "text", "text": text}]
    # Unchecked on purpose: OpenAI's SDK reads an answer's content as a string only; Mistral's is a list of parts.
    choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
    return [json.dumps(_chat_body([choice])).encode()]


def _code(code: str, container: str) -> list[bytes]:
    item = {"type": "code_interpreter_call", "id": "ci", "status": "completed", "code": code, "container_id": container, "outputs": [{"type": "logs", "logs": "1"}]}  # fmt: skip
    return _responses(item)


SHAPES = {
    "chat custom tool calls": (_CHAT_WHOLE, _custom_call("code_exec", "print('hello')"), _custom_call("sql", "DROP TABLE users")),
    "chat custom tool inputs": (_CHAT_WHOLE, _custom_call("sql", "SELECT 1"), _custom_call("sql", "DROP TABLE users")),
    "audio transcripts": (_CHAT_WHOLE, _spoken("Yes, they are great.", "UklG"), _spoken("No, they shed.", "UklG")),
    "audio transcripts streamed": (
        _CHAT,
        _spoken("Yes, they are great.", "AA", stream=True),
        _spoken("No, they shed.", "AA", stream=True),
    ),  # fmt: skip
    "content parts' text": (_CHAT_WHOLE, _parts("2 plus 2", "4"), _parts("2 plus 2", "5")),
    "content parts' thinking": (_CHAT_WHOLE, _parts("2 plus 2", "4"), _parts("guess", "4")),
    "code interpreter code": (_RESPONSES, _code("print(1)", "cntr_1"), _code("print(2)", "cntr_1")),
}
SHAPES_SAME = {
    "chat custom tool call": (_CHAT_WHOLE, _custom_call("sql", "SELECT 1"), _custom_call("sql", "SELECT 1")),
    "audio, other bytes": (_CHAT_WHOLE, _spoken("Yes.", "UklG"), _spoken("Yes.", "AAAA")),  # the words are what is compared
    "content parts": (_CHAT_WHOLE, _parts("2 plus 2", "4"), _parts("2 plus 2", "4")),
    "same code, another container": (_RESPONSES, _code("print(1)", "cntr_1"), _code("print(1)", "cntr_2")),
}


def test_other_shapes_of_answer_are_read(tmp_path: Path) -> None:
    """Chat's custom tool calls read as a call without a name or input, an audio answer's transcript,
    and content sent as parts (Mistral's) were not read: each pair here was an exact match. A code
    interpreter's container, new for every request, made the same code two different calls."""
    _, items = _all_differ(tmp_path, SHAPES)
    for name, item in items.items():
        assert item["similarity"] < 1 and item["first_divergence"]["at"] is not None, name
    assert items["chat custom tool calls"]["tool_calls"]["a"] == ["code_exec"]
    assert "said: " in items["audio transcripts streamed"]["diff"]
    _all_match(tmp_path, SHAPES_SAME)


def test_an_audio_answers_words_are_token_events_and_no_part_of_its_reply(tmp_path: Path) -> None:
    """Its events carry generated words (ttft counts from the first), and the assistant message a
    client sends back holds the audio's id, not its transcript: the next turn still continues it."""
    from infertap.analysis import Analysis
    from infertap.apis import read_response

    record = {"path": "/v1/chat/completions", "chunks": _spoken("Yes, they are.", "AA", stream=True), "response_headers": [["content-type", "text/event-stream"]]}  # fmt: skip
    out = read_response(record)
    assert out.audio == "Yes, they are." and out.text == "" and out.reply().text == ""
    assert [e.delta.generated for e in out.events] == [True, True, False]
    question = [{"role": "user", "content": "dogs?"}]
    back = [*question, {"role": "assistant", "content": None, "audio": {"id": "a"}}, {"role": "user", "content": "why?"}]
    write_capture(
        tmp_path / "cap",
        [
            {
                "id": "turn1",
                "body": {"model": "m", "messages": question, "stream": True},
                "chunks": record["chunks"],
                "content_type": "text/event-stream",
            },  # fmt: skip
            {"id": "turn2", "body": {"model": "m", "messages": back}, "chunks": _spoken("Fur.", "AA")},
        ],
    )
    with Analysis([tmp_path / "cap"], cache_dir=tmp_path / "cache") as a:
        rows = {r["exchange_id"]: r for r in a.query("SELECT exchange_id, parent_id, ttft_ns FROM metrics").records()}
    assert rows["turn2"]["parent_id"] == "turn1" and rows["turn1"]["ttft_ns"] is not None


def _url(url: str) -> dict[str, Any]:
    return {"type": "url_citation", "start_index": 0, "end_index": 5, "url": url, "title": "t"}


def _chat_cites(url: str, *, stream: bool = False) -> list[bytes]:
    """A search model's chat answer citing ``url`` (``annotations``, in the message or a delta)."""
    cited = {"type": "url_citation", "url_citation": {"start_index": 0, "end_index": 5, "url": url, "title": "t"}}
    if not stream:
        return _chat_whole({"content": "Rain.", "annotations": [cited]})
    deltas = [{"role": "assistant", "content": "Rain."}, {"annotations": [cited]}]
    events = [_chunk([{"index": 0, "delta": d, "finish_reason": None}]) for d in deltas]
    events.append(_chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}]))
    # The search models stream a delta's annotations, which the SDK's ChoiceDelta doesn't declare: kept, unchecked.
    events = [sdk_shapes.engine_shaped(sdk_shapes.chat_chunk, e, "annotations") for e in events]
    return [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events] + [b"data: [DONE]\n\n"]


def _anthropic_cites(document: int, *, stream: bool) -> list[bytes]:
    """Anthropic's text block citing a document (``citations``, or ``citations_delta`` streamed)."""
    cite = {"type": "char_location", "cited_text": "Revenue grew", "document_index": document, "start_char_index": 0, "end_char_index": 12}  # fmt: skip
    if not stream:
        return [_message([{"type": "text", "text": "Revenue grew.", "citations": [cite]}])]
    events = _anthropic_sse("Revenue grew.")
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "citations_delta", "citation": cite}}
    return [*events[:3], _message_event(delta), *events[3:]]


def _responses_cites(url: str, *, stream: bool) -> list[bytes]:
    part = {"type": "output_text", "text": "Rain.", "annotations": [_url(url)]}
    message = {"type": "message", "id": "msg", "role": "assistant", "status": "completed", "content": [part]}
    if not stream:
        return _responses(message)
    item = {"item_id": "msg", "output_index": 0, "content_index": 0}
    events = [
        {"type": "response.output_text.delta", **item, "delta": "Rain.", "logprobs": []},
        {"type": "response.output_text.annotation.added", **item, "annotation_index": 0, "annotation": _url(url)},
        {"type": "response.completed", "response": _response([message])},  # the output restated, as OpenAI does
    ]
    events = [sdk_shapes.response_event({**e, "sequence_number": n}) for n, e in enumerate(events)]
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


CITES = {
    "chat": (_CHAT_WHOLE, _chat_cites("https://a.example"), _chat_cites("https://b.example")),
    "chat streamed": (_CHAT, _chat_cites("https://a.example", stream=True), _chat_cites("https://b.example", stream=True)),
    "messages": (_MESSAGES_WHOLE, _anthropic_cites(0, stream=False), _anthropic_cites(1, stream=False)),
    "messages streamed": (_MESSAGES, _anthropic_cites(0, stream=True), _anthropic_cites(1, stream=True)),
    "responses": (
        _RESPONSES,
        _responses_cites("https://a.example", stream=False),
        _responses_cites("https://b.example", stream=False),
    ),  # fmt: skip
    "responses streamed": (
        _RESPONSES_SSE,
        _responses_cites("https://a.example", stream=True),
        _responses_cites("https://b.example", stream=True),
    ),  # fmt: skip
}


def test_the_same_words_citing_other_sources_are_another_answer(tmp_path: Path) -> None:
    """Citations (chat's and Responses' annotations, Anthropic's citations) were not read: the same
    words citing another page or document were an exact match."""
    d, items = _all_differ(tmp_path, CITES)
    assert d["counts"]["citations_differ"] == len(CITES), d["counts"]
    for name, item in items.items():
        assert item["similarity"] < 1 and "cited: " in item["diff"], (name, item["diff"])
    assert "citations_differ" not in _all_match(tmp_path, _twins(CITES))["counts"]


def _responses_whole_items(text: str, *, deltas: bool = False) -> list[bytes]:
    """A streamed Responses answer sent as whole items (as some servers and gateways do), or as deltas."""
    message = {"type": "message", "id": "msg", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": text, "annotations": []}]}  # fmt: skip
    events: list[dict[str, Any]] = [{"type": "response.created", "response": {"id": "r", "status": "in_progress", "output": []}}]
    if deltas:
        events += [{"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": text[:1]}]
        events += [{"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": text[1:]}]
    events += [
        {"type": "response.output_item.done", "output_index": 0, "item": message},
        {"type": "response.completed", "response": {"id": "r", "status": "completed", "output": [message]}},
    ]
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


def test_a_responses_stream_of_whole_items_is_read_from_its_final_event(tmp_path: Path) -> None:
    """Text that came in no delta, only in the items and the final response, was read as nothing:
    "4" and "5" were an exact match. A stream that sent deltas is read from them, once."""
    from infertap.apis import read_response

    def read(chunks: list[bytes]) -> str:
        return read_response({"path": "/v1/responses", "chunks": chunks, "response_headers": [["content-type", "text/event-stream"]]}).text  # fmt: skip

    assert read(_responses_whole_items("42")) == "42" and read(_responses_whole_items("42", deltas=True)) == "42"
    pairs = {"whole items": (_RESPONSES_SSE, _responses_whole_items("4"), _responses_whole_items("5"))}
    _all_differ(tmp_path, pairs)
    _all_match(tmp_path, _twins(pairs))


def _prompts(*answers: str, order: tuple[int, ...] = (), stream: bool = True) -> list[bytes]:
    """llama.cpp's /completion asked several prompts at once: each answer's events carry its ``index``
    (streamed, in ``order``), or the answers come as one JSON array."""
    ends = [{"index": i, "content": "", "stop": True, "stop_type": "eos", "stopping_word": ""} for i in range(len(answers))]
    if not stream:
        return [json.dumps([{**end, "content": text} for end, text in zip(ends, answers, strict=True)]).encode()]
    said = [{"index": i, "content": answers[i], "stop": False} for i in (order or range(len(answers)))]
    return [b"data: " + json.dumps(e).encode() + b"\n\n" for e in [*said, *ends]]


_LLAMACPP_WHOLE = ("/completion", {"prompt": ["a", "b"]}, "application/json")
_LLAMACPP_PROMPTS = ("/completion", {"prompt": ["a", "b"], "stream": True}, "text/event-stream")


def test_several_prompts_answered_at_once_are_each_an_answer(tmp_path: Path) -> None:
    """llama.cpp's answers to several prompts were joined into one text ("yesno" either way round),
    and their JSON array read as no answer at all."""
    pairs = {
        "answers swapped": (_LLAMACPP_PROMPTS, _prompts("yes", "no"), _prompts("no", "yes")),
        "second answer": (_LLAMACPP_PROMPTS, _prompts("yes", "no"), _prompts("yes", "maybe")),
        "whole": (_LLAMACPP_WHOLE, _prompts("yes", "no", stream=False), _prompts("yes", "maybe", stream=False)),
    }
    d, _ = _all_differ(tmp_path, pairs)
    assert d["counts"]["with_other_choices"] == 3 and "unreadable" not in d["counts"]
    same = {
        "interleaved otherwise": (_LLAMACPP_PROMPTS, _prompts("A", "B", order=(0, 1)), _prompts("A", "B", order=(1, 0))),
        "whole": (_LLAMACPP_WHOLE, _prompts("yes", "no", stream=False), _prompts("yes", "no", stream=False)),
    }
    _all_match(tmp_path, same)


def test_requests_no_api_reads_are_neither_matches_nor_divergences(tmp_path: Path) -> None:
    """A run compared with itself scored 40%: its model list, /tokenize and embeddings pairs were
    'unreadable', never a match, and headed the most divergent. Embeddings are now compared by
    their vectors, apart from the text pairs."""
    from click.testing import CliRunner

    from infertap.cli import cli

    others = [
        {"method": "GET", "path": "/v1/models", "body": b"", "chunks": [b'{"object": "list", "data": [{"id": "m"}]}']},
        {"path": "/tokenize", "body": {"content": "hi"}, "chunks": [b'{"tokens": [1, 2]}']},
        {"path": "/v1/embeddings", "body": {"model": "m", "input": "hi"}, "chunks": [b'{"data": [{"embedding": [0.1]}]}']},
    ]
    write_capture(tmp_path / "a", [{}, *others, {}])
    d = compare(tmp_path / "a", tmp_path / "a", top=5)["divergence"]
    assert (d["exact_match_rate"], d["pairs"], d["counts"]["not_compared"], d["most_divergent"]) == (1, 2, 2, [])
    assert d["embeddings"]["identical"] == d["embeddings"]["pairs"] == 1  # its vectors compared (test_compare_embeddings)
    assert d["readable"]["GET /v1/models"] == {
        "pairs": 1,
        "read_both": 0,
        "unreadable_a": 0,
        "unreadable_b": 0,
        "error_body_unread_a": 0,
        "error_body_unread_b": 0,
        "not_compared": 1,
        "not_in_file": 0,
        "too_large": 0,
        "response_not_kept": 0,
        "partly_unreadable": 0,
    }
    out = CliRunner().invoke(cli, ["compare", str(tmp_path / "a"), str(tmp_path / "a")], catch_exceptions=False).output
    assert "100.0%" in out and "POST /tokenize: 1 pairs not compared" in out and "unreadable in A" not in out
    # A chat answer no adapter can read is still never a match.
    write_capture(tmp_path / "b", [{"chunks": [b"<html>502</html>"]}])
    assert compare(tmp_path / "b", tmp_path / "b")["divergence"]["counts"]["unreadable"] == 1


def _responses_restated(said: str, final: str, *, call: bool = False) -> list[bytes]:
    """A streamed Responses answer whose deltas say ``said`` and whose ``response.completed`` says
    ``final`` (a message's text, or a function call's arguments): the openai SDK's
    ``stream.get_final_response()`` is the final event's response, what the client ends with."""
    if call:
        item = {"type": "function_call", "id": "fc", "call_id": "c1", "name": "f", "arguments": final, "status": "completed"}
        deltas = [{"type": "response.function_call_arguments.delta", "output_index": 0, "item_id": "fc", "delta": said}]
        added = {**item, "arguments": ""}
    else:
        item = {"type": "message", "id": "msg", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": final, "annotations": []}]}  # fmt: skip
        deltas = [{"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": said}]
        added = {**item, "content": []}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {"id": "r", "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": added},
        *deltas,
        {"type": "response.completed", "response": {"id": "r", "status": "completed", "output": [item]}},
    ]
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


def test_a_responses_stream_is_the_answer_its_final_event_gives(tmp_path: Path) -> None:
    """Deltas that disagree with ``response.completed``: the openai SDK's final response is the
    final event's, yet the deltas were read: "4" then a final "5" was an exact match for "4"."""
    pairs = {
        "text": (_RESPONSES_SSE, _responses_restated("4", "4"), _responses_restated("4", "5")),
        "call": (
            _RESPONSES_SSE,
            _responses_restated('{"x": 1}', '{"x": 1}', call=True),
            _responses_restated('{"x": 1}', '{"x": 2}', call=True),
        ),  # fmt: skip
    }
    _all_differ(tmp_path, pairs)
    same = {
        "text": (_RESPONSES_SSE, _responses_restated("5", "5"), _responses_restated("4", "5")),
        "call": (
            _RESPONSES_SSE,
            _responses_restated('{"x": 2}', '{"x": 2}', call=True),
            _responses_restated('{"x": 1}', '{"x": 2}', call=True),
        ),  # fmt: skip
    }
    _all_match(tmp_path, same)
