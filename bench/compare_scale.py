"""How far the analysis scales: two synthetic runs of N streamed exchanges each, paired by request.

    python -m bench.compare_scale                       # 10,000 and 100,000 pairs, side by side
    python -m bench.compare_scale --n 1000000           # the million pairs of issue #19
    python -m bench.compare_scale --n 10000000 --workdir /big/disk   # ten million (about 45 minutes here)
    python -m bench.compare_scale --n 10000 --n 100000 --json bench-compare.json [--workdir DIR]
    python -m bench.compare_scale --n 1000000 --workdir DIR --keep-cache   # then one phase again on its cache:
    INFERTAP_CACHE=DIR/n1000000/cache python -m bench.compare_scale --phase compare DIR/n1000000/a DIR/n1000000/b

Per size: the time to build the captures with the project's writer; the cold load (decoding both
runs into the Parquet cache, one worker process per run) with the main process's and the larger
worker's peak memory; then, on the cached runs, ``infertap stats`` and ``infertap sql`` of one run
and ``compare`` of the two, each with its own peak memory. Each phase runs in a fresh process, so
that each peak RSS (``VmHWM``, bench/peak.py) is that phase's own and the sizes can be read side by side:
compare's peak should stay flat as pairs grow (its DuckDB buffer is bounded, see
``compare.MEMORY_LIMIT``). Every pair differs in one token, so every divergence path runs. Each
answer ends as an engine's does (a finish reason, then ``[DONE]``), so that every exchange is an ok
answer; a size whose stats or compare did not count every one it built fails (``check``): an
empty comparison is fast, and would be timed as if it were one.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
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

#: How every engine ends a whole answer: a chunk with its finish reason, then ``[DONE]``; a stream
#: with no finish reason is an answer cut short, not ok, and left out of the speed compare times.
END = [b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n', b"data: [DONE]\n\n"]


def build(path: Path, n: int, text: str) -> None:
    pieces = [text[j : j + 4] for j in range(0, len(text), 4)]
    chunks = [b'data: {"choices": [{"index": 0, "delta": {"content": "%s"}}]}\n\n' % p.encode() for p in pieces] + END
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

        with Analysis([a, b], workers=2):
            pass
        out["worker_peak_rss_mib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    elif phase in ("stats", "sql"):
        from infertap.cli import cli

        args = ["stats", "--json", a] if phase == "stats" else ["sql", "--json", SQL, a]
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            try:
                cli(args, standalone_mode=False)
            except SystemExit as exit:  # pragma: no cover: only on a failure, which must show
                if exit.code:
                    raise
        if phase == "stats":
            out["ok"] = sum(g["ok"] for g in json.loads(printed.getvalue())["groups"])
    else:
        from infertap.analysis.compare import compare

        r = compare(a, b, extract="number")
        out = {
            "pairs": r["pairing"]["pairs"],
            "answer_changed": r["divergence"]["counts"].get("answer_changed"),
            # the pairs ok on both sides, whose times compare compared: the least over its metrics
            "timed": min(min(m["a"]["n"], m["b"]["n"]) for m in r["speed"]),
        }
    out["s"] = time.perf_counter() - t
    out["peak_rss_mib"] = peak_rss_mib()
    return out


#: What the ``sql`` phase asks: a count and a tail percentile over the metrics view (every exchange's row).
SQL = "SELECT count(*), quantile_cont(ttft_ns, 0.99) / 1e6 AS p99_ttft_ms, avg(tpot_ns) / 1e6 AS mean_tpot_ms FROM metrics"


def check(n: int, stats: dict[str, float | int | None], cmp: dict[str, float | int | None]) -> None:
    """Fails unless the phases counted what ``build`` built: ``n`` ok answers per run, ``n`` pairs
    compared in speed, each answer changed. A benchmark whose answers the analysis leaves out times
    an empty comparison, and says so here rather than in a fast number."""
    wrong = [
        f"{what} {got}, not {n}"
        for what, got in (
            ("stats counted ok", stats["ok"]),
            ("compare paired", cmp["pairs"]),
            ("compare timed", cmp["timed"]),
            ("compare called changed", cmp["answer_changed"]),
        )
        if got != n
    ]
    if wrong:
        raise SystemExit(
            f"{n:,} pairs built, yet {'; '.join(wrong)}: the benchmark measured not what it built "
            "(runs kept in --workdir from an older build are reused: remove them to build afresh)"
        )


def _in_child(phase: str, a: Path, b: Path, env: dict[str, str]) -> dict[str, float | int | None]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.compare_scale", "--phase", phase, str(a), str(b)],
        env=env,
        stdout=subprocess.PIPE,  # its errors go where this one's go
        text=True,
    )
    if done.returncode:
        raise SystemExit(f"the {phase} phase failed (exit {done.returncode}); the runs are kept in {a.parent}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(n: int, workdir: Path, keep_cache: bool = False) -> dict[str, float | int | None]:
    folder = workdir / f"n{n}"
    env = {**os.environ, "INFERTAP_CACHE": str(folder / "cache")}
    shutil.rmtree(folder / "cache", ignore_errors=True)  # the load is measured cold
    built = None
    if not (folder / "built").exists():  # runs of this size kept from an earlier run (--workdir) are reused
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        t = time.perf_counter()
        build(folder / "a", n, "The answer is 42.")
        build(folder / "b", n, "The answer is 41.")
        built = time.perf_counter() - t
        (folder / "built").write_text(str(built))
    load = _in_child("load", folder / "a", folder / "b", env)
    stats = _in_child("stats", folder / "a", folder / "b", env)
    sql = _in_child("sql", folder / "a", folder / "b", env)
    cmp = _in_child("compare", folder / "a", folder / "b", env)
    check(n, stats, cmp)
    if not keep_cache:
        shutil.rmtree(folder / "cache", ignore_errors=True)
    return {
        "exchanges_total": 2 * n,
        "pairs": cmp["pairs"],
        "pairs_timed": cmp["timed"],
        "build_s": built if built is not None else float((folder / "built").read_text()),
        "load_s": load["s"],
        "load_peak_rss_mib": load["peak_rss_mib"],
        "load_worker_peak_rss_mib": load["worker_peak_rss_mib"],
        "stats_s": stats["s"],
        "stats_peak_rss_mib": stats["peak_rss_mib"],
        "sql_s": sql["s"],
        "sql_peak_rss_mib": sql["peak_rss_mib"],
        "compare_s": cmp["s"],
        "compare_peak_rss_mib": cmp["peak_rss_mib"],
        "answer_changed": cmp["answer_changed"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, action="append", help="pairs (exchanges per run); repeat for several sizes")
    parser.add_argument("--json", default="bench-compare.json")
    parser.add_argument("--workdir", help="where the runs are built and kept, to be reused (default: a temporary folder)")
    parser.add_argument(
        "--keep-cache",
        action="store_true",
        help="keep the decoded runs (<workdir>/n<N>/cache) after the run, to time one phase again with INFERTAP_CACHE",
    )
    parser.add_argument("--phase", choices=["load", "stats", "sql", "compare"], help=argparse.SUPPRESS)  # one phase, in a child
    parser.add_argument("captures", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        print(json.dumps(_phase(args.phase, *args.captures)))
        return
    sizes = args.n or [10_000, 100_000]
    with contextlib.ExitStack() as stack:
        work = Path(args.workdir) if args.workdir else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        results = []
        for n in sizes:
            r = measure(n, work, args.keep_cache)
            results.append(r)
            print(
                f"{r['pairs']:>10,} pairs: built in {r['build_s']:.1f} s; load (cold decode, 2 workers) {r['load_s']:.1f} s, "
                f"peak {r['load_peak_rss_mib']:,.0f} MiB (worker {r['load_worker_peak_rss_mib']:,.0f}); "
                f"stats {r['stats_s']:.1f} s, peak {r['stats_peak_rss_mib']:,.0f} MiB; "
                f"sql {r['sql_s']:.1f} s, peak {r['sql_peak_rss_mib']:,.0f} MiB; "
                f"compare {r['compare_s']:.1f} s, peak {r['compare_peak_rss_mib']:,.0f} MiB",
                flush=True,
            )
    Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
