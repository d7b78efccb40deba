"""The decode's fast paths give what the plain ones give: msgspec's JSON against ``json.loads``, the
one-pass split of a body without ``\\r`` against the general loop, the cheaper turn keys."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from tests.extras import needs

needs("hypothesis", "dev")
from hypothesis import given, settings
from hypothesis import strategies as st

from infertap.apis import is_generation, read_request
from infertap.apis.body import timed_payloads
from infertap.apis.fastjson import loads
from infertap.apis.shapes import Turn, canonical_arguments

EXAMPLES = int(os.environ.get("INFERTAP_FUZZ_EXAMPLES", "200"))

EDGES = [
    '{"a":1,"a":2}',
    "\ufeff{}",
    '{"a":"\\ud800"}',
    '{"a":"\\udc00x"}',
    "[1e400]",
    "[-1e400]",
    "[NaN]",
    "[Infinity]",
    "[18446744073709551616]",
    "[-9223372036854775809]",
    "[123456789012345678901234567890]",
    "[0.30000000000000004441]",
    "[1.5e-400]",
    "[-0]",
    "[-0.0]",
    "[1E2]",
    '"\\u0000"',
    '{"\\ud83d\\ude00":1}',
    '{"a":"\x01"}',
    '{"a":1}x',
    "1 2",
    "",
    " {} ",
    "[" * 900 + "]" * 900,
]


def _outcome(fn: Any, data: Any) -> tuple[str, Any]:
    try:
        return "ok", repr(fn(data))  # repr: 1 and 1.0, nan and nan, -0.0 and 0.0 told apart
    except ValueError:
        return "error", None


@pytest.mark.parametrize("text", EDGES)
def test_fast_json_reads_every_edge_as_json_does(text: str) -> None:
    assert _outcome(loads, text) == _outcome(json.loads, text)
    raw = text.encode("utf-8", "surrogatepass")
    assert _outcome(loads, raw) == _outcome(json.loads, raw)
    utf16 = text.encode("utf-16", "surrogatepass")  # json.loads detects other encodings of bytes
    assert _outcome(loads, utf16) == _outcome(json.loads, utf16)


_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=EXAMPLES, deadline=None)
@given(_values, st.integers(min_value=0, max_value=40), st.sampled_from(["", "x", "]", ",", "\\", '"', "\\ud800"]))
def test_fast_json_agrees_with_json_on_documents_and_damaged_ones(value: Any, cut: int, junk: str) -> None:
    text = json.dumps(value, ensure_ascii=cut % 2 == 0)
    for candidate in (text, text[:cut] + junk + text[cut:]):
        assert _outcome(loads, candidate) == _outcome(json.loads, candidate)


_pieces = st.lists(
    st.lists(
        st.sampled_from([b"data: ", b"data:", b"event: x", b"{}", b"[DONE]", b"\n", b"\n\n", b" ", b"ab", b"\xff"]), max_size=6
    ).map(b"".join),
    max_size=8,
)


@settings(max_examples=EXAMPLES, deadline=None)
@given(_pieces, st.sampled_from(["sse", "ndjson"]))
def test_a_body_without_cr_splits_as_the_general_loop_splits_it(pieces: list[bytes], how: str) -> None:
    fast = timed_payloads({}, pieces, how)  # no "\r": the one-pass split
    general = timed_payloads({}, [p.replace(b"\n", b"\r\n") for p in pieces], how)  # the loop, normalizing
    assert [(p.chunk, p.data) for p in fast] == [(p.chunk, p.data) for p in general]


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=4), st.text(max_size=6)), min_size=2, max_size=2))
def test_turn_keys_differ_exactly_when_turns_do(pairs: list[tuple[str, str]]) -> None:
    (r1, t1), (r2, t2) = pairs
    a, b = Turn(r1, t1), Turn(r2, t2)
    assert (a.key() == b.key()) == (a == b)
    assert Turn(r1, t1, (("f", "{}"),)).key() != Turn(r1, t1).key()


def test_canonical_arguments_are_the_same_cached_or_not() -> None:
    short, long = '{"b": 1, "a": [1, 2]}', json.dumps({"b": "x" * 5000, "a": 1})
    for _ in range(2):
        assert canonical_arguments(short) == '{"a":[1,2],"b":1}'
        assert canonical_arguments(long) == json.dumps(json.loads(long), sort_keys=True, separators=(",", ":"))
        assert canonical_arguments("not json") == "not json"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", b'{"messages": []}'),
        ("/v1/chat/completions", b'{"model": "m"}'),
        ("/v1/completions", b'{"prompt": "x"}'),
        ("/v1/embeddings", b'{"input": "x"}'),
        ("/tokenize", b'{"messages": []}'),
        ("/custom", b'{"messages": []}'),
        ("/custom", b'{"prompt": "x"}'),
        ("/custom", b'{"input": "x"}'),
        ("/v1/responses", b'{"input": "x"}'),
        ("/api/chat", b'{"messages": []}'),
        ("/v1/chat/completions", b"not json"),
        ("/v1/chat/completions", b"[1]"),
        ("/v1/chat/completions", b""),
    ],
)
def test_is_generation_says_what_read_request_says(path: str, body: bytes) -> None:
    record = {"path": path, "request_body": body}
    assert is_generation(record) == read_request(record).generation
