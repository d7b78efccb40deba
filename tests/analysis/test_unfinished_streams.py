"""A 200 stream that ends with [DONE] and no finish reason is an answer the engine cut, not one it gave."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from infertap.analysis.compare import compare
from infertap.apis import ended_unfinished, unfinished
from infertap.cli import cli
from tests import sdk_shapes
from tests.analysis_builders import body, event, exchange, sse, write_capture

_CHUNK = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}


def _chat(k: int, content: str | None = None, finish: str | None = None) -> dict[str, object]:
    """A chat chunk of choice ``k`` alone (n > 1: each choice's deltas come in chunks of their own)."""
    delta = {"content": content} if content is not None else {}
    return sdk_shapes.chat_chunk({**_CHUNK, "choices": [{"index": k, "delta": delta, "finish_reason": finish}]})


def _failed(k: int, content: str | None = None, finish: str | None = "error", **more: object) -> dict[str, object]:
    """Choice ``k``'s chunk as vLLM or a gateway ends a failed choice: ``finish_reason`` "error" and/or an
    ``error`` object beside it, neither of which OpenAI's SDK allows (so unchecked, on purpose)."""
    delta = {"content": content} if content is not None else {}
    return {**_CHUNK, "choices": [{"index": k, "delta": delta, "finish_reason": finish, **more}]}


#: Two choices sent whole, the second's finish reason null: a cut answer as a server says it, which the SDK
#: refuses (its finish_reason is required), so unchecked on purpose.
_WHOLE_NULL_FINISH = (
    b'{"id":"r","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"message":{"role":"assistant",'
    b'"content":"4"},"finish_reason":"stop"},{"index":1,"message":{"role":"assistant","content":"5"},"finish_reason":null}]}'
)
_MESSAGE_START = sdk_shapes.message_event(
    {
        "type": "message_start",
        "message": {
            "id": "m",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        },
    }  # fmt: skip
)


def _whole(message: dict[str, object]) -> bytes:
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    return json.dumps(sdk_shapes.chat_completion({**_CHUNK, "object": "chat.completion", "choices": [choice]})).encode()


def test_a_stream_ended_by_done_with_no_finish_reason_is_no_ok_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """llama-cpp-python's interrupt_requests answers a stream in flight with [DONE] when the next
    request waits, after as little as the role chunk: counted ok, such answers were empty answers in
    a fast p50, no errors, and goodput that a sweep credited to a target that dropped them."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    role, done = event(role="assistant"), "[DONE]"
    records = [
        # Finished: a finish reason, then [DONE], or then the body's end; or a body not streamed.
        exchange("finished", chunks=[(5, sse(role, event("4"))), (9, sse(event(finish="stop"), done))]),
        exchange("finished_no_marker", chunks=[(5, sse(role, event("4"))), (9, sse(event(finish="stop")))]),
        exchange(
            "whole",
            request=body(stream=False),
            chunks=[(5, _whole({"role": "assistant", "content": "4"}))],
            headers=[["content-type", "application/json"]],
        ),
        # Cut: [DONE] after the role chunk alone, and after some text; the body closed after some text.
        exchange("no_marker", chunks=[(5, sse(role, event("4")))]),
        exchange("cut_empty", sent_ms=1, chunks=[(5, sse(role)), (6, sse(done))]),
        exchange("cut_text", sent_ms=2, chunks=[(5, sse(role, event("The answer"))), (6, sse(done))]),
    ]
    cap = write_capture(tmp_path / "cap", records)
    runner = CliRunner()
    rows = runner.invoke(cli, ["sql", "SELECT exchange_id, ok, unfinished FROM metrics ORDER BY 1", str(cap), "--json"])
    assert rows.exit_code == 0, rows.output
    said = {r["exchange_id"]: (r["ok"], r["unfinished"]) for r in json.loads(rows.output)}
    assert said == {
        "finished": (True, False),
        "finished_no_marker": (True, False),
        "whole": (True, False),
        "no_marker": (False, True),
        "cut_empty": (False, True),
        "cut_text": (False, True),
    }
    stats = runner.invoke(cli, ["stats", str(cap), "--json"])
    assert stats.exit_code == 0, stats.output
    [group] = json.loads(stats.output)["groups"]
    assert (group["requests"], group["ok"], group["errors"], group["unfinished"]) == (6, 3, 3, 3)
    text = runner.invoke(cli, ["stats", str(cap)])
    assert "unfinished 3 (a 200 stream that ended with no finish reason" in " ".join(text.output.split())


def test_replay_s_predicate_and_the_analysis_s_sql_say_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``infertap replay`` counts unfinished answers by ``infertap.apis.ended_unfinished`` as they
    end, from their last events (``unfinished`` reading whole those it can't tell), the analysis by
    ``views.UNFINISHED`` over decoded columns: one rule, held to the same answers. The long streams
    end past the tail read first, and their finish reason is in it or not."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    role, done = event(role="assistant"), "[DONE]"
    long_text = [(5 + i, sse(event("word " * 40))) for i in range(60)]  # 60 chunks of ~300 bytes: past TAIL_BYTES
    big_last = sse(event("x" * 30_000, finish="stop"), done)  # a last event longer than the tail: grown to it
    huge_last = sse(event("x" * 100_000, finish="stop"), done)  # past TAIL_MOST: read whole
    finished = sse(role, event("4"), event(finish="stop"), done)

    of = _chat
    goes_on = [(10 + i, sse(of(1, "word " * 40))) for i in range(60)]  # choice 1's long answer: past TAIL_BYTES
    first_goes_on = [(10 + i, sse(of(0, "word " * 40))) for i in range(60)]  # choice 0's
    n2, n3 = body(n=2), body(n=3)
    records = [
        exchange("whole_stream", chunks=[(5, sse(role, event("4"))), (9, sse(event(finish="stop"), done))]),
        exchange("done_no_finish", sent_ms=1, chunks=[(5, sse(role, event("The answer"))), (6, sse(done))]),
        exchange("no_done", sent_ms=2, chunks=[(5, sse(role, event("4")))]),
        exchange("no_done_timeout", sent_ms=2.5, end="timeout", chunks=[(5, sse(role, event("4")))]),
        {
            **exchange(
                "messages_no_stop",  # an Anthropic stream closed after its head: no stop reason, cut
                sent_ms=2.7,
                request=json.dumps(
                    {"model": "m", "max_tokens": 9, "stream": True, "messages": [{"role": "user", "content": "q"}]}
                ).encode(),
                chunks=[
                    (
                        5,
                        f"event: message_start\ndata: {json.dumps(_MESSAGE_START)}\n\n".encode(),
                    )
                ],
            ),
            "path": "/v1/messages",
        },
        exchange("error_status", sent_ms=3, status=503, chunks=[(5, sse(role)), (6, sse(done))]),
        exchange(
            "not_streamed",
            sent_ms=4,
            request=body(stream=False),
            chunks=[(5, _whole({"role": "assistant", "content": "4"}))],
            headers=[["content-type", "application/json"]],
        ),
        exchange("long_finished", sent_ms=5, chunks=[*long_text, (70, sse(event(finish="stop"), done))]),
        exchange("long_cut", sent_ms=6, chunks=[*long_text, (70, sse(done))]),
        exchange("big_last_event", sent_ms=7, chunks=[(5, sse(role)), (6, big_last)]),
        exchange("huge_last_event", sent_ms=7.5, chunks=[(5, sse(role)), (6, huge_last)]),
        exchange("crlf_cut", sent_ms=8, chunks=[*long_text, (70, sse(event("4"), done).replace(b"\n", b"\r\n"))]),
        exchange(
            "gzip_cut",
            sent_ms=9,
            chunks=[(5, gzip.compress(sse(role, event("4"), done)))],
            headers=[["content-type", "text/event-stream"], ["content-encoding", "gzip"]],
        ),
        exchange(
            "gzip_finished",
            sent_ms=10,
            chunks=[(5, gzip.compress(finished))],
            headers=[["content-type", "text/event-stream"], ["content-encoding", "gzip"]],
        ),
        # n > 1: each choice ends on its finish reason, said however long before the end
        exchange(
            "n2_first_ends_early",
            sent_ms=11,
            request=n2,
            chunks=[(5, sse(of(0, "4", "stop"))), *goes_on, (80, sse(of(1, finish="stop"), done))],
        ),
        exchange(
            "n2_first_ends_last",
            sent_ms=12,
            request=n2,
            chunks=[(5, sse(of(1, "4", "stop"))), *goes_on, (80, sse(of(0, "4", "stop"), done))],
        ),
        exchange(  # choice 1's finish long before the end: the last events are choice 0's alone
            "n2_other_ends_far_back",
            sent_ms=12.5,
            request=n2,
            chunks=[(5, sse(of(1, "5", "stop"))), *first_goes_on, (80, sse(of(0, finish="stop"), done))],
        ),
        exchange(
            "n2_first_never_ends",
            sent_ms=13,
            request=n2,
            chunks=[(5, sse(of(0, "4"))), *goes_on, (80, sse(of(1, finish="stop"), done))],
        ),
        exchange("n2_other_never_ends", sent_ms=14, request=n2, chunks=[(5, sse(of(0, "4", "stop"))), *goes_on, (80, sse(done))]),
        exchange(  # choice 1 cut long before the end, choice 0 finished last: its last events are choice 0's alone
            "n2_other_cut_far_back",
            sent_ms=14.5,
            request=n2,
            chunks=[(5, sse(of(1, "5"))), *first_goes_on, (80, sse(of(0, finish="stop"), done))],
        ),
        exchange(  # the same answer, its body closed with no [DONE]
            "n2_other_cut_no_marker",
            sent_ms=14.7,
            request=n2,
            chunks=[(5, sse(of(0, "4"), of(1, "5"), of(0, finish="stop")))],
        ),
        exchange(  # an in-band error ended it: a failure by that, not an answer cut
            "n2_error",
            sent_ms=14.9,
            request=n2,
            chunks=[(5, sse(of(0, "4"), of(1, "5"), _failed(0, error={"message": "overloaded"}), done))],
        ),
        exchange("n2_short_first_never_ends", sent_ms=15, request=n2, chunks=[(5, sse(of(0, "4"), of(1, "5", "stop"), done))]),
        exchange(  # the whole body within the tail, choice 0's finish before its last events
            "n3_short_first_ends_early",
            sent_ms=16,
            request=n3,
            chunks=[(5, sse(of(0, "4", "stop"), of(1, "5"), of(2, "6"), of(1, finish="stop"), of(2, finish="stop"), done))],
        ),
        exchange(  # one of three choices never ends, within the tail
            "n3_short_middle_never_ends",
            sent_ms=17,
            request=n3,
            chunks=[(5, sse(of(0, "4", "stop"), of(1, "5"), of(2, "6"), of(2, finish="stop"), done))],
        ),
        exchange(  # two choices sent whole (JSON), one with a null finish reason: said as it is, as a single choice's
            "n2_whole_null_finish",
            sent_ms=18,
            request=body(stream=False, n=2),
            chunks=[(5, _WHOLE_NULL_FINISH)],
            headers=[["content-type", "application/json"]],
        ),
    ]
    predicate = {r["id"]: unfinished(r) for r in records}
    tails = {r["id"]: ended_unfinished(r, generation=True) for r in records}
    assert {k for k, v in tails.items() if v is None} == {  # read whole
        "gzip_cut",
        "gzip_finished",
        "huge_last_event",
        *(k for k in predicate if k.startswith(("n2_", "n3_")) and k != "n2_whole_null_finish"),  # asked for several
    }
    assert {k: v for k, v in tails.items() if v is not None} == {k: predicate[k] for k, v in tails.items() if v is not None}
    cap = write_capture(tmp_path / "cap", records)
    rows = CliRunner().invoke(cli, ["sql", "SELECT exchange_id, unfinished FROM metrics", str(cap), "--json"])
    assert rows.exit_code == 0, rows.output
    assert {r["exchange_id"]: r["unfinished"] for r in json.loads(rows.output)} == predicate
    assert sorted(k for k, v in predicate.items() if v) == [
        "crlf_cut",
        "done_no_finish",
        "gzip_cut",
        "long_cut",
        "messages_no_stop",
        "n2_first_never_ends",
        "n2_other_cut_far_back",
        "n2_other_cut_no_marker",
        "n2_other_never_ends",
        "n2_short_first_never_ends",
        "n3_short_middle_never_ends",
        "no_done",
    ]


def _choice(k: int, *, text: str | None = None, content: str | None = None, finish: str | None = None) -> dict[str, object]:
    """A stream chunk of choice ``k`` alone: a completion's (``text``) or a chat delta's (``content``)."""
    if text is not None:
        choice = {"index": k, "text": text, "logprobs": None, "finish_reason": finish}
        return sdk_shapes.completion_chunk({"id": "cmpl-1", "object": "text_completion", "created": 0, "model": "m", "choices": [choice]})  # fmt: skip
    return _chat(k, content, finish)


def _completion(xid: str, sent_ms: float, events: list[dict[str, object]], **request: object) -> dict[str, object]:
    prompt = {"model": "m", "prompt": "2+2=", "stream": True, **request}
    return {
        **exchange(xid, sent_ms=sent_ms, request=json.dumps(prompt).encode(), chunks=[(5, sse(*events, "[DONE]"))]),
        "path": "/v1/completions",
    }


def test_a_choice_other_than_the_first_with_no_finish_reason_makes_the_answer_unfinished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``n`` = 2 (or a completions batch of prompts) streams several answers, each ending on its own
    finish reason: one whose choice 1 never said one (choice 0 did, then [DONE]) was counted ok by
    stats, and by replay's summary, as if whole. Cut short as a choice 0 with none is; a stream that
    finished every choice, and two choices sent whole (JSON, a null said as it is), stay ok."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    done = "[DONE]"
    chat_n2 = body(n=2)
    records = [
        exchange(
            "chat_both",
            request=chat_n2,
            chunks=[
                (
                    5,
                    sse(
                        _choice(0, content="4"),
                        _choice(1, content="5"),
                        _choice(0, finish="stop"),
                        _choice(1, finish="stop"),
                        done,
                    ),
                )
            ],
        ),
        exchange(
            "chat_second_cut",
            sent_ms=1,
            request=chat_n2,
            chunks=[(5, sse(_choice(0, content="4"), _choice(1, content="5"), _choice(0, finish="stop"), done))],
        ),
        exchange(
            "chat_whole_null",
            sent_ms=2,
            request=body(stream=False, n=2),
            chunks=[(5, _WHOLE_NULL_FINISH)],
            headers=[["content-type", "application/json"]],
        ),
        _completion("completions_both", 3, [_choice(0, text="4", finish="stop"), _choice(1, text="5", finish="length")], n=2),
        _completion(
            "completions_second_cut", 4, [_choice(0, text="4"), _choice(1, text="5"), _choice(0, text="", finish="stop")], n=2
        ),
        _completion(  # two prompts, one choice each: the second's never finished
            "completions_batch_cut", 5, [_choice(0, text="4", finish="stop"), _choice(1, text="5")], prompt=["2+2=", "2+3="]
        ),
        _completion(  # the same, the first's long answer after it: the last events are the first's alone
            "completions_batch_cut_far_back",
            6,
            [_choice(1, text="5"), *[_choice(0, text="word " * 40) for _ in range(60)], _choice(0, text="", finish="stop")],
            prompt=["2+2=", "2+3="],
        ),
    ]
    said = {r["id"]: unfinished(r) for r in records}
    tails = {r["id"]: ended_unfinished(r, generation=True) for r in records}  # replay's, as each ends
    assert {k: said[k] if v is None else v for k, v in tails.items()} == said  # none read whole decides otherwise
    assert tails["completions_batch_cut_far_back"] is None  # asked for two answers: read whole
    cut = {"chat_second_cut", "completions_second_cut", "completions_batch_cut", "completions_batch_cut_far_back"}
    assert {k for k, v in said.items() if v} == cut
    cap = write_capture(tmp_path / "cap", records)
    rows = CliRunner().invoke(
        cli,
        [
            "sql",
            "SELECT exchange_id, ok, unfinished, choices_unfinished FROM metrics JOIN exchanges USING (capture, exchange_id)",
            str(cap),
            "--json",
        ],
    )
    assert rows.exit_code == 0, rows.output
    table = {r["exchange_id"]: (r["ok"], r["unfinished"], r["choices_unfinished"]) for r in json.loads(rows.output)}
    assert table == {
        "chat_both": (True, False, 0),
        "chat_second_cut": (False, True, 1),
        "chat_whole_null": (True, False, 1),  # said null, sent whole: as a single choice's null is read
        "completions_both": (True, False, 0),
        "completions_second_cut": (False, True, 1),
        "completions_batch_cut": (False, True, 1),
        "completions_batch_cut_far_back": (False, True, 1),
    }
    stats = CliRunner().invoke(cli, ["stats", str(cap), "--json"])
    assert stats.exit_code == 0, stats.output
    groups = json.loads(stats.output)["groups"]
    assert sum(g["requests"] for g in groups) == 7
    assert (sum(g["ok"] for g in groups), sum(g["unfinished"] for g in groups)) == (3, 4)


def test_compare_leaves_out_an_answer_whose_other_choice_was_cut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """compare scores known answers over the answers each side gave: an n = 2 stream whose choice 1
    said no finish reason was cut (unfinished), no answer to score, where it was scored as given."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))

    def answer(i: int, cut: bool) -> dict[str, object]:
        events = [_choice(0, content="answer"), _choice(1, content="answer"), _choice(0, finish="stop")]
        events += [] if cut else [_choice(1, finish="stop")]
        return exchange(f"x{i}", sent_ms=i * 10, request=body(f"q{i}", n=2), chunks=[(5, sse(*events, "[DONE]"))])

    a = write_capture(tmp_path / "a", [answer(i, cut=False) for i in range(4)])
    b = write_capture(tmp_path / "b", [answer(i, cut=i == 0) for i in range(4)])
    refs = {f"q{i}": "answer" for i in range(4)}
    acc = compare(a, b, extract="regex:(answer)", references=refs)["accuracy"]
    assert (acc["items"], acc["a_right"], acc["b_right"], acc["unanswered"]) == (3, 3, 3, 1)
    acc = compare(a, a, extract="regex:(answer)", references=refs)["accuracy"]
    assert (acc["items"], acc["unanswered"]) == (4, 0)


def test_an_answer_one_of_whose_choices_failed_and_another_was_cut_is_an_error_not_unfinished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """n = 3, choice 0 "stop", choice 1 an error (its finish reason ``error``, or an error object),
    choice 2 cut: the rule's exception was keyed on choice 0's finish reason, so this was called
    unfinished where one choice's error alone is an error ("an error in a 200 body"). Keyed on the
    exchange's error now, in the SQL and in ``cut_short`` alike; with no choice failed, the cut
    choice still makes it unfinished, and with every choice finished it is ok."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    failed = {"message": "CUDA error: an illegal memory access"}
    n3 = body(n=3)
    first, cut = _choice(0, content="4", finish="stop"), _choice(2, content="6")

    def streamed(xid: str, sent_ms: float, *events: dict[str, object]) -> dict[str, object]:
        return exchange(xid, sent_ms=sent_ms, request=n3, chunks=[(5, sse(first, *events, "[DONE]"))])

    erred = _failed(1, finish=None, error=failed)
    records = [
        streamed("finish_error_and_cut", 0, _failed(1, "5"), cut),
        streamed("error_object_and_cut", 1, _choice(1, content="5"), erred, cut),
        streamed("stop_and_cut", 2, _choice(1, content="5", finish="stop"), cut),  # must differ: unfinished
        streamed("all_finished", 3, _choice(1, content="5", finish="stop"), cut, _choice(2, finish="length")),
    ]
    said = {r["id"]: unfinished(r) for r in records}
    assert {r["id"]: ended_unfinished(r, generation=True) for r in records} == dict.fromkeys(said)  # n > 1: read whole
    cap = write_capture(tmp_path / "cap", records)
    sql = "SELECT exchange_id, ok, unfinished, error_message FROM metrics JOIN exchanges USING (capture, exchange_id)"
    rows = CliRunner().invoke(cli, ["sql", sql, str(cap), "--json"])
    assert rows.exit_code == 0, rows.output
    table = {r["exchange_id"]: (r["ok"], r["unfinished"], r["error_message"]) for r in json.loads(rows.output)}
    assert table == {
        "finish_error_and_cut": (False, False, 'choice 1: finish_reason "error"'),
        "error_object_and_cut": (False, False, "choice 1: CUDA error: an illegal memory access"),
        "stop_and_cut": (False, True, None),
        "all_finished": (True, False, None),
    }
    assert said == {xid: cut for xid, (_, cut, _) in table.items()}  # the predicate replay reads by, as the SQL
    stats = CliRunner().invoke(cli, ["stats", str(cap), "--json"])
    [group] = json.loads(stats.output)["groups"]
    assert (group["ok"], group["unfinished"], group["errors"]) == (1, 1, 3)
