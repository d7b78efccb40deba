"""The C reader of the plainest streamed chat answers (``infertap._chatsse``, native/chatsse.c) against
its oracle, ``chat_stream._typed``: on generated chat streams it answers wherever ``_typed`` does and
as it does; on damaged ones it answers as ``_typed`` does or declines, and a body it declines is
read by Python. Where it is not built (it is optional) these tests skip, except under ``make test``,
where its absence is an error; and the Python readers read without it as they did before it."""

from __future__ import annotations

import itertools
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.extras import NOT_BUILT, built, needs

needs("hypothesis", "dev")
from hypothesis import given, settings
from hypothesis import strategies as st

from infertap.apis.chat_stream import LOOP_ONLY, _native, _typed, read_chat_stream, read_plainest_chat_stream
from tests.apis.test_chat_stream import PLAIN, _agrees, _record, _sse

_chatsse = built("infertap._chatsse")
EXAMPLES = int(os.environ.get("INFERTAP_FUZZ_EXAMPLES", "200"))
needs_c = pytest.mark.skipif(_chatsse is None, reason=NOT_BUILT)


def _both(chunks: list[bytes]) -> tuple[Any, Any]:
    """The C reader's answer and ``_typed``'s, of one body cut into ``chunks``."""
    body = b"".join(chunks)
    ends = list(itertools.accumulate(map(len, chunks)))
    return _native(chunks, body, ends), _typed(chunks, body, ends)


def _cut(body: bytes, cuts: list[int]) -> list[bytes]:
    bounds = sorted({c % (len(body) + 1) for c in cuts} | {0, len(body)})
    return [body[a:b] for a, b in zip(bounds, bounds[1:], strict=False)] or [b""]


# -- generated chat streams: every field _typed reads, in the types and values engines send -----------

_INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_JSON = st.recursive(
    st.none() | st.booleans() | _INT64 | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
_TEXT = st.text(max_size=12) | st.sampled_from(["", "a", "é", "😀", "\u2028", '"', "\\", "\n", "\x00", "[DONE"])
_STOP = st.none() | st.sampled_from(["", "###", "106"]) | st.integers(min_value=0, max_value=2**63 - 1)


def _maybe(strategy: Any) -> Any:
    """A field absent (None: dropped below), null, or of ``strategy``."""
    return st.one_of(st.just(None), st.just("null"), strategy)


def _fields(**fields: Any) -> Any:
    """An object of the fields drawn present (absent ones dropped; "null" as JSON null)."""
    return st.fixed_dictionaries(fields).map(lambda d: {k: None if v == "null" else v for k, v in d.items() if v is not None})


_CALL = _fields(
    index=st.one_of(st.just(None), st.integers(min_value=-2, max_value=3)),
    id=_maybe(_TEXT),
    type=st.just("function"),
    function=_maybe(_fields(name=_maybe(_TEXT), arguments=_maybe(_TEXT))),
)
_DELTA = _fields(
    role=st.sampled_from([None, "assistant"]),
    content=_maybe(_TEXT),
    reasoning_content=_maybe(_TEXT),
    reasoning=_maybe(_TEXT),
    tool_calls=_maybe(st.lists(_CALL, max_size=3)),
)
_CHOICE = _fields(
    index=st.sampled_from([None, 0]),
    delta=_maybe(_DELTA),
    text=_maybe(_TEXT),
    finish_reason=_maybe(st.sampled_from(["", "stop", "length", "tool_calls", "error", "eos"])),
    stop_reason=_maybe(_STOP),
    matched_stop=_maybe(_STOP),
    logprobs=st.sampled_from([None, "null"]),
    token_ids=st.sampled_from([None, "null"]),
)
_EVENT = _fields(
    id=_maybe(st.sampled_from(["", "c1", "c2"])),
    object=st.sampled_from([None, "chat.completion.chunk", "chat.completion", "text_completion"]),
    created=st.sampled_from([None, 0, 1800000000]),
    model=_maybe(st.sampled_from(["", "m", "m2"])),
    system_fingerprint=_maybe(st.sampled_from([0, 0.0, -0.0, False, "", [], {}, "fp", 1.5]) | _JSON),  # some false
    choices=st.lists(_CHOICE, max_size=2),
    usage=_maybe(st.dictionaries(st.sampled_from(["prompt_tokens", "completion_tokens", "total_tokens", "x"]), _JSON)),
    timings=_maybe(st.dictionaries(st.sampled_from(["prompt_ms", "predicted_n"]), _JSON, max_size=2)),
)


def _payload(event: dict[str, Any], ascii_only: bool, compact: bool) -> bytes:
    return json.dumps(event, ensure_ascii=ascii_only, separators=(",", ":") if compact else None).encode()


_STREAM = st.builds(
    lambda events, ascii_only, compact: _sse(*(_payload(e, ascii_only, compact) for e in events)),
    st.lists(_EVENT, min_size=1, max_size=6),
    st.booleans(),
    st.booleans(),
)


@needs_c
@settings(max_examples=EXAMPLES, deadline=None)
@given(_STREAM, st.lists(st.integers(min_value=0, max_value=2000), max_size=5))
def test_the_c_reader_reads_generated_chat_streams_as_typed_does(chunks: list[bytes], cuts: list[int]) -> None:
    native, typed = _both(_cut(b"".join(chunks), cuts))
    assert native == typed  # answered by both, alike, or declined by both


def test_the_generated_streams_are_mostly_read_by_typed() -> None:
    """The agreement above is not vacuous: ``_typed`` answers most generated streams (and the C
    reader with it), declining only some (an index other than 0, an event of no chat shape)."""
    answered = []

    @settings(max_examples=100, deadline=None, database=None)
    @given(_STREAM)
    def read(chunks: list[bytes]) -> None:
        answered.append(_both(chunks)[1] is not None)

    read()
    assert sum(answered) > len(answered) / 2


def _fields_in(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path of every field of every object in ``value``."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in [(*at, k), *_fields_in(v, (*at, k))]]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _fields_in(v, (*at, i))]
    return []


@needs_c
@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(_EVENT, min_size=1, max_size=3), st.data())
def test_a_field_of_any_type_is_read_as_typed_reads_it(events: list[dict[str, Any]], data: st.DataObject) -> None:
    """One field of a generated stream given a JSON value of any type: what msgspec's structs refuse
    (a number for a model, an object for an index, a list for a delta) the C reader declines too."""
    paths = _fields_in(events)
    if paths:
        *parent, key = data.draw(st.sampled_from(paths))
        target: Any = events
        for step in parent:
            target = target[step]
        target[key] = data.draw(_JSON)
    native, typed = _both(_sse(*events))
    assert native == typed


@needs_c
@pytest.mark.parametrize(
    "body",
    [
        b'data: {"choices":[]}\n \n\ndata: [DONE]\n\n',  # an event of two lines, the second blank
        b'data: {"choices":[]}\n\n\n\ndata: [DONE]\n\n',  # an empty block
        b'data:{"choices":[]}\n\ndata: [DONE]\n\n',  # no space after the colon
        b'data: {"choices":[]}\n\ndata: [DONE]\n\n \n\t',  # whitespace after the end
        b'data: {"choices":[]}\n\ndata: [DONE]\n\ndata: {"choices":[]}\n\n',  # an event after the end
        b'data: {"choices":[]}\n\ndata: [DONE] \n\n',
        b'data: {"choices":[]}\n\ndata: [DONE]\n\n\n',
        b'data: {"choices":[]}\n\ndata: [DONE]\n',
        b'data:  {"choices":[]} \n\ndata: [DONE]\n\n',  # spaces around the JSON
        b'data: {"choices":[]}\x0c\n\ndata: [DONE]\n\n',  # a form feed, whitespace to Python, not to JSON
        b'data: {"choices":[{"delta":{"content":"[DONE]"}}]}\n\ndata: [DONE]\n\n',
    ],
)
def test_framings_are_read_as_typed_reads_them(body: bytes) -> None:
    for cuts in ([], [len(body) - 1], list(range(len(body) - 14, len(body)))):  # the last, up to a byte a chunk
        native, typed = _both(_cut(body, cuts))
        assert native == typed, cuts
    _agrees(_record([body]))  # and whatever reads it, as read_response does


def test_an_end_split_over_more_than_three_chunks_is_left_to_the_loop() -> None:
    """``_typed`` looks for ``[DONE]`` in the last three chunks only: spread over more, the loop reads the body."""
    body = b"".join(PLAIN)
    chunks = [body[:-8], *(body[i : i + 1] for i in range(len(body) - 8, len(body)))]
    assert _both(chunks) == (None, None)
    assert _agrees(_record(chunks))


# -- damaged streams: the C reader answers as _typed does, or declines ---------------------------------

_DAMAGE = st.sampled_from(
    [b'"', b"\\", b"{", b"}", b"[", b"]", b",", b":", b" ", b"\t", b"\n", b"\n\n", b"\xff", b"\xed\xa0\x80", b"\xc3",
     b"0", b"-", b"-0", b"1e400", b"1e-400", b"0.10000000000000001", b"18446744073709551616", b"e", b".", b"\\u", b"\\ud800",
     b"\\ud83d\\ude00", b"null", b"true", b'"index":1,', b'"index":0,', b'"message":{},', b'"logprobs":{},', b'"model":"x",',
     b'"refusal":"r",', b'"error":{},', b'"usage":{"a":1,"a":2},', b"data: ", b"[DONE]", b"data: [DONE]\n\n", b"\x00", b"\r"]
)  # fmt: skip


@needs_c
@settings(max_examples=EXAMPLES, deadline=None)
@given(
    _STREAM,
    st.lists(st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=3), _DAMAGE), min_size=1, max_size=3),
    st.lists(st.integers(min_value=0, max_value=2000), max_size=4),
)
def test_the_c_reader_of_damaged_streams_answers_as_typed_does_or_declines(
    chunks: list[bytes], damage: list[tuple[int, int, bytes]], cuts: list[int]
) -> None:
    body = b"".join(chunks)
    for at, removed, inserted in damage:
        at %= len(body) + 1
        body = body[:at] + inserted + body[at + removed :]
    native, typed = _both(_cut(body, cuts))
    assert native is None or native == typed


_NUMBER = st.from_regex(r"-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,20})?([eE][-+]?[0-9]{1,3})?", fullmatch=True)


@needs_c
@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(_NUMBER, min_size=1, max_size=4), st.sampled_from(["usage", "timings", "system_fingerprint", "skipped"]))
def test_numbers_are_read_as_msgspec_reads_them_or_declined(numbers: list[str], field: str) -> None:
    """Numbers of every size and precision: as msgspec rounds them (a double's nearest), or declined
    where yyjson can't hold them exactly (an integer beyond 64 bits; beyond a double)."""
    values = "[" + ",".join(numbers) + "]"
    payload = f'{{"choices":[{{"index":0,"delta":{{"content":"a"}}}}],"{field}":{{"n":{values},"m":{numbers[0]}}}}}'
    native, typed = _both(_sse(payload.encode()))
    assert native is None or native == typed
    small = all(abs(int(n)) < 2**63 for n in numbers if n.lstrip("-").isdigit())
    finite = all(abs(float(n)) < 1.7e308 for n in numbers)
    if small and finite and typed is not None:
        assert native is not None  # read by C: a double or a 64-bit integer


# -- what the C reader declines, Python reads -------------------------------------------------------------


def _reading(chunks: list[bytes]) -> tuple[Any, Any, Any]:
    body = b"".join(chunks)
    ends = list(itertools.accumulate(map(len, chunks)))
    assert _chatsse is not None
    return _chatsse.read(body, ends), _typed(chunks, body, ends), read_chat_stream(_record(chunks))


@needs_c
@pytest.mark.parametrize(
    "event",
    [
        {"choices": [], "usage": {"prompt_tokens": 2**64}},  # an integer beyond 64 bits
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 2**64, "function": {"name": "f"}}]}}]},
        {"choices": [{"index": 0, "delta": {"content": "a"}}], "deep": json.loads("[" * 300 + "]" * 300)},  # deeper than C reads
        b'{"model": "a", "model": "b", "choices": []}',  # a field said twice
        b'{"choices": [], "usage": {"a": 1, "a": 2}}',
    ],
)
def test_what_the_c_reader_declines_python_reads(event: Any) -> None:
    chunks = _sse({"choices": [{"index": 0, "delta": {"content": "x"}}]}, event)
    declined, typed, read = _reading(chunks)
    assert declined is None and typed is not None
    assert read == typed and read_plainest_chat_stream(_record(chunks)) == typed
    assert _agrees(_record(chunks))  # and as read_response reads it


@needs_c
def test_json_nested_past_msgspecs_depth_is_declined_by_both() -> None:
    """msgspec raises RecursionError some thousands of levels down, even in a field it skips: the C
    reader, which could read it, declines it too."""
    chunks = _sse(
        {"choices": [{"index": 0, "delta": {"content": "a"}}]}, b'{"choices": [], "x": ' + b"[" * 20000 + b"]" * 20000 + b"}"
    )
    declined, typed, _ = _reading(chunks)
    assert declined is None and typed is None


@needs_c
def test_the_c_reader_answers_the_plain_stream() -> None:
    native, typed = _both(PLAIN)
    assert native is not None and native == typed


# -- LOOP_ONLY, restated in C --------------------------------------------------------------------------

_LOOP_PARTS = st.sampled_from(
    [b'"', b"refusal", b"function_call", b"custom", b"audio", b"annotations", b"images", b"error", b":", b" ", b"\t",
     b"\n", b"\x0b", b"\x0c", b"{", b"[", b"]", b"x", b'""', b'"x"', b"\\"]
)  # fmt: skip


@needs_c
@settings(max_examples=EXAMPLES * 5, deadline=None)
@given(st.lists(_LOOP_PARTS, max_size=16))
def test_the_c_reader_declines_what_loop_only_matches(parts: list[bytes]) -> None:
    body = b"".join(parts)
    assert _chatsse is not None and _chatsse.loop_only(body) == (LOOP_ONLY.search(body) is not None)


@needs_c
def test_loop_only_in_c_matches_each_of_its_keys() -> None:
    """Each alternative of LOOP_ONLY, and a near miss of each (must differ)."""
    assert _chatsse is not None
    for hit, miss in [
        (b'"refusal" : "no"', b'"refusal": null'),
        (b'"function_call":{}', b'"function_call":[]'),
        (b'"custom":{"a":1}', b'"custom":"x"'),
        (b'"audio": {}', b'"audio": null'),
        (b'"annotations":[ {}]', b'"annotations":[]'),
        (b'"images":[1]', b'"images":[ ]'),
        (b'"error":{"m":1}', b'"error":""'),
        (b'"error":"x"', b'"error":null'),
    ]:
        assert _chatsse.loop_only(hit) and LOOP_ONLY.search(hit), hit
        assert not _chatsse.loop_only(miss) and not LOOP_ONLY.search(miss), miss


# -- without the C reader ------------------------------------------------------------------------------


def test_without_the_c_reader_python_reads_the_same(tmp_path: Path) -> None:
    """The extension made unimportable (as where no compiler built it): chat_stream loads, and its
    readers answer as the C reader does (or as they do here, where it is not built)."""
    record = _record(PLAIN)
    out = tmp_path / "read.pickle"
    code = (
        "import pickle, sys\n"
        "sys.modules['infertap._chatsse'] = None  # import infertap._chatsse raises ImportError\n"
        "from infertap.apis import chat_stream\n"
        "assert chat_stream._read_c is None\n"
        f"record = pickle.loads({pickle.dumps(record)!r})\n"
        f"pickle.dump((chat_stream.read_chat_stream(record), chat_stream.read_plainest_chat_stream(record)), open({str(out)!r}, 'wb'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    python_read, python_plainest = pickle.loads(out.read_bytes())
    assert python_read is not None
    assert python_read == read_chat_stream(record) == python_plainest == read_plainest_chat_stream(record)
