"""A 200 stream that ends with [DONE] and no finish reason is an answer the engine cut, not one it gave."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from infertap.apis import ended_unfinished, unfinished
from infertap.cli import cli
from tests.analysis_builders import body, event, exchange, sse, write_capture


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
            chunks=[(5, b'{"choices":[{"index":0,"message":{"role":"assistant","content":"4"},"finish_reason":"stop"}]}')],
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

    def of(k: int, content: str | None = None, finish: str | None = None) -> dict[str, object]:
        """A chunk of choice ``k`` alone (n > 1: each choice's deltas come in chunks of their own)."""
        delta = {"content": content} if content is not None else {}
        return {"object": "chat.completion.chunk", "choices": [{"index": k, "delta": delta, "finish_reason": finish}]}

    goes_on = [(10 + i, sse(of(1, "word " * 40))) for i in range(60)]  # choice 1's long answer: past TAIL_BYTES
    records = [
        exchange("whole_stream", chunks=[(5, sse(role, event("4"))), (9, sse(event(finish="stop"), done))]),
        exchange("done_no_finish", sent_ms=1, chunks=[(5, sse(role, event("The answer"))), (6, sse(done))]),
        exchange("no_done", sent_ms=2, chunks=[(5, sse(role, event("4")))]),
        exchange("no_done_timeout", sent_ms=2.5, end="timeout", chunks=[(5, sse(role, event("4")))]),
        {
            **exchange(
                "messages_no_stop",  # an Anthropic stream: its own end events, not this rule's
                sent_ms=2.7,
                request=json.dumps(
                    {"model": "m", "max_tokens": 9, "stream": True, "messages": [{"role": "user", "content": "q"}]}
                ).encode(),
                chunks=[
                    (
                        5,
                        b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"usage":{"input_tokens":1}}}\n\n',
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
            chunks=[(5, b'{"choices":[{"index":0,"message":{"role":"assistant","content":"4"}}]}')],
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
        # n > 1: the answer's finish reason is choice 0's, said however long before the end
        exchange(
            "n2_first_ends_early",
            sent_ms=11,
            chunks=[(5, sse(of(0, "4", "stop"))), *goes_on, (80, sse(of(1, finish="stop"), done))],
        ),
        exchange(
            "n2_first_ends_last", sent_ms=12, chunks=[(5, sse(of(1, "4", "stop"))), *goes_on, (80, sse(of(0, "4", "stop"), done))]
        ),
        exchange(
            "n2_first_never_ends", sent_ms=13, chunks=[(5, sse(of(0, "4"))), *goes_on, (80, sse(of(1, finish="stop"), done))]
        ),
        exchange("n2_other_never_ends", sent_ms=14, chunks=[(5, sse(of(0, "4", "stop"))), *goes_on, (80, sse(done))]),
        exchange("n2_short_first_never_ends", sent_ms=15, chunks=[(5, sse(of(0, "4"), of(1, "5", "stop"), done))]),
        exchange(  # the whole body within the tail, choice 0's finish before its last events
            "n3_short_first_ends_early",
            sent_ms=16,
            chunks=[(5, sse(of(0, "4", "stop"), of(1, "5"), of(2, "6"), of(1, finish="stop"), of(2, finish="stop"), done))],
        ),
    ]
    predicate = {r["id"]: unfinished(r) for r in records}
    tails = {r["id"]: ended_unfinished(r, generation=True) for r in records}
    assert {k for k, v in tails.items() if v is None} == {  # read whole
        "gzip_cut",
        "gzip_finished",
        "huge_last_event",
        "n2_first_ends_early",
        "n2_first_never_ends",
        "n2_other_never_ends",
        "n2_short_first_never_ends",
        "n3_short_first_ends_early",
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
        "n2_first_never_ends",
        "n2_short_first_never_ends",
        "no_done",
    ]
