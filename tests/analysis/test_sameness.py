"""Two different answers are never an exact match: each pair here was one (an audit's findings),
and the pair beside it, the same answer twice, still is."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from infertap.analysis.compare import compare
from infertap.analysis.paired_divergence import exact_share
from infertap.apis import read_response
from tests import sdk_shapes
from tests.helpers import pair_captures, write_capture

CHAT = ("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "q"}]}, "application/json")
CHAT_SSE = ("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": True}, "text/event-stream")  # fmt: skip
OLLAMA = ("/api/chat", {"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": False}, "application/json")
GENERATE = ("/api/generate", {"model": "m", "prompt": "q", "stream": False}, "application/json")
MESSAGES = ("/v1/messages", {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "q"}]}, "application/json")
MESSAGES_SSE = ("/v1/messages", {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "q"}], "stream": True}, "text/event-stream")  # fmt: skip
RESPONSES = ("/v1/responses", {"model": "m", "input": "q"}, "application/json")
RESPONSES_SSE = ("/v1/responses", {"model": "m", "input": "q", "stream": True}, "text/event-stream")


def _all_differ(tmp_path: Path, pairs: dict[str, Any]) -> dict[str, Any]:
    """Every pair compared: none an exact match. The divergence, with each pair's item by name."""
    result = compare(*pair_captures(tmp_path / "differ", pairs), top=len(pairs))
    d = result["divergence"]
    assert d["counts"].get("exact", 0) == 0, d["counts"]
    order = list(pairs)
    d["items"] = {order[int(item["a_id"].split("-")[1])]: item for item in d["most_divergent"]}
    assert set(d["items"]) == set(pairs)
    return d


def _all_fail_apart(tmp_path: Path, pairs: dict[str, Any]) -> dict[str, Any]:
    """Every pair failed on both sides, each by another failure: no exact match, and no output compared."""
    d = compare(*pair_captures(tmp_path / "failed", pairs), top=len(pairs))["divergence"]
    n = len(pairs)
    assert d["failed"] == {
        "pairs": n,
        "a_only": 0,
        "b_only": 0,
        "both": n,
        "both_same": 0,
        "both_differ": n,
        "not_generation": 0,
    }, d["failed"]
    assert d["counts"].get("exact", 0) == 0 and d["outputs_compared"] == 0 and d["most_divergent"] == []
    return d


def _all_match(tmp_path: Path, pairs: dict[str, Any]) -> dict[str, Any]:
    d = compare(*pair_captures(tmp_path / "same", pairs), top=len(pairs))["divergence"]
    assert d["exact_match_rate"] == 1 and d["most_divergent"] == [], d["counts"]
    return d


def _twins(pairs: dict[str, Any]) -> dict[str, Any]:
    """Each pair with A's answer on both sides."""
    return {k: (api, x, x) for k, (api, x, _) in pairs.items()}


def _body(obj: Any) -> list[bytes]:
    return [obj if isinstance(obj, bytes) else json.dumps(obj).encode()]


def _sse(*events: Any) -> list[bytes]:
    return [b"data: " + (e if isinstance(e, bytes) else (e if e == "[DONE]" else json.dumps(e)).encode()) + b"\n\n" for e in events]  # fmt: skip


def _completion(message: dict[str, Any], finish: str = "stop", index: Any = 0) -> dict[str, Any]:
    """A whole chat answer of one choice, unchecked: what ``_message`` checks, and the odd ones build on."""
    choice = {"index": index, "message": {"role": "assistant", **message}, "finish_reason": finish}
    return {"id": "c1", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]}


def _message(message: dict[str, Any], finish: str = "stop") -> list[bytes]:
    return _body(sdk_shapes.chat_completion(_completion(message, finish)))


def _message_at(message: dict[str, Any], index: Any) -> list[bytes]:
    """A chat answer whose choice's index is no integer (null): no SDK reads it, so unchecked, on purpose."""
    return _body(_completion(message, index=index))


def _call(arguments: str) -> list[bytes]:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}
    return _message({"content": None, "tool_calls": [call]}, "tool_calls")


def _odd_chunk(delta: dict[str, Any], finish: str | None = None, index: Any = 0) -> dict[str, Any]:
    """A chat chunk unchecked, for what no SDK reads on purpose: an index no integer, a gateway's ``error`` finish."""
    choice = {"index": index, "delta": delta, "finish_reason": finish}
    return {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [choice]}


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return sdk_shapes.chat_chunk(_odd_chunk(delta, finish))


def _ollama_call(x: str) -> list[bytes]:
    call = '{"function":{"name":"f","arguments":{"x":' + x + "}}}"
    return [('{"model":"m","message":{"role":"assistant","content":"","tool_calls":[' + call + ']},"done":true,"done_reason":"stop"}').encode()]  # fmt: skip


def _anthropic_call(x: str) -> list[bytes]:
    """A Messages answer calling ``f`` with ``x`` written as given (digits no double holds), its shape checked."""
    block = '{"type":"tool_use","id":"t1","name":"f","input":{"x":' + x + "}}"
    raw = '{"type":"message","id":"m1","role":"assistant","model":"m","content":[' + block + '],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}'  # fmt: skip
    sdk_shapes.message(json.loads(raw))
    return [raw.encode()]


ARGUMENTS = {
    "numbers beyond a double": (CHAT, _call('{"x": 1e400}'), _call('{"x": 2e400}')),
    "digits beyond a double": (CHAT, _call('{"x": 9007199254740993.0}'), _call('{"x": 9007199254740992.0}')),
    "below a double's least": (CHAT, _call('{"x": 1e-400}'), _call('{"x": 0.0}')),
    "a key twice": (CHAT, _call('{"path": "/etc/passwd", "path": "/tmp/x"}'), _call('{"path": "/tmp/x"}')),
    "a string holding JSON": (CHAT, _call(json.dumps('{"a": 1}')), _call('{"a": 1}')),
    "a string of a number": (CHAT, _call('"1"'), _call("1")),
    "streamed, beyond a double": (
        CHAT_SSE,
        _sse(
            _chunk(
                {
                    "tool_calls": [
                        {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1e400}'}}
                    ]
                }
            ),
            _chunk({}, "tool_calls"),
            "[DONE]",
        ),  # fmt: skip
        _sse(
            _chunk(
                {
                    "tool_calls": [
                        {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1e999}'}}
                    ]
                }
            ),
            _chunk({}, "tool_calls"),
            "[DONE]",
        ),  # fmt: skip
    ),
    "ollama's object, beyond a double": (OLLAMA, _ollama_call("1e400"), _ollama_call("2e400")),
    "anthropic's input, beyond a double": (MESSAGES, _anthropic_call("1e400"), _anthropic_call("2e400")),
    "ollama's object, digits past a double": (OLLAMA, _ollama_call("0.1"), _ollama_call("0.10000000000000001")),
    "anthropic's input, digits past a double": (MESSAGES, _anthropic_call("0.1"), _anthropic_call("0.10000000000000001")),
}
ARGUMENTS_SAME = {
    "key order and spaces": (CHAT, _call('{"a": 1, "b": [2.5]}'), _call('{ "b":[2.50],\n"a":1 }')),
    "the same text, a key twice": (CHAT, _call('{"p": 1, "p": 2}'), _call('{"p": 1, "p": 2}')),
    "the same number beyond a double": (CHAT, _call('{"x": 1e400}'), _call('{"x": 1E+400}')),
    "ollama's object, the same": (OLLAMA, _ollama_call("1e400"), _ollama_call("1e400")),
    "anthropic's input, the same": (MESSAGES, _anthropic_call("1e400"), _anthropic_call("10e399")),
    "ollama's object, the same digits past a double": (
        OLLAMA,
        _ollama_call("0.10000000000000001"),
        _ollama_call("1.0000000000000001e-1"),
    ),
    "anthropic's input, a plain number": (MESSAGES, _anthropic_call("0.25"), _anthropic_call("2.5e-1")),
}


def test_tool_call_arguments_read_as_one_value_are_not_one_call(tmp_path: Path) -> None:
    """Canonical JSON made these one value: infinities, doubles, a key's last value, a string unwrapped."""
    d = _all_differ(tmp_path, ARGUMENTS)
    assert d["counts"]["tool_calls_differ"] == len(ARGUMENTS)
    assert all(item["tool_calls"]["arguments_equal"] is False for item in d["items"].values())
    _all_match(tmp_path, ARGUMENTS_SAME)


def _custom(text: str) -> list[bytes]:
    return _message({"content": None, "tool_calls": [{"id": "c1", "type": "custom", "custom": {"name": "g", "input": text}}]})


def _custom_sse(text: str) -> list[bytes]:
    """A custom tool's call streamed: the openai SDK's delta knows only function calls (openai-python#2530, its
    spec gap openai-openapi#576) though custom ones arrive so; checked without ``type`` and ``custom``."""
    call = {"index": 0, "id": "c1", "type": "custom", "custom": {"name": "g", "input": text}}
    sdk_shapes.chat_chunk(_odd_chunk({"tool_calls": [{"index": 0, "id": "c1"}]}))
    return _sse(_odd_chunk({"tool_calls": [call]}), _chunk({}, "tool_calls"), "[DONE]")


def _response(status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    """A whole Responses answer (as a body or an event restates it), checked."""
    return sdk_shapes.response({"object": "response", "id": "r1", "model": "m", "status": status, "output": output, **sdk_shapes.RESPONSE_REST})  # fmt: skip


def _response_sse(*events: dict[str, Any]) -> list[bytes]:
    """A Responses stream of ``events``, each numbered in order and checked."""
    return _sse(*(sdk_shapes.response_event({**e, "sequence_number": n}) for n, e in enumerate(events)))


def _responses_custom(text: str) -> list[bytes]:
    return _body(_response("completed", [{"type": "custom_tool_call", "id": "ct1", "call_id": "c1", "name": "g", "input": text}]))  # fmt: skip


def _responses_custom_sse(text: str) -> list[bytes]:
    item = {"type": "custom_tool_call", "id": "ct1", "call_id": "c1", "name": "g"}
    return _response_sse(
        {"type": "response.created", "response": _response("in_progress", [])},
        {"type": "response.output_item.added", "output_index": 0, "item": {**item, "input": ""}},
        {"type": "response.custom_tool_call_input.delta", "item_id": "ct1", "output_index": 0, "delta": text},
        {"type": "response.output_item.done", "output_index": 0, "item": {**item, "input": text}},
        {"type": "response.completed", "response": _response("completed", [{**item, "input": text}])},
    )


CUSTOM = {
    "JSON spaced otherwise": (CHAT, _custom('{"a":1}'), _custom('{\n  "a" : 1\n}\n')),
    "empty and braces": (CHAT, _custom(""), _custom("{}")),
    "quoted and bare": (CHAT, _custom('"hello"'), _custom("hello")),
    "streamed numbers": (CHAT_SSE, _custom_sse("1.0"), _custom_sse("1.00")),
    "responses, spaced otherwise": (RESPONSES, _responses_custom("[1, 2]"), _responses_custom("[1,2]\n")),
    "responses streamed, spaces and none": (RESPONSES_SSE, _responses_custom_sse("  "), _responses_custom_sse("")),
}


def test_a_custom_tools_input_is_compared_as_the_text_it_is(tmp_path: Path) -> None:
    """A custom tool reads free-form text: its input was canonicalized as JSON, or as ``{}`` when empty."""
    d = _all_differ(tmp_path, CUSTOM)
    assert d["counts"]["tool_calls_differ"] == len(CUSTOM)
    _all_match(tmp_path, _twins(CUSTOM))


def _anthropic(content: list[dict[str, Any]], beta: bool = False) -> list[bytes]:
    """A whole Messages answer of ``content``, checked (``beta``: by the beta model, for beta blocks)."""
    usage = {"input_tokens": 1, "output_tokens": 1}
    return _body(sdk_shapes.message({"type": "message", "id": "m1", "role": "assistant", "model": "m", "content": content, "stop_reason": "end_turn", "stop_sequence": None, "usage": usage}, beta=beta))  # fmt: skip


def _searched(url: str, secret: str = "x", use: str = "s1") -> list[bytes]:
    found = {"type": "web_search_result", "url": url, "title": "t", "encrypted_content": secret, "page_age": None}
    return _anthropic(
        [
            {"type": "server_tool_use", "id": use, "name": "web_search", "input": {"query": "q"}},
            {"type": "web_search_tool_result", "tool_use_id": use, "content": [found]},
            {"type": "text", "text": "Done."},
        ]
    )


def _ran(stdout: str) -> list[bytes]:
    return _anthropic(
        [
            {"type": "server_tool_use", "id": "s1", "name": "code_execution", "input": {"code": "print(6*7)"}},
            {
                "type": "code_execution_tool_result",
                "tool_use_id": "s1",
                "content": {"type": "code_execution_result", "stdout": stdout, "stderr": "", "return_code": 0, "content": []},
            },  # fmt: skip
        ]
    )


def _searched_sse(url: str) -> list[bytes]:
    found = {"type": "web_search_result", "url": url, "title": "t", "encrypted_content": "x"}
    return _message_sse(
        {
            "type": "message_start",
            "message": {
                "id": "m1",
                "type": "message",
                "role": "assistant",
                "model": "m",
                "content": [],
                "usage": {"input_tokens": 1, "output_tokens": 0},
            },
        },  # fmt: skip
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "web_search_tool_result", "tool_use_id": "s1", "content": [found]},
        },  # fmt: skip
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 5}},
        {"type": "message_stop"},
    )


def _message_sse(*events: dict[str, Any], beta: bool = False) -> list[bytes]:
    """A Messages stream of ``events``, each checked and named as Anthropic names it."""
    return [b"event: " + e["type"].encode() + b"\ndata: " + json.dumps(sdk_shapes.message_event(e, beta=beta)).encode() + b"\n\n" for e in events]  # fmt: skip


def _responses(*items: dict[str, Any]) -> list[bytes]:
    return _body(_response("completed", list(items)))


def _image(result: str, item: str = "ig1") -> list[bytes]:
    return _responses({"type": "image_generation_call", "id": item, "status": "completed", "result": result, "revised_prompt": "a cat"})  # fmt: skip


def _interpreted(logs: str, container: str = "c") -> list[bytes]:
    return _responses({"type": "code_interpreter_call", "id": "ci1", "status": "completed", "code": "print(6*7)", "container_id": container, "outputs": [{"type": "logs", "logs": logs}]})  # fmt: skip


def _search_call(url: str) -> list[bytes]:
    return _responses({"type": "web_search_call", "id": "ws1", "status": "completed", "action": {"type": "search", "query": "q", "sources": [{"type": "url", "url": url}]}})  # fmt: skip


def _chat_image(url: str) -> list[bytes]:
    """OpenRouter's image output: ``images`` beside the message's content, where the SDK has no field (the rest checked)."""
    body = sdk_shapes.chat_completion(_completion({"content": ""}))
    body["choices"][0]["message"]["images"] = [{"type": "image_url", "image_url": {"url": url}}]
    return _body(body)


def _ollama_image(image: str) -> list[bytes]:
    return _body({"model": "m", "message": {"role": "assistant", "content": "", "images": [image]}, "done": True, "done_reason": "stop"})  # fmt: skip


def _generated(image: str) -> list[bytes]:
    return _body({"model": "m", "response": "", "done": True, "done_reason": "stop", "image": image})


LONG = "iVBORw0KGgo" + "A" * 5000
RESULTS = {
    "anthropic, other pages found": (MESSAGES, _searched("https://a.example"), _searched("https://b.example")),
    "anthropic, other output of the code": (MESSAGES, _ran("42\n"), _ran("41\n")),
    "anthropic streamed, other pages found": (
        MESSAGES_SSE,
        _searched_sse("https://a.example"),
        _searched_sse("https://b.example"),
    ),
    "responses, another image": (RESPONSES, _image("iVBORw0KGgoAAAA"), _image("iVBORw0KGgoBBBB")),
    "responses, another long image": (RESPONSES, _image(LONG), _image(LONG + "B")),
    "responses, other output of the code": (RESPONSES, _interpreted("42"), _interpreted("41")),
    "responses, other sources found": (RESPONSES, _search_call("a"), _search_call("b")),
    "chat, another image": (CHAT, _chat_image("data:image/png;base64,AAAA"), _chat_image("data:image/png;base64,BBBB")),
    "ollama chat, another image": (OLLAMA, _ollama_image("AAAA"), _ollama_image("BBBB")),
    "ollama generate, another image": (GENERATE, _generated("AAAA"), _generated("BBBB")),
}
RESULTS_SAME = {
    "anthropic, the same pages, other ids and blobs": (
        MESSAGES,
        _searched("https://a.example"),
        _searched("https://a.example", "y", "s2"),
    ),  # fmt: skip
    "responses, the same image, another id": (RESPONSES, _image(LONG), _image(LONG, "ig2")),
    "responses, the same output, another container": (RESPONSES, _interpreted("42"), _interpreted("42", "c2")),
}


def test_what_a_server_tool_gave_back_is_part_of_the_answer(tmp_path: Path) -> None:
    """Search results, code output and generated images were never compared: the client got another answer."""
    d = _all_differ(tmp_path, RESULTS)
    assert d["counts"]["tool_results_differ"] == len(RESULTS)
    assert d["counts"].get("tool_calls_differ", 0) == 0  # what was asked is the same: counted apart
    assert '"stdout":"[-42-]{+41+}' in d["items"]["anthropic, other output of the code"]["diff"]  # shown in the diff
    _all_match(tmp_path, RESULTS_SAME)


GOOD = [_chunk({"content": "The answer is "}), _chunk({"content": "4"}), _chunk({}, "stop"), "[DONE]"]
TRUNCATED = json.dumps(_chunk({"content": "NOT "})).encode()[:-1]  # a chunk cut short of its last brace: no JSON
UNREAD = {"an event not JSON": (CHAT_SSE, _sse(GOOD[0], TRUNCATED, *GOOD[1:]), _sse(*GOOD))}


def test_an_event_that_is_not_json_is_no_exact_match(tmp_path: Path) -> None:
    """An event whose payload did not parse was dropped, and the pair counted exact."""
    d = _all_differ(tmp_path, UNREAD)
    assert d["counts"]["partly_unreadable"] == 1 and d["readable"]["POST /v1/chat/completions"]["partly_unreadable"] == 1
    same = _all_match(tmp_path, _twins(UNREAD))  # the same bytes unread on both sides
    assert same["counts"]["partly_unreadable"] == 1


def _raw_chat(content: bytes) -> list[bytes]:
    """A chat answer whose content is ``content``'s bytes as sent (not UTF-8): checked with a word in their place."""
    return [_message({"content": "HERE"})[0].replace(b"HERE", content)]


def _raw_chat_sse(content: bytes) -> list[bytes]:
    first = _sse(_chunk({"content": "HERE"}))[0].replace(b"HERE", content)
    return [first, *_sse(_chunk({}, "stop"), "[DONE]")]


NOT_UTF8 = {
    "a body": (CHAT, _raw_chat(b"caf\xc3 ok"), _raw_chat(b"caf\xff ok")),
    "a stream": (CHAT_SSE, _raw_chat_sse(b"\xe2\x82"), _raw_chat_sse(b"\xf0\x9f\x98")),
}


def test_bytes_that_are_not_utf8_are_told_apart(tmp_path: Path) -> None:
    """Each read as U+FFFD: two different bytes made the same text."""
    d = _all_differ(tmp_path, NOT_UTF8)
    assert d["counts"]["not_utf8"] == 2 and d["items"]["a body"]["not_utf8"] == [["c3"], ["ff"]]
    _all_match(tmp_path, _twins(NOT_UTF8))


def test_a_choice_whose_index_is_no_integer_is_the_first() -> None:
    """A null or string index was left out of the answer (while choice 0 was said to be the only one)."""
    assert read_response({"path": CHAT[0], "chunks": _message_at({"content": "Yes"}, None)}).text == "Yes"
    sse = _sse(_odd_chunk({"content": "Yes"}, index="0"), _odd_chunk({}, "stop", index="0"), "[DONE]")
    out = read_response({"path": CHAT[0], "chunks": sse, "response_headers": [["content-type", "text/event-stream"]]})
    assert (out.text, out.finish_reason_raw) == ("Yes", "stop")


INDEXES = {
    "a null index": (CHAT, _message_at({"content": "Yes"}, None), _message_at({"content": "No"}, None)),
    "a string index, streamed": (
        CHAT_SSE,
        _sse(_odd_chunk({"content": "Yes"}, index="0"), _odd_chunk({}, "stop", index="0"), "[DONE]"),
        _sse(_odd_chunk({"content": "No"}, index="0"), _odd_chunk({}, "stop", index="0"), "[DONE]"),
    ),
}


def test_answers_in_a_choice_of_no_integer_index_are_compared(tmp_path: Path) -> None:
    _all_differ(tmp_path, INDEXES)
    _all_match(tmp_path, _twins(INDEXES))


def _restating(call: bool) -> list[bytes]:
    text = {"type": "output_text", "text": "ok", "annotations": []}
    out: list[dict[str, Any]] = [{"type": "message", "id": "msg1", "role": "assistant", "status": "completed", "content": [text]}]  # fmt: skip
    if call:
        out.append({"type": "function_call", "id": "fc1", "call_id": "c1", "name": "rm_rf", "arguments": '{"path": "/"}'})
    return _response_sse(
        {"type": "response.created", "response": _response("in_progress", [])},
        {
            "type": "response.output_text.delta",
            "item_id": "msg1",
            "output_index": 0,
            "content_index": 0,
            "delta": "ok",
            "logprobs": [],
        },  # fmt: skip
        {"type": "response.completed", "response": _response("completed", out)},
    )


RESTATED = {"a call only the final event holds": (RESPONSES_SSE, _restating(True), _restating(False))}


def test_a_call_only_the_final_event_restates_is_read(tmp_path: Path) -> None:
    d = _all_differ(tmp_path, RESTATED)
    assert d["items"]["a call only the final event holds"]["tool_calls"]["a"] == ["rm_rf"]
    _all_match(tmp_path, _twins(RESTATED))


AFTER_DONE = {
    "text after the first end marker": (
        CHAT_SSE,
        _sse(
            _chunk({"content": "Hi"}), _chunk({}, "stop"), "[DONE]", _chunk({"content": " there"}), _chunk({}, "stop"), "[DONE]"
        ),
        _sse(_chunk({"content": "Hi"}), _chunk({"content": " there"}), _chunk({}, "stop"), "[DONE]"),
    ),
    "data after the end marker": (
        CHAT_SSE,
        _sse(_chunk({"content": "Hi"}), _chunk({}, "stop"), "[DONE]", _chunk({"content": " there"}), "[DONE]"),
        _sse(_chunk({"content": "Hi"}), _chunk({}, "stop"), "[DONE]"),
    ),
}


def test_a_stream_is_read_up_to_its_first_end_marker(tmp_path: Path) -> None:
    """A client stops at the first [DONE]: what followed was read as part of the answer."""
    a = AFTER_DONE["text after the first end marker"][1]
    assert read_response({"path": CHAT[0], "chunks": a, "response_headers": [["content-type", "text/event-stream"]]}).text == "Hi"
    d = _all_differ(tmp_path, AFTER_DONE)
    assert d["counts"]["data_after_end_marker"] == 2
    assert d["items"]["text after the first end marker"]["text"] == ["Hi", "Hi there"]
    _all_match(tmp_path, _twins(AFTER_DONE))


def test_an_exact_match_rate_below_one_is_never_shown_as_all() -> None:
    """1999 pairs of 2000 printed as 100.0%."""
    assert exact_share({"pairs": 2000, "counts": {"exact": 1999}, "exact_match_rate": 0.9995}) == "99.9% (1999 of 2000)"
    assert exact_share({"pairs": 3, "counts": {"exact": 3}, "exact_match_rate": 1.0}) == "100.0% (3 of 3)"
    assert exact_share({"pairs": 0, "counts": {}, "exact_match_rate": None}) == "-"


ENDED = {
    "two finish reasons": (
        CHAT_SSE,
        _sse(_chunk({"content": "Hi"}), _chunk({}, "length"), _chunk({}, "stop"), "[DONE]"),
        _sse(_chunk({"content": "Hi"}), _chunk({}, "stop"), "[DONE]"),
    ),
}
REASONED = {
    "both reasoning fields, differing": (
        CHAT,
        _message({"content": "x", "reasoning_content": "A", "reasoning": "A"}),
        _message({"content": "x", "reasoning_content": "A", "reasoning": "B"}),
    ),
}


def test_every_finish_reason_and_both_reasonings_are_compared(tmp_path: Path) -> None:
    """Only the last finish reason, and only the first of two reasoning fields, were read."""
    d = _all_differ(tmp_path, {**ENDED, **REASONED})
    assert d["items"]["two finish reasons"]["finish_reasons"] == [["length", "stop"], ["stop"]]
    _all_match(tmp_path, _twins({**ENDED, **REASONED}))


def _error(message: str) -> list[bytes]:
    return _body({"error": {"message": message, "type": "invalid_request_error"}})


ERRORS = {"words after 'request id'": (CHAT, _error("Idempotency check failed for request id: expired"), _error("Idempotency check failed for request id: conflict"))}  # fmt: skip
ERRORS_SAME = {"only the request ids differ": (CHAT, _error("Failed. request id: req_abc123def"), _error("Failed. request id: req_99f8e7d6c"))}  # fmt: skip


def test_a_word_after_request_id_is_part_of_the_error(tmp_path: Path) -> None:
    """The request-id scrubber took any word after "request id:" for an id."""
    _all_fail_apart(tmp_path, ERRORS)
    _all_match(tmp_path, ERRORS_SAME)


def test_the_report_shows_the_exact_match_rate_as_the_cli_does() -> None:
    """The HTML report printed 1999 of 2000 as "100.0%" after the CLI had stopped doing so."""
    from infertap.analysis.report import _divergence

    d = {
        "pairs": 2000,
        "counts": {"exact": 1999, "differ": 1},
        "exact_match_rate": 0.9995,
        "similarity_mean": 0.9999,
        "first_divergence_median": 3,
        "first_divergence_histogram": {},
    }
    html = "".join(_divergence(d))
    assert "99.9% (1999 of 2000)" in html and "100.0%" not in html


def test_where_answers_part_counts_only_pairs_of_two_answers(tmp_path: Path) -> None:
    """An error against an answer "differed at 0": with half the pairs failed on one side (a 404 on an
    engine without the route) the median first divergence was 0, whatever the answers did."""

    def answer(text: str) -> bytes:
        return _message({"content": text})[0]

    a, b = [], []
    for i in range(4):  # answers that part at character 20
        body = {"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]}
        a.append({"body": body, "chunks": [answer("the same twenty char and then one")]})
        b.append({"body": body, "chunks": [answer("the same twenty char but then another")]})
    for i in range(4, 10):  # B failed: no answer to place a divergence in
        body = {"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]}
        a.append({"body": body, "chunks": [answer("an answer")]})
        b.append({"body": body, "chunks": [b'{"detail":"Not Found"}'], "status": 404})
    write_capture(tmp_path / "a", a)
    write_capture(tmp_path / "b", b)
    d = compare(tmp_path / "a", tmp_path / "b")["divergence"]
    assert d["pairs"] == 10 and d["counts"].get("exact", 0) == 0
    at = len(os.path.commonprefix(["the same twenty char and then one", "the same twenty char but then another"]))
    assert d["first_divergence_median"] == at and d["first_divergence_histogram"] == {at // 8 * 8: 4}
    # The six B failed: counted apart, not as divergences no place was found for.
    assert d["failed"]["b_only"] == 6 and "divergence_not_placed" not in d["counts"]


def _anthropic_sse(*blocks: tuple[dict[str, Any], list[dict[str, Any]]], beta: bool = False) -> list[bytes]:
    """An Anthropic stream of ``blocks``: each its start and its deltas (``beta``: read by the beta models)."""
    start = {"id": "m1", "type": "message", "role": "assistant", "model": "m", "content": [], "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}  # fmt: skip
    events: list[Any] = [{"type": "message_start", "message": start}]
    for i, (start, deltas) in enumerate(blocks):
        events.append({"type": "content_block_start", "index": i, "content_block": start})
        events += ({"type": "content_block_delta", "index": i, "delta": d} for d in deltas)
        events.append({"type": "content_block_stop", "index": i})
    events += [
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 3}},
        {"type": "message_stop"},
    ]
    return _message_sse(*events, beta=beta)


def _cite(url: str) -> dict[str, Any]:
    return {"type": "web_search_result_location", "url": url, "title": "t", "cited_text": "c", "encrypted_index": "e"}


def _texts(*texts: str, cited_at: int | None = None) -> list[dict[str, Any]]:
    return [{"type": "text", "text": t, **({"citations": [_cite("https://a")]} if i == cited_at else {})} for i, t in enumerate(texts)]  # fmt: skip


_USE = {"type": "tool_use", "id": "t1", "name": "f", "input": {"x": 1}}


def _compaction(summary: str) -> list[dict[str, Any]]:
    return [{"type": "compaction", "content": summary}, {"type": "text", "text": "OK."}]


def _compaction_sse(summary: str) -> list[bytes]:
    half = len(summary) // 2
    deltas = [{"type": "compaction_delta", "content": summary[:half]}, {"type": "compaction_delta", "content": summary[half:]}]
    return _anthropic_sse(({"type": "compaction", "content": ""}, deltas), ({"type": "text", "text": ""}, [{"type": "text_delta", "text": "OK."}]), beta=True)  # fmt: skip


def _message_item(text: str, url: str | None = None) -> dict[str, Any]:
    notes = [{"type": "url_citation", "url": url, "start_index": 0, "end_index": 3, "title": "t"}] if url else []
    return {"type": "message", "id": "msg1", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": text, "annotations": notes}]}  # fmt: skip


_FUNCTION = {"type": "function_call", "id": "fc1", "call_id": "c1", "name": "f", "arguments": "{}", "status": "completed"}


def _program_output(result: str) -> list[dict[str, Any]]:
    """What the model's program returned (``program_output``, an item kept whole), then its message."""
    return [
        {"type": "program_output", "id": "po1", "call_id": "c1", "result": result, "status": "completed"},
        _message_item("Done."),
    ]


def _responses_sse(items: list[dict[str, Any]], deltas: bool = True) -> list[bytes]:
    """A Responses stream of ``items``: each added, its text as deltas (no annotation event), done;
    then the whole response restated."""
    events: list[Any] = [{"type": "response.created", "response": _response("in_progress", [])}]
    for i, item in enumerate(items):
        empty = {**item, "content": []} if item["type"] == "message" else item
        events.append({"type": "response.output_item.added", "output_index": i, "item": empty})
        if item["type"] == "message" and deltas:
            for part in item["content"]:
                events.append({"type": "response.output_text.delta", "item_id": item["id"], "output_index": i, "content_index": 0, "delta": part["text"], "logprobs": []})  # fmt: skip
        events.append({"type": "response.output_item.done", "output_index": i, "item": item})
    events.append({"type": "response.completed", "response": _response("completed", items)})
    return _response_sse(*events)


def _chat_error_sse(message: str) -> list[bytes]:
    """OpenRouter's error mid-stream: an error beside the choice that ends with ``error`` (no SDK's: unchecked)."""
    failed = _odd_chunk({"content": ""}, "error")
    return _sse(_chunk({"content": "Hel"}), {**failed, "error": {"code": 502, "message": message}}, "[DONE]")


def _chat_choice_error(message: str) -> list[bytes]:
    """A choice failed by its own ``error`` and finish "error", neither of which the SDK allows: unchecked."""
    body = _completion({"content": "Hel"}, "error")
    body["choices"][0]["error"] = {"message": message}
    return _body(body)


STRUCTURE = {
    "anthropic: a source cited by the other sentence": (
        MESSAGES,
        _anthropic(_texts("Sky is blue. ", "Grass is red.", cited_at=0)),
        _anthropic(_texts("Sky is blue. ", "Grass is red.", cited_at=1)),
    ),  # fmt: skip
    "anthropic: text, call, text against text, text, call": (
        MESSAGES,
        _anthropic([*_texts("Let me check."), _USE, *_texts(" Done.")]),
        _anthropic([*_texts("Let me check.", " Done."), _USE]),
    ),  # fmt: skip
    "anthropic: two text blocks against one": (MESSAGES, _anthropic(_texts("Hello", "World")), _anthropic(_texts("HelloWorld"))),
    "anthropic streamed: two text blocks against one": (
        MESSAGES_SSE,
        _anthropic_sse(
            ({"type": "text", "text": ""}, [{"type": "text_delta", "text": "Hello"}]),
            ({"type": "text", "text": ""}, [{"type": "text_delta", "text": "World"}]),
        ),  # fmt: skip
        _anthropic_sse(
            ({"type": "text", "text": ""}, [{"type": "text_delta", "text": "Hello"}, {"type": "text_delta", "text": "World"}])
        ),  # fmt: skip
    ),
    "anthropic: a block of a type not read (compaction)": (
        MESSAGES,
        _anthropic(_compaction("User wants to drop the prod DB."), beta=True),
        _anthropic(_compaction("User wants a haiku."), beta=True),
    ),  # fmt: skip
    "anthropic streamed: a block of a type not read": (
        MESSAGES_SSE,
        _compaction_sse("User wants to drop the prod DB."),
        _compaction_sse("User wants a haiku."),
    ),  # fmt: skip
    "responses: message then call against call then message": (
        RESPONSES,
        _responses(_message_item("ok"), _FUNCTION),
        _responses(_FUNCTION, _message_item("ok")),
    ),  # fmt: skip
    "responses: an item of a type not read (program_output)": (
        RESPONSES,
        _responses(*_program_output("deleted 42 rows")),
        _responses(*_program_output("listed 42 rows")),
    ),  # fmt: skip
    "responses streamed: an item of a type not read": (
        RESPONSES_SSE,
        _responses_sse(_program_output("deleted 42 rows")),
        _responses_sse(_program_output("listed 42 rows")),
    ),  # fmt: skip
    "responses streamed: sources only in the final items": (
        RESPONSES_SSE,
        _responses_sse([_message_item("See docs.", "https://a")]),
        _responses_sse([_message_item("See docs.", "https://evil")]),
    ),  # fmt: skip
}
#: A gateway's error beside a chat choice (OpenRouter's), or a choice's own: each side's failure.
ERRORS_BESIDE = {
    "chat streamed: an error beside the choice": (
        CHAT_SSE,
        _chat_error_sse("Provider disconnected"),
        _chat_error_sse("Rate limit exceeded"),
    ),  # fmt: skip
    "chat: an error of the choice": (
        CHAT,
        _chat_choice_error("Provider disconnected"),
        _chat_choice_error("Rate limit exceeded"),
    ),  # fmt: skip
}


def test_an_answer_made_of_blocks_is_compared_as_its_blocks(tmp_path: Path) -> None:
    """Anthropic's blocks and Responses' items were folded into one text and one list of sources: the
    same words in other blocks, a source moved to another sentence, an item of a kind the reader
    didn't know (what the model's program returned), sources only the final event restates, and a gateway's error
    beside a chat choice all read as the same answer."""
    d = _all_differ(tmp_path, STRUCTURE)
    items = d["items"]
    assert d["counts"]["layout_differs"] == 5
    assert d["counts"]["other_items_differ"] == 4
    assert items["anthropic: a source cited by the other sentence"]["layout"] == [
        ["text:13+1", "text:13"],
        ["text:13", "text:13+1"],
    ]
    assert items["anthropic streamed: two text blocks against one"]["layout"] == [["text:5", "text:5"], ["text:10"]]
    assert items["responses: message then call against call then message"]["layout"] == [["message:2", "function_call"], ["function_call", "message:2"]]  # fmt: skip
    assert d["counts"]["citations_differ"] >= 1 and "layout" not in items["responses streamed: sources only in the final items"]
    _all_match(tmp_path, _twins(STRUCTURE))
    # Read as each side's failure: other errors are other failures (no exact match), the same error the same.
    _all_fail_apart(tmp_path, ERRORS_BESIDE)
    _all_match(tmp_path / "errors", _twins(ERRORS_BESIDE))


def test_an_answer_streamed_reads_as_the_same_answer_whole() -> None:
    """Blocks and items read from a stream are laid out, kept and cited as the same answer sent whole."""
    pairs = [
        (MESSAGES_SSE, _compaction_sse("a summary"), MESSAGES, _anthropic(_compaction("a summary"), beta=True)),
        (RESPONSES_SSE, _responses_sse(_program_output("run()")), RESPONSES, _responses(*_program_output("run()"))),
        (
            RESPONSES_SSE,
            _responses_sse([_message_item("See docs.", "https://a")]),
            RESPONSES,
            _responses(_message_item("See docs.", "https://a")),
        ),  # fmt: skip
        (
            RESPONSES_SSE,
            _responses_sse([_message_item("See.", "https://a"), _FUNCTION], deltas=False),
            RESPONSES,
            _responses(_message_item("See.", "https://a"), _FUNCTION),
        ),  # fmt: skip
    ]
    for (path, body, ctype), streamed, (path_w, body_w, ctype_w), whole in pairs:
        s = read_response({"path": path, "request_body": json.dumps(body).encode(), "response_headers": [["content-type", ctype]], "chunks": streamed, "status": 200})  # fmt: skip
        w = read_response({"path": path_w, "request_body": json.dumps(body_w).encode(), "response_headers": [["content-type", ctype_w]], "chunks": whole, "status": 200})  # fmt: skip
        assert s.readable and w.readable and s.streamed and not w.streamed
        assert (s.text, s.layout, s.others, s.citations) == (w.text, w.layout, w.others, w.citations), path
        assert s.layout and (s.others or s.citations)


def _logprobs(text: str, logprob: float) -> dict[str, Any]:
    """A chat choice's logprobs of one token ``text``, with itself as its one top-k entry."""
    token = {"token": text, "logprob": logprob, "bytes": list(text.encode()), "top_logprobs": []}
    token["top_logprobs"] = [{k: token[k] for k in ("token", "logprob", "bytes")}]
    return {"content": [token], "refusal": None}


def _choices(*logprobs: dict[str, Any] | None) -> list[bytes]:
    """A chat answer of one choice per entry, each saying "hi", with those logprobs (None: none sent)."""
    choices = [
        {"index": i, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop", "logprobs": lp}
        for i, lp in enumerate(logprobs)
    ]
    return _body(
        sdk_shapes.chat_completion({"id": "c1", "object": "chat.completion", "created": 0, "model": "m", "choices": choices})
    )


def _hi_chunks(logprobs: dict[str, Any] | None) -> list[bytes]:
    """A chat stream saying "hi", its chunk with those logprobs (None: none sent)."""
    first = _odd_chunk({"role": "assistant", "content": "hi"})
    first["choices"][0]["logprobs"] = logprobs
    return _sse(sdk_shapes.chat_chunk(first), _chunk({}, "stop"), "[DONE]")


LOGPROBS_ONE_SIDE = {
    "logprobs on A's answer only": (CHAT, _choices(_logprobs("hi", -0.1)), _choices(None)),
    "logprobs on B's answer only, streamed": (CHAT_SSE, _hi_chunks(None), _hi_chunks(_logprobs("hi", -0.1))),
    "logprobs on another choice": (CHAT, _choices(None, _logprobs("hi", -0.1)), _choices(_logprobs("hi", -0.1), None)),
}
LOGPROBS_BOTH = {
    "logprobs on both, other values": (CHAT, _choices(_logprobs("hi", -0.1)), _choices(_logprobs("hi", -0.5))),
    "logprobs on both, streamed": (CHAT_SSE, _hi_chunks(_logprobs("hi", -0.1)), _hi_chunks(_logprobs("hi", -0.2))),
}


def test_logprobs_sent_by_one_engine_only_are_no_exact_match(tmp_path: Path) -> None:
    """The same text with the logprobs its client asked for on one side and none on the other (an
    engine that ignores ``logprobs``) was an exact match, and the pair silently left out of the KL."""
    d = _all_differ(tmp_path, LOGPROBS_ONE_SIDE)
    assert d["counts"]["logprobs_one_side"] == len(LOGPROBS_ONE_SIDE)
    assert d["items"]["logprobs on A's answer only"]["logprob_choices"] == [[0], []]
    assert d["items"]["logprobs on B's answer only, streamed"]["logprob_choices"] == [[], [0]]
    assert d["items"]["logprobs on another choice"]["logprob_choices"] == [[1], [0]]
    # Logprobs on both sides: the answers' values may differ (their KL says how much), the answer is the same.
    same = _all_match(tmp_path, {**LOGPROBS_BOTH, **_twins(LOGPROBS_ONE_SIDE)})
    assert "logprobs_one_side" not in same["counts"] and same["logprobs"]["pairs"] == len(LOGPROBS_BOTH) + 2, same
