"""compare with answers that failed: said per side and over which pairs the speed is, before the speed."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from infertap.analysis.compare import compare
from infertap.analysis.divergence import similarity
from infertap.analysis.report import render
from infertap.cli import cli
from infertap.demo import pair_summary
from tests import sdk_shapes
from tests.analysis_builders import JSON_HEADERS, body, event, exchange, sse, write_capture


def _answer(i: int, sent_ms: float, took_ms: float, *, cut: bool = False, status: int = 200) -> dict[str, Any]:
    """Request ``i`` answered in ``took_ms``; ``cut``: a role chunk then [DONE] (llama-cpp-python's
    interrupted stream, unfinished); a ``status`` not 2xx: an error body."""
    if status != 200:
        chunks = [(took_ms, json.dumps(sdk_shapes.error_body("boom")).encode())]
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


def _said(
    i: int, text: str | None = None, *, error: str | None = None, status: int = 500, unfinished: bool = False
) -> dict[str, Any]:
    """Question ``q{i}`` answered ``text``; ``error``: a 500 (or ``status``) whose body says it; neither: no
    response at all (the upstream failed before a status); ``unfinished``: a role chunk then [DONE]."""
    request = body(f"q{i}")
    if error is not None:
        chunks = [(5.0, json.dumps(sdk_shapes.error_body(error)).encode())]
        return exchange(f"x{i}", sent_ms=i * 100, chunks=chunks, request=request, status=status, headers=[["content-type", "application/json"]])  # fmt: skip
    if text is None and not unfinished:
        return exchange(f"x{i}", sent_ms=i * 100, request=request, status=None, end="upstream_error")
    events: list[Any] = [event(role="assistant")] + ([] if unfinished else [event(text), event(finish="stop")])
    return exchange(f"x{i}", sent_ms=i * 100, chunks=[(k + 1.0, sse(e)) for k, e in enumerate([*events, "[DONE]"])], request=request)  # fmt: skip


#: Each question's answer on A and on B: two the same, two different, then a side failed on each.
SAID = [
    (_said(0, "Paris"), _said(0, "Paris")),  # the same answer: an exact match
    (_said(1, "Paris"), _said(1, "Lyon")),  # different answers: a divergence of the outputs
    (_said(2, "Paris"), _said(2, error="boom")),  # B: a 500 with its error
    (_said(3, "Paris"), _said(3)),  # B: no response at all
    (_said(4, error="boom"), _said(4, "Paris")),  # A: a 500
    (_said(5, error="boom"), _said(5, error="boom")),  # both, the same error: an exact match still
    (_said(6, error="boom"), _said(6, error="overloaded", status=503)),  # both, other errors
    (_said(7, "Paris"), _said(7, unfinished=True)),  # B: a stream the engine cut before any word
]


def test_a_pair_a_side_failed_is_counted_apart_from_the_outputs_that_differ(tmp_path):
    """A 500, no response or an unfinished stream against "Paris" counted as outputs that differ, at
    similarity 0: B, failing more often, read as answering differently. Those pairs are now counted
    apart, by side; what the outputs' figures are over is said; two answers still differ or match."""
    a = write_capture(tmp_path / "a", [x for x, _ in SAID])
    b = write_capture(tmp_path / "b", [y for _, y in SAID])
    text, data = _compare(a, b)
    d = data["divergence"]
    assert (d["pairs"], d["counts"]["exact"], d["outputs_compared"], d["outputs_differ"]) == (8, 2, 2, 1)
    assert d["failed"] == {"pairs": 6, "a_only": 1, "b_only": 3, "both": 2, "both_same": 1, "both_differ": 1, "not_generation": 0}
    assert d["similarity_mean"] == (1 + similarity("Paris", "Lyon")) / 2  # the two compared, no failure at 0
    assert [item["a_id"] for item in d["most_divergent"]] == ["x1"]
    assert d["first_divergence_histogram"] == {"0": 1}  # "Paris" against "Lyon" only (JSON keys)
    for change in ("finish_reason_changed", "status_or_end_differs", "divergence_not_placed", "end_marker_differs"):
        assert change not in d["counts"], d["counts"]
    note = (
        "6 pairs not compared for output, a side failed (an error status or body, no response, a stream cut short "
        "or unfinished): A only 1, B only 3, both 2 (1 the same failure, an exact match; 1 different failures); "
        "similarity, first divergence and what changed are over the 2 pairs with no side failed, exact match over all 8"
    )
    flat = " ".join(text.split())
    assert note in flat and "outputs compared (no side failed) │ 2 of 8" in flat and "outputs that differ │ 1 of 2" in flat
    assert html.escape(note) in render(a, b)
    assert pair_summary(data).endswith("outputs identical in 2 of 8; a side failed in 6 (not compared for output)")
    _, swapped = _compare(b, a)  # each side's failures said as that side's
    assert swapped["divergence"]["failed"] == {
        "pairs": 6,
        "a_only": 3,
        "b_only": 1,
        "both": 2,
        "both_same": 1,
        "both_differ": 1,
        "not_generation": 0,
    }


def test_the_pairs_a_side_failed_are_listed_by_id_with_each_sides_failure(tmp_path):
    """compare counted the failed pairs (A only, B only, both) but named none: a user could not find
    which exchanges failed. --json lists the first --top of them by id, with each side's failure in
    outcomes' words, and how many more; the terminal and the report name a few."""
    a = write_capture(tmp_path / "a", [x for x, _ in SAID])
    b = write_capture(tmp_path / "b", [y for _, y in SAID])
    text, data = _compare(a, b)
    d = data["divergence"]
    path = "/v1/chat/completions"
    assert d["failed_pairs"] == [  # the first 5 (--top's default) in A's order; x7 (B unfinished) left out
        {"a_id": "x2", "b_id": "x2", "path": path, "a": None, "b": "status 500"},
        {"a_id": "x3", "b_id": "x3", "path": path, "a": None, "b": "no response (upstream_error)"},
        {"a_id": "x4", "b_id": "x4", "path": path, "a": "status 500", "b": None},
        {"a_id": "x5", "b_id": "x5", "path": path, "a": "status 500", "b": "status 500"},
        {"a_id": "x6", "b_id": "x6", "path": path, "a": "status 500", "b": "status 503"},
    ]
    assert d["failed_pairs_left_out"] == 1
    # Each side's failures are the ones outcomes counted, in its words.
    every = compare(a, b, top=10)["divergence"]
    assert every["failed_pairs_left_out"] == 0 and len(every["failed_pairs"]) == d["failed"]["pairs"] == 6
    assert every["failed_pairs"][-1] == {"a_id": "x7", "b_id": "x7", "path": path, "a": None, "b": "unfinished"}
    said_b = [p["b"] for p in every["failed_pairs"] if p["b"] is not None]
    assert sorted(said_b) == sorted(why for why, n in data["outcomes"]["pairs"]["failed_b"].items() for _ in range(n))
    line = (
        "failed pairs: A x2 / B x2 (B status 500); A x3 / B x3 (B no response (upstream_error)); "
        "A x4 / B x4 (A status 500); 3 more (compare --json lists the first --top of them)"
    )
    assert line in " ".join(text.split()), text
    assert html.escape(line) in render(a, b)
    # --top bounds the list: none listed, every one said left out, and the terminal says so.
    none = json.loads(CliRunner().invoke(cli, ["compare", str(a), str(b), "--json", "--top", "0"]).output)["divergence"]
    assert (none["failed_pairs"], none["failed_pairs_left_out"]) == ([], 6)
    said = CliRunner().invoke(cli, ["compare", str(a), str(b), "--top", "0"], env={"COLUMNS": "300"}).output
    assert "failed pairs: 6, none listed (compare --json lists the first --top of them)" in said


def test_two_runs_that_answered_everything_have_no_failed_pairs(tmp_path):
    """The must-match and must-differ sides: every pair compared, none left out, no note."""
    a = write_capture(tmp_path / "a", [x for x, _ in SAID[:2]])
    b = write_capture(tmp_path / "b", [y for _, y in SAID[:2]])
    text, data = _compare(a, b)
    d = data["divergence"]
    assert (d["outputs_compared"], d["outputs_differ"], d["failed"]["pairs"]) == (2, 1, 0)
    assert (d["failed_pairs"], d["failed_pairs_left_out"]) == ([], 0)
    assert "not compared for output" not in text and "failed pairs" not in text
    same, _ = _compare(a, write_capture(tmp_path / "a2", [x for x, _ in SAID[:2]]))
    assert "outputs that differ │ 0 of 2" in " ".join(same.split())


def test_a_failed_side_is_an_unanswered_item_not_a_changed_answer(tmp_path):
    """With --extract, an error against "Paris" counted as an answer changed; it is left out as unanswered."""
    a = write_capture(tmp_path / "a", [x for x, _ in SAID])
    b = write_capture(tmp_path / "b", [y for _, y in SAID])
    refs = {f"q{i}": "Paris" for i in range(len(SAID))}
    r = compare(a, b, extract="regex:(Paris|Lyon)", references=refs)
    counts = r["divergence"]["counts"]
    assert (counts["answer_unchanged"], counts["answer_changed"], counts["known_unanswered"]) == (1, 1, 6)
    assert (r["accuracy"]["items"], r["accuracy"]["a_right"], r["accuracy"]["b_right"], r["accuracy"]["unanswered"]) == (
        2,
        2,
        1,
        6,
    )


def _no_messages(i: int, status: int) -> dict[str, Any]:
    """A chat request with no messages (an API reads it; no generation request): refused with ``status``."""
    chunks = [(50.0, json.dumps(sdk_shapes.error_body("messages is required", "invalid_request_error")).encode())]
    request = json.dumps({"model": "m", "stream": True}).encode()
    return exchange(f"n{i}", sent_ms=i * 1000, chunks=chunks, request=request, status=status, headers=JSON_HEADERS)


def test_failed_pairs_of_no_generation_request_are_told_apart_from_the_answers_counts(tmp_path):
    """B's answers line said "4 requests, 4 ok" while divergence said "2 pairs not compared for
    output, a side failed": its failed pairs count every pair an API reads, the answers line and
    the speed generation requests only, and nothing said so. ``failed.not_generation`` counts the
    failed pairs of no generation request, and the note says they are in no answers line (must
    differ); runs whose failed pairs are all generation requests say nothing of it (must match)."""
    answers = [_answer(i, i * 1000, 300) for i in range(4)]
    a = _run(tmp_path / "a", [*answers, _no_messages(5, 400), _no_messages(6, 200)])
    b = _run(tmp_path / "b", [*answers, _no_messages(5, 400), _no_messages(6, 400)])
    text, data = _compare(a, b)
    o, d = data["outcomes"], data["divergence"]
    assert (o["b"]["requests"], o["b"]["failed"], o["pairs"]["pairs"], o["note"]) == (4, 0, 4, None)
    assert (d["failed"]["pairs"], d["failed"]["not_generation"]) == (2, 2)
    said = "2 of the failed pairs are of no generation request (no messages, input or prompt), in none of the answers"
    assert said in " ".join(text.split()) and said in html.unescape(render(a, b))
    generation = _run(tmp_path / "g", [_answer(i, i * 1000, 300, status=500 if i == 2 else 200) for i in range(4)])
    text, data = _compare(a.parent / "a", generation)
    assert (data["divergence"]["failed"]["pairs"], data["divergence"]["failed"]["not_generation"]) == (1, 0)
    assert data["outcomes"]["pairs"]["failed_b"] == {"status 500": 1}
    assert "no generation request" not in text
