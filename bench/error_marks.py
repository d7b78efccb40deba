"""What judging a large streamed answer costs replay's event loop: its in-band error marks
(``ERROR_MARKS``) searched in the whole body as it ends (as before) or chunk by chunk as its bytes
arrive (``ErrorMarkScan``, a batch of ``SCAN_BYTES`` at a time, as now).

    python -m bench.error_marks [--mib 1.4 8] [--answers 8] [--json bench-error-marks.json]

Per body size, ``--answers`` chat streams of that size (SSE chunks of about 150 bytes, no mark in
them: every answer's bytes are searched whole) arrive side by side on one loop, a chunk per loop
turn, and each is judged as it ends by ``ended_answer``, as ``Replay._judge`` does. It reports the
event loop's lag (a 1 ms sleep's lateness, worst and median, ``bench.loop_ticker``) and the longest
single judgement (the end of one answer: what every other request's send waits behind), medians
of 3 runs; and the search's own CPU per body, at the end and fed as the chunks come, with the
longest the loop is held by one chunk's feed. Judgements and feeds are timed in the thread's CPU
time: on a shared machine, another process's turn on the core is no search's.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import time
from typing import Any

from bench.loop_ticker import ticking
from infertap.apis import ErrorMarkScan, ended_answer
from infertap.apis.read import _by_path
from infertap.apis.unfinished import _may_report_error
from infertap.capture.records import new_exchange

MIB = 1 << 20
PATH = "/v1/chat/completions"


def chunks(mib: float) -> list[bytes]:
    """A chat stream of about ``mib`` MiB: content chunks, a finish chunk, a usage chunk, [DONE]."""
    piece = b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"word "}}]}\n\n'
    body = [piece] * max(1, int(mib * MIB / len(piece)))
    body.append(b'data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n')
    body.append(b'data: {"id":"c1","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":9,"total_tokens":14}}\n\n')
    body.append(b"data: [DONE]\n\n")
    return body


def record(body: list[bytes]) -> dict[str, Any]:
    rec = new_exchange(method="POST", path=PATH, upstream="u", wall=0.0, start_ns=0, request_body=b'{"stream":true}')
    rec.update({"status": 200, "end": "complete", "chunks": body, "chunk_ns": list(range(len(body)))})
    rec["response_headers"] = [["content-type", "text/event-stream"]]
    return rec


async def judged(body: list[bytes], answers: int, as_they_arrive: bool) -> dict[str, float]:
    """``answers`` streams of ``body`` arriving side by side, each judged as it ends: the loop's lag
    and the longest judgement (the garbage collector held off: its pauses are no search's)."""
    judgements: list[float] = []

    async def answer() -> None:
        scan = ErrorMarkScan.of_path(PATH) if as_they_arrive else None
        for chunk in body:
            await asyncio.sleep(0)  # the next chunk arrives on a later loop turn
            if scan is not None:
                scan.feed(chunk)
        rec = record(body)
        t = time.thread_time()
        result = ended_answer(rec, generation=True, marked=None if scan is None else scan.ended())
        judgements.append(time.thread_time() - t)
        assert result == (False, True, 9, None), result  # read ok from its last events, no mark

    lags: list[float] = []
    gc.disable()
    try:
        async with ticking(lags, settle_s=0.02):
            await asyncio.gather(*(answer() for _ in range(answers)))
    finally:
        gc.enable()
    return {
        "loop_lag_max_ms": max(lags),
        "loop_lag_p50_ms": statistics.median(lags),
        "longest_judgement_ms": max(judgements) * 1000,
    }


def cpu(body: list[bytes]) -> dict[str, float]:
    """The search's whole cost per body (ms, the best of 5), at the end and fed as it arrives, and
    the longest the loop is held by one chunk's feed."""
    api = _by_path(PATH)
    assert api is not None
    whole, fed, steps = [], [], []
    for _ in range(5):
        t = time.thread_time()
        assert not _may_report_error(api, body)
        whole.append(time.thread_time() - t)
        scan = ErrorMarkScan.of_path(PATH)
        assert scan is not None
        t = time.thread_time()
        for chunk in body:
            scan.feed(chunk)
        assert not scan.ended()
        fed.append(time.thread_time() - t)
        step = 0.0
        for chunk in body:
            t = time.thread_time()
            scan.feed(chunk)
            step = max(step, time.thread_time() - t)
        steps.append(step)
    return {
        "whole_at_end_ms": min(whole) * 1000,
        "fed_as_they_arrive_ms": min(fed) * 1000,
        "longest_feed_ms": statistics.median(steps) * 1000,  # of each run's longest: a preempted one is no search's
    }


def _median(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: round(statistics.median(r[k] for r in runs), 3) for k in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, nargs="*", default=[1.4, 8.0])
    parser.add_argument("--answers", type=int, default=8)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    rows = []
    for mib in args.mib:
        body = chunks(mib)
        before = _median([asyncio.run(judged(body, args.answers, as_they_arrive=False)) for _ in range(3)])
        after = _median([asyncio.run(judged(body, args.answers, as_they_arrive=True)) for _ in range(3)])
        row = {
            "body_mib": round(sum(map(len, body)) / MIB, 2),
            "chunks": len(body),
            "answers": args.answers,
            "search_cpu": {k: round(v, 3) for k, v in cpu(body).items()},
            "whole_at_end": before,
            "as_they_arrive": after,
            "longest_judgement_ratio": round(before["longest_judgement_ms"] / after["longest_judgement_ms"], 1),
            "loop_lag_max_ratio": round(before["loop_lag_max_ms"] / after["loop_lag_max_ms"], 1),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(rows, out, indent=2)


if __name__ == "__main__":
    main()
