"""Killing the recorder: SIGKILL loses at most the flush window, SIGTERM loses nothing."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import threading
import time

import httpx
import pytest

from infertap.capture.info import summarize
from infertap.stopping import stop_signals

# What a SIGKILL may cost: exchanges that completed within this long before the kill. The writer
# gathers for 5 ms before each write; the margin is for a loaded 2-core machine.
FLUSH_WINDOW_S = 0.25


def test_sigkill_under_100_concurrent_streams_keeps_every_exchange_completed_before_the_flush_window(fake, record):
    app, url = fake
    rec = record(url)
    completed: dict[str, float] = {}
    stop = threading.Event()

    async def client(worker: int) -> None:
        async with httpx.AsyncClient(timeout=10) as c:
            i = 0
            while not stop.is_set():
                tag = f"w{worker}-{i}"
                try:
                    r = await c.post(f"{rec.url}/v1/chat/completions", json={"tag": tag, "n_chunks": 40, "pace_ms": 5})
                    if r.status_code == 200 and r.content.endswith(b"[DONE]\n\n"):
                        completed[tag] = time.monotonic()
                except httpx.HTTPError:
                    return
                i += 1

    def load() -> None:
        async def main() -> None:
            await asyncio.gather(*(client(w) for w in range(100)))

        asyncio.run(main())

    t = threading.Thread(target=load)
    t.start()
    while len(completed) < 100:
        time.sleep(0.01)
    time.sleep(2 * FLUSH_WINDOW_S)  # traffic keeps flowing: the kill lands mid-stream
    streaming = app.in_flight
    killed_at = time.monotonic()
    rec.proc.popen.send_signal(signal.SIGKILL)
    rec.proc.popen.wait(10)
    stop.set()
    t.join(15)

    recorded = {json.loads(x["request_body"])["tag"] for x in rec.exchanges()}
    must_have = {tag for tag, at in completed.items() if at < killed_at - FLUSH_WINDOW_S}
    assert len(must_have) >= 100 and app.max_in_flight >= 90 and streaming > 0  # 100 streams at once; killed mid-stream
    assert must_have <= recorded, f"lost {sorted(must_have - recorded)[:5]}"
    summary = summarize(rec.out)
    assert summary["closed_cleanly"] is False


def test_sigterm_under_100_concurrent_streams_loses_nothing(fake, record):
    app, url = fake
    rec = record(url, "--graceful-timeout", "1")
    results: dict[str, str] = {}

    async def one(c: httpx.AsyncClient, tag: str) -> None:
        try:
            async with c.stream("POST", f"{rec.url}/v1/chat/completions", json={"tag": tag, "n_chunks": 400, "pace_ms": 10}) as r:
                async for _ in r.aiter_raw():
                    results[tag] = "streaming"
            results[tag] = "done"
        except httpx.HTTPError:
            results[tag] = "cut"

    async def main() -> None:
        async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=100)) as c:
            tasks = [asyncio.create_task(one(c, f"t{i}")) for i in range(100)]
            while sum(v == "streaming" for v in results.values()) < 100:
                await asyncio.sleep(0.02)
            rec.proc.popen.send_signal(signal.SIGTERM)
            await asyncio.gather(*tasks)

    asyncio.run(main())
    assert rec.proc.popen.wait(30) == 0
    exchanges = rec.exchanges()
    assert sorted(json.loads(x["request_body"])["tag"] for x in exchanges) == sorted(f"t{i}" for i in range(100))
    # The streams outlive the 1 s grace period, so each is cut and recorded as such, with its chunks.
    assert {x["end"] for x in exchanges} == {"cancelled"}
    assert all(x["chunks"] for x in exchanges)
    assert summarize(rec.out)["closed_cleanly"] is True


@pytest.mark.parametrize(
    ("sig", "times"),
    [(signal.SIGINT, 1), (signal.SIGTERM, 1), (signal.SIGHUP, 1), (signal.SIGINT, 2)],
    ids=["SIGINT", "SIGTERM", "SIGHUP", "SIGINT twice"],
)
def test_a_stop_signal_records_the_streams_in_flight_as_cancelled_without_a_traceback(fake, record, sig, times):
    """Ctrl-C, kill, and the terminal closing (SIGHUP, which killed it with no footer) each end
    the recording cleanly: the streams cut short recorded as cancelled, and no uvicorn traceback
    per stream on the terminal. A second Ctrl-C (uvicorn then skips the app's shutdown, and
    Starlette printed its lifespan's cancellation as a traceback) too."""
    app, url = fake
    previous = signal.signal(signal.SIGHUP, signal.SIG_DFL)  # the recorder inherits it: not under nohup
    try:
        rec = record(url, "--graceful-timeout", "0.2", "--no-probe", "--no-telemetry")
    finally:
        signal.signal(signal.SIGHUP, previous)
    streaming: set[str] = set()

    async def one(c: httpx.AsyncClient, tag: str) -> None:
        with contextlib.suppress(httpx.HTTPError):
            async with c.stream("POST", f"{rec.url}/v1/chat/completions", json={"tag": tag, "n_chunks": 400, "pace_ms": 20}) as r:
                async for _ in r.aiter_raw():
                    streaming.add(tag)

    async def main() -> None:
        async with httpx.AsyncClient(timeout=30) as c:
            tasks = [asyncio.create_task(one(c, f"t{i}")) for i in range(3)]
            while len(streaming) < 3:
                await asyncio.sleep(0.02)
            for _ in range(times):
                rec.proc.popen.send_signal(sig)
                await asyncio.sleep(0.05)
            await asyncio.gather(*tasks)

    asyncio.run(main())
    assert rec.proc.popen.wait(30) == 0
    exchanges = rec.exchanges()
    assert sorted(json.loads(x["request_body"])["tag"] for x in exchanges) == ["t0", "t1", "t2"]
    assert {x["end"] for x in exchanges} == {"cancelled"} and all(x["chunks"] for x in exchanges)
    assert summarize(rec.out)["closed_cleanly"] is True
    log = rec.proc.log_tail(100_000)
    assert "Traceback" not in log and "CancelledError" not in log, log


def test_sighup_is_left_alone_under_nohup():
    """`nohup infertap record`: SIGHUP is ignored, and stays so (the recording outlives the terminal)."""
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        assert signal.SIGHUP not in stop_signals()
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        assert signal.SIGHUP in stop_signals()
    finally:
        signal.signal(signal.SIGHUP, previous)
