"""``read_chat_stream`` reads what ``read_response`` reads, or declines: on plain streams, odd events
(empty deltas, messages, other choices, errors, usage with nulls, tool-call pieces), and on what it
must leave to the general path (CRLF, events split across chunks, comments, several data lines,
non-JSON data, NaN, a torn stream, NDJSON, gzip).

Every test runs twice: with the optional C reader of the plainest bodies (``infertap._chatsse``, where
built; tests/apis/test_chat_stream_native.py holds it to ``_typed`` apart) and with the Python readers alone."""

from __future__ import annotations

import gzip
import itertools
import json
import os
from typing import Any

import pytest

from tests.extras import needs

needs("hypothesis", "dev")
from hypothesis import given, settings
from hypothesis import strategies as st

from infertap.apis import chat_stream, links_of, read_request, read_response, stream_done
from infertap.apis.chat_stream import _looped, _native, _typed, read_chat_stream
from infertap.apis.conversation import Prefixes, read_links
from tests import sdk_shapes
from tests.extras import NOT_BUILT, built

_chatsse = built("infertap._chatsse")

EXAMPLES = int(os.environ.get("INFERTAP_FUZZ_EXAMPLES", "200"))
SSE = [["content-type", "text/event-stream"]]
_C = False  # whether this run of the module reads with the C reader (the fixture below)


@pytest.fixture(
    scope="module",
    autouse=True,
    params=["python", pytest.param("c", marks=pytest.mark.skipif(_chatsse is None, reason=NOT_BUILT))],
)
def reader(request: pytest.FixtureRequest) -> Any:
    """The module's tests with the C reader where it is built, and again without it (as where it is not)."""
    global _C
    saved, _C = chat_stream._read_c, request.param == "c"
    if not _C:
        chat_stream._read_c = None
    yield request.param
    chat_stream._read_c, _C = saved, False


def _record(chunks: list[bytes], headers: list[list[str]] | None = None, path: str = "/v1/chat/completions") -> dict[str, Any]:
    return {
        "path": path,
        "request_body": b'{"messages":[]}',
        "response_headers": SSE if headers is None else headers,
        "chunks": chunks,
    }


def _general(record: dict[str, Any]) -> dict[str, Any]:
    """What decode takes from read_response: the Output's fields and each event's row."""
    out = read_response(record)
    rows = [
        (
            e.chunk,
            e.data,
            e.delta.content,
            e.delta.reasoning,
            e.delta.tool_deltas if e.delta.tool_calls else 0,
            e.delta.finish_reason,
            e.delta.usage,
        )
        for e in out.events
    ]
    fields = {k: v for k, v in vars(out).items() if k != "events"}
    return {"output": fields, "rows": rows, "done": stream_done(list(record["chunks"]), out)}


def _fast(record: dict[str, Any]) -> dict[str, Any] | None:
    s = read_chat_stream(record)
    if s is None:
        return None
    rows = list(zip(s.chunk, s.data, s.content, s.reasoning, s.tool_calls, s.finish_reason, s.usage, strict=True))
    fields = {k: v for k, v in vars(s.output).items() if k != "events"}
    assert s.output.events == []
    return {"output": fields, "rows": rows, "done": s.done}


def _agrees(record: dict[str, Any]) -> bool:
    """Asserts the fast reading equals the general one when it answers; says whether it answered."""
    fast = _fast(record)
    if fast is not None:
        assert fast == _general(record)
    return fast is not None


def _sse(*objs: Any, done: bool = True) -> list[bytes]:
    out = [b"data: " + (o if isinstance(o, bytes) else json.dumps(o).encode()) + b"\n\n" for o in objs]
    return out + ([b"data: [DONE]\n\n"] if done else [])


def _odd_chunk(delta: Any, finish: Any = None, **extra: Any) -> dict[str, Any]:
    """A chunk of ``delta`` unchecked: for the odd values (an index ``True``, a number for text) no SDK reads."""
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


def _chunk(delta: Any, finish: Any = None, *engine: str, **choice: Any) -> dict[str, Any]:
    """A chunk of ``delta`` the openai SDK reads; ``choice``'s fields beside it, ``engine`` naming those an engine
    adds (vLLM's ``stop_reason``, SGLang's ``matched_stop``), checked without them."""
    chunk = _odd_chunk(delta, finish)
    chunk["choices"][0].update(choice)
    return sdk_shapes.engine_shaped(sdk_shapes.chat_chunk, chunk, *engine)


def _engine_chunk(*choices: dict[str, Any]) -> dict[str, Any]:
    """An engine's chunk of ``choices`` that carry vLLM's ``stop_reason`` or SGLang's ``matched_stop`` and
    ``hidden_states``, the rest checked."""
    chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": list(choices)}
    return sdk_shapes.engine_shaped(sdk_shapes.chat_chunk, chunk, "stop_reason", "matched_stop", "hidden_states")


def _whole(*choices: dict[str, Any]) -> list[bytes]:
    """A whole chat answer of ``choices`` (each's message an assistant's), engines' fields beside them, the rest checked."""
    said = [{"finish_reason": "stop", **c, "message": {"role": "assistant", **c["message"]}} for c in choices]
    body = {"id": "c1", "object": "chat.completion", "created": 0, "model": "m", "choices": said}
    return [json.dumps(sdk_shapes.engine_shaped(sdk_shapes.chat_completion, body, "stop_reason", "matched_stop")).encode()]


PLAIN = _sse(
    _chunk({"role": "assistant", "content": ""}),
    _chunk({"content": "Hi"}),
    _chunk({"reasoning_content": "hmm"}),
    _chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}]}),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a":'}}]}),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}),
    _chunk({}, "tool_calls"),
    sdk_shapes.chat_chunk(
        {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
        }
    ),
)


def test_a_plain_stream_is_read_in_one_pass_as_read_response_reads_it() -> None:
    assert _agrees(_record(PLAIN))
    assert _agrees(_record([b"".join(PLAIN)]))  # one chunk holding every event
    assert _agrees(_record(PLAIN[:-1]))  # no [DONE]: stream_done from the last event
    body = b"".join(PLAIN)
    assert _agrees(_record([body[i : i + 7] for i in range(0, len(body), 7)]))  # events split across chunks


@pytest.mark.parametrize(
    "chunks",
    [
        [p.replace(b"\n", b"\r\n") for p in PLAIN],  # CRLF
        [b": keep-alive\n\n", *PLAIN],  # a comment
        [b"event: message\n", *PLAIN],  # a named event
        [b'data: {"choices":\ndata: []}\n\n', *PLAIN],  # two data lines
        [b"data: not json\n\n", *PLAIN],
        [b'data: {"choices": [], "x": NaN}\n\n', *PLAIN],  # json.loads reads NaN, msgspec doesn't
        [b'data: {"choices": [{"delta": {"content": "\\ud800"}}]}\n\n', *PLAIN],  # a lone surrogate
        [b"data: [1, 2]\n\n", *PLAIN],  # JSON but not an object
        [*PLAIN, b'data: {"choices": [{"delta": {"content": "x"'],  # torn: cut mid-event
        [*PLAIN[:-1], b'data: {"choices": []}'],  # a last event without its blank line
        [b"\n\n", *PLAIN],  # an empty block
    ],
)
def test_what_needs_the_general_path_gets_it(chunks: list[bytes]) -> None:
    record = _record(chunks)
    assert read_chat_stream(record) is None
    assert _general(record)  # and read_response reads it as it always did


def test_other_apis_framings_and_encodings_are_declined() -> None:
    ndjson = [json.dumps(_chunk({"content": "x"})).encode() + b"\n"]
    assert read_chat_stream(_record(ndjson, [["content-type", "application/x-ndjson"]])) is None
    assert (
        read_chat_stream(_record(_whole({"index": 0, "message": {"content": "x"}}), [["content-type", "application/json"]]))
        is None
    )
    assert read_chat_stream(_record([gzip.compress(b"".join(PLAIN))], [*SSE, ["content-encoding", "gzip"]])) is None
    assert read_chat_stream(_record(PLAIN, path="/v1/completions")) is None
    assert read_chat_stream(_record(PLAIN, path="/v1/responses")) is None
    assert read_chat_stream(_record([])) is None
    assert read_chat_stream(_record(_sse({"foo": 1}))) is None  # nothing chat-shaped: read_response sniffs


ODD_EVENTS = [
    _chunk({}),  # an empty delta: the message is read instead
    {"choices": [{"index": 0, "delta": {}, "message": {"content": "from message"}}]},
    {"choices": [{"index": 0, "delta": {"foo": 1}, "message": {"content": "not read"}}]},
    {"choices": [{"index": 1, "delta": {"content": "second choice"}}]},
    {"choices": [{"index": None, "delta": {"content": "null index"}}]},
    {"choices": [{"delta": {"content": "no index"}}, {"delta": {"content": " twice"}}]},
    {"choices": [{"index": 0, "text": "legacy text", "finish_reason": "length"}]},
    {"choices": [{"index": 0, "delta": {"reasoning": "r"}, "finish_reason": ""}]},
    {"choices": [{"index": 0, "delta": {"content": 5, "reasoning_content": ""}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"function": {"name": "g", "arguments": {"k": [1, 2]}}}, "x"]}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 2, "id": None, "function": {"arguments": "[]"}}]}}]},
    {"choices": [{"index": 0, "logprobs": {"content": [{"id": 7}, {"id": "x"}, 3]}, "token_ids": [1, "2", 3]}]},
    {"choices": "not a list", "model": 5, "id": ""},
    {"choices": None, "object": "chat.completion.chunk", "model": "", "system_fingerprint": 0},
    {"choices": [], "usage": {}, "timings": {}},
    {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3, "x": None}},  # a field no SDK knows
    {"choices": [], "usage": {"prompt_tokens": 9, "prompt_tokens_details": {"cached_tokens": 4}}, "timings": {"prompt_ms": 1.5}},
    {"choices": [], "usage": [1], "id": 7, "system_fingerprint": "fp"},
    {"error": {"message": "overloaded"}},
    {"error": ""},
    {"error": "plain"},
    {"choices": [{"index": 0, "delta": {"content": "é\u2028😀"}, "finish_reason": "eos"}]},
    {"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": "weird"}], "model": "m2", "id": "c2"},
    {"object": "other"},
    {"choices": [{"index": 0.0, "delta": {"content": "float index"}}]},
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop", "stop_reason": "###"}]},  # vLLM's stop string
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop", "stop_reason": 128009}]},  # a stop token id: none
    {"choices": [{"index": 0, "delta": {}, "stop_reason": ""}]},
    {"choices": [{"index": 0, "delta": {}, "stop_reason": True}]},
    {"choices": [{"index": 0, "delta": {"content": "s"}, "stop_reason": None}]},
    {
        "choices": [
            {
                "index": 0,
                "delta": {
                    "content": [
                        {"type": "thinking", "thinking": [{"type": "text", "text": "t"}]},
                        {"type": "text", "text": "part"},
                    ]
                },
            }
        ]
    },  # fmt: skip
    {
        "choices": [
            {"index": 0, "delta": {"tool_calls": [{"index": 0, "type": "custom", "custom": {"name": "c", "input": "x"}}]}}
        ]
    },  # fmt: skip
    {"choices": [{"index": 0, "delta": {"audio": {"id": "a", "transcript": "spoken"}}}]},
    {
        "choices": [
            {"index": 0, "delta": {"content": "c", "annotations": [{"type": "url_citation", "url_citation": {"url": "u"}}]}}
        ]
    },  # fmt: skip
    {"choices": [{"index": 0, "delta": {"content": "c", "annotations": []}}]},
    {"choices": [{"index": 0, "delta": {"reasoning_content": "a", "reasoning": "b"}}]},  # both, and they differ
    {"choices": [{"index": 0, "delta": {"reasoning_content": "a", "reasoning": "a"}}]},
    {"choices": [{"index": "0", "delta": {"content": "string index"}, "finish_reason": "length"}]},
    {"choices": [{"index": 0, "delta": {"images": [{"type": "image_url", "image_url": {"url": "data:,x"}}]}}]},
    {"choices": [{"index": 0, "delta": {"content": "i", "images": []}}]},
]
#: Events of an answer with several choices (n > 1): the general fold reads them, each choice apart.
OTHER_CHOICES = [e for e in ODD_EVENTS if any(isinstance(c, dict) and c.get("index") == 1 for c in e.get("choices") or ())]
#: And those of an audio answer, citing a source or with an image: the general fold keeps them.
DECLINED = [
    *OTHER_CHOICES,
    *(e for e in ODD_EVENTS if any(k in json.dumps(e) for k in ("audio", "url_citation", "image_url"))),
]


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    st.lists(st.sampled_from(ODD_EVENTS), min_size=1, max_size=8),
    st.lists(st.integers(min_value=1, max_value=400), max_size=6),
    st.booleans(),
)
def test_odd_events_read_alike_wherever_the_chunks_cut(events: list[Any], cuts: list[int], done: bool) -> None:
    body = b"".join(_sse(*events, done=done))
    bounds = sorted({c % (len(body) + 1) for c in cuts} | {0, len(body)})
    chunks = [body[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    _agrees(_record(chunks))


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(st.sampled_from([*ODD_EVENTS, {"id": "first"}, {"id": "u0", "usage": {"prompt_tokens": 1}}]), max_size=6))
def test_replays_linking_reads_the_reply_as_read_response_does(events: list[Any]) -> None:
    """``read_links`` (replay's reading of a reply, only as far as linking needs it) gives the links
    that ``links_of`` gives from the whole response: the reply, the response id, whether it was one."""
    record = {**_record(_sse(_chunk({"content": "a"}), *events)), "status": 200}
    record["request_body"] = b'{"messages": [{"role": "user", "content": "q"}]}'
    request = read_request(record)
    prefixes = Prefixes.of(request.api, request.turns)
    assert read_links(record, prefixes, None, request.generation) == links_of(record, request, read_response(record))


def test_most_odd_events_are_read_by_the_fast_path() -> None:
    """The agreement above is not vacuous: the one-pass reading answers for nearly all of them."""
    answered = [_agrees(_record(_sse(_chunk({"content": "a"}), event))) for event in ODD_EVENTS]
    assert OTHER_CHOICES and answered == [event not in DECLINED for event in ODD_EVENTS]


def test_several_choices_are_read_each_apart_and_the_fast_readings_decline_them() -> None:
    """n > 1: choices other than the first were left out of every reading, so two answers whose
    second choices differ compared as identical."""
    events = [
        _engine_chunk({"index": 0, "delta": {"content": "Hel"}}, {"index": 1, "delta": {"content": "Good"}}),
        _engine_chunk(
            {"index": 1, "delta": {"content": "bye", "tool_calls": [{"index": 0, "function": {"name": "f", "arguments": "{}"}}]}}
        ),
        _engine_chunk({"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop"}),
        _engine_chunk({"index": 1, "delta": {}, "finish_reason": "length", "stop_reason": None}),
        _engine_chunk({"index": 2, "delta": {"content": "!"}, "finish_reason": "stop", "stop_reason": "###"}),
    ]
    record = _record(_sse(*events))
    assert read_chat_stream(record) is None and not _typed_agrees(record["chunks"])
    out = read_response(record)
    assert out.text == "Hello" and out.finish_reason_raw == "stop"
    assert out.choices == [
        {
            "index": 1,
            "text": "Goodbye",
            "reasoning": "",
            "refusal": "",
            "audio": "",
            "citations": [],
            "tool_results": [],
            "tool_calls": [{"id": None, "name": "f", "arguments": "{}"}],
            "finish_reason": "length",
            "error": None,
            "stop_sequence": None,
            "stop_reason": "null",  # said: an end of sequence or the length
            "matched_stop": None,
        },  # fmt: skip
        {
            "index": 2,
            "text": "!",
            "reasoning": "",
            "refusal": "",
            "audio": "",
            "citations": [],
            "tool_results": [],
            "tool_calls": [],
            "finish_reason": "stop",
            "error": None,
            "stop_sequence": "###",
            "stop_reason": '"###"',
            "matched_stop": None,
        },  # fmt: skip
    ]
    whole = _whole({"index": 1, "message": {"content": "b"}}, {"index": 0, "message": {"content": "a"}})
    out = read_response(_record(whole, [["content-type", "application/json"]]))
    assert out.text == "a" and [c["text"] for c in out.choices] == ["b"]


def test_the_stop_sequence_that_ended_an_answer_is_read_by_every_reading() -> None:
    """vLLM's ``stop_reason`` and SGLang's ``matched_stop``, by the typed, the looped and the general
    readings; a stop token id is not a stop sequence (vLLM names ids no other engine does)."""
    for key, said in (("stop_reason", "###"), ("matched_stop", "END")):
        chunks = _sse(_chunk({"content": "a"}), _engine_chunk({"index": 0, "delta": {}, "finish_reason": "stop", key: said}))
        assert _typed_agrees(chunks) and _agrees(_record(chunks))
        assert read_response(_record(chunks)).stop_sequence == said
    for none in ("", True, None, 106):
        chunks = _sse(_engine_chunk({"index": 0, "delta": {"content": "a"}, "stop_reason": none}))
        assert _agrees(_record(chunks)) and read_response(_record(chunks)).stop_sequence is None


def test_vllms_stop_reason_is_read_as_said_by_every_reading() -> None:
    """vLLM's ``stop_reason`` as JSON, null too (an end of sequence is said, not missing): a stop
    string and a token id of the same digits are two; a chunk without the key says nothing."""
    said = {"###": '"###"', "106": '"106"', 106: "106", None: "null"}
    for value, read in said.items():
        chunks = _sse(_chunk({"content": "a"}), _engine_chunk({"index": 0, "delta": {}, "finish_reason": "stop", "stop_reason": value}))  # fmt: skip
        assert _typed_agrees(chunks) and _agrees(_record(chunks))
        assert read_response(_record(chunks)).stop_reason == read, value
    chunks = _sse(_chunk({"content": "a"}), _chunk({}, "stop"))  # llama.cpp's, OpenAI's: no stop_reason
    assert _typed_agrees(chunks) and _agrees(_record(chunks)) and read_response(_record(chunks)).stop_reason is None
    null_then_string = (
        [{"index": 0, "delta": {"content": "a"}, "stop_reason": None}],
        [{"index": 0, "delta": {}, "stop_reason": "###"}],
    )
    later = _sse(*(_engine_chunk(*c) for c in null_then_string))
    assert read_response(_record(later)).stop_reason == '"###"'  # the last said


def test_sglangs_matched_stop_is_read_as_said_by_every_reading() -> None:
    """SGLang's ``matched_stop`` as JSON, null too, as SGLang streams it (every chunk carries the key,
    null before the last; a hidden-states chunk may follow it): a later null does not undo the
    value, a stop string and a token id of the same digits are two, a whole body reads alike."""
    said = {"###": '"###"', "2": '"2"', 2: "2", None: "null"}
    for value, read in said.items():
        choice = {"index": 0, "logprobs": None, "finish_reason": None, "matched_stop": None}
        chunks = _sse(
            _engine_chunk({**choice, "delta": {"role": "assistant", "content": ""}}),
            _engine_chunk({**choice, "delta": {"content": "a"}}),
            _engine_chunk({**choice, "delta": {}, "finish_reason": "stop", "matched_stop": value}),
            _engine_chunk({**choice, "delta": {"hidden_states": [0.5]}}),
        )
        assert _typed_agrees(chunks) and _agrees(_record(chunks))
        assert read_response(_record(chunks)).matched_stop == read, value
        whole = _whole({"index": 0, "message": {"content": "a"}, "finish_reason": "stop", "matched_stop": value})
        out = read_response(_record(whole, [["content-type", "application/json"]]))
        assert out.matched_stop == read and out.stop_reason is None, value
    chunks = _sse(_chunk({"content": "a"}), _chunk({}, "stop", "stop_reason", stop_reason=None))  # vLLM's: no matched_stop
    assert _typed_agrees(chunks) and _agrees(_record(chunks)) and read_response(_record(chunks)).matched_stop is None
    two = [{"index": 0, "message": {"content": "a"}, "matched_stop": 2}, {"index": 1, "message": {"content": "b"}, "matched_stop": "###"}]  # fmt: skip
    out = read_response(_record(_whole(*two), [["content-type", "application/json"]]))
    assert out.matched_stop == "2" and out.choices[0]["matched_stop"] == '"###"'


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [b"data: ", b"data:", b": c", b"{}", b'{"choices":[]}', b"[DONE]", b"\n", b"\n\n", b" ", b"\r", b"\xff", b'"x"']
        ),
        max_size=12,
    ),
    st.lists(st.integers(min_value=0, max_value=60), max_size=4),
)
def test_damaged_bodies_read_alike_or_are_declined(parts: list[bytes], cuts: list[int]) -> None:
    body = b"".join(parts)
    bounds = sorted({c % (len(body) + 1) for c in cuts} | {0, len(body)})
    _agrees(_record([body[a:b] for a, b in zip(bounds, bounds[1:], strict=False)] or [b""]))


# -- the typed reading of the plainest bodies against the loop ----------------------------------------

TYPED_ODD: list[Any] = [
    *ODD_EVENTS,
    _odd_chunk({"tool_calls": [{"index": True, "function": {"name": "f"}}]}),
    _odd_chunk({"tool_calls": [{"index": 1.0, "function": {"arguments": "x"}}]}),
    _odd_chunk({"tool_calls": [{"index": None, "id": "a"}, {"id": "b", "function": None}]}),
    _odd_chunk({"tool_calls": [{"function": {"arguments": {"a": 1}}}]}),
    _odd_chunk({"tool_calls": [5]}),
    _odd_chunk({"tool_calls": None, "content": None, "reasoning": "r", "reasoning_content": ""}),
    _odd_chunk({}, None, usage=None, timings=None, system_fingerprint=None),
    {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "message": {"content": "m"}}]},
    {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": "a"}, "logprobs": None, "token_ids": None}],
    },
    {"choices": [{"index": 0, "delta": {"content": "a"}}, {"index": 0, "delta": {"content": "b"}, "finish_reason": "stop"}]},
    {"choices": [{"index": 1, "delta": {"content": "other"}}, {"delta": {"content": "no index"}}]},
    {"choices": [{"index": 0, "delta": {"content": "[DONE]"}}]},
    {"choices": [], "usage": {"completion_tokens": None, "prompt_tokens": 2}, "model": None, "id": None},
    {"choices": [], "object": 5},
]
DUPLICATES = b'{"model": "a", "model": "b", "choices": [{"index": 0, "delta": {"content": "x", "content": "y"}}]}'


def _typed_agrees(chunks: list[bytes]) -> bool:
    """``_typed`` equals ``_looped`` wherever it answers, the C reader ``_typed`` wherever it answers;
    whether the reading of this run (C, or ``_typed`` without it) answered."""
    body = b"".join(chunks)
    ends = list(itertools.accumulate(map(len, chunks)))
    typed = _typed(chunks, body, ends)
    if typed is not None:
        assert typed == _looped(chunks, body, ends)
    native = _native(chunks, body, ends)
    assert native is None or native == typed
    return (native if _C else typed) is not None


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    st.lists(st.sampled_from([*TYPED_ODD, DUPLICATES]), min_size=1, max_size=8),
    st.lists(st.integers(min_value=1, max_value=400), max_size=6),
    st.booleans(),
)
def test_the_typed_reading_is_the_loops_wherever_it_answers(events: list[Any], cuts: list[int], done: bool) -> None:
    body = b"".join(_sse(*events, done=done))
    bounds = sorted({c % (len(body) + 1) for c in cuts} | {0, len(body)})
    _typed_agrees([body[a:b] for a, b in zip(bounds, bounds[1:], strict=False)])


def test_the_typed_reading_answers_for_plain_streams_and_declines_the_rest() -> None:
    assert _typed_agrees(PLAIN)
    assert _typed_agrees([b"".join(PLAIN)])
    assert _typed_agrees(_sse(DUPLICATES, _chunk({"content": "é"}))) is not _C  # C declines a field said twice
    assert not _typed_agrees(PLAIN[:-1])  # no [DONE]: whether it ended is the last event's to say
    _typed_agrees([*PLAIN, b"\n"])  # trailing whitespace: answered or not, alike
    for declined in (
        _sse(_odd_chunk({"tool_calls": [{"index": True}]})),  # an index the loop reads as none
        _sse(_odd_chunk({"content": 5})),
        _sse({"error": {"message": "overloaded"}}),  # no chat shape: the loop looks for an error
        _sse(_chunk({"content": "[DONE]"})),
        [b'data: {"choices": [{"delta": {"content": "\xff"}}]}\n\n', b"data: [DONE]\n\n"],  # not UTF-8
        [b"data: {}\n\ndata: [DONE]\n\n"],
        _sse(_chunk({"content": "a"}), {"choices": [{"index": 0, "logprobs": {"content": [{"id": 7}]}}]}),
        _sse(_chunk({"content": "a"}), {"choices": [{"index": 0, "delta": {}, "message": {"content": "m"}}]}),
    ):
        assert not _typed_agrees(declined)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(st.sampled_from([*TYPED_ODD, DUPLICATES]), min_size=1, max_size=6), st.booleans())
def test_compare_summarizes_a_plainest_stream_as_read_response_reads_it(events: list[Any], done: bool) -> None:
    from infertap.analysis import summaries

    record = {**_record(_sse(*events, done=done)), "id": "x", "method": "POST", "status": 200}
    fast = summaries.summarize(record)
    original = summaries.read_plainest_chat_stream
    summaries.read_plainest_chat_stream = lambda record: None  # type: ignore[assignment]
    try:
        assert fast == summaries.summarize(record)
    finally:
        summaries.read_plainest_chat_stream = original


def test_compare_summarizes_the_plain_stream_by_the_typed_reading() -> None:
    from infertap.analysis import summaries

    record = {**_record(PLAIN), "id": "x", "method": "POST", "status": 200}
    assert summaries.read_plainest_chat_stream(record) is not None  # the path the hypothesis test above compares
    summary = summaries.summarize(record)
    assert (summary.text, summary.reasoning, summary.finish_reason) == ("Hi", "hmm", "tool_calls")
    assert summary.tool_calls == [{"id": "call_1", "name": "f", "arguments": '{"a":1}'}]
