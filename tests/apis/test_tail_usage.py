"""``apis.tail_usage``: the usage and final finish reason in a cut answer's kept tail
(``response_tail``), of whole events only, per API; the answer itself stays unknown."""

from __future__ import annotations

import json
from typing import Any

from infertap.apis import NOT_KEPT, read_response, tail_usage
from infertap.capture.redact import REDACTED, Redactor
from infertap.engines.enrich import TAIL_USAGE, enrichment
from tests import sdk_shapes
from tests.fake_upstream import sse_chunk

SSE = [["content-type", "text/event-stream"]]
_BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": True}).encode()


def _cut(path: str, head: bytes, tail: bytes, size: int = 1 << 20, headers: Any = SSE) -> dict[str, Any]:
    return {
        "id": "x",
        "path": path,
        "status": 200,
        "request_body": _BODY,
        "response_headers": headers,
        "chunks": [head],
        "chunk_ns": [1],
        "response_body_size": size,
        "response_tail": tail,
    }


def _event(kind: str, data: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + json.dumps(data).encode() + b"\n\n"


def _chat_end(completion: int) -> bytes:
    head = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    finish = sdk_shapes.chat_chunk({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
    usage = {"prompt_tokens": 7, "completion_tokens": completion, "total_tokens": 7 + completion}
    usage = sdk_shapes.chat_chunk({**head, "choices": [], "usage": usage})
    return b"data: " + json.dumps(finish).encode() + b"\n\ndata: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n"


def test_each_apis_usage_and_finish_reason_are_read_from_the_whole_events_of_the_tail() -> None:
    words = b"".join(sse_chunk("c", i, "word ") for i in range(5))
    chat = _cut("/v1/chat/completions", words, words[17:] + _chat_end(4096))  # the tail starts mid-event
    got = tail_usage(chat)
    assert got is not None and (got.prompt_tokens, got.output_tokens, got.finish_reason, got.finish_reason_raw) == (
        7,
        4096,
        "length",
        "length",
    )
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": "max_tokens", "stop_sequence": None},
        "usage": {"output_tokens": 900},
    }
    delta = _event("message_delta", sdk_shapes.message_event(delta))
    messages = _cut(
        "/v1/messages", b"event: message_start\n", b'ext": "a"}}\n\n' + delta + _event("message_stop", {"type": "message_stop"})
    )
    got = tail_usage(messages)
    assert got is not None and (got.output_tokens, got.finish_reason_raw, got.finish_reason) == (900, "max_tokens", "length")
    done = {"id": "r", "object": "response", "created_at": 0, "model": "m", "status": "completed", "output": [], **sdk_shapes.RESPONSE_REST, "usage": sdk_shapes.response_usage(3, 800)}  # fmt: skip
    completed = sdk_shapes.response_event({"type": "response.completed", "response": done, "sequence_number": 9})
    responses = _cut("/v1/responses", b"event: response.created\n", b'"}\n\n' + _event("response.completed", completed))
    got = tail_usage(responses)
    assert got is not None and (got.prompt_tokens, got.output_tokens) == (3, 800)
    # The answer itself stays unknown.
    assert read_response(chat).error == NOT_KEPT and not read_response(chat).readable


def test_a_tail_of_no_whole_event_or_a_json_bodys_end_alone_says_nothing() -> None:
    end = _chat_end(50)
    assert tail_usage(_cut("/v1/chat/completions", b"data: {", end[-40:])) is None  # inside its last event
    assert tail_usage(_cut("/v1/chat/completions", b"data: {", b"")) is None
    body = json.dumps(
        {
            "id": "c",
            "choices": [{"index": 0, "message": {"content": "a" * 99}, "finish_reason": "stop"}],
            "usage": {"completion_tokens": 60},
        }
    ).encode()
    json_headers = [["content-type", "application/json"]]
    # The end of a JSON document: its usage can't be told apart from a nested one's without its start.
    assert tail_usage(_cut("/v1/chat/completions", body[:40], body[-60:], len(body), json_headers)) is None
    # Head and tail together the whole body: read exactly.
    got = tail_usage(_cut("/v1/chat/completions", body[:40], body[40:], len(body), json_headers))
    assert got is not None and (got.output_tokens, got.finish_reason) == (60, "stop")
    gzip = [["content-type", "text/event-stream"], ["content-encoding", "gzip"]]
    assert tail_usage(_cut("/v1/chat/completions", b"data: {", b"}\n\n" + end, headers=gzip)) is None


def test_the_enricher_records_a_cut_answers_tail_usage_and_the_redactor_searches_the_tail() -> None:
    record = _cut("/v1/chat/completions", b"data: {", b"}\n\n" + _chat_end(321))
    out = enrichment(None, None, record)
    assert out is not None and out["response"]["usage"] == {"prompt_tokens": 7, "completion_tokens": 321, "total_tokens": 328}
    assert out["response"]["finish_reason"] == "length" and out["response"]["parse_error"] == NOT_KEPT
    assert out["output_tokens"] == {"ids": None, "count": 321, "source": TAIL_USAGE}
    key = "sk-secret-0123456789"
    echoed = _cut("/v1/chat/completions", b"data: {", key[5:].encode() + b" and " + key.encode() + b"\n\n")
    Redactor().echoes(echoed, {key})  # a credential the tail starts inside, and one whole
    assert echoed["response_tail"] == (REDACTED + " and " + REDACTED + "\n\n").encode()


def _completed(response: dict[str, Any], event_first: bool = True) -> bytes:
    """A response.completed event: OpenAI writes its type first, vLLM's pydantic its response first."""
    if event_first:
        data = {"type": "response.completed", "response": response, "sequence_number": 9}
    else:
        data = {"response": response, "sequence_number": 9, "type": "response.completed"}
    return b"event: response.completed\ndata: " + json.dumps(data).encode() + b"\n\n"


def _long_answer(**more: Any) -> dict[str, Any]:
    """An answer longer than the tail, whose text and an item hold decoy usages."""
    text = 'x \\" "usage": {"input_tokens": 1, "output_tokens": 2}} \\\\' * 4000  # escaped quotes and backslashes
    decoy = {"type": "custom", "id": "i", "usage": {"input_tokens": 1, "output_tokens": 2}}
    message = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
    return {"id": "r", "object": "response", "status": "completed", "output": [message, decoy], **more}


def test_a_responses_usage_is_read_back_from_the_end_of_a_completed_event_longer_than_the_tail() -> None:
    """A runaway Responses answer's response.completed restates it whole: longer than the tail, it is
    no whole event there, but its usage (after its output) is read back from its end, exactly: the
    usages in the output's text and items are never taken for it."""
    from infertap.capture.records import RESPONSE_TAIL_BYTES

    usage = {"input_tokens": 30, "input_tokens_details": {"cached_tokens": 10}, "output_tokens": 70000, "total_tokens": 70030}
    after = {"usage": usage, "user": None, "metadata": {"note": '"usage": {"output_tokens": 3} }'}}  # OpenAI's order
    for event_first in (True, False):
        event = _completed(_long_answer(**after), event_first)
        assert len(event) > 2 * RESPONSE_TAIL_BYTES
        record = _cut("/v1/responses", b"event: response.created\n", event[-RESPONSE_TAIL_BYTES:])
        got = tail_usage(record)
        assert got is not None and (got.usage, got.prompt_tokens, got.cached_tokens, got.output_tokens) == (usage, 30, 10, 70000)
        assert read_response(record).error == NOT_KEPT
    # The usage last of all, as vLLM's serializer writes it: read too.
    event = _completed(_long_answer(usage=usage), False)
    got = tail_usage(_cut("/v1/responses", b"event: response.created\n", event[-RESPONSE_TAIL_BYTES:]))
    assert got is not None and got.output_tokens == 70000


def test_a_responses_usage_that_cant_be_read_back_exactly_stays_unknown() -> None:
    from infertap.capture.records import RESPONSE_TAIL_BYTES

    usage = {"input_tokens": 30, "output_tokens": 70000}
    tails = {
        "no usage: the last item's own is no usage of the response": _completed(_long_answer()),
        "the usage before the output": _completed({"id": "r", "usage": usage, **_long_answer()}),
        "an event of an unknown object member": b"data: "
        + json.dumps({"type": "response.completed", "response": _long_answer(usage=usage), "extra": {"a": 1}}).encode()
        + b"\n\n",
    }
    for why, event in tails.items():
        assert tail_usage(_cut("/v1/responses", b"event: response.created\n", event[-RESPONSE_TAIL_BYTES:])) is None, why
    event = _completed(_long_answer(usage=usage))
    starts_in_usage = event[-40:]  # the tail begins within the usage object
    assert b'"usage"' not in starts_in_usage
    assert tail_usage(_cut("/v1/responses", b"event: response.created\n", starts_in_usage)) is None
    # A stream not ended whole: its last event may be any (an item done, its object's "usage" its own).
    item = {"type": "response.output_item.done", "item": _long_answer(usage=usage)}
    event = b"event: response.output_item.done\ndata: " + json.dumps(item).encode() + b"\n\n"
    gone = {**_cut("/v1/responses", b"event: response.created\n", event[-RESPONSE_TAIL_BYTES:]), "end": "client_disconnected"}
    assert tail_usage(gone) is None


def _whole_and_cut(path: str, request: dict[str, Any], body: bytes, headers: Any = SSE) -> tuple[Any, Any]:
    """The same stream read whole, and cut as the recorder cuts it (a head, the last
    RESPONSE_TAIL_BYTES, its size): the answer's finish reason and usage read of each."""
    from infertap.capture.records import RESPONSE_TAIL_BYTES

    whole = {**_cut(path, body, b"", headers=headers), "request_body": json.dumps(request).encode()}
    del whole["response_tail"], whole["response_body_size"]
    head, tail = body[:4096], body[-RESPONSE_TAIL_BYTES:]
    assert len(head) + len(tail) < len(body)  # neither holds the whole answer's last event
    cut = {**whole, "chunks": [head], "response_body_size": len(body), "response_tail": tail}
    return read_response(whole), tail_usage(cut)


def _pydantic_response(status: str, output: list[Any], **more: Any) -> dict[str, Any]:
    """A response in the order vLLM's pydantic model writes it: incomplete_details and instructions
    before the output, status and usage after it."""
    usage = {"input_tokens": 30, "output_tokens": 70000}
    return {
        "id": "r",
        "incomplete_details": None,
        "instructions": None,
        **more,
        "output": output,
        "status": status,
        "usage": usage,
    }


_LONG_TEXT = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "w " * 50000}]}
_CALL = {"type": "function_call", "call_id": "c", "name": "get_weather", "arguments": '{"city":"Paris"}'}
_ASK = {"model": "m", "input": "q", "stream": True}
_TOOLS = {**_ASK, "tools": [{"type": "function", "name": "get_weather", "parameters": {}}]}
_LONG_INSTRUCTIONS = "be brief " * 10000  # before the output: the event outgrows the tail, the output does not


def test_a_cut_responses_finish_reason_is_read_back_as_the_whole_answers_is() -> None:
    """Its usage was read back from the end of response.completed, its finish reason left unknown;
    a data: [DONE] after that event made the usage unknown too. Each cut answer's finish reason and
    usage now match the same answer read whole, where its end says them."""
    created = _event("response.created", {"type": "response.created", "response": {"id": "r", "status": "in_progress"}})
    same = {
        "completed, no tool offered": (_ASK, _pydantic_response("completed", [_LONG_TEXT])),
        "completed, its call read whole": (
            _TOOLS,
            _pydantic_response("completed", [_CALL], instructions=_LONG_INSTRUCTIONS),
        ),
        "cut for its length, its reason read": (  # a server that writes incomplete_details after the output
            _TOOLS,
            {
                "id": "r",
                "instructions": _LONG_INSTRUCTIONS,
                "output": [_CALL],
                "incomplete_details": {"reason": "max_output_tokens"},
                "status": "incomplete",
                "usage": {"input_tokens": 30, "output_tokens": 70000},
            },
        ),
    }
    got = {}
    for name, (request, response) in same.items():
        for done in (b"", b"data: [DONE]\n\n"):
            event = _completed(response, event_first=False)
            whole, cut = _whole_and_cut("/v1/responses", request, created + event + done)
            assert cut is not None, name
            assert (cut.finish_reason, cut.finish_reason_raw, cut.usage) == (
                whole.finish_reason,
                whole.finish_reason_raw,
                whole.usage,
            ), name
            got[name] = cut.finish_reason
    assert got == {"completed, no tool offered": "stop", "completed, its call read whole": "tool_calls", "cut for its length, its reason read": "length"}  # fmt: skip


def test_a_cut_responses_finish_reason_its_end_cant_tell_stays_unknown() -> None:
    """Where the tail holds the usage but not what the finish reason needs, the reason is unknown,
    never a guess: a completed answer that may hold a call (tools offered, its output longer than
    the tail: stop or tool_calls), an incomplete one whose reason came before its output, and one
    whose status came before its output (OpenAI's order)."""
    created = _event("response.created", {"type": "response.created", "response": {"id": "r", "status": "in_progress"}})
    cases = {
        "may hold a call": (_TOOLS, _completed(_pydantic_response("completed", [_LONG_TEXT, _CALL]), False), "completed"),
        "reason before the output": (
            _ASK,
            _completed(_pydantic_response("incomplete", [_LONG_TEXT], incomplete_details={"reason": "max_output_tokens"}), False),
            "incomplete",
        ),
        "status before the output": (_ASK, _completed(_long_answer(usage={"input_tokens": 3, "output_tokens": 9})), None),
    }
    for name, (request, event, raw) in cases.items():
        whole, cut = _whole_and_cut("/v1/responses", request, created + event)
        assert whole.finish_reason is not None, name
        assert cut is not None and cut.usage == whole.usage, name
        assert (cut.finish_reason, cut.finish_reason_raw) == (None, raw), name


def test_a_cut_messages_finish_reason_is_the_whole_answers() -> None:
    """Messages' message_delta (stop_reason, usage) is a small event of the tail: a cut answer's
    finish reason and output usage match the whole answer's, a [DONE] after message_stop or not;
    a call's and a length's differ."""
    message = {"id": "m", "type": "message", "role": "assistant", "model": "m", "content": [], "stop_reason": None,
               "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 1}}  # fmt: skip
    start = sdk_shapes.message_event({"type": "message_start", "message": message})
    word = sdk_shapes.message_event(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "w " * 50}}
    )
    words = b"".join(_event("content_block_delta", word) for _ in range(2000))
    got = {}
    for reason in ("tool_use", "max_tokens"):
        delta = {
            "type": "message_delta",
            "delta": {"stop_reason": reason, "stop_sequence": None},
            "usage": {"output_tokens": 900},
        }
        sdk_shapes.message_event(delta)
        for done in (b"", b"data: [DONE]\n\n"):
            body = _event("message_start", start) + words + _event("message_delta", delta) + _event("message_stop", {"type": "message_stop"}) + done  # fmt: skip
            whole, cut = _whole_and_cut("/v1/messages", {"model": "m", "messages": [], "stream": True}, body)
            assert cut is not None and (cut.finish_reason, cut.finish_reason_raw, cut.output_tokens) == (
                whole.finish_reason,
                whole.finish_reason_raw,
                whole.output_tokens,
            )
            got[reason] = cut.finish_reason
    assert got == {"tool_use": "tool_calls", "max_tokens": "length"}


def _ollama_chat(text: str, call_arguments: str | None) -> bytes:
    """An /api/chat NDJSON stream: text lines, a line with its call (as Ollama sends it), the done line."""
    lines: list[dict[str, Any]] = [{"model": "m", "message": {"role": "assistant", "content": text}, "done": False}] * 400
    if call_arguments is not None:
        call = {"function": {"name": "get_weather", "arguments": {"city": call_arguments}}}
        lines.append({"model": "m", "message": {"role": "assistant", "content": "", "tool_calls": [call]}, "done": False})
    lines.append({"model": "m", "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop", "eval_count": 900})  # fmt: skip
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def test_a_cut_ollama_chat_answer_finishes_as_its_whole_answer_or_unknown() -> None:
    """Ollama says "stop" of an answer that calls a tool, and the call comes in a message line of
    its own: a cut answer whose tail holds no call finished "stop" where the whole one said
    tool_calls. Where its call may have come before the tail (tools offered), the reason is unknown."""
    ndjson = [["content-type", "application/x-ndjson"]]
    ask = {"model": "m", "messages": [{"role": "user", "content": "q"}]}
    tools = {**ask, "tools": [{"type": "function", "function": {"name": "get_weather"}}]}

    for request, body, reason in (
        (tools, _ollama_chat("w " * 100, "Paris"), "tool_calls"),
        (ask, _ollama_chat("w " * 100, None), "stop"),
    ):
        whole, cut = _whole_and_cut("/api/chat", request, body, ndjson)
        assert cut is not None and (cut.finish_reason, cut.finish_reason_raw, cut.output_tokens) == (reason, "stop", 900)
        assert (whole.finish_reason, whole.finish_reason_raw, whole.output_tokens) == (reason, "stop", 900)
    whole, cut = _whole_and_cut("/api/chat", tools, _ollama_chat("w " * 100, "P" * 70000), ndjson)  # a call longer than the tail
    assert whole.finish_reason == "tool_calls"
    assert cut is not None and (cut.finish_reason, cut.finish_reason_raw, cut.output_tokens) == (None, "stop", 900)


def _chat_stream(text: str, call_arguments: str | None, finish: str) -> bytes:
    """A chat stream as OpenAI sends it to a named tool_choice (older vLLM, Ollama's /v1 to any):
    text chunks, the call's pieces, then finish_reason ``finish`` and the usage chunk."""
    chunks: list[dict[str, Any]] = [{"index": 0, "delta": {"content": text}, "finish_reason": None}] * 800
    if call_arguments is not None:
        call = {"index": 0, "id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": call_arguments}}
        chunks.append({"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None})
    chunks.append({"index": 0, "delta": {}, "finish_reason": finish})
    head = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    events = [sdk_shapes.chat_chunk({**head, "choices": [c]}) for c in chunks]
    events.append(sdk_shapes.chat_chunk({**head, "choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 900, "total_tokens": 907}}))  # fmt: skip
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"


def test_a_cut_chat_answer_that_says_stop_of_a_call_finishes_as_its_whole_answer_or_unknown() -> None:
    """An engine that says "stop" of a call (Chat.finish: tool_calls) sends the call's pieces before
    its finish chunk: a cut answer whose tail holds none may have called before it where the
    request offered tools, so its reason is unknown, not the "stop" its whole answer is not."""
    ask = {"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": True}
    tools = {**ask, "tools": [{"type": "function", "function": {"name": "get_weather"}}]}
    for request, body, reason in (
        (tools, _chat_stream("w ", '{"city":"Paris"}', "stop"), "tool_calls"),  # the call in the tail
        (ask, _chat_stream("w ", None, "stop"), "stop"),  # no tool offered: none called
    ):
        whole, cut = _whole_and_cut("/v1/chat/completions", request, body)
        assert cut is not None and (cut.finish_reason, cut.finish_reason_raw, cut.output_tokens) == (reason, "stop", 900)
        assert (whole.finish_reason, whole.finish_reason_raw, whole.output_tokens) == (reason, "stop", 900)
    whole, cut = _whole_and_cut("/v1/chat/completions", tools, _chat_stream("w ", '"' + "P" * 70000 + '"', "stop"))
    assert whole.finish_reason == "tool_calls"  # a call longer than the tail: its pieces all before it
    assert cut is not None and (cut.finish_reason, cut.finish_reason_raw, cut.output_tokens) == (None, "stop", 900)
    whole, cut = _whole_and_cut("/v1/chat/completions", tools, _chat_stream("w ", '"' + "P" * 70000 + '"', "tool_calls"))
    assert cut is not None and (cut.finish_reason, whole.finish_reason) == ("tool_calls", "tool_calls")  # said outright


def test_a_cut_converse_streams_usage_and_stop_reason_are_read_from_its_tail_s_whole_messages() -> None:
    """A ``/converse-stream`` answer past the limit: its binary frames have no separator, so its tail is
    read from the first whole message there; its usage and stop reason are the whole answer's, a
    tool use's and a length's differ, and a tail holding neither says nothing."""
    from infertap.capture.records import RESPONSE_TAIL_BYTES
    from tests.eventstream_frames import EVENTSTREAM, answer_frames

    headers = [["content-type", EVENTSTREAM]]
    request = {"messages": [{"role": "user", "content": [{"text": "q"}]}]}
    path = "/model/amazon.nova-lite-v1%3A0/converse-stream"
    got = {}
    for stop in ("tool_use", "max_tokens"):
        body = b"".join(answer_frames(*(["w " * 50] * 2000), stop=stop))
        whole, cut = _whole_and_cut(path, request, body, headers=headers)
        assert whole.output_tokens == 2000 and whole.finish_reason_raw == stop
        assert cut is not None and (cut.prompt_tokens, cut.output_tokens, cut.finish_reason, cut.finish_reason_raw) == (
            whole.prompt_tokens,
            whole.output_tokens,
            whole.finish_reason,
            whole.finish_reason_raw,
        )
        assert cut.usage == whole.usage
        got[stop] = cut.finish_reason
    assert got == {"tool_use": "tool_calls", "max_tokens": "length"}
    # Head and tail together the whole body: read whole. A tail of text deltas alone: nothing.
    body = b"".join(answer_frames("a", "b"))
    contiguous = {
        **_cut(path, body[:50], body[50:], size=len(body), headers=headers),
        "request_body": json.dumps(request).encode(),
    }
    assert (found := tail_usage(contiguous)) is not None and (found.output_tokens, found.finish_reason) == (2, "stop")
    words = b"".join(answer_frames(*(["w " * 50] * 2000)))[: -(RESPONSE_TAIL_BYTES // 2)]
    no_end = {**_cut(path, words[:4096], words[-RESPONSE_TAIL_BYTES:], size=len(words) + 999, headers=headers), "request_body": json.dumps(request).encode()}  # fmt: skip
    assert tail_usage(no_end) is None


def _sglang_events(n: int) -> bytes:
    """SGLang's ``/generate`` stream of ``n`` events (each the text so far), the last with its finish and counts."""
    events = []
    for i in range(n):
        meta = {"id": "s", "prompt_tokens": 6, "completion_tokens": i + 1, "cached_tokens": 0, "finish_reason": None}
        if i == n - 1:
            meta["finish_reason"] = {"type": "length", "length": n}
        events.append(b"data: " + json.dumps({"text": "word " * (i + 1), "meta_info": meta}).encode() + b"\n\n")
    return b"".join(events) + b"data: [DONE]\n\n"


def test_a_cut_generate_answer_to_a_body_of_both_servers_shapes_is_read_as_the_server_that_answered() -> None:
    """A /generate body holding SGLang's text and TGI's inputs is read as the server its answer's
    shape names (read.read_request): its kept tail too, where its counts and finish reason are. An
    SGLang body alone must match: the same tail read the same."""
    both = {"text": "q", "sampling_params": {"max_new_tokens": 900}, "inputs": "q", "parameters": {"max_new_tokens": 9}}
    body = _sglang_events(900)
    for request in (both, {k: both[k] for k in ("text", "sampling_params")}):
        whole, cut = _whole_and_cut("/generate", {**request, "stream": True}, body)
        assert whole.api == "sglang-generate" and (whole.output_tokens, whole.finish_reason) == (900, "length")
        assert cut is not None and (cut.output_tokens, cut.finish_reason, cut.finish_reason_raw) == (900, "length", "length"), (
            request
        )
    # A TGI answer (a whole JSON body) to the same body: its head and tail together the whole body.
    details = {"finish_reason": "eos_token", "generated_tokens": 2, "seed": None, "prefill": [], "tokens": []}
    tgi = json.dumps({"generated_text": " Paris.", "details": details}).encode()
    record = {**_cut("/generate", tgi[:20], tgi[20:], len(tgi), [["content-type", "application/json"]])}
    record["request_body"] = json.dumps(both).encode()
    got = tail_usage(record)
    assert got is not None and (got.output_tokens, got.finish_reason) == (2, "stop")


def _sglang_batch_events(*prompts: tuple[int, int]) -> bytes:
    """SGLang's stream of a batch: each ``(index, n)`` in turn, that prompt's ``n`` events (each the
    text so far, the last with its finish and counts), its ``index`` on each but the first prompt's."""
    events = []
    for index, count in prompts:
        for i in range(count):
            done = {"type": "length", "length": count} if i == count - 1 else None
            meta = {"id": f"s{index}", "prompt_tokens": 6 + index, "completion_tokens": i + 1, "finish_reason": done}
            said = {"text": "word " * (i + 1), "meta_info": meta, **({"index": index} if index else {})}
            events.append(b"data: " + json.dumps(said).encode() + b"\n\n")
    return b"".join(events) + b"data: [DONE]\n\n"


def test_a_cut_sglang_batch_s_usage_is_every_prompt_s_or_unknown() -> None:
    """A batch's usage is every prompt's summed: a cut batch stream whose tail holds one prompt's
    events alone (the other ended in the middle not kept) has no usage, never that prompt's taken
    for the batch's; its finish reason (the first prompt's, ended in the tail) is still read. A tail
    holding every prompt's end reads the whole answer's counts. A batch answered as a JSON array is
    not read from its end (which prompts' answers it holds is unknown), its head and tail together
    the whole body read exactly. For an SGLang body and one of both servers' shapes alike."""
    sglang = {"text": ["a", "b"], "sampling_params": {"max_new_tokens": 900}}
    both = {**sglang, "inputs": "a", "parameters": {"max_new_tokens": 9}}
    for request in (sglang, both):
        asked = {**request, "stream": True}
        whole, cut = _whole_and_cut("/generate", asked, _sglang_batch_events((1, 1), (0, 900)))  # the second's end in the head
        assert whole.prompt_tokens == 6 + 7 and whole.output_tokens == 900 + 1 and whole.finish_reason == "length"
        assert cut is not None and cut.usage is None and (cut.prompt_tokens, cut.output_tokens) == (None, None), request
        assert (cut.finish_reason, cut.finish_reason_raw) == ("length", "length")
        # The match: the second prompt's end in the tail too, the whole answer's counts.
        whole, cut = _whole_and_cut("/generate", asked, _sglang_batch_events((0, 900), (1, 3)))
        assert whole.prompt_tokens == 6 + 7 and whole.output_tokens == 900 + 3, request
        assert cut is not None and (cut.prompt_tokens, cut.output_tokens, cut.finish_reason) == (13, 903, "length"), request
        # A JSON array: its end alone says nothing; with its head, the whole body, exactly.
        answers = [
            {"text": "word " * n, "meta_info": {"prompt_tokens": 6 + i, "completion_tokens": n}} for i, n in enumerate((9, 20000))
        ]
        answers[0]["meta_info"]["finish_reason"] = {"type": "stop"}
        array = json.dumps(answers).encode()
        record = _cut("/generate", array[:40], array[-4096:], len(array), [["content-type", "application/json"]])
        record["request_body"] = json.dumps(request).encode()
        assert tail_usage(record) is None, request
        got = tail_usage({**record, "response_tail": array[40:]})
        assert got is not None and (got.prompt_tokens, got.output_tokens, got.finish_reason) == (13, 20009, "stop"), request
