"""What a capacity sweep (``infertap sweep``) costs, and how fast ``--search`` finds a known knee,
side by side with the peers' own sweeps on the same engine.

1. Overhead. A capture of evenly spaced streamed requests at ``--rate`` (1,000/s) is swept at speeds
   0.5 and 1 against the fast local upstream (bench.upstream, its own process), with SLOs judged
   live during each point (``e2e:p99``, ``error_rate``: the sweep checks them every 0.2 s to end a
   lost point early) and with one that isn't (``ttft:p99``); beside a plain ``replay`` of the same
   capture. Reported: the schedule lag p99 of the 1,000/s point (target: under 1 ms), and per point
   the time between points: the evaluation in DuckDB, the idle wait, the rest (sweep.json).
2. Search. ``--search`` against tests/slot_engine.py's SlotEngine (its own process), whose
   capacity is ``slots / service_s`` requests/s by construction, for 2-3 sizes, SLO
   ``e2e:p95 <= 1.5 × service``: points, seconds, the capacity found against the true one.
3. Peers, on the same engines, where found (``--guidellm``/``--aiperf``, else on PATH, else in
   /tmp/guidellm/bin, /tmp/aiperf/bin; never installed here): GuideLLM's ``goodput`` profile
   (concurrency doubled, then bisected, against an attainment of 0.95 of ``e2el_ms``: the closest
   to ``--search``) and AIPerf's ``--request-rate`` list with ``--goodput`` (a grid of rates, no
   search). Each one's capacity is the goodput (requests/s meeting the SLO) at its highest passing
   level. A tiny word-level tokenizer is put in a private Hugging Face cache (no network).

    python -m bench.sweep [--quick] [--rate 1000] [--json bench-sweep.json] [--guidellm PATH] [--aiperf PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.proxy_overhead import _wait
from bench.replay_lag import _TOKENIZER, _capture
from infertap.analysis import capacity as capacity_module
from infertap.analysis.capacity import run_sweep
from infertap.analysis.slo import parse_slos
from infertap.launch import free_port
from infertap.replay import ReplayConfig, ReplayStats, Schedule, run_replay
from infertap.replay import sweep as sweep_module
from infertap.replay.sweep import SweepConfig

# -- the engine of known capacity, in its own process ----------------------------------------------


def _engine_app(slots: int, service_s: float) -> Any:
    """SlotEngine for completions; other paths (a peer's /v1/models, /health) a small JSON answer."""
    from tests.fake_upstream import read_body
    from tests.slot_engine import SlotEngine

    engine = SlotEngine(slots, service_s)
    models = json.dumps({"object": "list", "data": [{"id": "bench", "object": "model", "owned_by": "bench"}]}).encode()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not (scope["method"] == "POST" and scope["path"].endswith("completions")):
            await read_body(receive)
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": models})
            return
        await engine(scope, receive, send)

    return app


def _serve(spec: str, port: int) -> None:
    import uvicorn

    slots, service_s = spec.split(":")
    uvicorn.run(_engine_app(int(slots), float(service_s)), host="127.0.0.1", port=port, log_level="warning", backlog=4096)


@contextlib.contextmanager
def _process(argv: list[str]) -> Iterator[str]:
    """A server of this repository's (``-m module ...``) on a free port, its URL while it runs."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, *argv, "--port", str(port)])
    url = f"http://127.0.0.1:{port}"
    try:
        _wait(url)
        yield url
    finally:
        proc.terminate()
        proc.wait()


# -- 1. the sweep's own overhead -------------------------------------------------------------------


@contextlib.contextmanager
def _timed_sweep() -> Iterator[dict[str, list[float]]]:
    """While inside: when each point's replay ended and the next began, its evaluation and idle wait."""
    marks: dict[str, list[float]] = {"replay_end": [], "evaluate_s": [], "idle_s": []}
    judge, replay, wait = capacity_module.judge, sweep_module.run_replay, sweep_module.Sweep._wait_idle

    def timed(fn: Callable[..., Any], key: str) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                marks[key].append(time.perf_counter() - (t0 if key != "replay_end" else 0.0))

        return run

    capacity_module.judge = timed(judge, "evaluate_s")
    sweep_module.run_replay = timed(replay, "replay_end")
    sweep_module.Sweep._wait_idle = timed(wait, "idle_s")  # type: ignore[method-assign]
    try:
        yield marks
    finally:
        capacity_module.judge, sweep_module.run_replay, sweep_module.Sweep._wait_idle = judge, replay, wait  # type: ignore[method-assign]


def overhead(url: str, work: Path, slos: list[str]) -> dict[str, Any]:
    """A sweep at speeds 0.5 and 1 of ``overhead-src`` (``--rate`` requests/s): the top point's lag, and the
    time spent between points."""
    capture = work / "overhead-src"
    out = work / f"overhead-{len(list(work.glob('overhead-*')))}"
    starts: list[float] = []
    with _timed_sweep() as marks:
        result = run_sweep(
            SweepConfig(ReplayConfig(capture, url, out, probe=False), speeds=(0.5, 1.0)),
            parse_slos(slos),
            on_point_start=lambda *_: starts.append(time.perf_counter()),
        )
        done = time.perf_counter()
    ends = marks["replay_end"]
    between = [nxt - end for end, nxt in zip(ends, [*starts[1:], done], strict=True)]
    top = result["points"][-1]
    return {
        "slos": slos,
        "lag_p50_ms": top["schedule_lag_ms"]["p50"],
        "lag_p99_ms": top["schedule_lag_ms"]["p99"],
        "requests": top["sent"],
        "passed": top["passed"],
        "between_points_ms": 1000 * statistics.mean(between),
        "evaluate_ms": 1000 * statistics.mean(marks["evaluate_s"]),
        "idle_wait_ms": 1000 * statistics.mean(marks["idle_s"]),
        "other_ms": 1000
        * statistics.mean(b - e - i for b, e, i in zip(between, marks["evaluate_s"], marks["idle_s"], strict=True)),
    }


def live_check_ms(finished: int) -> float:
    """One call of the live SLO check (``certain_miss``: e2e and error_rate) once ``finished`` requests
    have ended: it runs every 0.2 s on the replay's event loop, between sends."""
    stats = ReplayStats(completed=finished, intervals=[(i * 1_000_000, i * 1_000_000 + 50_000_000) for i in range(finished)])
    stats.statuses["200"] = finished
    stats.ends["complete"] = finished
    stats.open_ns = {i: finished * 1_000_000 + i for i in range(64)}
    lost = capacity_module.certain_miss(parse_slos(["e2e:p99<=1s", "error_rate<=1%"]), 2 * finished)
    t0 = time.perf_counter()
    for _ in range(5):
        lost(stats)
    return (time.perf_counter() - t0) / 5 * 1000


def plain_replay_lag(url: str, work: Path) -> dict[str, Any]:
    out = work / f"plain-{len(list(work.glob('plain-*')))}"
    summary = run_replay(ReplayConfig(work / "overhead-src", url, out, schedule=Schedule("original"), probe=False))
    return {"lag_p50_ms": summary["lag_ms"]["p50"], "lag_p99_ms": summary["lag_ms"]["p99"], "requests": summary["sent"]}


# -- 2. --search against an engine of known capacity -----------------------------------------------

BASE_RATE = 10.0  # the search's source capture: requests/s at speed 1


def search(url: str, work: Path, slots: int, service_s: float, min_duration_s: float) -> dict[str, Any]:
    true = slots / service_s
    name = f"{slots}x{service_s:g}"
    source = work / f"search-src-{name}"
    _capture(source, BASE_RATE, 4.0)
    slo = f"e2e:p95<={1.5 * service_s * 1000:g}ms"
    config = SweepConfig(
        ReplayConfig(source, url, work / f"search-{name}", probe=False), search=True, min_duration_s=min_duration_s
    )
    t0 = time.perf_counter()
    result = run_sweep(config, parse_slos([slo]))
    seconds = time.perf_counter() - t0
    cap = result["capacity"] or {}
    found = cap.get("requests_per_s")
    return {
        "engine": name,
        "true_requests_per_s": true,
        "true_speed": true / BASE_RATE,
        "slo": slo,
        "points": len(result["points"]),
        "lost_early": sum(p["lost_early"] for p in result["points"]),
        "seconds": seconds,
        "found_speed": cap.get("speed"),
        "knee": [result["knee"]["passed"], result["knee"]["failed"]],
        "found_requests_per_s": found,
        "found_goodput_per_s": (cap.get("goodput") or {}).get("requests_per_s"),
        "found_over_true": found / true if found else None,
    }


# -- 3. the peers ----------------------------------------------------------------------------------


def _find(name: str, given: str | None) -> str | None:
    for candidate in (given, shutil.which(name), f"/tmp/{name}/bin/{name}"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def _peer_env(exe: str, work: Path) -> dict[str, str]:
    """A private, offline Hugging Face cache holding ``local/bench``, a word-level tokenizer (as bench.replay_lag)."""
    hf = work / f"hf-{Path(exe).name}"
    repo = hf / "hub" / "models--local--bench"
    snap = repo / "snapshots" / ("0" * 40)
    if not snap.exists():
        snap.mkdir(parents=True)
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / "main").write_text("0" * 40)
        subprocess.run([str(Path(exe).with_name("python")), "-c", _TOKENIZER, str(snap)], check=True, capture_output=True)
        (snap / "config.json").write_text('{"model_type": "llama"}')  # transformers 5 reads it even for a tokenizer alone
    env = dict(os.environ, HF_HOME=str(hf), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", NO_PROXY="127.0.0.1,localhost")
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        env.pop(var, None)
    return env


def _run_peer(argv: list[str], env: dict[str, str], work: Path, log: str) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=work, timeout=1800)
    seconds = time.perf_counter() - t0
    (work / log).write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"{argv[0]} exited with {done.returncode} (log: {work / log}):\n{(done.stdout + done.stderr)[-2000:]}")
    return seconds


def guidellm_goodput(exe: str, url: str, work: Path, service_s: float, seconds: float) -> dict[str, Any]:
    """GuideLLM's goodput search: closed loop from 1 stream, doubled, then bisected to 10%, each probe
    ``seconds`` long; a probe passes when 95% of requests meet ``e2el_ms``."""
    report = work / "guidellm.json"
    argv = [
        exe,
        "run",
        "--backend",
        f"kind=openai_http,target={url},model=bench",
        "--profile",
        "kind=goodput,initial_streams=1,tolerance=0.1,target_attainment=0.95",
        "--metrics",
        json.dumps({"kind": "generative", "slo": {"e2el_ms": 1.5 * service_s * 1000}}),
        "--data",
        "kind=synthetic_text,prompt_tokens=8,output_tokens=5",
        "--tokenizer",
        "kind=huggingface_auto,model=local/bench",
        "--constraint",
        f"kind=max_duration,seconds={seconds:g}",
        "--output",
        f"kind=json,path={report}",
        "--disable-console-interactive",
    ]
    elapsed = _run_peer(argv, _peer_env(exe, work), work, "guidellm.log")
    search = json.loads(report.read_text())["conclusions"][0]
    best = search.get("best_passing_streams")
    probe = next((p for p in search["probes"] if p["streams"] == best), None)
    return {
        "points": len(search["probes"]),
        "seconds": elapsed,
        "capacity_per_s": probe["goodput"] if probe else None,
        "level": f"{best} streams" if best else None,
        "stop": search.get("stop_reason"),
    }


def aiperf_grid(exe: str, url: str, work: Path, service_s: float, seconds: float, rates: list[float]) -> dict[str, Any]:
    """AIPerf over a list of constant request rates (its sweep: a grid, no search), with ``--goodput``;
    a rate passes when 95% of its requests meet the bound."""
    out = work / "aiperf"
    argv = [
        exe,
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
        "--request-rate",
        ",".join(f"{r:g}" for r in rates),
        "--arrival-pattern",
        "constant",
        "--goodput",
        f"request_latency:{1.5 * service_s * 1000:g}",
        "--benchmark-duration",
        f"{seconds:g}",
        "--synthetic-input-tokens-mean",
        "8",
        "--output-tokens-mean",
        "5",
        "--artifact-dir",
        str(out),
        "--ui-type",
        "none",
    ]
    elapsed = _run_peer(argv, _peer_env(exe, work), work, "aiperf.log")
    passing = []
    for rate in rates:
        m = json.loads((out / f"rate_{rate:.1f}" / "profile_export_aiperf.json").read_text())
        good, total = m["good_request_count"]["avg"], m["request_count"]["avg"]
        if total and good / total >= 0.95:
            passing.append((rate, m["goodput"]["avg"]))
    best = max(passing, default=None)
    return {
        "points": len(rates),
        "seconds": elapsed,
        "capacity_per_s": best[1] if best else None,
        "level": f"{best[0]:g} requests/s" if best else None,
        "stop": "grid done",
    }


# -- the run -----------------------------------------------------------------------------------------


def _print_search(row: dict[str, Any], peers: dict[str, dict[str, Any] | str]) -> None:
    found = row["found_requests_per_s"]
    print(
        f"engine {row['engine']} (true {row['true_requests_per_s']:g} req/s = speed {row['true_speed']:g}; {row['slo']}): "
        f"infertap --search {row['points']} points in {row['seconds']:.1f} s ({row['lost_early']} ended early), knee "
        f"{row['knee'][0]}..{row['knee'][1]}, capacity {found or 0:.1f} req/s = {100 * (row['found_over_true'] or 0):.0f}% of true",
        flush=True,
    )
    for name, peer in peers.items():
        if isinstance(peer, str):
            print(f"    {name}: {peer}", flush=True)
            continue
        cap = peer["capacity_per_s"]
        ratio = f"{100 * cap / row['true_requests_per_s']:.0f}% of true" if cap else "none found"
        speed = f"; {peer['seconds'] / row['seconds']:.1f}x infertap's time" if row["seconds"] else ""
        print(
            f"    {name}: {peer['points']} points in {peer['seconds']:.1f} s{speed}, capacity {cap or 0:.1f} req/s "
            f"({ratio}, at {peer['level']})",
            flush=True,
        )


def _peers(args: argparse.Namespace, url: str, work: Path, row: dict[str, Any], service_s: float) -> dict[str, Any]:
    """Each peer's sweep against the engine ``url``, or why it didn't run."""
    found: dict[str, Any] = {}
    work.mkdir(parents=True, exist_ok=True)
    true = row["true_requests_per_s"]
    # The grid a sweep without a search is given: doubling up to the first rate at or past the capacity (2x resolution).
    ladder = [BASE_RATE * 2**k for k in range(12) if BASE_RATE * 2 ** (k - 1) < true]
    runs = (
        ("GuideLLM goodput", "guidellm", lambda exe: guidellm_goodput(exe, url, work, service_s, args.point_seconds)),
        ("AIPerf --request-rate grid", "aiperf", lambda exe: aiperf_grid(exe, url, work, service_s, args.point_seconds, ladder)),
    )
    for label, name, run in runs:
        exe = _find(name, getattr(args, name))
        if exe is None:
            found[label] = f"not found (--{name}, PATH, /tmp/{name}/bin): not run"
            continue
        try:
            found[label] = run(exe)
        except (RuntimeError, OSError, KeyError, ValueError, subprocess.TimeoutExpired) as exc:
            found[label] = f"failed: {str(exc)[:300]}"
    return found


def _overhead_section(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """A plain replay and the two sweeps, interleaved and repeated: one run's p99 on a small shared
    machine is mostly its neighbours' noise, so each configuration's best p99 is compared (every run's kept)."""
    _capture(work / "overhead-src", args.rate, 2.0 if args.quick else 5.0)
    configs = {
        "plain replay": None,
        "sweep, ttft SLO": ["ttft:p99<=1s"],
        "sweep, e2e + error_rate SLOs": ["e2e:p99<=1s", "error_rate<=1%"],
    }
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in configs}
    with _process(["-m", "bench.upstream", "--chunks", "4"]) as url:
        for _ in range(2 if args.quick else 3):
            for name, slos in configs.items():
                runs[name].append(plain_replay_lag(url, work) if slos is None else overhead(url, work, slos))
    rows = {name: _summary_row(found) for name, found in runs.items()}
    base = rows["plain replay"]["lag_p99_best_ms"]
    for name, row in rows.items():
        line = (
            f"{name:<30} at {args.rate:g}/s, {row['requests']} requests: lag p50 {row['lag_p50_ms']:.3f} ms, p99 best "
            f"{row['lag_p99_best_ms']:.3f} ms ({row['lag_p99_best_ms'] / base:.2f}x plain; runs {', '.join(f'{r:.3f}' for r in row['lag_p99_runs_ms'])})"
        )
        if "evaluate_ms" in row:
            line += (
                f"; between points {row['between_points_ms']:.0f} ms: evaluation {row['evaluate_ms']:.0f}, "
                f"idle wait {row['idle_wait_ms']:.0f}, other {row['other_ms']:.0f}"
            )
        print(line, flush=True)
    checks = {n: live_check_ms(n) for n in (1_000, 10_000, 100_000)}
    print(
        "live SLO check (every 0.2 s, on the replay's loop), per call: "
        + ", ".join(f"{ms:.2f} ms at {n:,} finished requests" for n, ms in checks.items()),
        flush=True,
    )
    return {"rate": args.rate, "runs": runs, "summary": rows, "live_check_ms": checks}


def _summary_row(found: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the runs; the schedule lag's p99 also at its best and per run (on a
    shared machine the best run is the replayer's, the others add the neighbours' noise)."""
    numbers = [k for k, v in found[0].items() if isinstance(v, int | float) and not isinstance(v, bool) and k != "requests"]
    return {
        "requests": found[0]["requests"],
        **{k: statistics.median(r[k] for r in found) for k in numbers},
        "lag_p99_best_ms": min(r["lag_p99_ms"] for r in found),
        "lag_p99_runs_ms": [r["lag_p99_ms"] for r in found],
    }


def _search_section(args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    rows = []
    for slots, service_s in [(4, 0.1), (16, 0.2)] if args.quick else [(2, 0.1), (8, 0.1), (32, 0.2)]:
        with _process(["-m", "bench.sweep", "--serve-engine", f"{slots}:{service_s}"]) as url:
            row = search(url, work, slots, service_s, args.point_seconds)
            peers = {} if args.no_peers else _peers(args, url, work / row["engine"], row, service_s)
        _print_search(row, peers)
        rows.append({**row, "peers": peers})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="shorter points, two engine sizes")
    parser.add_argument("--rate", type=float, default=1000.0, help="requests/s of the overhead sweep's top point")
    parser.add_argument("--json", default="bench-sweep.json")
    parser.add_argument("--guidellm", default=None, help="a guidellm executable (its own venv)")
    parser.add_argument("--aiperf", default=None, help="an aiperf executable (its own venv)")
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--serve-engine", default=None, help=argparse.SUPPRESS)  # SLOTS:SERVICE_S, with --port
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_engine:
        _serve(args.serve_engine, args.port)
        return
    args.point_seconds = 3.0 if args.quick else 6.0
    result: dict[str, Any] = {
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "python": platform.python_version(),
        },
        "quick": args.quick,
    }
    with tempfile.TemporaryDirectory() as tmp:
        result["overhead"] = _overhead_section(args, Path(tmp))
        result["search"] = _search_section(args, Path(tmp))
    Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
