"""A redacted body put back together (``redact_json.spliced``): every other byte as it was, and a
body of many MiB never copied whole in one slice, which holds the GIL (tens of ms at 52 MiB) from a
worker thread as on the event loop itself."""

from __future__ import annotations

import json

from tests.extras import needs

needs("hypothesis", "dev")
from hypothesis import given
from hypothesis import strategies as st

from infertap.capture.redact_json import _RUN, REDACTED, spliced, sub_secrets
from infertap.capture.redact_names import default_secret_header

KEY = "sk-splice-MMMM6666mmmm"


class _Sliced(bytes):
    """A body that notes the length of each slice taken of it (each one a copy)."""

    lengths: list[int]

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            self.lengths.append(len(range(*index.indices(len(self)))))
        return super().__getitem__(index)


def test_a_large_body_with_credentials_is_copied_in_runs_every_other_byte_kept() -> None:
    """Credentials near its start, in its middle and at its end: each replaced where it stands, the
    body between copied a run at a time (it was one slice of nearly the whole body, then a join)."""
    messages = [{"role": "user", "content": "word " * 200}] * 1500  # about 1.5 MiB
    doc = {"api_key": KEY, "messages": messages, "tools": [{"headers": {"x-api-key": KEY}}], "password": KEY}
    raw = json.dumps(doc).encode()
    body = _Sliced(raw)
    body.lengths = []
    found: set[str] = set()
    out = sub_secrets(body, found, default_secret_header, lambda text, _: text)
    assert out == raw.replace(KEY.encode(), REDACTED.encode()) and found == {KEY}
    assert type(out) is bytes and len(raw) > 4 * _RUN
    assert max(body.lengths) <= _RUN


def test_a_body_with_nothing_to_redact_is_returned_as_it_was() -> None:
    raw = json.dumps({"messages": [{"role": "user", "content": "hi"}], "api_key": REDACTED}).encode()
    assert sub_secrets(raw, set(), default_secret_header, lambda text, _: text) is raw  # its placeholder: no edit


@given(
    st.binary(max_size=64),
    st.lists(st.tuples(st.integers(0, 64), st.integers(0, 8), st.binary(max_size=4)), max_size=6),
    st.integers(1, 9),
)
def test_spliced_is_the_body_with_each_span_replaced(raw: bytes, cuts: list[tuple[int, int, bytes]], run: int) -> None:
    """Whatever the runs, the result is the body with each span (in order, apart) replaced."""
    edits, pos = [], 0
    for at, length, new in sorted(cuts):
        start = min(max(at, pos), len(raw))
        end = min(start + length, len(raw))
        edits.append((start, end, new))
        pos = end
    expected, pos = b"", 0
    for start, end, new in edits:
        expected += raw[pos:start] + new
        pos = end
    assert spliced(raw, edits, run) == expected + raw[pos:]
