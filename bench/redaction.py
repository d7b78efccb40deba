"""What a large request body's redaction costs the recorder's event loop, before and after it moved
off the loop.

    python -m bench.redaction [--mib 8 56] [--kib 50 200] [--json bench-redaction.json]

Per body size and shape (a chat body with no credential, one with an ``api_key``, one with many
``*_token`` keys: the hint then matches and the whole body is walked), it reports the hint scan's
cost per MiB (one ``search`` over the body, as before, and a window at a time, as now), the whole
redaction's cost per MiB, and the event loop's lag (a 1 ms sleep's lateness, worst and median) while
one such body is recorded through ``Scrubbed`` with the real ``Redactor``: redacted on the loop (as
before) and handed over with ``request=True`` (as now: on a worker thread, the scan in windows).
Where the body holds a credential, it also reports the longest the redaction holds the GIL (a
0.5 ms sleeper thread's worst lateness, what a worker thread's redaction costs the loop) and, side
by side, that of the edit's splice alone: copied as one slice of nearly the whole body (as before)
and in 256 KiB runs joined without the GIL (``redact_json.spliced``, as now). Bodies under
``OFFLOAD_BYTES`` (``--kib``) report the loop's lag while recorded as before (where the body goes
decided by its size alone) and as now (by its count of strings too).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import threading
import time
from typing import Any

from bench.loop_ticker import ticking
from infertap.capture.records import new_exchange
from infertap.capture.redact import REDACTED, Redactor
from infertap.capture.redact_json import _BODY_HINT, _URL_CREDENTIAL_HINT, hinted, spliced
from infertap.capture.scrubbing import OFFLOAD_BYTES, OFFLOAD_STRINGS, Scrubbed

MIB = 1 << 20


def body(shape: str, mib: float) -> bytes:
    n = int(mib * MIB)
    if shape == "many *_token keys":
        return json.dumps({"model": "m", "messages": [{"role": "user", "content": "x", "page_token": "t"}] * (n // 60)}).encode()
    if shape == "api_key among many strings":  # the hint matches: walked whole, string by string
        many = [{"role": "user", "content": "x", "page_token": "t"}] * (n // 60)
        return json.dumps({"model": "m", "messages": many, "api_key": "sk-abcdefgh12345"}).encode()
    doc: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "word " * 200}] * (n // 1100)}
    if shape == "api_key":
        doc["api_key"] = "sk-abcdefgh12345"
    return json.dumps(doc).encode()


def gil_held(fn: Any) -> float:
    """The longest (ms) another thread waited past a 0.5 ms sleep while ``fn`` ran: how long ``fn``
    held the GIL at a stretch, at the least."""
    gaps: list[float] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            t = time.perf_counter()
            time.sleep(0.0005)
            gaps.append((time.perf_counter() - t - 0.0005) * 1000)

    watcher = threading.Thread(target=watch)
    watcher.start()
    time.sleep(0.01)
    gaps.clear()
    fn()
    done.set()
    watcher.join()
    return round(max(gaps), 2)


def one_slice(raw: bytes, start: int, end: int) -> bytes:
    """The splice as it was: everything before the edit copied in one slice, then joined."""
    return b"".join([raw[:start], REDACTED.encode(), raw[end:]])


def timed(fn: Any) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


async def lag_while_recorded(raw: bytes, offloaded: bool, strings: int = OFFLOAD_STRINGS) -> dict[str, float]:
    """The loop's lateness waking from 1 ms sleeps while one exchange with ``raw`` is recorded
    (``strings``: ``Scrubbed``'s ``offload_strings``; past any count, the size alone decides)."""
    redactor, written = Redactor(), []
    scrubbed = Scrubbed(redactor, written.append, offload_strings=strings)
    record = new_exchange(
        method="POST",
        path="/v1/chat/completions",
        upstream="u",
        wall=0.0,
        start_ns=0,
        request_headers=[["content-type", "application/json"]],
        request_body=raw,
    )
    lags: list[float] = []
    async with ticking(lags, settle_s=0.02):
        if offloaded:
            scrubbed.record(record, set(), request=True)
        else:  # as the proxy did: the body redacted on the loop, then handed over
            redactor.request(record, set())
            scrubbed.record(record, set())
        await scrubbed.drained()
        await asyncio.sleep(0.01)
    assert written, "the exchange was not written"
    return {"max_ms": round(max(lags), 2), "p50_ms": round(statistics.median(lags), 3), "ticks": len(lags)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, nargs="*", default=[8.0, 56.0])
    parser.add_argument("--kib", type=float, nargs="*", default=[50.0, 200.0], help="bodies under OFFLOAD_BYTES")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    rows = []
    for kib in args.kib:  # small bodies: decided by size alone (before) and by their count of strings (now)
        for shape in ("no credential", "api_key among many strings"):
            raw = body(shape, kib / 1024)
            assert len(raw) < OFFLOAD_BYTES
            row = {
                "body_kib": round(len(raw) / 1024, 1),
                "shape": shape,
                "strings": raw.count(b'"') // 2,
                "redaction_ms": round(timed(lambda: Redactor().body(raw, [], set())) * 1000, 2),  # noqa: B023
                "loop_lag_by_size": asyncio.run(lag_while_recorded(raw, True, strings=1 << 62)),
                "loop_lag_by_strings": asyncio.run(lag_while_recorded(raw, True)),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    for mib in args.mib:
        for shape in ("no credential", "api_key", "many *_token keys"):
            raw = body(shape, mib)
            size = len(raw) / MIB
            one = timed(lambda: _BODY_HINT.search(raw[::-1]) or _URL_CREDENTIAL_HINT.search(raw))  # noqa: B023
            windowed = timed(lambda: hinted(raw))  # noqa: B023
            whole = timed(lambda: Redactor().body(raw, [["content-type", "application/json"]], set()))  # noqa: B023
            row = {
                "body_mib": round(size, 1),
                "shape": shape,
                "hint_one_search_ms_per_mib": round(one * 1000 / size, 2),
                "hint_windowed_ms_per_mib": round(windowed * 1000 / size, 2),
                "redaction_ms_per_mib": round(whole * 1000 / size, 2),
                "loop_lag_on_loop": asyncio.run(lag_while_recorded(raw, False)),
                "loop_lag_offloaded": asyncio.run(lag_while_recorded(raw, True)),
            }
            if shape == "api_key":
                start = raw.rindex(b"sk-abcdefgh12345")
                end = start + len(b"sk-abcdefgh12345")
                row["redaction_gil_max_ms"] = gil_held(lambda: Redactor().body(raw, [], set()))  # noqa: B023
                row["splice_one_slice_gil_max_ms"] = gil_held(lambda: one_slice(raw, start, end))  # noqa: B023
                row["splice_in_runs_gil_max_ms"] = gil_held(lambda: spliced(raw, [(start, end, REDACTED.encode())]))  # noqa: B023
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
