"""``ChatRequests`` reads a chat request exactly as ``read_request`` does (every field but ``body``),
with the same conversation prefixes as ``Prefixes.of`` its turns, or declines it: on generated
bodies, on bodies that grow turn by turn through one reader (its remembered messages), and on
the bodies JSON reads in surprising ways."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import pytest

from infertap.apis import read_request
from infertap.apis.chat_request import ChatRequests
from infertap.apis.conversation import Prefixes
from infertap.apis.shapes import Request
from tests.extras import needs

needs("hypothesis", "dev")
from hypothesis import given, settings
from hypothesis import strategies as st

EXAMPLES = int(os.environ.get("INFERTAP_FUZZ_EXAMPLES", "200"))
PATH = "/v1/chat/completions"


def _fields(r: Request) -> dict[str, Any]:
    return {f.name: getattr(r, f.name) for f in dataclasses.fields(r) if f.name != "body"}


def _agrees(reader: ChatRequests, raw: bytes, path: str = PATH) -> bool:
    """Whether the reader took the body; asserts that what it gives is read_request's."""
    record = {"path": path, "request_body": raw}
    fast = reader.read(record)
    if fast is None:
        return False
    request, prefixes = fast
    expected = read_request(record)
    assert _fields(request) == _fields(expected)
    assert (request.body is None) == (expected.body is None)
    if expected.turns:
        assert prefixes == Prefixes.of(expected.api, expected.turns)
    return True


_odd = st.sampled_from([None, 5, 1.5, True, "s", [], {}, [1], {"a": 1}])
_text = st.text(max_size=8)
_call = st.fixed_dictionaries(
    {"id": _text, "type": st.just("function"), "function": st.fixed_dictionaries({"name": _text, "arguments": _text | _odd})}
)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "developer", "user", "assistant", "tool", "", None, 5])},
    optional={
        "content": st.one_of(
            _text, _text, st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": _text}), max_size=2), _odd
        ),
        "tool_calls": st.lists(_call, max_size=2) | _odd,
        "name": _text,
    },
)
_top = st.dictionaries(
    st.sampled_from(
        [
            "model",
            "stream",
            "temperature",
            "top_p",
            "max_tokens",
            "max_completion_tokens",
            "seed",
            "tool_choice",
            "previous_response_id",
            "prompt",
            "input",
            "n_predict",
            "repetition_penalty",
            "stop",
        ]
    ),  # fmt: skip
    _text | _odd | st.integers(-5, 5) | st.floats(allow_nan=False),
    max_size=5,
)


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    _top,
    st.one_of(st.lists(st.one_of(_message, _message, _message, _odd), max_size=6), _odd, st.none()),
    st.lists(st.fixed_dictionaries({"type": st.just("function"), "function": st.fixed_dictionaries({"name": _text})}), max_size=2)
    | _odd,
    st.booleans(),
    st.booleans(),
)
def test_generated_bodies_read_as_read_request_reads_them(
    top: dict[str, Any], messages: Any, tools: Any, ascii_only: bool, with_tools: bool
) -> None:
    body = dict(top)
    if messages is not None:
        body["messages"] = messages
    if with_tools:
        body["tools"] = tools
    _agrees(ChatRequests(), json.dumps(body, ensure_ascii=ascii_only).encode())


def test_a_conversation_read_turn_by_turn_agrees_at_every_turn() -> None:
    reader = ChatRequests()
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent. é"}]
    taken = 0
    for turn in range(12):
        messages.append({"role": "user", "content": f"step {turn}"})
        for other in range(2):  # a second conversation interleaved, sharing the system prompt
            raw = json.dumps(
                {"model": "m", "messages": [*messages[:1], *messages[1:]] if other == 0 else messages[:2], "tools": tools}
            )
            taken += _agrees(reader, raw.encode())
        call = {"id": f"c{turn}", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}}
        messages += [{"role": "assistant", "content": None, "tool_calls": [call]}, {"role": "tool", "content": "x"}]
    assert taken == 24  # the usual body is never left to the slow path


@pytest.mark.parametrize(
    "raw",
    [
        b'{"messages": [{"role": "user", "content": "a"}], "messages": [{"role": "user", "content": "b"}]}',
        b'{"model": "a", "model": 5, "max_tokens": 1, "max_completion_tokens": 2}',
        b'{"max_completion_tokens": 2, "max_tokens": 1, "messages": []}',
        b'{"messages": [], "temperature": NaN}',
        b'{"messages": [], "temperature": 1e400}',
        b'{"temperature": 1e400, "messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 0.10000000000000001}}}]}]}',
        b'{"messages": [{"role": "user", "content": "\\ud800"}]}',
        b'{"messages": [{"role": "user", "content": "\xff"}]}',
        b'{"messages": [{"role": "user", "content": "\xc3\xa9"}]}',
        b'\xef\xbb\xbf{"messages": []}',
        b' \n{"messages": []} \n',
        b'{"messages": []} x',
        b'{"messages": [1, "a", null, {"role": "user"}]}',
        b'{"messages": [{"role": "system", "content": "a"}, {"role": "developer", "content": "b"}, {"role": "user"}]}',
        b'{"messages": null}',
        b'{"messages": "hi"}',
        b'{"messages": {"role": "user"}}',
        b'{"messages": [], "tools": 5}',
        b'{"messages": [], "tools": "abc"}',
        b'{"messages": [], "tools": [5, {"name": "flat"}, {"type": "function", "function": {"name": "f"}}]}',
        b'{"messages": [{"role": "user", "content": "a"}]',
        b'{"messages": [{"role": "user", "content": "a",}]}',
        b'{"\\ud800": 1, "messages": []}',
        b'{"model": "m"}',
        b'{"stream": 0, "messages": [], "stop": ["a"]}',
        b"[]",
        b"",
    ],
)
def test_bodies_json_reads_oddly_are_read_alike_or_declined(raw: bytes) -> None:
    _agrees(ChatRequests(), raw)


@pytest.mark.parametrize("odd", [b'"seed": 1e400', b'"user": "\\ud83d"'])
def test_a_value_only_the_slow_parser_takes_leaves_the_rest_of_the_body_read_alike(odd: bytes) -> None:
    """One value msgspec refuses sent the whole body to the exact parse: an object call's
    ``0.10000000000000001`` read as ``1.0000000000000001E-1``, not ``0.1``, and the conversation
    stopped linking to the turns before it."""
    plain = b'{"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 0.10000000000000001}}}]}]}'
    odd_body = plain[:1] + odd + b", " + plain[1:]
    read = [read_request({"path": PATH, "request_body": raw}) for raw in (plain, odd_body)]
    assert [r.turns[0].calls for r in read] == [(("f", '{"x":0.1}'),)] * 2
    _agrees(ChatRequests(), odd_body)  # where the fast path takes it, it reads the same


def test_other_paths_are_declined() -> None:
    raw = b'{"messages": [{"role": "user", "content": "a"}]}'
    assert _agrees(ChatRequests(), raw, "/v1/chat/completions")
    for path in ("/v1/completions", "/api/chat", "/v1/messages", "/tokenize", "/custom"):
        assert ChatRequests().read({"path": path, "request_body": raw}) is None
