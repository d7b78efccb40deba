"""Soak: many requests through ``infertap record`` at high concurrency; nothing may be lost.

    python -m bench.soak [--requests 100000] [--concurrency 64] [--json bench-soak.json]

Against the fast local upstream (its own process), it sends streamed requests and checks, at the
end: error rate 0, the capture holds exactly as many exchanges as were sent (all complete), and
the proxy's resident memory at 10% of the run against the end (flat within 10% is the target).
Exits non-zero when a check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.proxy_overhead import _rss_mb, _wait
from infertap.capture.info import summarize
from infertap.launch import free_port


async def drive(url: str, total: int, concurrency: int, pid: int, samples: list[tuple[int, float]]) -> tuple[int, int]:
    body = {"model": "bench", "messages": [{"role": "user", "content": "hi"}], "stream": True, "n_chunks": 8}
    sent = errors = 0
    next_id = 0
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=concurrency), trust_env=False) as client:

        async def worker() -> None:
            nonlocal sent, errors, next_id
            while next_id < total:
                next_id += 1
                sent += 1
                try:
                    async with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
                        data = b"".join([c async for c in r.aiter_raw()])
                    if r.status_code != 200 or not data.endswith(b"[DONE]\n\n"):
                        errors += 1
                except httpx.HTTPError:
                    errors += 1
                if sent % max(1, total // 20) == 0:
                    samples.append((sent, _rss_mb(pid)))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return sent, errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--json", default="bench-soak.json")
    args = parser.parse_args()
    up_port, port = free_port(), free_port()
    upstream = subprocess.Popen([sys.executable, "-m", "bench.upstream", "--port", str(up_port), "--chunks", "8"])
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "soak"
        proxy = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "infertap",
                "record",
                "--upstream",
                f"http://127.0.0.1:{up_port}",
                "--listen",
                f"127.0.0.1:{port}",
                "--out",
                str(out),
                "--no-probe",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            _wait(f"http://127.0.0.1:{up_port}")
            _wait(f"http://127.0.0.1:{port}")
            samples: list[tuple[int, float]] = []
            t0 = time.perf_counter()
            sent, errors = asyncio.run(drive(f"http://127.0.0.1:{port}", args.requests, args.concurrency, proxy.pid, samples))
            wall = time.perf_counter() - t0
        finally:
            proxy.terminate()
            proxy.wait(60)
            upstream.terminate()
            upstream.wait()
        info = summarize(out)
    early = next((rss for n, rss in samples if n >= args.requests // 10), samples[0][1] if samples else float("nan"))
    late = samples[-1][1] if samples else float("nan")
    growth = (late - early) / early if early else float("nan")
    checks = {
        "error rate 0": errors == 0,
        # (one more exchange, the readiness probe's GET, is in the capture too)
        "capture count equals sent": info["paths"].get("POST /v1/chat/completions") == sent
        and info["ends"].get("complete") == info["exchanges"],
        "closed cleanly": info["closed_cleanly"],
        "memory flat within 10%": growth <= 0.10,
    }
    result = {
        "requests": sent,
        "errors": errors,
        "wall_s": wall,
        "requests_per_s": sent / wall,
        "rss_mb_at_10pct": early,
        "rss_mb_at_end": late,
        "rss_growth": growth,
        "captured": info["exchanges"],
        "capture_bytes": info["bytes_on_disk"],
        "body_bytes": info["body_bytes"],
        "checks": checks,
    }
    Path(args.json).write_text(json.dumps(result, indent=2))
    print(
        f"{sent:,} requests at concurrency {args.concurrency} in {wall:.0f} s ({sent / wall:.0f}/s); errors {errors}; "
        f"captured {info['exchanges']:,}; proxy RSS {early:.0f} -> {late:.0f} MiB ({growth:+.1%}); "
        f"capture {info['bytes_on_disk'] / 2**20:.1f} MiB for {info['body_bytes'] / 2**20:.1f} MiB of bodies "
        f"({info['body_bytes'] / max(1, info['bytes_on_disk']):.1f}x)"
    )
    for name, ok in checks.items():
        print(f"  {'ok  ' if ok else 'FAIL'} {name}")
    sys.exit(0 if all(checks.values()) else 1)


if __name__ == "__main__":
    main()
