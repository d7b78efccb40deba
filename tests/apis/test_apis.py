"""The API adapters on the shapes each API documents: every family read into the same normalized
shape, streamed and whole; what no adapter reads is unreadable, never an empty answer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infertap.apis import api_for, ended_by_marker, read_request, read_response, sampling_fields
from tests import sdk_shapes

SSE = [["content-type", "text/event-stream"]]
JSON = [["content-type", "application/json"]]


def _sse(*events: dict[str, Any], done: bool = False, named: bool = False) -> list[bytes]:
    out = [(f"event: {e['type']}\n" if named else "").encode() + b"data: " + json.dumps(e).encode() + b"\n\n" for e in events]
    return out + ([b"data: [DONE]\n\n"] if done else [])


def _record(path: str, chunks: list[bytes], headers: list[list[str]] = SSE, body: dict | None = None, status: int = 200) -> dict:
    return {
        "path": path,
        "status": status,
        "response_headers": headers,
        "chunks": chunks,
        "request_body": json.dumps(body or {}).encode(),
    }


# -- each API, streamed and whole --------------------------------------------------------------


def _messages_sse(*events: dict[str, Any]) -> list[bytes]:
    """An Anthropic stream, each event checked (but ``ping``, which the SDK drops before it reads an event)."""
    return _sse(*(e if e["type"] == "ping" else sdk_shapes.message_event(e) for e in events), named=True)


def _responses_sse(*events: dict[str, Any]) -> list[bytes]:
    """A Responses stream, each event numbered in order and checked."""
    return _sse(*(sdk_shapes.response_event({**e, "sequence_number": n}) for n, e in enumerate(events)), named=True)


def _chat_sse(*chunks: dict[str, Any]) -> list[bytes]:
    """A chat stream of ``chunks`` (each given its id, created and model), checked, then ``[DONE]``."""
    head = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    return _sse(*(sdk_shapes.chat_chunk({**head, **c}) for c in chunks), done=True)


ANTHROPIC_STREAM = _messages_sse(
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 12, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 5, "output_tokens": 1},
        },
    },
    {"type": "ping"},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "s"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Let me "}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "check."}},
    {"type": "content_block_stop", "index": 1},
    {
        "type": "content_block_start",
        "index": 2,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}},
    },
    {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ""}},
    {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": '{"city": '}},
    {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": '"Paris"}'}},
    {"type": "content_block_stop", "index": 2},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": {"output_tokens": 21}},
    {"type": "message_stop"},
)
ANTHROPIC_WHOLE = sdk_shapes.message(
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "s"},
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
        ],
        "usage": {"input_tokens": 12, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 5, "output_tokens": 21},
    }
)
_MESSAGE_ITEM = {
    "type": "message",
    "id": "m_1",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "Let me check.", "annotations": []}],
}
_CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "weather",
    "arguments": '{"city": "Paris"}',
    "status": "completed",
}
_RESPONSE = sdk_shapes.response(
    {
        "id": "resp_1",
        "object": "response",
        "model": "gpt-x",
        "status": "completed",
        **sdk_shapes.RESPONSE_REST,
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "hmm"}]},
            _MESSAGE_ITEM,
            _CALL,
        ],
        "usage": sdk_shapes.response_usage(117, 21, cached=100),
    }
)
_TEXT = {"item_id": "m_1", "output_index": 1, "content_index": 0}
RESPONSES_STREAM = _responses_sse(
    {"type": "response.created", "response": {**_RESPONSE, "status": "in_progress", "output": [], "usage": None}},
    {"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning", "id": "rs_1", "summary": []}},
    {"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "output_index": 0, "summary_index": 0, "delta": "hmm"},
    {"type": "response.output_item.added", "output_index": 1, "item": {**_MESSAGE_ITEM, "status": "in_progress", "content": []}},
    {"type": "response.content_part.added", **_TEXT, "part": {"type": "output_text", "text": "", "annotations": []}},
    {"type": "response.output_text.delta", **_TEXT, "delta": "Let me ", "logprobs": []},
    {"type": "response.output_text.delta", **_TEXT, "delta": "check.", "logprobs": []},
    {"type": "response.output_text.done", **_TEXT, "text": "Let me check.", "logprobs": []},
    {"type": "response.output_item.done", "output_index": 1, "item": _MESSAGE_ITEM},
    {"type": "response.output_item.added", "output_index": 2, "item": {**_CALL, "arguments": "", "status": "in_progress"}},
    {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 2, "delta": '{"city": '},
    {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 2, "delta": '"Paris"}'},
    {
        "type": "response.function_call_arguments.done",
        "item_id": "fc_1",
        "output_index": 2,
        "arguments": '{"city": "Paris"}',
    },
    {"type": "response.output_item.done", "output_index": 2, "item": _CALL},
    {"type": "response.completed", "response": _RESPONSE},
)
CHAT_STREAM = _chat_sse(
    {"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {"reasoning_content": "hmm"}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {"content": "Let me check."}, "finish_reason": None}]},
    {
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "weather", "arguments": '{"city": '},
                        }
                    ]
                },
                "finish_reason": None,
            }
        ]
    },
    {
        "choices": [
            {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}, "finish_reason": None}
        ]
    },  # fmt: skip
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    {
        "choices": [],
        "usage": {
            "prompt_tokens": 117,
            "completion_tokens": 21,
            "total_tokens": 138,
            "prompt_tokens_details": {"cached_tokens": 100},
        },
    },
)
OLLAMA_STREAM = [
    json.dumps(e).encode() + b"\n"
    for e in (
        {"model": "m", "message": {"role": "assistant", "content": "", "thinking": "hmm"}, "done": False},
        {"model": "m", "message": {"role": "assistant", "content": "Let me check."}, "done": False},
        {
            "model": "m",
            "message": {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "weather", "arguments": {"city": "Paris"}}}],
            },
            "done": False,
        },
        {
            "model": "m",
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": 117,
            "eval_count": 21,
            "eval_duration": 1000,
        },
    )
]

CASES = {
    "messages streamed": ("/v1/messages", ANTHROPIC_STREAM, SSE, "tool_use"),
    "messages whole": ("/v1/messages", [json.dumps(ANTHROPIC_WHOLE).encode()], JSON, "tool_use"),
    "responses streamed": ("/v1/responses", RESPONSES_STREAM, SSE, "completed"),
    "responses whole": ("/v1/responses", [json.dumps(_RESPONSE).encode()], JSON, "completed"),
    "chat streamed": ("/v1/chat/completions", CHAT_STREAM, SSE, "tool_calls"),
    "ollama chat streamed": ("/api/chat", OLLAMA_STREAM, [["content-type", "application/x-ndjson"]], "stop"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_api_reads_into_the_same_shape(case):
    path, chunks, headers, raw = CASES[case]
    out = read_response(_record(path, chunks, headers))
    assert out.readable and out.error is None and out.error_message is None
    assert (out.text, out.reasoning) == ("Let me check.", "hmm")
    assert [(c["name"], json.loads(c["arguments"])) for c in out.tool_calls] == [("weather", {"city": "Paris"})]
    assert out.finish_reason_raw == raw
    assert out.finish_reason == "tool_calls"  # Ollama's "stop" too: its answer calls a tool
    assert out.output_tokens == 21 and out.prompt_tokens == 117
    assert out.cached_tokens == (None if case.startswith("ollama") else 100)
    assert out.streamed == ("whole" not in case)
    assert any(e.delta.generated for e in out.events)


def test_anthropic_prompt_tokens_include_the_cache_and_a_stream_merges_its_usage():
    out = read_response(_record("/v1/messages", ANTHROPIC_STREAM))
    # input_tokens 12 leaves out 100 read from and 5 written to the cache; output 21 comes from message_delta.
    assert (out.prompt_tokens, out.cached_tokens, out.output_tokens) == (117, 100, 21)
    assert out.cached_tokens / out.prompt_tokens < 1  # a share, never 1153%
    assert (out.model, out.response_id) == ("claude-x", "msg_1")


def test_first_generated_event_of_a_stream_is_the_first_text_not_the_preamble():
    out = read_response(_record("/v1/responses", RESPONSES_STREAM))
    first = next(i for i, e in enumerate(out.events) if e.delta.generated)
    assert out.events[first].obj["type"] == "response.reasoning_summary_text.delta"
    # output_item.done restates a call already streamed: it is no new tool-call delta.
    done = [e for e in out.events if e.obj["type"] == "response.output_item.done"]
    assert all(e.delta.tool_deltas == 0 for e in done)


def test_responses_status_stands_for_the_finish_reason():
    incomplete = sdk_shapes.response(
        {
            **_RESPONSE,
            "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
            "output": _RESPONSE["output"][:2],
        }
    )
    out = read_response(_record("/v1/responses", [json.dumps(incomplete).encode()], JSON))
    assert (out.finish_reason, out.finish_reason_raw) == ("length", "incomplete:max_output_tokens")
    plain = sdk_shapes.response({**_RESPONSE, "output": _RESPONSE["output"][:2]})
    plain = read_response(_record("/v1/responses", [json.dumps(plain).encode()], JSON))
    assert (plain.finish_reason, plain.finish_reason_raw) == ("stop", "completed")


@pytest.mark.parametrize(
    "raw,common",
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("refusal", "content_filter"),
        ("something_new", "other"),
    ],
)
def test_anthropic_stop_reasons_map_to_the_common_vocabulary_and_keep_their_word(raw, common):
    body = {**ANTHROPIC_WHOLE, "stop_reason": raw, "content": [{"type": "text", "text": "x"}]}
    if raw != "something_new":  # a word of a later API than the SDK's: unchecked, on purpose
        sdk_shapes.message(body)
    out = read_response(_record("/v1/messages", [json.dumps(body).encode()], JSON))
    assert (out.finish_reason, out.finish_reason_raw) == (common, raw)


# -- what can't be read is said so ----------------------------------------------------------------


def test_a_body_no_adapter_understands_is_unreadable_with_the_reason():
    odd = read_response(_record("/v1/messages", [b'{"answer": "42"}'], JSON))
    assert not odd.readable and odd.text == "" and "messages" in odd.error
    html = read_response(_record("/v1/responses", [b"<html>oops</html>"], [["content-type", "text/html"]]))
    assert not html.readable and html.error == "the body is not JSON"
    empty = read_response(_record("/v1/chat/completions", []))
    assert not empty.readable and empty.error == "empty body"


#: Each server's error body as it sends it (``sdk_shapes`` checks each against the server's own model), by route.
_TOO_LONG = {"message": "too long", "type": "BadRequestError", "param": None, "code": 400}
_NO_MODEL = {"message": "No such model", "type": "invalid_request_error", "param": "model", "code": "model_not_found"}
_NO_ROOM = {"code": 400, "message": "too long", "type": "exceed_context_size_error", "n_prompt_tokens": 9, "n_ctx": 4}
ERROR_BODIES = [
    ("/v1/responses", sdk_shapes.openai_error({"error": _NO_MODEL})),
    ("/v1/chat/completions", sdk_shapes.vllm_error({"error": _TOO_LONG})),
    ("/v1/completions", sdk_shapes.vllm_legacy_error({"object": "error", **_TOO_LONG})),
    ("/v1/chat/completions", sdk_shapes.llamacpp_error({"error": _NO_ROOM})),
    ("/completion", sdk_shapes.llamacpp_error({"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}})),
    (
        "/v1/messages",
        sdk_shapes.anthropic_error({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ),
    ("/api/chat", sdk_shapes.string_error({"error": "model 'x' not found"})),
]


@pytest.mark.parametrize(("path", "body"), ERROR_BODIES, ids=[f"{p}-{i}" for i, (p, _) in enumerate(ERROR_BODIES)])
def test_an_error_object_is_read_as_an_error_not_as_an_empty_answer(path, body):
    out = read_response(_record(path, [json.dumps(body).encode()], JSON, status=400))
    said = body["error"] if isinstance(body.get("error"), str) else (body.get("error") or body)["message"]
    assert out.readable and out.error_message == said and out.finish_reason == "error" and out.text == ""


#: llama.cpp's stream errors (its server source, tools/server): a build before the HTTP rewrite wrote an ``error:``
#: field (``server_sent_event(sink, "error", ...)``); a later one's Anthropic route an ``event: error`` whose data
#: is its bare error object, not Anthropic's. Each after text, as an error that ends the answer.
_LLAMA_ERROR = {"code": 500, "message": "slot crashed", "type": "server_error"}
_CHAT_HI = sdk_shapes.chat_chunk({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                                  "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]})  # fmt: skip
LLAMA_STREAM_ERRORS = [
    ("/v1/chat/completions", _sse(_CHAT_HI), b"error: " + json.dumps(_LLAMA_ERROR).encode() + b"\n\n"),
    ("/v1/messages", ANTHROPIC_STREAM[:9], b"event: error\ndata: " + json.dumps(_LLAMA_ERROR).encode() + b"\n\n"),
]


@pytest.mark.parametrize(("path", "head", "error"), LLAMA_STREAM_ERRORS, ids=["error-field", "anthropic-route"])
def test_llama_cpp_stream_errors_are_read_as_errors(path, head, error):
    from infertap.apis import ended_answer

    failed = _record(path, [*head, error])
    out = read_response(failed)
    assert out.text and out.error_message == "slot crashed" and out.finish_reason == "error"
    _, told, _, error_said = ended_answer(failed, generation=True)  # replay's reading of the tail: the same
    assert told and error_said == "slot crashed"
    # must match: the same error in an SSE comment line is no error
    said = _record(path, [*head, b": error: " + json.dumps(_LLAMA_ERROR).encode() + b"\n\n"])
    assert read_response(said).error_message is None


def test_a_stream_that_reports_an_error_midway_keeps_its_text_and_the_error():
    chunks = ANTHROPIC_STREAM[:9] + _sse({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    out = read_response(_record("/v1/messages", chunks))
    assert out.text == "Let me check." and out.error_message == "Overloaded" and out.finish_reason == "error"


def test_the_path_names_the_api_and_the_body_decides_when_the_path_does_not():
    assert api_for("/v1/chat/completions").name == "chat"
    assert api_for("/openai/deployments/x/chat/completions?api-version=1").name == "chat"
    assert api_for("/v1/messages").name == "messages" and api_for("/v1/responses").name == "responses"
    assert api_for("/v1/messages/count_tokens", {"messages": []}).name == "unknown"
    assert api_for("/generate", {"prompt": "x"}).name == "completions"
    assert api_for("/v1/embeddings", {"input": "x"}).name == "unknown"
    # Anthropic's Messages on Vertex AI and Bedrock: the model in the path, the API in the body.
    vertex = "/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-x:streamRawPredict"
    given = {"anthropic_version": "vertex-2023-10-16", "system": "Be terse.", "messages": [{"role": "user", "content": "hi"}]}
    assert api_for(vertex, given).name == "messages" and api_for("/model/anthropic.claude-x/invoke", given).name == "messages"
    asked = read_request({"path": vertex, "request_body": json.dumps(given).encode()})
    assert (asked.api, asked.system, asked.generation) == ("messages", "Be terse.", True)
    assert api_for(vertex, {"messages": [{"role": "user", "content": "hi"}]}).name == "chat"  # no anthropic_version: chat's shape
    # llama-server answers its native /completions alias in llama.cpp's own shape: read by its shape.
    native = read_response(
        _record(
            "/completions",
            _sse(
                {"content": "4", "stop": False},
                {"content": "2", "stop": True, "stop_type": "eos", "tokens_predicted": 2, "tokens_evaluated": 5},
            ),
        )
    )
    assert (native.api, native.text, native.finish_reason, native.output_tokens, native.prompt_tokens) == (
        "llamacpp",
        "42",
        "stop",
        2,
        5,
    )


def test_the_end_of_a_responses_stream_is_seen_far_from_its_last_byte():
    assert ended_by_marker(RESPONSES_STREAM[-3:])
    assert not ended_by_marker(RESPONSES_STREAM[:-1])
    assert ended_by_marker(ANTHROPIC_STREAM[-2:]) and ended_by_marker(CHAT_STREAM[-2:])
    # A response cut at its length limit, or failed, ends its stream as surely as a completed one.
    for ending in ("incomplete", "failed"):
        last = json.dumps(sdk_shapes.response_event({"type": f"response.{ending}", "response": {**_RESPONSE, "status": ending}, "sequence_number": 1}))  # fmt: skip
        assert ended_by_marker([f"event: response.{ending}\ndata: {last}\n\n".encode()]), ending
    assert not ended_by_marker([b'event: response.output_text.delta\ndata: {"delta": "response.failed"}\n\n'])


# -- requests --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("preferred", "other"),
    [
        (("max_completion_tokens", 50), ("max_tokens", 100)),
        (("n_predict", 7), ("max_completion_tokens", 50)),
        (("repeat_penalty", 1.0), ("repetition_penalty", 1.3)),
        (("stop", ["a"]), ("stop_sequences", ["b"])),
    ],
)
def test_a_setting_sent_under_two_names_is_read_by_one_precedence_whatever_the_key_order(preferred, other):
    """Read first-key-wins, ``max_completion_tokens`` then ``max_tokens`` gave 50 and the other order
    100, where vLLM and SGLang take ``max_completion_tokens`` either way."""
    name = sampling_fields(dict([preferred])).popitem()[0]
    for pair in ([preferred, other], [other, preferred]):
        assert sampling_fields(dict(pair)) == {name: preferred[1]}
    body = {"model": "m", "messages": [], "max_tokens": 100, "max_completion_tokens": 50}
    assert read_request({"path": "/v1/chat/completions", "request_body": json.dumps(body).encode()}).max_tokens == 50


def test_requests_of_every_api_read_into_one_shape():
    tools = [{"type": "function", "function": {"name": "weather", "parameters": {}}}]
    chat = read_request(
        {
            "path": "/v1/chat/completions",
            "request_body": json.dumps(
                {
                    "model": "m",
                    "messages": [
                        {"role": "system", "content": "Be brief."},
                        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                    ],
                    "tools": tools,
                    "max_completion_tokens": 5,
                    "temperature": 0,
                    "stream": True,
                }
            ).encode(),
        }
    )
    assert (chat.api, chat.generation, chat.system, chat.last_user, chat.tools, chat.max_tokens) == (
        "chat",
        True,
        "Be brief.",
        "hi",
        ("weather",),
        5,
    )
    assert chat.sampling == {"max_tokens": 5, "temperature": 0} and chat.stream is True and chat.items == 2
    msgs = read_request(
        {
            "path": "/v1/messages",
            "request_body": json.dumps(
                {
                    "model": "claude",
                    "system": [{"type": "text", "text": "Be brief."}],
                    "max_tokens": 64,
                    "stop_sequences": ["\n"],
                    "tools": [{"name": "weather", "input_schema": {}}],
                    "messages": [{"role": "user", "content": "hi"}],
                }
            ).encode(),
        }
    )
    assert (msgs.api, msgs.system, msgs.turns[0].role, msgs.tools, msgs.sampling) == (
        "messages",
        "Be brief.",
        "system",
        ("weather",),
        {"max_tokens": 64, "stop": ["\n"]},
    )
    resp = read_request(
        {
            "path": "/v1/responses",
            "request_body": json.dumps(
                {
                    "model": "gpt",
                    "instructions": "Be brief.",
                    "input": "hi",
                    "max_output_tokens": 9,
                    "tools": [{"type": "function", "name": "weather"}],
                    "previous_response_id": "resp_0",
                }
            ).encode(),
        }
    )
    assert (resp.api, resp.generation, resp.last_user, resp.max_tokens, resp.tools, resp.previous_response_id) == (
        "responses",
        True,
        "hi",
        9,
        ("weather",),
        "resp_0",
    )
    ollama = read_request(
        {
            "path": "/api/chat",
            "request_body": json.dumps(
                {
                    "model": "m",
                    "messages": [{"role": "user", "content": "hi"}],
                    "options": {"num_predict": 7, "repeat_penalty": 1.1},
                }
            ).encode(),
        }
    )
    assert ollama.sampling == {"max_tokens": 7, "repeat_penalty": 1.1}
    assert not read_request({"path": "/v1/models", "request_body": b""}).generation
    assert not read_request({"path": "/v1/embeddings", "request_body": b'{"input": "x"}'}).generation


@pytest.mark.parametrize(
    "case", ["messages streamed", "messages whole", "responses streamed", "responses whole", "chat streamed"]
)
def test_a_reply_is_the_turn_the_next_request_carries(case):
    """What the SDKs send back as the next turn's history reads as the same turn as the reply."""
    path, chunks, headers, _ = CASES[case]
    reply = read_response(_record(path, chunks, headers)).reply()
    if path == "/v1/messages":
        history = {
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": ANTHROPIC_WHOLE["content"]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]},
            ]
        }
    elif path == "/v1/responses":
        history = {
            "input": [
                {"role": "user", "content": "hi"},
                *_RESPONSE["output"],
                {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
            ]
        }
    else:
        history = {
            "messages": [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": "Let me check.",
                    "tool_calls": [
                        {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Paris"}'}}
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
            ]
        }
    turns = read_request({"path": path, "request_body": json.dumps({"model": "m", **history}).encode()}).turns
    assert turns[1] == reply and turns[2].text == "sunny"
    other = read_response(_record(path, [c.replace(b"Paris", b"Rome") for c in chunks], headers)).reply()
    assert turns[1] != other


def test_a_moved_cache_breakpoint_on_an_image_or_document_is_the_same_turn():
    """Claude Code moves ``cache_control`` to the last block each turn: on an image or a document
    (alone, or in a tool result) it made the turn read as another, and the conversation stopped linking."""
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    document = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "D"}}
    mark = {"cache_control": {"type": "ephemeral"}}

    def turns(*blocks: dict[str, Any]) -> Any:
        body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": list(blocks)}]}
        return read_request({"path": "/v1/messages", "request_body": json.dumps(body).encode()}).turns

    for block in (image, document, {"type": "tool_result", "tool_use_id": "t1", "content": [image]}):
        marked = {**block, "content": [image | mark]} if block["type"] == "tool_result" else block | mark
        assert turns(marked) == turns(block)
    assert turns(image) != turns({**image, "source": {**image["source"], "data": "BBBB"}})  # another image still differs


def test_an_image_sent_to_ollama_is_part_of_its_turn_and_one_it_generated_is_not():
    """Ollama sends images beside the text (``images``): a prompt or message with another image is
    another turn; an assistant message keeps the turn of the reply that made it, which leaves the
    images it generated out."""

    def turns(path: str, **body: Any) -> Any:
        return read_request({"path": path, "request_body": json.dumps({"model": "m", **body}).encode()}).turns

    def chat(image: str | None, role: str = "user") -> Any:
        return turns("/api/chat", messages=[{"role": role, "content": "a cat", **({"images": [image]} if image else {})}])

    assert chat("AAAA") != chat("BBBB") and chat("AAAA") != chat(None) and chat("AAAA") == chat("AAAA")
    assert turns("/api/generate", prompt="what?", images=["AAAA"]) != turns("/api/generate", prompt="what?", images=["BBBB"])
    assert turns("/api/generate", prompt="what?", images=["AAAA"]) == turns("/api/generate", prompt="what?", images=["AAAA"])
    generated = [json.dumps({"model": "m", "message": {"role": "assistant", "content": "a cat", "images": ["CCCC"]}, "done": True}).encode()]  # fmt: skip
    reply = read_response(_record("/api/chat", generated, [["content-type", "application/json"]])).reply()
    assert chat("CCCC", "assistant") == chat(None, "assistant") == (reply,)
