"""A Responses answer ended to call a tool (``tool_calls``) only where its output holds a call its
client must make: a function's, a custom tool's, the local shell's, the computer's, apply patch's,
an MCP call awaiting approval. The built-in tools the API ran itself (web and file search, code
interpreter, image generation, MCP calls and listings) followed by a message are a finished answer
(``stop``), as the API's client sees it: nothing left for it to do. The same by every reading (whole,
streamed, streamed with no output restated, a cut answer's tail), and in ``stats`` and ``compare``."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from infertap.analysis.compare import compare
from infertap.apis import read_response, tail_usage
from infertap.capture.records import RESPONSE_TAIL_BYTES
from infertap.cli import cli
from tests import sdk_shapes
from tests.helpers import pair_captures, write_capture

_SSE, _JSON = "text/event-stream", "application/json"
_WEB_TOOLS = {"model": "m", "input": "weather in Paris?", "tools": [{"type": "web_search"}]}
_TOOLS = {**_WEB_TOOLS, "tools": [{"type": "web_search"}, {"type": "function", "name": "get_weather", "parameters": {}}]}
_USAGE = sdk_shapes.response_usage(30, 9)
_SEQUENCE = itertools.count()  # the events' sequence_number (only rising matters)

_MESSAGE = {"type": "message", "id": "m1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "Sunny.", "annotations": []}]}  # fmt: skip
_SEARCH = {"type": "web_search_call", "id": "ws1", "status": "completed", "action": {"type": "search", "query": "paris"}}
_BUILT_IN = {  # ran by the API: their results in the response, a message after them
    "web_search_call": [_SEARCH, _MESSAGE],
    "file_search_call": [{"type": "file_search_call", "id": "fs1", "status": "completed", "queries": ["q"]}, _MESSAGE],
    "code_interpreter_call": [
        {"type": "code_interpreter_call", "id": "ci1", "status": "completed", "code": "1+1", "container_id": "c"},
        _MESSAGE,
    ],
    "image_generation_call": [{"type": "image_generation_call", "id": "ig1", "status": "completed", "result": "aGk="}, _MESSAGE],
    "mcp_list_tools and mcp_call": [
        {"type": "mcp_list_tools", "id": "ml1", "server_label": "s", "tools": [{"name": "t", "input_schema": {}}]},
        {"type": "mcp_call", "id": "mc1", "server_label": "s", "name": "t", "arguments": "{}", "output": "ok"},
        _MESSAGE,
    ],
    "reasoning": [{"type": "reasoning", "id": "r1", "summary": [{"type": "summary_text", "text": "think"}]}, _MESSAGE],
    "shell_call in a container": [
        {
            "type": "shell_call",
            "id": "sh1",
            "call_id": "c1",
            "action": {"commands": ["ls"]},
            "status": "completed",
            "environment": {"type": "container_reference", "container_id": "cntr"},
        },  # fmt: skip
        _MESSAGE,
    ],
}
_CALL = {"type": "function_call", "id": "fc1", "call_id": "c1", "name": "get_weather", "arguments": '{"city":"Paris"}'}
_CLIENT = {  # the client must make (or approve) them before the answer goes on
    "function_call": [_SEARCH, _CALL],
    "custom_tool_call": [{"type": "custom_tool_call", "id": "ct1", "call_id": "c1", "name": "apply", "input": "x"}],
    "local_shell_call": [
        {
            "type": "local_shell_call",
            "id": "ls1",
            "call_id": "c1",
            "status": "completed",
            "action": {"type": "exec", "command": ["ls"], "env": {}},
        },  # fmt: skip
    ],
    "computer_call": [
        {
            "type": "computer_call",
            "id": "cc1",
            "call_id": "c1",
            "status": "completed",
            "action": {"type": "screenshot"},
            "pending_safety_checks": [],
        },  # fmt: skip
    ],
    "apply_patch_call": [
        {
            "type": "apply_patch_call",
            "id": "ap1",
            "call_id": "c1",
            "status": "completed",
            "operation": {"type": "create_file", "path": "a.txt", "diff": "+a"},
        },  # fmt: skip
    ],
    "shell_call, local": [
        {
            "type": "shell_call",
            "id": "sh1",
            "call_id": "c1",
            "action": {"commands": ["ls"]},
            "status": "completed",
            "environment": {"type": "local"},
        },  # fmt: skip
    ],
    "mcp_approval_request": [
        {"type": "mcp_list_tools", "id": "ml1", "server_label": "s", "tools": []},
        {"type": "mcp_approval_request", "id": "ar1", "server_label": "s", "name": "t", "arguments": "{}"},
    ],
}


def _response(output: list[dict[str, Any]], status: str = "completed", **more: Any) -> dict[str, Any]:
    """A response in the order vLLM's pydantic model writes it: its status after its output."""
    body = {"id": "r", "object": "response", "model": "m", **sdk_shapes.RESPONSE_REST, **more, "output": output}
    return sdk_shapes.response({**body, "status": status, "usage": _USAGE if status == "completed" else None})


def _sse(kind: str, data: dict[str, Any]) -> bytes:
    event = sdk_shapes.response_event({"type": kind, **data, "sequence_number": next(_SEQUENCE)})
    return b"event: " + kind.encode() + b"\ndata: " + json.dumps(event).encode() + b"\n\n"


def _stream(output: list[dict[str, Any]], *, restated: bool = True, **more: Any) -> bytes:
    """The answer streamed as OpenAI streams it: each item added, a message's text as deltas, each
    item done, then response.completed restating the output (or, as some servers do, none of it)."""
    events = [_sse("response.created", {"response": _response([], "in_progress")})]
    for i, item in enumerate(output):
        added = {**item, "content": []} if item["type"] == "message" else item
        events.append(_sse("response.output_item.added", {"output_index": i, "item": added}))
        for part in item.get("content", []) if item["type"] == "message" else []:
            delta = {"item_id": item["id"], "output_index": i, "content_index": 0, "delta": part["text"], "logprobs": []}
            events.append(_sse("response.output_text.delta", delta))
        events.append(_sse("response.output_item.done", {"output_index": i, "item": item}))
    events.append(_sse("response.completed", {"response": _response(output if restated else [], **more)}))
    return b"".join(events)


def _record(body: bytes, ctype: str, request: dict[str, Any]) -> dict[str, Any]:
    stream = ctype == _SSE
    return {
        "path": "/v1/responses",
        "status": 200,
        "end": "complete",
        "request_body": json.dumps({**request, "stream": stream}).encode(),
        "response_headers": [["content-type", ctype]],
        "chunks": [body],
    }


def _cut(whole: dict[str, Any]) -> dict[str, Any]:
    """The record as the recorder keeps an answer past its response limit: a head and its tail."""
    body = whole["chunks"][0]
    head, tail = body[:1024], body[-RESPONSE_TAIL_BYTES:]
    assert len(head) + len(tail) < len(body)
    return {**whole, "chunks": [head], "response_body_size": len(body), "response_tail": tail}


def test_a_responses_answer_ends_with_tool_calls_only_where_its_client_must_call_one() -> None:
    cases = [(name, output, "stop") for name, output in _BUILT_IN.items()]
    cases += [(name, output, "tool_calls") for name, output in _CLIENT.items()]
    for name, output, want in cases:
        readings = {
            "whole": _record(json.dumps(_response(output)).encode(), _JSON, _TOOLS),
            "streamed": _record(_stream(output), _SSE, _TOOLS),
            "streamed, no output restated": _record(_stream(output, restated=False), _SSE, _TOOLS),
        }
        for how, record in readings.items():
            out = read_response(record)
            assert (out.finish_reason, out.finish_reason_raw) == (want, "completed"), (name, how)
            assert out.tool_calls or name == "reasoning", (name, how)  # every call read, the API's own too
        # Cut past the recorder's limit: its end says the output whole (a long instruction before it).
        long = "be brief " * 10000
        cut = _cut(_record(_stream(output, instructions=long), _SSE, _TOOLS))
        got = tail_usage(cut)
        assert got is not None and (got.finish_reason, got.finish_reason_raw) == (want, "completed"), name


def test_a_cut_answer_offered_only_the_api_s_own_tools_finishes_as_read_whole() -> None:
    """A cut answer whose tail can't hold its output (longer than the tail) can't say whether it
    holds a call: unknown where the request offered a function; where it offered only tools the API
    runs itself, none of the client's can be in it, and it finished (``stop``), as read whole."""
    long_message = {**_MESSAGE, "content": [{"type": "output_text", "text": "w " * 50000, "annotations": []}]}
    output = [_SEARCH, long_message]
    for request, want in ((_WEB_TOOLS, "stop"), (_TOOLS, None)):
        whole = _record(_stream(output), _SSE, request)
        got = tail_usage(_cut(whole))
        assert read_response(whole).finish_reason == "stop"
        assert got is not None and (got.finish_reason, got.finish_reason_raw) == (want, "completed"), request["tools"]


def test_stats_and_compare_count_a_web_search_answered_as_stop_and_a_function_call_as_tool_calls(tmp_path: Path) -> None:
    answers = [
        (_stream(_BUILT_IN["web_search_call"]), _SSE),
        (json.dumps(_response(_BUILT_IN["code_interpreter_call"])).encode(), _JSON),
        (_stream(_BUILT_IN["mcp_list_tools and mcp_call"], restated=False), _SSE),
        (_stream(_CLIENT["function_call"]), _SSE),
        (json.dumps(_response(_CLIENT["local_shell_call"])).encode(), _JSON),
    ]
    write_capture(
        tmp_path / "cap",
        [
            {
                "path": "/v1/responses",
                "body": {**_TOOLS, "stream": ctype == _SSE, "tag": i},
                "chunks": [body],
                "content_type": ctype,
            }
            for i, (body, ctype) in enumerate(answers)
        ],
    )
    stats = CliRunner().invoke(cli, ["stats", str(tmp_path / "cap"), "--json"])
    assert stats.exit_code == 0, stats.output
    finishes: dict[str, int] = {}
    for group in json.loads(stats.output)["groups"]:
        for word, n in group["finish_reasons"].items():
            finishes[word] = finishes.get(word, 0) + n
    assert finishes == {"stop": 3, "tool_calls": 2}

    responses = ("/v1/responses", {**_TOOLS, "stream": True}, _SSE)
    # Must match: a search answered, streamed with its output restated or not.
    searched = _BUILT_IN["web_search_call"]
    a, b = pair_captures(tmp_path / "same", {"search": (responses, [_stream(searched)], [_stream(searched, restated=False)])})
    d = compare(a, b, top=1)["divergence"]
    assert d["exact_match_rate"] == 1 and not d["counts"].get("finish_reason_changed"), d["counts"]
    # Must differ: the same search, then a message on one side and a function call on the other.
    a, b = pair_captures(tmp_path / "differ", {"answer vs call": (responses, [_stream(searched)], [_stream([_SEARCH, _CALL])])})
    d = compare(a, b, top=1)["divergence"]
    assert d["counts"]["finish_reason_changed"] == 1, d["counts"]
    (item,) = d["most_divergent"]
    assert item["finish_reason"] == ["stop", "tool_calls"]
