"""How far ``compare`` scales: two synthetic runs of N streamed exchanges each, paired by request.

    python -m bench.compare_scale [--n 500000] [--json bench-compare.json]

Reports the time to build the captures, to compare them (loading into DuckDB included, cold
cache) and the peak memory. Every pair differs in one token, so every divergence path runs.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path

from infertap.analysis.compare import compare
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=500_000, help="exchanges per run (the total is twice that)")
    parser.add_argument("--json", default="bench-compare.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("INFERTAP_CACHE", str(Path(tmp) / "cache"))
        t = time.perf_counter()
        build(Path(tmp) / "a", args.n, "The answer is 42.")
        build(Path(tmp) / "b", args.n, "The answer is 41.")
        built = time.perf_counter() - t
        t = time.perf_counter()
        r = compare(Path(tmp) / "a", Path(tmp) / "b", extract="number")
        took = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result = {
        "exchanges_total": 2 * args.n,
        "pairs": r["pairing"]["pairs"],
        "build_s": built,
        "compare_s": took,
        "peak_rss_mib": peak,
        "answer_changed": r["divergence"]["counts"].get("answer_changed"),
    }
    print(
        f"{2 * args.n:,} exchanges ({r['pairing']['pairs']:,} pairs): built in {built:.1f} s; compare (cold load included) "
        f"{took:.1f} s; peak RSS {peak:,.0f} MiB"
    )
    Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
