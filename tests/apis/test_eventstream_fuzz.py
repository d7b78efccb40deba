"""Bedrock's ``/converse-stream`` read from any bytes never raises: random bytes, a whole answer with
bytes replaced, inserted or taken out, messages whose CRCs check but whose headers are of any of the
event-stream's value types (a boolean, an integer, a timestamp, a UUID, bytes where a string goes),
and events whose payloads are any JSON. What it cannot read it says (``Output.error``), and what it
reads before a damaged message is the answer's own start."""

from __future__ import annotations

import json
import os

from tests.extras import needs

needs("hypothesis", "dev")
from hypothesis import given, settings
from hypothesis import strategies as st

from infertap.apis import read_response, stream_done
from tests.eventstream_frames import EVENTSTREAM, answer_frames, event_frame, message_frame, typed_header

EXAMPLES = int(os.environ.get("INFERTAP_FUZZ_EXAMPLES", "200"))
_WHOLE = b"".join(answer_frames("4", "2"))
#: Each header value type's size (None: a 2-byte length first), as the format defines them.
_SIZES = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 6: None, 7: None, 8: 8, 9: 16}
_NAMES = (":message-type", ":event-type", ":exception-type", ":error-code", ":error-message", ":content-type", "x")
_KINDS = ("event", "exception", "error", "metadata", "messageStop", "contentBlockDelta", "throttlingException")


def _record(chunks: list[bytes]) -> dict[str, object]:
    return {
        "path": "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse-stream",
        "request_body": b'{"messages": [{"role": "user", "content": [{"text": "17 + 25?"}]}]}',
        "request_headers": [["content-type", "application/json"]],
        "response_headers": [["content-type", EVENTSTREAM]],
        "chunks": chunks,
    }


def _read(chunks: list[bytes]) -> None:
    out = read_response(_record(chunks))
    stream_done(chunks, out)
    assert out.error_message is None or isinstance(out.error_message, str)


@st.composite
def _header(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(sorted(_SIZES)))
    size = _SIZES[kind]
    if kind == 7:
        value = draw(st.sampled_from(_KINDS)).encode()
    else:
        value = draw(st.binary(min_size=size or 0, max_size=size if size is not None else 12))
    return typed_header(draw(st.sampled_from(_NAMES)), kind, value)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=4))
def test_random_bytes_never_raise(chunks: list[bytes]) -> None:
    _read(chunks)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.integers(0, len(_WHOLE) - 1), st.integers(0, 8), st.binary(max_size=8), st.integers(1, 40))
def test_a_whole_answer_changed_anywhere_never_raises_and_reads_its_own_start(at: int, taken: int, put: bytes, cut: int) -> None:
    changed = _WHOLE[:at] + put + _WHOLE[at + taken :]
    out = read_response(_record([changed[:cut], changed[cut:]]))
    assert "42".startswith(out.text)
    assert (out.error is None) is (changed == _WHOLE)


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(("event", "exception", "error")), st.lists(_header(), max_size=4)), min_size=1, max_size=3
    ),
    st.sampled_from((b"", b"{}", b'{"message": 5}', b'{"contentBlockIndex": 0, "delta": {"text": "4"}}', b"\xff")),
)
def test_headers_of_every_value_type_never_raise(heads: list[tuple[str, list[bytes]]], payload: bytes) -> None:
    frames = [message_frame({":message-type": kind}, payload, b"".join(h)) for kind, h in heads]
    _read([*answer_frames("4")[:3], *frames])
    _read([b"".join(frames)])


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.sampled_from(_KINDS), _JSON, st.sampled_from(("exception", "error")), _JSON)
def test_events_of_any_json_never_raise(kind: str, payload: object, failing: str, said: object) -> None:
    frames = [
        message_frame({":event-type": kind, ":message-type": "event"}, json.dumps(payload).encode()),
        event_frame(kind, {"contentBlockIndex": 0, "delta": payload, "start": payload, "usage": payload}),
        message_frame({":exception-type": kind, ":message-type": failing}, json.dumps({"message": said}).encode()),
    ]
    _read(frames)
