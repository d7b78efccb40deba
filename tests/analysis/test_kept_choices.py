"""An n > 1 answer kept in part: each choice's end read from the kept head and tail, as a whole read has it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from infertap.apis import read_response, tail_usage, unfinished
from infertap.capture.records import RESPONSE_TAIL_BYTES, ResponseKept
from infertap.cli import cli
from tests import sdk_shapes
from tests.analysis_builders import body, exchange, sse, write_capture

_LIMIT = 4096  # the recorder's response limit here: a head of a few events
_WORDS = "word " * 40


def _chat(k: int, content: str | None = None, finish: str | None = None) -> dict[str, Any]:
    delta = {"content": content} if content is not None else {}
    choice = {"index": k, "delta": delta, "finish_reason": finish}
    return sdk_shapes.chat_chunk({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [choice]})


def _long(k: int, events: int = 300) -> list[dict[str, Any]]:
    """Choice ``k``'s long answer: ~90 KB, more than the head and the tail together."""
    return [_chat(k, _WORDS) for _ in range(events)]


def _answer(xid: str, sent_ms: float, events: list[dict[str, Any]], n: int = 2) -> dict[str, Any]:
    return exchange(xid, sent_ms=sent_ms, request=body(n=n), chunks=[(5 + i, sse(e)) for i, e in enumerate([*events, "[DONE]"])])


def _cut(record: dict[str, Any]) -> dict[str, Any]:
    """The record as the recorder keeps it past its response limit (``ResponseKept``)."""
    kept = {**record, "chunks": [], "chunk_ns": []}
    cutter = ResponseKept(kept["chunk_ns"], kept["chunks"], _LIMIT)
    for ns, chunk in zip(record["chunk_ns"], record["chunks"], strict=True):
        cutter.add(ns, chunk)
    cutter.mark(kept)
    assert len(kept["response_tail"]) == RESPONSE_TAIL_BYTES
    return kept


ANSWERS = [
    # choice 0 ends in the head; choice 1 runs away and is cut: its last tokens in the tail, no finish
    _answer("second_cut", 0, [_chat(0, "4", "stop"), *_long(1)]),
    # the same, choice 1 finishing otherwise (length) in the tail
    _answer("second_length", 1, [_chat(0, "4", "stop"), *_long(1), _chat(1, finish="length")]),
    # choice 1 ends in the head, choice 0 runs to the length in the tail
    _answer("first_length", 2, [_chat(1, "5", "stop"), *_long(0), _chat(0, finish="length")]),
    # choice 1 cut, its last token in the tail, choice 0 finishing otherwise after it
    _answer("second_cut_first_last", 3, [_chat(1, "5"), *_long(0), _chat(1, " and"), _chat(0, finish="length")]),
    # one answer (n = 1) runs to the length: as before
    _answer("one_length", 4, [*_long(0), _chat(0, finish="length")], n=1),
]
#: Choice 1 ends, or is cut, in the middle, neither kept: unknown, whatever the whole read says.
UNKNOWN = [
    _answer("second_ends_unkept", 5, [*_long(1, 100), _chat(1, finish="stop"), *_long(0), _chat(0, finish="stop")]),
    _answer("second_cut_unkept", 6, [*_long(1, 100), *_long(0), _chat(0, finish="stop")]),
]


def _columns(cap: Path) -> dict[str, tuple[Any, ...]]:
    rows = CliRunner().invoke(
        cli,
        ["sql", "SELECT exchange_id, finish_reason, choices, choices_unfinished FROM exchanges", str(cap), "--json"],
    )
    assert rows.exit_code == 0, rows.output
    return {r["exchange_id"]: (r["finish_reason"], r["choices"], r["choices_unfinished"]) for r in json.loads(rows.output)}


def test_each_choice_of_a_cut_answer_ends_as_the_whole_answer_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A runaway n = 2 answer kept in part read only choice 0's finish reason from its tail: a choice 1
    cut short (or ending otherwise) was missed, and choice 0's finish said in the head was unknown.
    Now each choice's end is read from the head and the tail: as the whole answer's where they tell."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    whole = _columns(write_capture(tmp_path / "whole", [*ANSWERS, *UNKNOWN]))
    assert whole == {
        "second_cut": ("stop", 2, 1),
        "second_length": ("stop", 2, 0),
        "first_length": ("length", 2, 0),
        "second_cut_first_last": ("length", 2, 1),
        "one_length": ("length", 1, 0),
        "second_ends_unkept": ("stop", 2, 0),
        "second_cut_unkept": ("stop", 2, 1),
    }
    cut = [_cut(r) for r in [*ANSWERS, *UNKNOWN]]
    assert all(read_response(r).error is not None for r in cut)  # unread: only the ends are
    kept = _columns(write_capture(tmp_path / "kept", cut))
    assert kept == {**whole, "second_ends_unkept": ("stop", 2, None), "second_cut_unkept": ("stop", 2, None)}
    # The tail alone, as the enricher reads it, and the unfinished rule: a cut answer is never judged so.
    got = tail_usage(cut[0])
    assert got is not None and (got.finish_reason, got.choices) == ("stop", (2, 1))
    assert not any(unfinished(r) for r in cut)
