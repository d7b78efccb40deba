"""Accuracy against known answers: the score, its interval, McNemar's test and the noise floor."""

from __future__ import annotations

import json
import logging
import math
import subprocess
import sys
import threading

import pytest
from click.testing import CliRunner

from infertap.analysis.accuracy import accuracy, difference_interval, mcnemar_exact
from infertap.analysis.compare import compare
from infertap.analysis.extract import grader
from infertap.analysis.report import render
from infertap.cli import cli
from infertap.demo import known_answers, known_answers_lines
from tests import sdk_shapes
from tests.extras import needs
from tests.helpers import write_capture

# math-verify's timeouts are SIGALRM and its alarm(0) would cancel pytest-timeout's signal timer.
MATH_TIMEOUT = pytest.mark.timeout(300, method="thread")


def _counts(rb: int, wb: int, rw: int, wr: int) -> dict[str, int]:
    return {"right_both": rb, "wrong_both": wb, "right_to_wrong": rw, "wrong_to_right": wr}


def test_mcnemar_exact_is_the_binomial_test_on_the_flips():
    def by_definition(rw: int, wr: int) -> float:
        m = rw + wr
        tail = sum(math.comb(m, i) for i in range(min(rw, wr) + 1)) / 2**m
        return min(1.0, 2 * tail)

    for rw, wr in ((1, 7), (0, 5), (3, 3), (10, 30), (0, 1)):
        assert mcnemar_exact(rw, wr) == pytest.approx(by_definition(rw, wr))
        assert mcnemar_exact(rw, wr) == mcnemar_exact(wr, rw)  # two-sided
    assert mcnemar_exact(0, 0) == 1.0 and mcnemar_exact(4, 4) == 1.0
    assert mcnemar_exact(0, 12) < 0.001 < mcnemar_exact(1, 7)
    # Past 1,000 flips the approximation takes over, and agrees with the exact test where both apply.
    assert mcnemar_exact(470, 531) == pytest.approx(by_definition(470, 531), rel=0.05)


def test_the_interval_is_newcombes_paired_score_interval():
    # Six items, all wrong on A and right on B: +44.8 to +100 (a bootstrap of the flips gave +100 to +100).
    low, high = difference_interval(0, 0, 0, 6)
    assert low == pytest.approx(44.80, abs=0.01) and high == 100
    nothing = difference_interval(0, 40, 0, 0)  # nothing flipped: still uncertain, and symmetric
    assert nothing[0] < 0 < nothing[1] and nothing[0] == pytest.approx(-nothing[1])
    lo, hi = difference_interval(5, 27, 1, 7)
    assert lo < 100 * (7 - 1) / 40 < hi
    wide, narrow = difference_interval(5, 27, 1, 7), difference_interval(500, 2700, 100, 700)
    assert (narrow[1] - narrow[0]) < (wide[1] - wide[0]) / 5
    assert narrow[0] > 0  # a large lopsided sample excludes "no difference"
    assert difference_interval(0, 0, 0, 1) is None
    assert difference_interval(4, 0, 1, 0) == pytest.approx(tuple(-x for x in reversed(difference_interval(4, 0, 0, 1))))


def _newcombe_by_the_paper(a: int, d: int, b: int, c: int) -> tuple[float, float]:
    """Newcombe (1998) method 10 written out apart from the module: each Wilson limit a root of
    (p - x)^2 = z^2 x (1 - x) / n, and phi corrected as his paper gives it."""
    z, n = 1.959963984540054, a + b + c + d

    def wilson(k: int) -> tuple[float, float]:
        p = k / n
        # (1 + z^2/n) x^2 - (2p + z^2/n) x + p^2 = 0
        qa, qb, qc = 1 + z * z / n, -(2 * p + z * z / n), p * p
        root = math.sqrt(qb * qb - 4 * qa * qc)
        return (-qb - root) / (2 * qa), (-qb + root) / (2 * qa)

    p1, p2 = (a + c) / n, (a + b) / n  # B right on a + c, A on a + b
    (l1, u1), (l2, u2) = wilson(a + c), wilson(a + b)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    cross = a * d - b * c
    numerator = cross - n / 2 if cross > n / 2 else (0 if cross >= 0 else cross)
    phi = numerator / math.sqrt(margins) if margins else 0
    low = p1 - p2 - math.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    high = p1 - p2 + math.sqrt((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2)
    return 100 * low, 100 * high


def test_nothing_flipped_is_an_interval_that_narrows_with_the_items():
    """Nothing flipped with A half right set phi to 1 and the interval to 0 to 0, on any number of items."""
    ten, hundred = difference_interval(5, 5, 0, 0), difference_interval(50, 50, 0, 0)
    assert ten == pytest.approx((-16.659, 16.659), abs=0.001)  # by hand: Wilson's 26.34 x sqrt(2 - 2 x 0.8)
    assert hundred == pytest.approx((-1.923, 1.923), abs=0.001)  # 9.617 x sqrt(2 - 2 x 0.98)
    assert difference_interval(10, 0, 0, 0) == pytest.approx((-27.753, 27.753), abs=0.001)  # z^2 / (n + z^2)
    for counts in ((5, 5, 0, 0), (50, 50, 0, 0), (10, 0, 0, 0), (0, 40, 0, 0), (3, 3, 2, 1), (5, 27, 1, 7), (0, 0, 0, 6)):
        assert difference_interval(*counts) == pytest.approx(_newcombe_by_the_paper(*counts), abs=1e-9), counts
    # Must differ: the same 50% with one item flipped each way is wider than none flipped; must match: flips mirrored.
    assert difference_interval(49, 49, 1, 1)[1] > hundred[1]
    assert difference_interval(3, 3, 1, 2) == pytest.approx(tuple(-x for x in reversed(difference_interval(3, 3, 2, 1))))


def test_accuracy_must_differ_when_answers_moved_and_match_when_they_did_not():
    moved = accuracy(_counts(5, 27, 1, 7))
    assert moved is not None
    assert (moved["items"], moved["a_right"], moved["b_right"]) == (40, 6, 12)
    assert moved["difference_points"] == pytest.approx(15.0)
    assert "7 wrong->right, 1 right->wrong" in moved["verdict"]
    same = accuracy(_counts(6, 34, 0, 0))
    assert same is not None and same["difference_points"] == 0 and same["mcnemar_p"] == 1.0
    assert "not distinguishable from chance" in same["verdict"]
    assert accuracy({"answer_changed": 3}) is None  # no item had a known answer


def test_the_noise_floor_decides_whether_a_difference_is_a_finding():
    """B's difference is judged against A's own second run's: its interval, not its count of flips."""
    # B fixed 20 of A's wrong answers and broke none; A's rerun flipped 12 each way: a finding
    # (the count of flips, 20 against 24, called it none).
    fixed = accuracy(_counts(180, 0, 0, 20), baseline=_counts(176, 0, 12, 12))
    assert fixed is not None and fixed["noise_floor"]["flips"] == 24
    assert "no finding" not in fixed["verdict"] and "flipped 24 of 200, +0.0 points" in fixed["verdict"]
    # The rerun itself moved as far as B did: within the noise floor.
    drifted = accuracy(_counts(150, 20, 5, 25), baseline=_counts(150, 20, 6, 24))
    assert drifted is not None and drifted["mcnemar_p"] < 0.001
    assert "within that noise floor, no finding" in drifted["verdict"]
    quiet = accuracy(_counts(5, 27, 1, 7), baseline=_counts(6, 34, 0, 0))
    assert quiet is not None and quiet["noise_floor"]["flips"] == 0
    assert "no finding" not in quiet["verdict"] and "flipped 0 of 40" in quiet["verdict"]


def test_the_verdict_names_the_test_and_says_when_the_interval_disagrees_with_it():
    few = accuracy(_counts(5, 27, 1, 7))  # p = 0.07, while the approximate interval excludes 0
    assert few is not None and few["mcnemar_test"] == "exact" and "exact McNemar p = 0.0703" in few["verdict"]
    assert "too narrow on so few flips" in few["verdict"]
    assert "too narrow" not in accuracy(_counts(0, 36, 0, 4))["verdict"]  # its interval holds 0
    many = accuracy(_counts(0, 0, 470, 531))
    assert many is not None and "normal approximation McNemar p" in many["verdict"]


def _chat(question: str) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": question}], "temperature": 0}


def _reply(text: str) -> list[bytes]:
    return [
        json.dumps(
            {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}
        ).encode()
    ]


_QUESTIONS = {f"What is {i} + {i}?": str(2 * i) for i in range(1, 9)}


def _run(path, answers: dict[str, str]):
    write_capture(path, [{"body": _chat(q), "chunks": _reply(f"{q[8:-1]} = {a}")} for q, a in answers.items()])
    return path


def test_compare_gives_each_sides_accuracy_with_the_noise_floor(tmp_path):
    right = dict(_QUESTIONS)
    a = _run(tmp_path / "a", {q: (a if i < 2 else "0") for i, (q, a) in enumerate(right.items())})  # 2 of 8 right
    b = _run(tmp_path / "b", {q: (a if i < 6 else "0") for i, (q, a) in enumerate(right.items())})  # 6 of 8 right
    again = _run(tmp_path / "a-again", {q: (a if i < 2 else "0") for i, (q, a) in enumerate(right.items())})
    r = compare(a, b, baseline=again, extract="number", references=_QUESTIONS)
    acc = r["accuracy"]
    assert (acc["a_right"], acc["b_right"], acc["items"], acc["wrong_to_right"], acc["right_to_wrong"]) == (2, 6, 8, 4, 0)
    assert acc["noise_floor"]["flips"] == 0
    itself = compare(a, again, extract="number", references=_QUESTIONS)["accuracy"]
    assert itself["difference_points"] == 0 and itself["wrong_to_right"] == itself["right_to_wrong"] == 0
    assert compare(a, b, extract="number")["accuracy"] is None  # no known answers given

    refs = tmp_path / "answers.json"
    refs.write_text(json.dumps(_QUESTIONS))
    out = CliRunner().invoke(
        cli, ["compare", str(a), str(b), "--baseline", str(again), "--extract", "number", "--reference", str(refs)]
    )
    assert out.exit_code == 0, out.output
    assert "2 (25%)" in out.output and "6 (75%)" in out.output and "+50.0 points" in out.output
    assert "flipped 0 of 8" in out.output
    page = render(a, b, extract="number", references=_QUESTIONS)
    assert "Known answers" in page and "+50.0 points" in page


@pytest.mark.parametrize(
    ("content", "args", "message"),
    [
        ('{"What is 1 + 1?": "2"}', [], "--reference needs --extract"),
        ("not json", ["--extract", "number"], "not JSON"),
        ('["2"]', ["--extract", "number"], 'one JSON object of "question": "answer" strings'),
        ('{"What is 1 + 1?": 2}', ["--extract", "number"], 'one JSON object of "question": "answer" strings'),
    ],
)
def test_bad_references_end_in_a_clear_error(tmp_path, content, args, message):
    a = _run(tmp_path / "a", {"What is 1 + 1?": "2"})
    refs = tmp_path / "refs.json"
    refs.write_text(content)
    for command in (["compare", str(a), str(a)], ["report", str(a), str(a), "-o", str(tmp_path / "r.html")]):
        out = CliRunner().invoke(cli, [*command, "--reference", str(refs), *args])
        assert out.exit_code == 2 if "needs" in message else out.exit_code == 1, out.output
        assert message in out.output and "Traceback" not in out.output


def _call(name: str) -> list[bytes]:
    call = {"id": "c1", "type": "function", "function": {"name": name, "arguments": "{}"}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return [json.dumps({"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}).encode()]


def test_known_answers_are_read_by_the_extraction_and_only_answers_are_scored(tmp_path):
    """A reference written "3.50" against an extracted 3.5 scored wrong; the tool call before an
    answer scored as a second, wrong item; a failed request scored as a wrong answer."""
    refs = {"What is 7 / 2?": "3.50", "What is 2 + 2?": "4", "What is 3 + 3?": "6"}
    asked = [{"role": "user", "content": "What is 2 + 2?"}]
    answered = [*asked, {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "4"}]  # fmt: skip
    common = [
        {"body": _chat("What is 7 / 2?"), "chunks": _reply("7 / 2 = 3.5")},
        {"body": {"model": "m", "messages": asked}, "chunks": _call("add")},
        {"body": {"model": "m", "messages": answered}, "chunks": _reply("2 + 2 = 4")},
    ]
    write_capture(tmp_path / "a", [*common, {"body": _chat("What is 3 + 3?"), "chunks": _reply("3 + 3 = 6")}])
    failed = {"body": _chat("What is 3 + 3?"), "chunks": [json.dumps(sdk_shapes.error_body("overloaded")).encode()], "status": 503}  # fmt: skip
    write_capture(tmp_path / "b", [*common, failed])
    acc = compare(tmp_path / "a", tmp_path / "b", extract="number", references=refs)["accuracy"]
    assert (acc["items"], acc["a_right"], acc["b_right"], acc["unanswered"]) == (2, 2, 2, 1), acc
    assert acc["right_to_wrong"] == 0 and "1 left out, not answered on a side" in acc["verdict"]
    choice = {"What is 7 / 2?": "b", "What is 2 + 2?": "x"}  # a letter, read as the choice extraction reads it
    write_capture(tmp_path / "c", [{"body": _chat("What is 7 / 2?"), "chunks": _reply("The answer is (B).")}])
    acc = compare(tmp_path / "c", tmp_path / "c", extract="choice", references=choice)["accuracy"]
    assert (acc["items"], acc["a_right"]) == (1, 1)


def test_an_answer_number_reads_no_number_in_is_wrong_and_said(tmp_path):
    """An answer with no number in it ("forty-two", or cut short) is wrong, as benchmarks grade it, and counted
    apart per side, in the verdict, compare's table, the report and the demo's lines: a grader's limits seen."""
    refs = {"What is 6 * 7?": "42", "What is 2 + 2?": "4", "What is 3 + 3?": "6"}
    answers = {
        "a": ["6 * 7 = 42", "2 + 2 = 4", "3 + 3 = 5"],
        "b": ["Six times seven is forty-two.", "2 + 2 = 4", "3 + 3 = 6"],
    }
    for side, texts in answers.items():
        write_capture(tmp_path / side, [{"body": _chat(q), "chunks": _reply(t)} for q, t in zip(refs, texts, strict=True)])
    number = grader("number")
    assert not number.decides(number.read(answers["b"][0])) and number.decides(number.read(answers["a"][0]))
    assert not grader("choice").decides(None)  # so do the others: tests/analysis/test_unread_answers.py

    result = compare(tmp_path / "a", tmp_path / "b", extract="number", references=refs)
    acc = result["accuracy"]
    assert (acc["items"], acc["a_right"], acc["b_right"], acc["unread"], acc["unanswered"]) == (3, 2, 2, {"a": 0, "b": 1}, 0)
    assert (acc["wrong_to_right"], acc["right_to_wrong"]) == (1, 1)
    assert result["divergence"]["counts"]["known_unread_b"] == 1 and "known_unread_a" not in result["divergence"]["counts"]
    assert "counted wrong, no answer read in them: A's 0, B's 1" in acc["verdict"]
    itself = compare(tmp_path / "a", tmp_path / "a", extract="number", references=refs)["accuracy"]
    assert (itself["items"], itself["unread"]) == (3, {"a": 0, "b": 0}) and "no answer read" not in itself["verdict"]

    (tmp_path / "refs.json").write_text(json.dumps(refs))
    argv = [str(tmp_path / "a"), str(tmp_path / "b"), "--extract", "number", "--reference", str(tmp_path / "refs.json")]
    out = CliRunner().invoke(cli, ["compare", *argv], env={"COLUMNS": "300"})
    assert out.exit_code == 0, out.output
    assert "of the wrong, no answer read" in out.output and "counted wrong, no answer read in them" in out.output
    page = render(tmp_path / "a", tmp_path / "b", extract="number", references=refs)
    assert "of the wrong, no answer read in them" in page
    study = compare(tmp_path / "a", tmp_path / "b", baseline=tmp_path / "a", extract="number", references=refs)
    lines = known_answers_lines(known_answers([], study))  # the demo's known answers
    assert sum("(1 wrong with no number read in them)" in line for line in lines) == 1, lines


def _responses(*items: dict) -> list[bytes]:
    """A Responses answer of these output items, completed."""
    return [json.dumps({"id": "resp_1", "object": "response", "status": "completed", "output": list(items)}).encode()]


def _messages(stop: str, *blocks: dict) -> list[bytes]:
    """An Anthropic Messages answer of these blocks, ended ``stop``."""
    usage = {"input_tokens": 10, "output_tokens": 5}
    body = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": list(blocks), "stop_reason": stop, "usage": usage}  # fmt: skip
    return [json.dumps(body).encode()]


def test_an_answer_of_server_tool_calls_only_is_graded_one_of_client_calls_only_is_not(tmp_path):
    """Only a call its client must make is a step towards the answer: an answer holding only calls the
    API ran itself (Responses' web search with no message; Anthropic's search, its turn paused) was
    left ungraded as "only called tools", though no step of the client's follows it."""
    search = {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "2 + 2"}}
    function = {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "add", "arguments": "{}"}
    server_use = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "2 + 2"}}
    tool_use = {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {}}
    responses = ("/v1/responses", {"model": "m", "input": "What is 2 + 2?"}, "application/json")
    messages = ("/v1/messages", {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "What is 2 + 2?"}]}, "application/json")  # fmt: skip
    cases = {
        # name: (request, answer, graded)
        "responses, built-in calls only": (responses, _responses(search), True),
        "anthropic, paused after its search": (messages, _messages("pause_turn", server_use), True),
        "responses, the client's call": (responses, _responses(search, function), False),
        "anthropic, the client's call": (messages, _messages("tool_use", server_use, tool_use), False),
    }
    for i, (name, ((path, body, ctype), answer, graded)) in enumerate(cases.items()):
        for side in ("a", "b"):
            write_capture(tmp_path / str(i) / side, [{"path": path, "body": body, "chunks": answer, "content_type": ctype}])
        result = compare(tmp_path / str(i) / "a", tmp_path / str(i) / "b", extract="number", references={"What is 2 + 2?": "4"})
        counts = result["divergence"]["counts"]
        if graded:  # no text on either side: graded, wrong on both (no number read in either), and said
            assert counts["wrong_both"] == 1 and result["accuracy"]["items"] == 1, (name, counts)
            assert result["accuracy"]["unread"] == {"a": 1, "b": 1}
        else:  # a step: the client runs its call, the answer comes after: not graded at all
            assert "wrong_both" not in counts and result["accuracy"] is None, (name, counts)


def test_an_answer_whose_client_left_after_its_end_marker_is_answered(tmp_path):
    """A stream the client closed after [DONE] holds the whole answer (stats counts it ok): it was
    left out as 'not answered'; one cut before its end marker is left out still."""

    def streamed(i: int, text: str, end: str = "complete", done: bool = True) -> dict:
        events = [b'data: {"choices":[{"index":0,"delta":{"content":"%s"}}]}\n\n' % text.encode()]
        if done:
            events.append(b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": f"What is {i} + {i}?"}]}
        return {"body": body, "chunks": events, "end": end, "content_type": "text/event-stream"}

    refs = {f"What is {i} + {i}?": str(2 * i) for i in range(3)}
    # The engine broke off after its end marker (llama-cpp-python interrupting a stream): no answer either.
    write_capture(tmp_path / "a", [streamed(0, "0"), streamed(1, "2", "client_disconnected"), streamed(2, "4", "upstream_error")])  # fmt: skip
    write_capture(tmp_path / "b", [streamed(i, str(2 * i)) for i in range(3)])
    acc = compare(tmp_path / "a", tmp_path / "b", extract="number", references=refs)["accuracy"]
    assert (acc["items"], acc["a_right"], acc["unanswered"]) == (2, 2, 1)


def test_a_prompt_of_token_ids_is_its_own_question(tmp_path):
    """llama.cpp's ``/completion`` and ``/v1/completions`` take a prompt of token ids (or ids mixed
    with text): only its text parts were read, so two prompts of other ids were both the question
    "" and a known answer could not be given to either."""
    done = {"stop": True, "stop_type": "eos"}
    prompts = {"[1, 2, 3]": "4", "[1, 2, 4]": "5", '[1, "plus", 3]': "6", '[1, "plus", 4]': "7"}
    common = [
        {
            "path": "/completion",
            "body": {"prompt": json.loads(p), "n_predict": 4},
            "chunks": [json.dumps({"content": f"= {answer}", **done}).encode()],
        }
        for p, answer in prompts.items()
    ]
    completions = {"path": "/v1/completions", "body": b'{"model":"m","prompt":[[5,6],[7]]}', "chunks": _text_completion("= 8")}
    write_capture(tmp_path / "a", [*common, completions])
    write_capture(tmp_path / "b", [*common, {**completions, "chunks": _text_completion("= 9")}])
    refs = {**prompts, "[[5, 6], [7]]": "8"}  # ids sent with other spacing: the same prompt
    acc = compare(tmp_path / "a", tmp_path / "b", extract="number", references=refs)["accuracy"]
    assert acc is not None, "no prompt was read as a question with a known answer"
    assert (acc["items"], acc["a_right"], acc["b_right"], acc["right_to_wrong"]) == (5, 5, 4, 1), acc


def _text_completion(text: str) -> list[bytes]:
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "stop"}
    body = {"id": "cmpl-1", "object": "text_completion", "created": 0, "model": "m", "choices": [choice]}
    return [json.dumps(sdk_shapes.completion(body)).encode()]


def test_a_completions_prompt_sent_as_a_list_of_one_is_that_question(tmp_path):
    """OpenAI's, vLLM's, llama-server's and llama-cpp-python's /v1/completions run ``["ab"]`` as
    ``"ab"`` (a batch of one): it was the question '["ab"]', which no known answer keyed "ab"
    reached; a batch of two prompts stays a batch, the question of neither."""
    from infertap.analysis import Analysis

    asks = {
        "what is 2 + 2?": (["what is 2 + 2?"], "= 4", "= 5"),  # a list of one, as the string: scored
        "what is 3 + 3?": ("what is 3 + 3?", "= 6", "= 6"),
        "[1, 2, 3]": ([[1, 2, 3]], "= 7", "= 7"),  # a batch of one prompt of token ids: those ids
        "what is 4 + 4?": (["what is 4 + 4?", "what is 5 + 5?"], "= 8", "= 9"),  # a batch: no question
    }
    for side, at in (("a", 1), ("b", 2)):
        xs = [{"path": "/v1/completions", "body": {"model": "m", "prompt": p[0]}, "chunks": _text_completion(p[at])} for p in asks.values()]  # fmt: skip
        write_capture(tmp_path / side, xs)
    refs = tmp_path / "answers.json"
    refs.write_text(json.dumps({"what is 2 + 2?": "4", "what is 3 + 3?": "6", "[1, 2, 3]": "7", "what is 4 + 4?": "8"}))
    args = ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--extract", "number", "--reference", str(refs), "--json"]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    acc = json.loads(out.output)["accuracy"]
    assert (acc["items"], acc["a_right"], acc["b_right"], acc["right_to_wrong"]) == (3, 3, 2, 1), acc
    with Analysis([tmp_path / "a"], cache_dir=tmp_path / "cache") as an:
        questions = [row[0] for row in an.sql("SELECT last_user FROM requests ORDER BY last_user").fetchall()]
    assert questions == ['["what is 4 + 4?", "what is 5 + 5?"]', "[1, 2, 3]", "what is 2 + 2?", "what is 3 + 3?"]


# --extract math: math-verify itself grades (the math extra; make test installs it).
_MATH = {  # question: (reference, A's answer, B's answer)
    "q1": ("-3x", "So the product is \\boxed{x \\cdot -3}.", "So the product is \\boxed{-3x}."),
    "q2": ("2", "The answer is \\boxed{2xy}.", "The answer is \\boxed{2}."),
    "q3": ("0.5", "Halving gives \\boxed{\\frac{1}{2}}.", "Halving gives $\\boxed{0.5}$."),
    "q4": ("\\sin 2", "It is \\boxed{\\sin 2}.", "It is \\boxed{2}."),
}


def _math_runs(tmp_path):
    for side, k in (("a", 1), ("b", 2)):
        write_capture(tmp_path / side, [{"body": _chat(q), "chunks": _reply(v[k])} for q, v in _MATH.items()])
    return tmp_path / "a", tmp_path / "b", {q: v[0] for q, v in _MATH.items()}


@MATH_TIMEOUT
def test_math_grades_as_math_verify_does_and_number_agrees_on_these(tmp_path):
    """ "x \\cdot -3" is -3x, "2xy" is no 2, "\\sin 2" is no 2, "x/2" is \\frac{x}{2}, "10s" is 10: math-verify's
    readings, and number's since it read -3, 2, 2, another answer and 10s."""
    needs("math_verify", "math")
    from math_verify import parse, verify

    g, number = grader("math"), grader("number")
    for reference, answer, right in [
        ("-3x", "So \\boxed{x \\cdot -3}", True),
        ("2", "\\boxed{2xy}", False),
        ("0.5", "\\boxed{\\frac{1}{2}}", True),
        ("\\frac{1}{2}", "The answer is 0.5", True),  # free text: math-verify's plain expressions
        ("7", "\\boxed{8}", False),
        ("\\sin 2", "\\boxed{\\sin 2}", True),
        ("2", "\\boxed{\\sin 2}", False),
        ("\\frac{x}{2}", "\\boxed{x/2}", True),
        ("\\frac{x}{3}", "\\boxed{x/2}", False),
        ("10", "\\boxed{10s}", True),
        ("\\frac{2^x}{2}", "\\boxed{2^x/2}", True),
        ("2", "\\boxed{2^x/2}", False),
        ("\\frac{x}{2}", "\\boxed{0.5x}", True),
        ("\\frac{1}{2}x", "\\boxed{x/2}", True),
        ("\\frac{x}{3}", "\\boxed{0.5x}", False),
        ("0.5y", "\\boxed{\\frac{1}{2}x}", False),
        ("2", "\\boxed{2xyzw}", False),
        ("2wxyz", "\\boxed{2xyzw}", True),
        ("x \\cdot y", "\\boxed{yx}", True),
        ("xz", "\\boxed{xy}", False),
        ("\\sin(x)^2", "\\boxed{\\sin^2 x}", True),
        ("\\cos(x)^2", "\\boxed{\\sin^2 x}", False),
        ("x \\cdot y + 1", "\\boxed{xy + 1}", True),
        ("1", "\\boxed{xy + 1}", False),
        ("x \\cdot y + 1", "So $x y + 1$.", True),
        ("xy + 1", "\\boxed{xy + 1}", True),  # a known answer written bare is LaTeX, as MATH's are
        ("xy + 1", "\\boxed{1}", False),
        ("$2bacd$", "\\boxed{2abcd}", True),
        ("2", "\\boxed{2abcd}", False),
        ("5", "The speed is 5m/s.", True),  # a unit per unit: the number, as "5 m/s" is
        ("6", "The speed is 5m/s.", False),
        ("10", "\\boxed{10\\text{ m/s}}", True),  # words in \\text: a unit, not the quotient m/s
        ("11", "\\boxed{10\\text{ m/s}}", False),
    ]:
        assert g.same(g.known(reference), g.read(answer)) is right, (reference, answer)
        assert right is verify(parse(f"${reference}$"), parse(answer))  # what math-verify itself says
        assert number.same(number.known(reference), number.read(answer)) is right, (reference, answer)
    assert g.shown(g.read("So \\boxed{x \\cdot -3}")) == "x \\cdot -3" and g.shown(g.read("no answer")) is None
    assert not g.same(g.known("7"), g.read("no answer"))  # nothing read is no answer

    a, b, refs = _math_runs(tmp_path)
    by_math = compare(a, b, extract="math", references=refs)
    acc = by_math["accuracy"]
    assert (acc["a_right"], acc["b_right"], acc["right_to_wrong"], acc["wrong_to_right"]) == (3, 3, 1, 1)
    counts = by_math["divergence"]["counts"]
    # A's and B's answers are one in q1 and q3 (-3x, 1/2), differ in q2 and q4
    assert (counts["answer_unchanged"], counts["answer_changed"]) == (2, 2)
    by_number = compare(a, b, extract="number", references=refs)["accuracy"]
    flips = ("a_right", "b_right", "right_to_wrong", "wrong_to_right")
    assert [by_number[k] for k in flips] == [acc[k] for k in flips]  # number read A's q1, q2, q4 otherwise


@MATH_TIMEOUT
def test_math_reads_off_the_main_thread_and_a_comparison_too_slow_is_counted(tmp_path, monkeypatch):
    """math-verify's timeouts are signals: off the main thread they raise, so none is asked for there;
    a comparison past its timeout is unequal and counted, never a crash. The slow comparison is a
    stand-in that hangs (sympy's time depends on the machine), cut by math-verify's own alarm."""
    needs("math_verify", "math")
    import time

    import math_verify.grader

    from infertap.analysis import extract_math

    g = grader("math")
    got: list[bool] = []
    worker = threading.Thread(target=lambda: got.append(g.same(g.known("-3x"), g.read("\\boxed{x \\cdot -3}"))))
    worker.start()
    worker.join()
    assert got == [True]

    slow = extract_math.MathVerify(timeout_s=1)
    gold, answer = slow.known("(x+1)^{2}"), slow.read("\\boxed{(x+2)^{2}}")
    monkeypatch.setattr(math_verify.grader, "sympy_expr_eq", lambda *a, **k: time.sleep(60))
    assert not slow.same(gold, answer)
    assert slow.timed_out() == 1
    monkeypatch.setattr(extract_math, "TIMEOUT_S", 1)
    q = "Expand."
    write_capture(tmp_path / "a", [{"body": _chat(q), "chunks": _reply("\\boxed{(x+2)^{2}}")}])
    acc = compare(tmp_path / "a", tmp_path / "a", extract="math", references={q: "(x+1)^{2}"})["accuracy"]
    assert acc["timed_out"] >= 1 and acc["a_right"] == acc["b_right"] == 0
    assert "took too long" in acc["verdict"]


@MATH_TIMEOUT
def test_math_off_the_main_thread_is_bounded_too(tmp_path, monkeypatch):
    """Off the main thread math-verify's alarm can't fire: a comparison that hangs there ran unbounded
    (the 60 s stand-in's None read as unequal, nothing counted). Now it is given up at the timeout,
    counted, and compare run in a worker thread says so; a reading that is quick still reads."""
    needs("math_verify", "math")
    import time

    import math_verify.grader

    from infertap.analysis import extract_math

    monkeypatch.setattr(extract_math, "TIMEOUT_S", 1)
    q = "Expand."
    write_capture(tmp_path / "a", [{"body": _chat(q), "chunks": _reply("\\boxed{(x+2)^{2}}")}])
    g = extract_math.MathVerify()
    gold, answer = g.known("(x+1)^{2}"), g.read("\\boxed{(x+2)^{2}}")
    monkeypatch.setattr(math_verify.grader, "sympy_expr_eq", lambda *a, **k: time.sleep(60))
    got: list[object] = []

    def grade() -> None:
        got.append((g.same(gold, answer), g.timed_out(), g.shown(g.read("\\boxed{7}"))))
        got.append(compare(tmp_path / "a", tmp_path / "a", extract="math", references={q: "(x+1)^{2}"})["accuracy"])

    worker = threading.Thread(target=grade)
    worker.start()
    worker.join()
    assert got[0] == (False, 1, "7")
    acc = got[1]
    assert isinstance(acc, dict) and acc["timed_out"] >= 1 and acc["a_right"] == acc["b_right"] == 0
    assert "took too long" in acc["verdict"]


@MATH_TIMEOUT
def test_math_off_the_main_thread_says_nothing_of_timeouts_it_has(tmp_path):
    """math-verify warns "Timeout is disabled" when asked for none, which is how each call off the main
    thread asks (its own bound is ``_within``'s): compare run in a worker thread printed it to stderr.
    Now that warning is dropped there, and the grading still said."""
    needs("math_verify", "math")
    a, b, refs = _math_runs(tmp_path)
    (tmp_path / "refs.json").write_text(json.dumps(refs))
    argv = ["infertap", "compare", str(a), str(b), "--extract", "math", "--reference", str(tmp_path / "refs.json")]
    script = (
        "import sys, threading\n"
        "from infertap.cli import main\n"
        f"sys.argv = {argv!r}\n"
        "worker = threading.Thread(target=main)\n"
        "worker.start(); worker.join()\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr
    assert "right->wrong" in out.stdout  # it graded
    assert "Timeout is disabled" not in out.stderr, out.stderr


def test_math_warns_of_a_missing_timeout_where_the_call_is_not_ours(caplog):
    """Only our bounded calls' warning is dropped: math-verify called without a timeout elsewhere still warns."""
    needs("math_verify", "math")
    import math_verify.parser

    from infertap.analysis import extract_math

    extract_math.MathVerify()  # its filter in place
    for thread in (extract_math._WORKER, "someone-else"):
        record = logging.LogRecord("math_verify.parser", logging.WARNING, __file__, 0, "Timeout is disabled as x", None, None)
        record.threadName = thread
        caplog.clear()
        math_verify.parser.logger.handle(record)
        assert [r.threadName for r in caplog.records] == ([] if thread == extract_math._WORKER else [thread])


def test_math_without_its_extra_names_the_install_command(tmp_path):
    a, _, refs = _math_runs(tmp_path)
    (tmp_path / "refs.json").write_text(json.dumps(refs))
    script = (
        "import sys; sys.modules['math_verify'] = None\n"
        "from infertap.cli import main\n"
        f"sys.argv = ['infertap', 'compare', {str(a)!r}, {str(a)!r}, '--extract', 'math', '--reference', {str(tmp_path / 'refs.json')!r}]\n"
        "main()\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "math-verify" in out.stderr and "pip install 'infertap[math]'" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
