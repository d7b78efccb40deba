"""Loading captures for analysis at scale: cold decode, cached load, a stats query, peak memory.

Builds synthetic captures totalling N streamed chat exchanges (12 chunks each, an enrichment with
prompt token ids each, overlapping in time), then measures, each in a fresh process so that peak
memory (``VmHWM``, bench/peak.py) is the phase's own: a cold load (decode into the Parquet cache), a cached load,
and ``speed_stats`` by run and by model over everything. Prints a table and writes JSON.

    python -m bench.analysis_load [--n 1000000] [--captures 10] [--json bench-analysis.json] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.peak import peak_rss_mib
from infertap.capture.records import new_exchange
from infertap.capture.writer import CaptureWriter

WORDS = [b"The", b" answer", b" is", b" four", b".", b" Hello", b" there", b"!", b" Sure", b","]
DELTA = b'data: {"object":"chat.completion.chunk","model":"bench","choices":[{"index":0,"delta":{"content":"%s"},"finish_reason":null}]}\n\n'
ROLE = b'data: {"object":"chat.completion.chunk","model":"bench","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}\n\n'
FINISH = b'data: {"object":"chat.completion.chunk","model":"bench","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
USAGE = b'data: {"object":"chat.completion.chunk","model":"bench","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d}}\n\n'
SYSTEM = list(range(1, 31))  # a shared system prompt, in token ids


def build(path: Path, n: int, seed: int) -> None:
    """One capture of ``n`` exchanges, ~50 requests/s at ~8 in flight."""
    rng = random.Random(seed)
    with CaptureWriter(path, recorder={"kind": "bench"}) as writer:
        t_ns = 0
        for i in range(n):
            t_ns += int(rng.expovariate(50.0) * 1e9)
            words = [WORDS[rng.randrange(len(WORDS))] for _ in range(8)]
            chunks = [ROLE, *(DELTA % w for w in words), FINISH]
            prompt = [*SYSTEM, *(rng.randrange(100, 5000) for _ in range(rng.randrange(5, 40)))]
            chunks += [USAGE % (len(prompt), len(words)), b"data: [DONE]\n\n"]
            first = rng.randrange(20, 200) * 1_000_000
            chunk_ns = [first + k * rng.randrange(8, 30) * 1_000_000 for k in range(len(chunks))]
            content = " ".join(str(t) for t in prompt[len(SYSTEM) :])
            body = b'{"model":"bench-%d","stream":true,"messages":[{"role":"user","content":"%s"}]}' % (i % 3, content.encode())
            xid = f"{seed}-{i}"
            writer.write(
                new_exchange(
                    id=xid,
                    seq=i,
                    session=None,
                    wall=1.8e9 + t_ns / 1e9,
                    start_ns=t_ns,
                    sent_ns=t_ns,
                    client=None,
                    method="POST",
                    path="/v1/chat/completions",
                    query="",
                    http_version="1.1",
                    request_headers=[["content-type", "application/json"]],
                    request_body=body,
                    status=200,
                    response_headers=[["content-type", "text/event-stream"]],
                    headers_ns=first - 1_000_000,
                    chunk_ns=chunk_ns,
                    chunks=chunks,
                    end_ns=chunk_ns[-1] + 100_000,
                    end="complete",
                    error=None,
                    upstream="bench",
                )
            )
            writer.write(
                {
                    "type": "enrichment",
                    "exchange_id": xid,
                    "wall": 1.8e9,
                    "engine": None,
                    "kind": "bench",
                    "prompt_tokens": {"ids": prompt, "count": len(prompt), "source": "bench"},
                    "output_tokens": {"ids": None, "count": len(words), "source": "bench"},
                    "settings": {},
                    "server_timings": None,
                    "response": None,
                }
            )
            while 2 * (i + 1) - writer.records > 20_000:  # keep the writer's queue bounded
                time.sleep(0.005)


def measure(captures: list[str], cache: str) -> dict[str, float]:
    """One phase in this process: load, then stats; the caller runs it in a fresh process."""
    from infertap.analysis import Analysis, speed_stats

    t0 = time.perf_counter()
    with Analysis(captures, cache_dir=cache) as a:
        t1 = time.perf_counter()
        by_run = speed_stats(a, ["run"])
        t2 = time.perf_counter()
        speed_stats(a, ["model"])
        t3 = time.perf_counter()
        exchanges = a.count("exchanges")
        decoded = len(a.decoded)
    ok = sum(g["ok"] for g in by_run["groups"])
    # Decoding several captures happens in worker processes: their peak is reported apart (0: none ran).
    return {
        "load_s": t1 - t0,
        "stats_by_run_s": t2 - t1,
        "stats_by_model_s": t3 - t2,
        "exchanges": exchanges,
        "ok": ok,
        "decoded_captures": decoded,
        "peak_rss_mib": peak_rss_mib(),
        "worker_peak_rss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


def _phase(captures: list[str], cache: str) -> dict[str, float]:
    cmd = [sys.executable, "-m", "bench.analysis_load", "--measure", "--cache", cache, *captures]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1_000_000, help="exchanges in all")
    parser.add_argument(
        "--captures", type=int, default=None, help="how many captures to split them into [default: one per 100,000]"
    )
    parser.add_argument("--json", default="bench-analysis.json")
    parser.add_argument("--workdir", default=None, help="keep the captures and cache here (reused when present)")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cache", default=None, help=argparse.SUPPRESS)
    parser.add_argument("paths", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.paths, args.cache)))
        return

    k = args.captures or max(1, -(-args.n // 100_000))
    work = Path(args.workdir or tempfile.mkdtemp(prefix="infertap-bench-"))
    sizes = [args.n // k + (i < args.n % k) for i in range(k)]
    captures = [work / f"capture-{i:03d}" for i in range(k)]
    t0 = time.perf_counter()
    for i, (path, size) in enumerate(zip(captures, sizes, strict=True)):
        if not path.exists():
            build(path, size, seed=i)
    build_s = time.perf_counter() - t0
    on_disk = sum(f.stat().st_size for c in captures for f in c.iterdir())
    cache = work / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    names = [str(c) for c in captures]
    cold = _phase(names, str(cache))
    cached = _phase(names, str(cache))
    cache_bytes = sum(f.stat().st_size for f in cache.rglob("*.parquet"))
    result = {
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "python": platform.python_version(),
        },
        "exchanges": args.n,
        "captures": k,
        "capture_bytes": on_disk,
        "cache_bytes": cache_bytes,
        "build_s": build_s,
        "cold": cold,
        "cached": cached,
    }
    print(
        f"{args.n:,} exchanges in {k} captures ({on_disk / 2**20:,.1f} MiB on disk; Parquet cache {cache_bytes / 2**20:,.1f} MiB); "
        f"built in {build_s:.1f} s"
    )
    print(
        f"{'phase':<8} {'load s':>9} {'stats by run s':>15} {'stats by model s':>17} {'peak RSS MiB':>13} "
        f"{'worker peak MiB':>16} {'decoded':>8}"
    )
    for name, r in (("cold", cold), ("cached", cached)):
        print(
            f"{name:<8} {r['load_s']:>9.2f} {r['stats_by_run_s']:>15.2f} {r['stats_by_model_s']:>17.2f} {r['peak_rss_mib']:>13.0f} "
            f"{r['worker_peak_rss_mib']:>16.0f} {r['decoded_captures']:>8}"
        )
    print(
        f"cold load: {args.n / cold['load_s']:,.0f} exchanges/s; cached load {cold['load_s'] / max(cached['load_s'], 1e-9):,.0f}x faster"
    )
    Path(args.json).write_text(json.dumps(result, indent=2))
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
