"""Known answers graded by ``number``, ``choice``, ``json`` and ``regex:``: an answer the grader reads nothing in (no
number, option letter, JSON value or match: an empty answer, a text cut short before its answer) is wrong, as
benchmarks grade it, and counted apart per side. Left out of the score instead (as it was for a while), a side
whose answers were cut short before their number scored as high as one that answered them."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from infertap.analysis.compare import compare
from infertap.analysis.extract import grader
from infertap.analysis.report import render
from infertap.cli import cli
from tests import sdk_shapes
from tests.helpers import write_capture

# Per grader: the known answer, then answers it reads right, reads wrong, and reads nothing in (with the finish
# reason the engine gave: an empty answer that stopped, a text cut at its token limit).
CASES = {
    "number": ("42", "The answer is 42.", "The answer is 41.", [("", "stop"), ("Let me think. First we", "length")]),
    "choice": ("B", "The answer is (B).", "The answer is (C).", [("", "stop"), ("Let me think about each of the", "length")]),
    "json": ('{"answer": 4}', 'Here: {"answer": 4}', '{"answer": 5}', [("", "stop"), ('{"answer": ', "length")]),
    "regex:Final answer: (\\w+)": (
        "Paris",
        "Final answer: Paris",
        "Final answer: Lyon",
        [("", "stop"), ("I think the final", "length")],
    ),  # fmt: skip
}
# Each question's answer on A and on B: right, wrong, or unread (the grader reads nothing in it).
PLAN = [("right", "unread"), ("wrong", "right"), ("right", "wrong"), ("unread", "unread"), ("right", "right")]


def _said(spec: str, kind: str, i: int) -> tuple[str, str]:
    _, right, wrong, unread = CASES[spec]
    return {"right": (right, "stop"), "wrong": (wrong, "stop")}.get(kind) or unread[i % len(unread)]


def _captures(tmp_path, spec: str, plan: list[tuple[str, str]]) -> dict[str, str]:
    """A and B answering question i as ``plan[i]`` says; the known answers."""
    refs = {f"Question {i}?": CASES[spec][0] for i in range(len(plan))}
    for side in (0, 1):
        exchanges = []
        for i, (question, kinds) in enumerate(zip(refs, plan, strict=True)):
            text, finish = _said(spec, kinds[side], i)
            answer = sdk_shapes.chat_answer({"role": "assistant", "content": text}, finish=finish)
            exchanges.append({"body": {"model": "m", "messages": [{"role": "user", "content": question}]}, "chunks": [json.dumps(answer).encode()]})  # fmt: skip
        write_capture(tmp_path / "ab"[side], exchanges)
    return refs


@pytest.mark.parametrize("spec", list(CASES))
def test_the_grader_reads_nothing_in_an_empty_or_cut_answer_and_decides_the_others(spec):
    """Must differ: nothing read is no reading. Must match: a readable wrong answer is wrong, a right one right."""
    g, (reference, right, wrong, unread) = grader(spec), CASES[spec]
    known = g.known(reference)
    assert g.decides(g.read(right)) and g.same(known, g.read(right))
    assert g.decides(g.read(wrong)) and not g.same(known, g.read(wrong))
    for text, _ in unread:
        assert g.read(text) is None and not g.decides(g.read(text)), text


def test_a_regex_whose_group_took_no_part_reads_nothing():
    g = grader("regex:answer(?:: (\\w+))?")
    assert g.read("the answer") is None and not g.decides(g.read("the answer"))
    assert g.read("answer: 4") == "4" and g.decides("4")
    assert grader("regex:(\\d*)").decides(grader("regex:(\\d*)").read("none"))  # an empty match is a reading


@pytest.mark.parametrize("spec", list(CASES))
def test_an_answer_the_grader_reads_nothing_in_is_wrong_and_counted_per_side(tmp_path, spec):
    """Every item is graded; each side's unread answers are wrong, counted apart per side in compare's --json,
    its table, its verdict and the report."""
    refs = _captures(tmp_path, spec, PLAN)
    a_right, b_right = (sum(kinds[side] == "right" for kinds in PLAN) for side in (0, 1))
    unread = {side: sum(kinds["ab".index(side)] == "unread" for kinds in PLAN) for side in "ab"}

    result = compare(tmp_path / "a", tmp_path / "b", extract=spec, references=refs)
    acc = result["accuracy"]
    got = (acc["items"], acc["a_right"], acc["b_right"], acc["unread"], acc["unanswered"])
    assert got == (len(PLAN), a_right, b_right, unread, 0), acc
    assert (acc["a_rate"], acc["b_rate"]) == (a_right / len(PLAN), b_right / len(PLAN))  # the unread are wrong
    right = [(a == "right", b == "right") for a, b in PLAN]
    assert (acc["right_to_wrong"], acc["wrong_to_right"]) == (right.count((True, False)), right.count((False, True)))
    counts = result["divergence"]["counts"]
    assert (counts["known_unread_a"], counts["known_unread_b"]) == (unread["a"], unread["b"])
    assert f"counted wrong, no answer read in them: A's {unread['a']}, B's {unread['b']}" in acc["verdict"]

    (tmp_path / "refs.json").write_text(json.dumps(refs))
    argv = ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--extract", spec, "--reference", str(tmp_path / "refs.json")]  # fmt: skip
    out = CliRunner().invoke(cli, [*argv, "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["accuracy"]["unread"] == unread
    out = CliRunner().invoke(cli, argv, env={"COLUMNS": "300"})
    assert out.exit_code == 0 and "of the wrong, no answer read" in out.output, out.output
    page = render(tmp_path / "a", tmp_path / "b", extract=spec, references=refs)
    assert f"A {unread['a']}, B {unread['b']}" in page and "of the wrong, no answer read in them" in page


@pytest.mark.parametrize("spec", list(CASES))
def test_answers_cut_short_before_their_answer_lower_the_score(tmp_path, spec):
    """Must differ: B right wherever it answered, cut short before its answer on the rest, scores lower than A,
    right on all of them (it scored the same while the unread were left out)."""
    plan = [("right", "right"), ("right", "unread"), ("right", "right"), ("right", "unread")]
    refs = _captures(tmp_path, spec, plan)
    acc = compare(tmp_path / "a", tmp_path / "b", extract=spec, references=refs)["accuracy"]
    assert (acc["items"], acc["a_right"], acc["b_right"], acc["right_to_wrong"]) == (4, 4, 2, 2), acc
    assert acc["unread"] == {"a": 0, "b": 2}


@pytest.mark.parametrize("spec", list(CASES))
def test_answers_the_grader_reads_are_graded_as_before(tmp_path, spec):
    """Must match: where every answer is read, none is counted unread; a wrong one read is wrong, as before."""
    plan = [kinds for kinds in PLAN if "unread" not in kinds]
    refs = _captures(tmp_path, spec, plan)
    acc = compare(tmp_path / "a", tmp_path / "b", extract=spec, references=refs)["accuracy"]
    assert (acc["items"], acc["unread"]) == (len(plan), {"a": 0, "b": 0}), acc
    assert (acc["a_right"], acc["b_right"]) == tuple(sum(k[side] == "right" for k in plan) for side in (0, 1))
    assert "no answer read" not in acc["verdict"]
