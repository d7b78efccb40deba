"""How far ``compare`` scales: two synthetic runs of N streamed exchanges each, paired by request.

    python -m bench.compare_scale                       # 10,000 and 100,000 pairs, side by side
    python -m bench.compare_scale --n 1000000           # the million pairs of issue #19
    python -m bench.compare_scale --n 10000 --n 100000 --json bench-compare.json [--workdir DIR]

Per size: the time to build the captures; the cold load (decoding both runs into the Parquet cache)
with its peak memory; then ``compare`` on the cached runs with its own peak memory. Each phase runs in
a fresh process, so that each peak RSS (ru_maxrss) is that phase's own and the sizes can be read side
by side: compare's peak should stay flat as pairs grow (its DuckDB buffer is bounded, see
``compare.MEMORY_LIMIT``). Every pair differs in one token, so every divergence path runs.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from infertap.capture.records import new_exchange
from infertap.capture.writer import CaptureWriter


def build(path: Path, n: int, text: str) -> None:
    pieces = [text[j : j + 4] for j in range(0, len(text), 4)]
    chunks = [b'data: {"choices": [{"index": 0, "delta": {"content": "%s"}}]}\n\n' % p.encode() for p in pieces] + [
        b"data: [DONE]\n\n"
    ]
    with CaptureWriter(path, recorder={"kind": "bench"}) as w:
        for i in range(n):
            body = json.dumps({"model": "m", "messages": [{"role": "user", "content": f"q{i}"}], "stream": True}).encode()
            w.write(
                new_exchange(
                    id=f"{path.name}{i}",
                    seq=i,
                    session=None,
                    wall=1.8e9 + i / 1000,
                    start_ns=i * 1_000_000,
                    sent_ns=i * 1_000_000,
                    client=None,
                    method="POST",
                    path="/v1/chat/completions",
                    query="",
                    http_version="1.1",
                    request_headers=[],
                    request_body=body,
                    status=200,
                    response_headers=[["content-type", "text/event-stream"]],
                    headers_ns=1000,
                    chunk_ns=[2000 * (k + 1) for k in range(len(chunks))],
                    chunks=chunks,
                    end_ns=20000,
                    end="complete",
                    error=None,
                    upstream="bench",
                )
            )


def _phase(phase: str, a: str, b: str) -> dict[str, float | int | None]:
    """One phase in this (child) process: ``load`` decodes both runs into the cache, ``compare`` compares them."""
    t = time.perf_counter()
    out: dict[str, float | int | None] = {}
    if phase == "load":
        from infertap.analysis import Analysis

        for path in (a, b):
            with Analysis([path], workers=1):
                pass
    else:
        from infertap.analysis.compare import compare

        r = compare(a, b, extract="number")
        out = {"pairs": r["pairing"]["pairs"], "answer_changed": r["divergence"]["counts"].get("answer_changed")}
    out["s"] = time.perf_counter() - t
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def _in_child(phase: str, a: Path, b: Path, env: dict[str, str]) -> dict[str, float | int | None]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.compare_scale", "--phase", phase, str(a), str(b)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(n: int, workdir: Path) -> dict[str, float | int | None]:
    folder = workdir / f"n{n}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    env = {**os.environ, "INFERTAP_CACHE": str(folder / "cache")}
    t = time.perf_counter()
    build(folder / "a", n, "The answer is 42.")
    build(folder / "b", n, "The answer is 41.")
    built = time.perf_counter() - t
    load = _in_child("load", folder / "a", folder / "b", env)
    cmp = _in_child("compare", folder / "a", folder / "b", env)
    shutil.rmtree(folder, ignore_errors=True)
    return {
        "exchanges_total": 2 * n,
        "pairs": cmp["pairs"],
        "build_s": built,
        "load_s": load["s"],
        "load_peak_rss_mib": load["peak_rss_mib"],
        "compare_s": cmp["s"],
        "compare_peak_rss_mib": cmp["peak_rss_mib"],
        "answer_changed": cmp["answer_changed"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, action="append", help="pairs (exchanges per run); repeat for several sizes")
    parser.add_argument("--json", default="bench-compare.json")
    parser.add_argument("--workdir", help="where the captures are built (default: a temporary folder)")
    parser.add_argument("--phase", choices=["load", "compare"], help=argparse.SUPPRESS)  # one phase, in a child
    parser.add_argument("captures", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        print(json.dumps(_phase(args.phase, *args.captures)))
        return
    sizes = args.n or [10_000, 100_000]
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        results = []
        for n in sizes:
            r = measure(n, Path(tmp))
            results.append(r)
            print(
                f"{r['pairs']:>9,} pairs: built in {r['build_s']:.1f} s; load (cold decode) {r['load_s']:.1f} s, "
                f"peak {r['load_peak_rss_mib']:,.0f} MiB; compare {r['compare_s']:.1f} s, peak {r['compare_peak_rss_mib']:,.0f} MiB",
                flush=True,
            )
    Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
