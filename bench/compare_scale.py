"""How far the analysis scales: two synthetic runs of N streamed exchanges each, paired by request.

    python -m bench.compare_scale                       # 10,000 and 100,000 pairs, side by side
    python -m bench.compare_scale --n 1000000           # the million pairs of issue #19
    python -m bench.compare_scale --n 10000000 --workdir /big/disk   # ten million (about 45 minutes here)
    python -m bench.compare_scale --n 10000 --n 100000 --json bench-compare.json [--workdir DIR]
    python -m bench.compare_scale --embeddings          # embeddings answers: 1,000, 10,000 and 100,000 pairs
    python -m bench.compare_scale --embeddings --n 1800 --dimension 4096 --inputs 8
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

``--embeddings``: runs of OpenAI ``/v1/embeddings`` answers instead (``--inputs`` vectors of
``--dimension`` floats each, every other request asking for base64, the rest JSON floats), every
pair's vectors differing (``check_embeddings``); timed in the cold load and compare, whose peaks are
the ones that grow with the answers' size (a decode worker's batch of chunks, compare's vectors).
The load's worker peak is each decode worker's own (``DescendantsPeak``), the largest of them.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.peak import DescendantsPeak, peak_rss_mib
from infertap.capture.records import Exchange, new_exchange
from infertap.capture.writer import CaptureWriter

#: How every engine ends a whole answer: a chunk with its finish reason, then ``[DONE]``; a stream
#: with no finish reason is an answer cut short, not ok, and left out of the speed compare times.
END = [b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n', b"data: [DONE]\n\n"]


def _exchange(
    run: Path, i: int, route: str, body: bytes, content_type: str, chunks: list[bytes], request_headers: list[list[str]]
) -> Exchange:
    """The ``i``-th exchange of a bench run: sent a millisecond after the one before, answered in 20 µs."""
    return new_exchange(
        id=f"{run.name}{i}",
        seq=i,
        session=None,
        wall=1.8e9 + i / 1000,
        start_ns=i * 1_000_000,
        sent_ns=i * 1_000_000,
        client=None,
        method="POST",
        path=route,
        query="",
        http_version="1.1",
        request_headers=request_headers,
        request_body=body,
        status=200,
        response_headers=[["content-type", content_type]],
        headers_ns=1000,
        chunk_ns=[2000 * (k + 1) for k in range(len(chunks))],
        chunks=chunks,
        end_ns=20000,
        end="complete",
        error=None,
        upstream="bench",
    )


def build(path: Path, n: int, text: str) -> None:
    pieces = [text[j : j + 4] for j in range(0, len(text), 4)]
    chunks = [b'data: {"choices": [{"index": 0, "delta": {"content": "%s"}}]}\n\n' % p.encode() for p in pieces] + END
    with CaptureWriter(path, recorder={"kind": "bench"}) as w:
        for i in range(n):
            body = json.dumps({"model": "m", "messages": [{"role": "user", "content": f"q{i}"}], "stream": True}).encode()
            w.write(_exchange(path, i, "/v1/chat/completions", body, "text/event-stream", chunks, []))


#: Embeddings answers: each request embeds ``INPUTS`` inputs of ``DIMENSION`` floats, every other one
#: asking for base64 (OpenAI's ``encoding_format``), the rest as JSON floats; vectors drawn from a pool.
DIMENSION = 576
INPUTS = 3
_POOL = 61


def _vector_pool(seed: int, nudge: float, dimension: int) -> list[tuple[str, str]]:
    """``_POOL`` unit vectors (the same for every seed), each moved by ``nudge`` in a direction of
    ``seed``'s: each as OpenAI's JSON floats and as its base64 of float32."""
    import base64

    import numpy as np

    base = np.random.default_rng(0).standard_normal((_POOL, dimension))
    moved = base + nudge * np.random.default_rng(seed).standard_normal((_POOL, dimension))
    moved = (moved / np.linalg.norm(moved, axis=1, keepdims=True)).astype("<f4")
    return [("[" + ",".join(f"{x:.9g}" for x in v.tolist()) + "]", base64.b64encode(v.tobytes()).decode()) for v in moved]


def build_embeddings(path: Path, n: int, seed: int, dimension: int = DIMENSION, inputs: int = INPUTS) -> None:
    """``n`` OpenAI ``/v1/embeddings`` exchanges of ``inputs`` inputs each; runs built with two seeds
    answer every request with other vectors (a cosine near 0.99999, over float rounding's)."""
    pool = _vector_pool(seed, 0.003, dimension)
    with CaptureWriter(path, recorder={"kind": "bench"}) as w:
        for i in range(n):
            b64 = i % 2 == 1
            texts = [f"passage {i} part {k}: the quick brown fox jumps over the lazy dog" for k in range(inputs)]
            request: dict[str, object] = {"model": "m", "input": texts}
            if b64:
                request["encoding_format"] = "base64"
            vectors = [pool[(i * inputs + k) % _POOL] for k in range(inputs)]
            items = ",".join(
                f'{{"object":"embedding","index":{k},"embedding":{json.dumps(b64s) if b64 else floats}}}'
                for k, (floats, b64s) in enumerate(vectors)
            )
            tokens = 12 * inputs
            answer = (
                f'{{"object":"list","data":[{items}],"model":"m","usage":{{"prompt_tokens":{tokens},"total_tokens":{tokens}}}}}'
            )
            body = json.dumps(request).encode()
            w.write(
                _exchange(
                    path, i, "/v1/embeddings", body, "application/json", [answer.encode()], [["content-type", "application/json"]]
                )
            )


def _phase(phase: str, a: str, b: str) -> dict[str, float | int | None]:
    """One phase in this (child) process: ``load`` decodes both runs into the cache, ``compare`` compares them."""
    t = time.perf_counter()
    out: dict[str, float | int | None] = {}
    if phase == "load":
        from infertap.analysis import Analysis

        with DescendantsPeak() as workers, Analysis([a, b], workers=2):
            pass
        out["worker_peak_rss_mib"] = workers.mib()
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
        e = r["divergence"].get("embeddings") or {}
        out = {
            "embeddings_compared": e.get("compared"),
            "embeddings_differ": e.get("differ"),
            "vectors": e.get("vectors"),
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


def check_embeddings(n: int, inputs: int, cmp: dict[str, float | int | None]) -> None:
    """Fails unless compare paired and compared every embeddings answer built, each pair differing
    in every vector (``check``'s reason: an empty comparison is fast)."""
    wanted = {"pairs": n, "embeddings_compared": n, "embeddings_differ": n, "vectors": n * inputs}
    wrong = [f"{k} {cmp[k]}, not {v}" for k, v in wanted.items() if cmp[k] != v]
    if wrong:
        raise SystemExit(f"{n:,} embeddings pairs built, yet {'; '.join(wrong)}: the benchmark measured not what it built")


def measure(
    n: int, workdir: Path, keep_cache: bool = False, embeddings: tuple[int, int] | None = None
) -> dict[str, float | int | None]:
    """One size's phases; ``embeddings`` (dimension, inputs): runs of embeddings answers instead of
    chat streams, timed in the cold load and compare (stats and sql read no vectors)."""
    folder = workdir / (f"n{n}" if embeddings is None else f"e{n}-{embeddings[0]}x{embeddings[1]}")
    env = {**os.environ, "INFERTAP_CACHE": str(folder / "cache")}
    shutil.rmtree(folder / "cache", ignore_errors=True)  # the load is measured cold
    built = None
    if not (folder / "built").exists():  # runs of this size kept from an earlier run (--workdir) are reused
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        t = time.perf_counter()
        if embeddings is None:
            build(folder / "a", n, "The answer is 42.")
            build(folder / "b", n, "The answer is 41.")
        else:
            build_embeddings(folder / "a", n, 1, *embeddings)
            build_embeddings(folder / "b", n, 2, *embeddings)
        built = time.perf_counter() - t
        (folder / "built").write_text(str(built))
    load = _in_child("load", folder / "a", folder / "b", env)
    if embeddings is None:
        stats = _in_child("stats", folder / "a", folder / "b", env)
        sql = _in_child("sql", folder / "a", folder / "b", env)
    cmp = _in_child("compare", folder / "a", folder / "b", env)
    if embeddings is None:
        check(n, stats, cmp)
    else:
        check_embeddings(n, embeddings[1], cmp)
    if not keep_cache:
        shutil.rmtree(folder / "cache", ignore_errors=True)
    out: dict[str, float | int | None] = {
        "exchanges_total": 2 * n,
        "pairs": cmp["pairs"],
        "build_s": built if built is not None else float((folder / "built").read_text()),
        "load_s": load["s"],
        "load_peak_rss_mib": load["peak_rss_mib"],
        "load_worker_peak_rss_mib": load["worker_peak_rss_mib"],
        "compare_s": cmp["s"],
        "compare_peak_rss_mib": cmp["peak_rss_mib"],
    }
    if embeddings is None:
        out.update(
            pairs_timed=cmp["timed"],
            stats_s=stats["s"],
            stats_peak_rss_mib=stats["peak_rss_mib"],
            sql_s=sql["s"],
            sql_peak_rss_mib=sql["peak_rss_mib"],
            answer_changed=cmp["answer_changed"],
        )
    else:
        out.update(dimension=embeddings[0], inputs=embeddings[1], vectors=cmp["vectors"])
    return out


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
    parser.add_argument(
        "--embeddings",
        action="store_true",
        help="runs of OpenAI /v1/embeddings answers (JSON floats and base64) instead of chat streams "
        "(default sizes 1,000, 10,000 and 100,000 pairs)",
    )
    parser.add_argument("--dimension", type=int, default=DIMENSION, help="with --embeddings: floats a vector")
    parser.add_argument("--inputs", type=int, default=INPUTS, help="with --embeddings: inputs (vectors) a request")
    parser.add_argument("--phase", choices=["load", "stats", "sql", "compare"], help=argparse.SUPPRESS)  # one phase, in a child
    parser.add_argument("captures", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        print(json.dumps(_phase(args.phase, *args.captures)))
        return
    sizes = args.n or ([1_000, 10_000, 100_000] if args.embeddings else [10_000, 100_000])
    embeddings = (args.dimension, args.inputs) if args.embeddings else None
    with contextlib.ExitStack() as stack:
        work = Path(args.workdir) if args.workdir else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        results = []
        for n in sizes:
            r = measure(n, work, args.keep_cache, embeddings)
            results.append(r)
            if embeddings is not None:
                print(
                    f"{r['pairs']:>10,} embeddings pairs ({r['inputs']} vectors of {r['dimension']} floats each side): "
                    f"built in {r['build_s']:.1f} s; load (cold decode, 2 workers) {r['load_s']:.1f} s, "
                    f"peak {r['load_peak_rss_mib']:,.0f} MiB (worker {r['load_worker_peak_rss_mib']:,.0f}); "
                    f"compare {r['compare_s']:.1f} s, peak {r['compare_peak_rss_mib']:,.0f} MiB",
                    flush=True,
                )
                continue
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
