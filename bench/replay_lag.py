"""Schedule fidelity of ``infertap replay`` against a baseline client, side by side in one run.

For each rate, a synthetic capture of evenly spaced requests is replayed at its original timing
against a fast local upstream (its own process), twice: by infertap's replayer (absolute
deadlines) and by a baseline that sleeps the relative interval between requests, as several peer
tools do. Lag = actual send time - ideal send time. Prints a table and writes JSON.

    python -m bench.replay_lag [--rates 100,500,1000] [--seconds 3] [--json bench-replay.json] [--aiperf PATH]

With ``--aiperf`` (an ``aiperf`` executable in a venv of its own: ``python3.12 -m venv /opt/aiperf &&
/opt/aiperf/bin/pip install aiperf``), AIPerf replays the same trace with ``--fixed-schedule`` and both
are reported relative to their first request (AIPerf exports when requests started, not when they
were due).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.proxy_overhead import _pct, _wait
from infertap.capture.reader import CaptureReader
from infertap.capture.writer import CaptureWriter
from infertap.launch import free_port
from infertap.replay import ReplayConfig, Schedule, run_replay


def _capture(path: Path, rate: float, seconds: float, **params: object) -> int:
    """A synthetic capture of ``rate * seconds`` evenly spaced streamed requests (``params`` in each body)."""
    n = int(rate * seconds)
    body = json.dumps(
        {"model": "bench", "messages": [{"role": "user", "content": "hi"}], "stream": True, "n_chunks": 4, **params}
    ).encode()
    with CaptureWriter(path, recorder={"kind": "bench"}) as writer:
        for i in range(n):
            offset = int(i * 1e9 / rate)
            writer.write(
                {
                    "type": "exchange",
                    "id": f"b{i}",
                    "seq": i,
                    "session": None,
                    "wall": 1.8e9 + offset / 1e9,
                    "start_ns": offset,
                    "sent_ns": offset,
                    "client": None,
                    "method": "POST",
                    "path": "/v1/chat/completions",
                    "query": "",
                    "http_version": "1.1",
                    "request_headers": [["content-type", "application/json"]],
                    "request_body": body,
                    "status": 200,
                    "response_headers": [],
                    "headers_ns": 0,
                    "chunk_ns": [],
                    "chunks": [],
                    "end_ns": 1_000_000,
                    "end": "complete",
                    "error": None,
                    "upstream": "bench",
                }
            )
    return n


def infertap_lags(capture: Path, url: str, out: Path) -> list[float]:
    run_replay(ReplayConfig(capture, url, out, schedule=Schedule("original"), probe=False))
    return [x["lag_ns"] / 1e6 for x in CaptureReader(out).exchanges()]


async def _baseline(url: str, n: int, rate: float) -> list[float]:
    """Relative sleeps: ``sleep(interval)`` between sends, so every delay adds to the next."""
    interval = 1 / rate
    body = {"model": "bench", "messages": [{"role": "user", "content": "hi"}], "stream": True, "n_chunks": 4}
    lags: list[float] = []
    tasks = set()
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=None), trust_env=False) as client:

        async def one() -> None:
            async with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
                async for _ in r.aiter_raw():
                    pass

        start = time.monotonic_ns()
        for i in range(n):
            lags.append((time.monotonic_ns() - start - i * interval * 1e9) / 1e6)
            task = asyncio.create_task(one())
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            await asyncio.sleep(interval)
        await asyncio.gather(*tasks)
    return lags


_TOKENIZER = """
import sys
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
tok = Tokenizer(models.WordLevel(vocab={"[UNK]": 0, "hi": 1}, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(sys.argv[1])
"""


def aiperf_lags(aiperf: str, url: str, rate: float, n: int, work: Path) -> list[float]:
    """AIPerf replaying the same evenly spaced trace with --fixed-schedule.

    AIPerf needs a tokenizer; with no network, a tiny one is put in a private Hugging Face cache.
    Its export gives each request's start (wall clock), not when it was due, so lag is measured
    relative to the first request: (start_i - start_0) - (due_i - due_0).
    """
    hf = work / "hf"
    snap = hf / "hub" / "models--local--bench" / "snapshots" / ("0" * 40)
    if not snap.exists():
        snap.mkdir(parents=True)
        (hf / "hub" / "models--local--bench" / "refs").mkdir(parents=True, exist_ok=True)
        (hf / "hub" / "models--local--bench" / "refs" / "main").write_text("0" * 40)
        subprocess.run([str(Path(aiperf).with_name("python")), "-c", _TOKENIZER, str(snap)], check=True, capture_output=True)
    trace = work / f"trace-{rate:g}.jsonl"
    trace.write_text(
        "".join(json.dumps({"timestamp": i * 1000 / rate, "text": "hi", "output_length": 4}) + "\n" for i in range(n))
    )
    out = work / f"aiperf-{rate:g}"
    env = dict(os.environ, HF_HOME=str(hf), HF_HUB_OFFLINE="1")
    subprocess.run(
        [
            aiperf,
            "profile",
            "--model",
            "bench",
            "--tokenizer",
            "local/bench",
            "--url",
            url,
            "--endpoint-type",
            "chat",
            "--streaming",
            "--input-file",
            str(trace),
            "--custom-dataset-type",
            "single_turn",
            "--fixed-schedule",
            "--artifact-dir",
            str(out),
            "--ui-type",
            "none",
        ],
        check=True,
        capture_output=True,
        env=env,
        timeout=600,
    )
    starts = sorted(
        json.loads(line)["metadata"]["request_start_ns"] for line in (out / "profile_export.jsonl").read_text().splitlines()
    )
    return [((t - starts[0]) - i * 1e9 / rate) / 1e6 for i, t in enumerate(starts)]


def relative(lags_abs_ms: list[float]) -> list[float]:
    """infertap's absolute lags made relative to its first request, as AIPerf's must be."""
    return [lag - lags_abs_ms[0] for lag in lags_abs_ms]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", default="100,500,1000", help="requests/s to measure, comma-separated")
    parser.add_argument("--ladder", default="100,200,300,500,750,1000,1500,2000", help="rates searched for the p99 < 1 ms limit")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--json", default="bench-replay.json")
    parser.add_argument("--aiperf", default=shutil.which("aiperf"), help="an aiperf executable (its own venv) to compare with")
    args = parser.parse_args()
    port = free_port()
    upstream = subprocess.Popen([sys.executable, "-m", "bench.upstream", "--port", str(port), "--chunks", "4"])
    url = f"http://127.0.0.1:{port}"
    try:
        _wait(url)
        rows = []
        rates = sorted({float(r) for r in args.rates.split(",")} | {float(r) for r in args.ladder.split(",")})
        with tempfile.TemporaryDirectory() as tmp:
            for rate in rates:
                capture = Path(tmp) / f"src-{rate:g}"
                n = _capture(capture, rate, args.seconds)
                ours = infertap_lags(capture, url, Path(tmp) / f"out-{rate:g}")
                base = asyncio.run(_baseline(url, n, rate))
                rows.append(
                    {
                        "rate": rate,
                        "requests": n,
                        "infertap_p50_ms": statistics.median(ours),
                        "infertap_p99_ms": _pct(ours, 0.99),
                        "baseline_p50_ms": statistics.median(base),
                        "baseline_p99_ms": _pct(base, 0.99),
                    }
                )
                r = rows[-1]
                line = (
                    f"{rate:>6g}/s  n={n:<5}  infertap lag p50 {r['infertap_p50_ms']:8.3f} ms  p99 {r['infertap_p99_ms']:8.3f} ms   "
                    f"relative-sleep baseline p50 {r['baseline_p50_ms']:8.3f} ms  p99 {r['baseline_p99_ms']:8.3f} ms"
                )
                if args.aiperf:
                    theirs = aiperf_lags(args.aiperf, url, rate, n, Path(tmp))
                    mine = [abs(v) for v in relative(ours)]
                    theirs = [abs(v) for v in theirs]
                    r.update(
                        infertap_rel_p50_ms=statistics.median(mine),
                        infertap_rel_p99_ms=_pct(mine, 0.99),
                        aiperf_rel_p50_ms=statistics.median(theirs),
                        aiperf_rel_p99_ms=_pct(theirs, 0.99),
                    )
                    line += (
                        f"   |relative to the first request|: infertap p50 {r['infertap_rel_p50_ms']:.3f} p99 {r['infertap_rel_p99_ms']:.3f} ms,"
                        f" AIPerf --fixed-schedule p50 {r['aiperf_rel_p50_ms']:.3f} p99 {r['aiperf_rel_p99_ms']:.3f} ms"
                    )
                print(line, flush=True)
    finally:
        upstream.terminate()
        upstream.wait()
    under = [r["rate"] for r in rows if r["infertap_p99_ms"] < 1.0]
    base_under = [r["rate"] for r in rows if r["baseline_p99_ms"] < 1.0]
    result = {
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "python": platform.python_version(),
        },
        "seconds_per_rate": args.seconds,
        "rows": rows,
        "highest_rate_p99_under_1ms": {"infertap": max(under, default=None), "baseline": max(base_under, default=None)},
    }
    print(
        f"highest rate with p99 lag < 1 ms: infertap {result['highest_rate_p99_under_1ms']['infertap']}, "
        f"relative-sleep baseline {result['highest_rate_p99_under_1ms']['baseline']} (rates tried: {', '.join(f'{r:g}' for r in rates)})"
    )
    Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
