"""Bytes a client sent that the recorder never read as a request: each leaves a record saying they
came, what they were and when (the recorder in-process: ``in_process``, its clock the test's)."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.fake_upstream import ServerThread, sse_upstream
from tests.proxy.in_process import InProcessRecorder, read_all


@pytest.mark.parametrize("behind", ["a-stream", "nothing"])
def test_a_refusals_times_are_when_its_bytes_came_and_when_its_answer_was_written(tmp_path, behind):
    """A refusal held behind a stream still going (its answer written once the stream ends) took
    both times at that write: its start after the stream's end, its answer at 0. Its start is now
    when its bytes came, its answer when written, as a refusal answered at once has them."""

    ended: list[int] = []

    def now() -> tuple[int, float]:
        return time.monotonic_ns() - rec.writer.started_ns, time.time()

    async def held() -> None:
        await asyncio.sleep(0.5)
        ended.append(now()[0])  # the upstream's end: the stream's follows, then the refusal's answer

    with ServerThread(sse_upstream([b"data: 1\n\n"], held)) as up:
        rec = InProcessRecorder(up.url, tmp_path / "cap")
        rec.server.__enter__()

        with rec.connect() as s:
            if behind == "a-stream":
                s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
                rec.read()
            before = now()
            s.sendall(b"GET /v1/bad HTTP/1.1\r\nHost: x\r\nBad Header: x\r\n\r\n")
            rec.read()
            sent = now()
            answer = read_all(s)
            answered = now()
        xs = sorted(rec.stop(), key=lambda x: x["seq"])
    refused = xs[-1]
    assert answer.endswith(b"Invalid HTTP request received.") and refused["status"] == 400
    assert before[0] <= refused["start_ns"] <= sent[0] and before[1] <= refused["wall"] <= sent[1]
    written = refused["start_ns"] + refused["headers_ns"]
    assert refused["chunk_ns"] == [refused["headers_ns"]] and refused["end_ns"] == refused["headers_ns"]
    assert written <= answered[0]
    if behind == "a-stream":
        assert xs[0]["end"] == "complete" and ended[0] <= written
