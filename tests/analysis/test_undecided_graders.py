"""Known answers graded by ``choice``, ``json`` and ``regex:``: an answer the grader reads nothing in (no option
letter, no JSON value, no match: an empty answer, a text cut short) is undecided, as ``number``'s is, not wrong."""

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
    """Must differ: nothing read is undecided. Must match: a readable wrong answer is still wrong, a right one right."""
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
def test_an_answer_the_grader_reads_nothing_in_is_undecided_not_wrong(tmp_path, spec):
    """An empty or cut answer was scored as a wrong one, so a run that answered less looked less accurate: it is left
    out of right/wrong and McNemar, counted apart, in compare's --json, its table, its verdict and the report."""
    refs = _captures(tmp_path, spec, PLAN)
    graded = [kinds for kinds in PLAN if "unread" not in kinds]
    a_right, b_right = (sum(kinds[side] == "right" for kinds in graded) for side in (0, 1))
    undecided = len(PLAN) - len(graded)

    result = compare(tmp_path / "a", tmp_path / "b", extract=spec, references=refs)
    acc = result["accuracy"]
    got = (acc["items"], acc["a_right"], acc["b_right"], acc["undecided"], acc["unanswered"])
    assert got == (len(graded), a_right, b_right, undecided, 0), acc
    assert (acc["a_rate"], acc["b_rate"]) == (a_right / len(graded), b_right / len(graded))  # the unread in neither
    flips = [("right", "wrong"), ("wrong", "right")]
    assert (acc["right_to_wrong"], acc["wrong_to_right"]) == tuple(graded.count(f) for f in flips)
    assert result["divergence"]["counts"]["known_undecided"] == undecided
    assert f"{undecided} left out, undecided: no answer read on a side" in acc["verdict"]

    (tmp_path / "refs.json").write_text(json.dumps(refs))
    argv = ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--extract", spec, "--reference", str(tmp_path / "refs.json")]  # fmt: skip
    out = CliRunner().invoke(cli, [*argv, "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["accuracy"]["undecided"] == undecided
    out = CliRunner().invoke(cli, argv)
    assert out.exit_code == 0 and "undecided, left out" in out.output, out.output
    page = render(tmp_path / "a", tmp_path / "b", extract=spec, references=refs)
    assert "undecided (no answer read on a side), left out" in page


@pytest.mark.parametrize("spec", list(CASES))
def test_answers_the_grader_reads_are_all_graded(tmp_path, spec):
    """Must match: where every answer is read, nothing is undecided; a wrong one read is wrong, as before."""
    plan = [kinds for kinds in PLAN if "unread" not in kinds]
    refs = _captures(tmp_path, spec, plan)
    acc = compare(tmp_path / "a", tmp_path / "b", extract=spec, references=refs)["accuracy"]
    assert (acc["items"], acc["undecided"]) == (len(plan), 0), acc
    assert (acc["a_right"], acc["b_right"]) == tuple(sum(k[side] == "right" for k in plan) for side in (0, 1))
    assert "undecided" not in acc["verdict"]


@pytest.mark.parametrize("spec", list(CASES))
def test_every_answer_unread_is_no_score_and_says_so(tmp_path, spec):
    """Where the grader read nothing on a side of every item there is no score, and compare says why."""
    refs = _captures(tmp_path, spec, [("right", "unread"), ("unread", "wrong")])
    result = compare(tmp_path / "a", tmp_path / "b", extract=spec, references=refs)
    assert result["accuracy"] is None and result["divergence"]["counts"]["known_undecided"] == 2
    (tmp_path / "refs.json").write_text(json.dumps(refs))
    argv = ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--extract", spec, "--reference", str(tmp_path / "refs.json")]  # fmt: skip
    out = CliRunner().invoke(cli, argv)
    assert out.exit_code == 0, out.output
    assert "known answers: none graded, all left out: 2 undecided: no answer read on a side" in out.output
