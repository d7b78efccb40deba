"""A value of an unexpected type anywhere in a request or response (a number where a list of tool
calls goes, a string where an object does) is read as no value of that field, never an exception:
one such exchange must not stop the decode of a whole capture, nor a replay or a compare. Each
field of a real-shaped body of every API is replaced in turn by each odd value."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from infertap.analysis import Analysis, speed_stats
from infertap.analysis.compare import compare
from infertap.apis import links_of, read_request, read_response
from infertap.apis.chat_request import ChatRequests
from infertap.apis.chat_stream import read_chat_stream
from infertap.cli import cli
from infertap.replay.transforms import Transforms
from infertap.replay.workload import load_workload
from tests.analysis_builders import JSON_HEADERS, SSE_HEADERS, exchange, write_capture

ODD: list[Any] = [5, 1.5, True, "s", {}, [], None, [5], {"a": 5}, ["s"]]
_CALL = {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
_TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}

REQUESTS: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": {
        "model": "m",
        "stream": True,
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": [{"type": "text", "text": "q"}]},
            {"role": "assistant", "content": None, "tool_calls": [_CALL]},
            {"role": "tool", "tool_call_id": "c1", "content": "r"},
        ],
        "tools": [_TOOL],
        "tool_choice": "auto",
        "temperature": 0,
        "max_tokens": 8,
    },
    "/v1/responses": {
        "model": "m",
        "instructions": "s",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "q"}]},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "r"},
        ],
        "tools": [{"type": "function", "name": "f"}],
        "previous_response_id": "r0",
        "max_output_tokens": 8,
    },
    "/v1/messages": {
        "model": "m",
        "system": [{"type": "text", "text": "s"}],
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "r"}]}],
            },
        ],
        "tools": [{"name": "f", "input_schema": {"type": "object"}}],
        "max_tokens": 8,
    },
    "/api/chat": {
        "model": "m",
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]},
        ],
        "options": {"temperature": 0, "num_predict": 8},
    },
    "/completion": {"prompt": "q", "n_predict": 8, "temperature": 0},
}

# Responses as events (each one streamed alone, and the list of them as one body).
RESPONSES: dict[str, list[dict[str, Any]]] = {
    "/v1/chat/completions": [
        {
            "id": "x",
            "object": "chat.completion.chunk",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": "a", "reasoning_content": "r", "tool_calls": [_CALL]},
                    "logprobs": {"content": [{"id": 1, "token": "a", "logprob": -1.0}]},
                    "token_ids": [1],
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 0}},
            "timings": {"prompt_ms": 1.0},
        },
        {
            "id": "x",
            "object": "chat.completion",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "a", "tool_calls": [_CALL]}, "finish_reason": "stop"}
            ],
        },
        {"error": {"message": "bad", "type": "t"}},
    ],
    "/v1/responses": [
        {"type": "response.output_text.delta", "delta": "a"},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": "{}"},
        {"type": "response.output_item.added", "output_index": 0, "item": {"type": "function_call", "call_id": "c", "name": "f"}},
        {
            "type": "response.completed",
            "response": {
                "id": "r",
                "status": "completed",
                "model": "m",
                "output": [
                    {"type": "message", "content": [{"type": "output_text", "text": "a"}]},
                    {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "r"}], "summary": [{"text": "s"}]},
                    {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                ],
                "usage": {"input_tokens": 1, "output_tokens": 1, "input_tokens_details": {"cached_tokens": 0}},
            },
        },
    ],
    "/v1/messages": [
        {"type": "message_start", "message": {"id": "m1", "model": "m", "usage": {"input_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{}"}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "a"}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "thinking_delta", "thinking": "r"}},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}},
        {
            "type": "message",
            "id": "m1",
            "content": [{"type": "text", "text": "a"}, {"type": "tool_use", "id": "t", "name": "f", "input": {"a": 1}}],
            "stop_reason": "tool_use",
        },
    ],
    "/api/chat": [
        {
            "model": "m",
            "message": {
                "role": "assistant",
                "content": "a",
                "thinking": "r",
                "tool_calls": [{"function": {"index": 0, "name": "f", "arguments": {"a": 1}}}],
            },
            "done": False,
        },
        {"model": "m", "done": True, "done_reason": "stop", "eval_count": 1, "prompt_eval_count": 1, "eval_duration": 5},
    ],
    "/completion": [{"content": "a", "stop": True, "timings": {"prompt_ms": 1.0, "predicted_n": 1}, "tokens": [1]}],
}


def _variants(doc: Any) -> Iterator[Any]:
    """``doc`` with each of its values (at any depth, the whole included) replaced by each odd value."""
    paths: list[tuple[Any, ...]] = [()]

    def walk(node: Any, path: tuple[Any, ...]) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in items:
            paths.append((*path, key))
            walk(child, (*path, key))

    walk(doc, ())
    for path in paths:
        for odd in ODD:
            if not path:
                yield odd
                continue
            changed = copy.deepcopy(doc)
            node = changed
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = odd
            yield changed


def _sse(events: list[Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"


@pytest.mark.parametrize("path", sorted(REQUESTS))
def test_odd_request_values_are_read_without_an_exception(path: str) -> None:
    chat = ChatRequests()
    answer = _sse(RESPONSES[path][:1])
    for body in _variants(REQUESTS[path]):
        record = {"id": "x", "status": 200, "path": path, "request_body": json.dumps(body).encode(), "chunks": [answer]}
        request = read_request(record)
        links_of(record, request, read_response(record))
        fast = chat.read(record)
        if fast is not None:
            assert fast[0].turns == request.turns and fast[0].tools == request.tools


@pytest.mark.parametrize("path", sorted(RESPONSES))
def test_odd_response_values_are_read_without_an_exception(path: str) -> None:
    request = json.dumps(REQUESTS[path]).encode()
    for i, event in enumerate(RESPONSES[path]):
        for changed in _variants(event):
            events = [*RESPONSES[path][:i], changed]
            for chunks, headers in (
                ([_sse(events)], [["content-type", "text/event-stream"]]),
                ([json.dumps(changed).encode()], [["content-type", "application/json"]]),
                ([b"".join(json.dumps(e).encode() + b"\n" for e in events)], [["content-type", "application/x-ndjson"]]),
            ):
                record = {
                    "id": "x",
                    "status": 200,
                    "path": path,
                    "request_body": request,
                    "chunks": chunks,
                    "response_headers": headers,
                }
                out = read_response(record)
                links_of(record, read_request(record), out)
                read_chat_stream(record)


def _odd_exchanges() -> Iterator[dict[str, Any]]:
    """Every odd request and response above as an exchange of one capture."""
    n = 0
    for path, request in REQUESTS.items():
        answer = _sse(RESPONSES[path][:1])
        for body in _variants(request):
            n += 1
            yield exchange(f"q{n}", sent_ms=n, request=json.dumps(body).encode(), chunks=[(1.0, answer)], path=path, seq=n)
    for path, events in RESPONSES.items():
        for i, event in enumerate(events):
            for changed in _variants(event):
                n += 1
                chunks, headers = [(1.0, _sse([*events[:i], changed]))], SSE_HEADERS
                if n % 2:
                    chunks, headers = [(1.0, json.dumps(changed).encode())], JSON_HEADERS
                request = json.dumps(REQUESTS[path]).encode()
                yield exchange(f"r{n}", sent_ms=n, request=request, chunks=chunks, headers=headers, path=path, seq=n)


def test_a_capture_of_odd_values_goes_through_every_command(tmp_path: Path) -> None:
    records = list(_odd_exchanges())
    capture = write_capture(tmp_path / "odd", records)
    with Analysis([str(capture)], cache_dir=tmp_path / "cache") as a:
        assert a.count("exchanges") == len(records)
        assert a.sql("SELECT count(*) FROM requests").fetchall() == [(len(records),)]
        readable = a.sql("SELECT count(*) FROM exchanges WHERE readable").fetchall()[0][0]
        generation = a.sql("SELECT count(*) FROM requests WHERE generation").fetchall()
        assert generation[0][0] > len(records) // 2  # what isn't: an odd value in place of the whole body
        assert a.sql("SELECT count(DISTINCT exchange_id) FROM turns").fetchall() == generation
        groups = speed_stats(a, ["path"])["groups"]
        assert sum(g["requests"] for g in groups) == generation[0][0]
    again = write_capture(tmp_path / "odd-again", records)
    result = compare(capture, again)  # every response summarized, every pair diffed
    assert result["pairing"]["pairs"] == len(records)
    assert result["divergence"]["counts"]["exact"] == readable > len(records) // 2  # the same answers, where readable
    _through_the_other_commands(capture, again, len(records), tmp_path)


def _through_the_other_commands(capture: Path, again: Path, records: int, tmp_path: Path) -> None:
    """A replay's workload (a body transform asked of every request), and each command that reads a capture."""
    workload = load_workload(capture, transforms=Transforms(set_values=[("temperature", 0)]))
    assert len(workload.items) == records
    for args in (
        ["info", str(capture)],
        ["claim", str(capture)],
        ["report", str(capture), str(again), "-o", str(tmp_path / "report.html")],
        ["export", str(capture), "--parquet", str(tmp_path / "export")],
        ["compare", str(capture), str(again), "--extract", "json"],
    ):
        run = CliRunner().invoke(cli, args, catch_exceptions=True)
        assert run.exit_code == 0, (args, run.output, run.exception)


def _deep_exchanges(depth: int) -> Iterator[dict[str, Any]]:
    """JSON nested ``depth`` deep wherever traffic carries JSON: tool-call arguments, an event, a
    whole answer, a request's messages, a message's content, its tools, an earlier call's arguments."""
    deep = "[" * depth + "]" * depth
    nested = deep.encode()
    call = {"index": 0, "id": "c", "function": {"name": "f", "arguments": deep}}
    answers = [
        _sse([{"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}]),
        b'data: {"choices": [{"index": 0, "delta": {"content": ' + nested + b"}}]}\n\ndata: [DONE]\n\n",
    ]
    whole = b'{"choices": [{"index": 0, "message": {"content": "x", "extra": ' + nested + b"}}]}"
    requests = [
        b'{"model": "m", "messages": ' + nested + b"}",
        b'{"model": "m", "messages": [{"role": "user", "content": ' + nested + b"}]}",
        b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": ' + nested + b"}",
        json.dumps({"model": "m", "messages": [{"role": "assistant", "tool_calls": [{"function": call["function"]}]}]}).encode(),
        nested,
    ]
    n = 0
    for chunks, headers in [*((a, SSE_HEADERS) for a in answers), (whole, JSON_HEADERS)]:
        n += 1
        yield exchange(f"a{n}", sent_ms=n, chunks=[(1.0, chunks)], headers=headers, seq=n)
    for request in requests:
        n += 1
        yield exchange(f"q{n}", sent_ms=n, request=request, chunks=[(1.0, answers[0])], seq=n)


@pytest.mark.parametrize("depth", [990, 200_000])
def test_json_nested_too_deeply_is_read_as_no_json_by_every_command(tmp_path: Path, depth: int) -> None:
    """Both JSON parsers raise RecursionError on JSON nested deeper than Python's recursion limit
    (msgspec from about a thousand): such a value is read as not JSON, and the rest of the capture
    as it always was (one such exchange stopped the decode of every other before)."""
    records = list(_deep_exchanges(depth))
    capture = write_capture(tmp_path / "deep", records)
    with Analysis([str(capture)], cache_dir=tmp_path / "cache") as a:
        assert a.count("exchanges") == len(records)
    again = write_capture(tmp_path / "deep-again", records)
    assert compare(capture, again)["pairing"]["pairs"] == len(records)
    _through_the_other_commands(capture, again, len(records), tmp_path)
