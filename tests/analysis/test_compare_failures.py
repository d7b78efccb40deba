"""compare with answers that failed: said per side and over which pairs the speed is, before the speed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from infertap.analysis.compare import compare
from infertap.analysis.report import render
from infertap.cli import cli
from tests.analysis_builders import body, event, exchange, sse, write_capture


def _answer(i: int, sent_ms: float, took_ms: float, *, cut: bool = False, status: int = 200) -> dict[str, Any]:
    """Request ``i`` answered in ``took_ms``; ``cut``: a role chunk then [DONE] (llama-cpp-python's
    interrupted stream, unfinished); a ``status`` not 2xx: an error body."""
    if status != 200:
        chunks = [(took_ms, json.dumps({"error": {"message": "boom"}}).encode())]
        return exchange(
            f"x{i}",
            sent_ms=sent_ms,
            chunks=chunks,
            request=body(f"q{i}"),
            status=status,
            headers=[["content-type", "application/json"]],
        )
    events: list[Any] = [event(role="assistant")]
    if not cut:
        events += [event("the "), event("answer"), event(finish="stop")]
    chunks = [(took_ms * (k + 1) / (len(events) + 1), sse(e)) for k, e in enumerate(events)] + [(took_ms, sse("[DONE]"))]
    return exchange(f"x{i}", sent_ms=sent_ms, chunks=chunks, request=body(f"q{i}"))


def _run(path: Path, answers: list[dict[str, Any]]) -> Path:
    return write_capture(path, answers)


def _compare(a: Path, b: Path) -> tuple[str, dict[str, Any]]:
    env = {"COLUMNS": "300"}
    text = CliRunner().invoke(cli, ["compare", str(a), str(b)], env=env)
    assert text.exit_code == 0, text.output
    data = CliRunner().invoke(cli, ["compare", str(a), str(b), "--json"], env=env)
    assert data.exit_code == 0, data.output
    return text.output, json.loads(data.output)


def test_compare_says_how_many_answers_b_failed_before_its_speed(tmp_path):
    """B failed a quarter of its answers (5 unfinished, 1 status 500) and was faster on the rest:
    compare said "paired: 20 pairs" and B/A over n=14, its failures in the n column only."""
    a = _run(tmp_path / "a", [_answer(i, i * 1000, 400) for i in range(20)])
    b = _run(
        tmp_path / "b",
        [_answer(i, i * 1000, 200, cut=i % 4 == 0, status=500 if i == 1 else 200) for i in range(20)],
    )
    text, data = _compare(a, b)
    o = data["outcomes"]
    assert o["a"] == {"requests": 20, "ok": 20, "failed": 0, "unfinished": 0, "errors": {}}
    assert o["b"] == {"requests": 20, "ok": 14, "failed": 6, "unfinished": 5, "errors": {"status 500": 1}}
    assert o["pairs"] == {"pairs": 20, "ok_both": 14, "failed_a": {}, "failed_b": {"unfinished": 5, "status 500": 1}}
    note = "speed over 14 of 20 pairs, those ok on both sides: B failed 6 (5 unfinished, 1 status 500)"
    assert o["note"].startswith(note)
    assert all(row["a"]["n"] == 14 for row in data["speed"] if row["metric"] == "e2e")
    lines = text.splitlines()
    speed = lines.index("2. Speed (paired exchanges that succeeded on both sides)")
    assert lines[speed + 1] == "answers A: 20 requests, 20 ok"
    assert lines[speed + 2] == "answers B: 20 requests, 14 ok, 6 failed (5 unfinished, 1 status 500)"
    assert lines[speed + 3].startswith(note), text
    page = render(a, b)
    assert "Answers B: 20 requests, 14 ok, 6 failed (5 unfinished, 1 status 500)" in page
    assert note in page and page.index(note) < page.index("B/A p50")
    # A failed too: both sides named, the pairs of either left out.
    text, data = _compare(b, a)
    assert "speed over 14 of 20 pairs, those ok on both sides: A failed 6 (5 unfinished, 1 status 500)" in text


def test_compare_of_two_clean_runs_says_no_failure(tmp_path):
    a = _run(tmp_path / "a", [_answer(i, i * 1000, 400) for i in range(20)])
    b = _run(tmp_path / "b", [_answer(i, i * 1000, 200) for i in range(20)])
    text, data = _compare(a, b)
    assert data["outcomes"]["note"] is None
    assert data["outcomes"]["pairs"] == {"pairs": 20, "ok_both": 20, "failed_a": {}, "failed_b": {}}
    assert "answers B: 20 requests, 20 ok\n" in text
    assert "failed (" not in text and "speed over" not in text, text
    assert "speed over" not in render(a, b)


def test_an_unfinished_answer_is_unanswered_not_wrong(tmp_path):
    """A stream the engine cut (a role chunk and [DONE]) is not ok in stats and compare's speed, yet
    with known answers it was scored as a wrong answer: an item a side didn't answer is left out."""
    a = write_capture(tmp_path / "a", [_answer(i, i * 1000, 400) for i in range(20)])
    b = write_capture(tmp_path / "b", [_answer(i, i * 1000, 200, cut=i % 4 == 0) for i in range(20)])
    refs = {f"q{i}": "answer" for i in range(20)}
    acc = compare(a, b, extract="regex:(answer)", references=refs)["accuracy"]
    assert (acc["items"], acc["a_right"], acc["b_right"], acc["unanswered"]) == (15, 15, 15, 5)
    clean = write_capture(tmp_path / "c", [_answer(i, i * 1000, 200) for i in range(20)])
    acc = compare(a, clean, extract="regex:(answer)", references=refs)["accuracy"]
    assert (acc["items"], acc["b_right"], acc["unanswered"]) == (20, 20, 0)
