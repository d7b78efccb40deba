"""What redacting large request bodies costs a replay's event loop: the schedule lag of the small
requests sent beside them, and the loop's own lag.

    python -m bench.replay_redaction [--mib 16] [--big 4] [--json bench-replay-redaction.json]

A synthetic capture of small chat requests every 5 ms, with ``--big`` requests of ``--mib`` MiB
among them (an agent's long conversation: no credential, so redaction is the hint scan; and one
of many ``*_token`` keys, which the redaction walks whole), is replayed at its original timing
against a fast local upstream (its own process), side by side with a baseline run whose bodies
are not redacted at all (what sending such bodies costs the loop anyway); the ``*_token`` body
also walked whole, string by string, as it was before the body hint read a key named as a
credential only whole (``page_token`` no longer hints: ``walked`` is the before, ``redacted`` the
after); and one of a real credential among those keys (``api_key among many strings``), which is
walked, its walk pausing every ``PAUSE_EVERY`` strings off the loop (``redacted``) side by side
with the walk as it was, the GIL let go only when CPython takes it (``unpaused``). Reported: the small requests' recorded ``lag_ns`` (p50, p99, max) and a 1 ms sleep's
lateness on the replay's loop.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.loop_ticker import ticking
from bench.proxy_overhead import _pct, _wait
from bench.redaction import body as big_body
from infertap.capture import redact_json
from infertap.capture.reader import CaptureReader
from infertap.capture.redact import Redactor
from infertap.capture.redact_json import sub_secrets
from infertap.capture.writer import CaptureWriter
from infertap.launch import free_port
from infertap.replay import ReplayConfig, run_replay
from infertap.replay.runner import Replay

_SMALL = json.dumps({"model": "bench", "messages": [{"role": "user", "content": "hi"}], "stream": True, "n_chunks": 2}).encode()


def _capture(path: Path, raw: bytes, big: int, seconds: float) -> None:
    """Small requests every 5 ms for ``seconds``; ``big`` of them, evenly spread, carry ``raw``."""
    n = int(seconds / 0.005)
    bigs = {round((k + 0.5) * n / big) for k in range(big)}
    with CaptureWriter(path, recorder={"kind": "bench"}) as writer:
        for i in range(n):
            offset = i * 5_000_000
            writer.write(
                {
                    "type": "exchange", "id": f"{'big' if i in bigs else 'small'}{i}", "seq": i, "session": None,
                    "wall": 1.8e9 + offset / 1e9, "start_ns": offset, "sent_ns": offset, "client": None, "method": "POST",
                    "path": "/v1/chat/completions", "query": "", "http_version": "1.1",
                    "request_headers": [["content-type", "application/json"]],
                    "request_body": raw if i in bigs else _SMALL, "status": 200, "response_headers": [], "headers_ns": 0,
                    "chunk_ns": [], "chunks": [], "end_ns": 1_000_000, "end": "complete", "error": None, "upstream": "bench",
                }
            )  # fmt: skip


def _with_ticker(lags: list[float]) -> None:
    """Wrap ``Replay.run`` so that a 1 ms sleeper on the same loop measures its lateness meanwhile."""
    run = Replay.run

    async def timed(self: Replay) -> dict[str, Any]:
        async with ticking(lags):
            return await run(self)

    Replay.run = timed  # type: ignore[method-assign]


def _unredacted(self: Redactor, record: Any, found: set[str] | None = None) -> None:
    """The baseline's: nothing searched, nothing redacted (its bodies hold no credential)."""


def _walked(self: Redactor, raw: bytes, headers: Any = (), found: set[str] | None = None) -> bytes:
    """The before: every body walked whole, as one of many ``*_token`` keys was (the hint matched)."""
    return sub_secrets(raw, found, self.secret_header, self._body_url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, default=16.0)
    parser.add_argument("--big", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    loop_lags: list[float] = []
    request, walk = Redactor.request, Redactor.body
    every = redact_json.PAUSE_EVERY
    _with_ticker(loop_lags)
    port = free_port()
    upstream = subprocess.Popen([sys.executable, "-m", "bench.upstream", "--port", str(port), "--chunks", "2"])
    url = f"http://127.0.0.1:{port}"
    rows = []
    try:
        _wait(url)
        with tempfile.TemporaryDirectory() as tmp:
            arms = [("no credential", "redacted"), ("no credential", "none")]
            arms += [("many *_token keys", arm) for arm in ("walked", "redacted", "none")]
            arms += [("api_key among many strings", arm) for arm in ("unpaused", "redacted", "none")]
            for shape, redacted in arms:
                src, out = Path(tmp) / f"src-{len(rows)}", Path(tmp) / f"out-{len(rows)}"
                _capture(src, big_body(shape, args.mib), args.big, args.seconds)
                loop_lags.clear()
                Redactor.request = _unredacted if redacted == "none" else request  # type: ignore[method-assign]
                Redactor.body = _walked if redacted == "walked" else walk  # type: ignore[method-assign]
                redact_json.PAUSE_EVERY = 1 << 62 if redacted in ("walked", "unpaused") else every  # as it was
                run_replay(ReplayConfig(src, url, out, probe=False))
                Redactor.request, Redactor.body = request, walk  # type: ignore[method-assign]
                redact_json.PAUSE_EVERY = every
                small = [x["lag_ns"] / 1e6 for x in CaptureReader(out).exchanges() if x["source_id"].startswith("small")]
                row = {
                    "shape": shape,
                    "redacted": redacted,
                    "big_mib": args.mib,
                    "big": args.big,
                    "small_requests": len(small),
                    "small_lag_ms": {
                        "p50": round(statistics.median(small), 3),
                        "p99": round(_pct(small, 0.99), 2),
                        "max": round(max(small), 2),
                    },
                    "loop_lag_ms": {"p50": round(statistics.median(loop_lags), 3), "max": round(max(loop_lags), 2)},
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        upstream.terminate()
        upstream.wait()
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
