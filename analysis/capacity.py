"""How much of a recorded workload a target carries under SLOs: a sweep (infertap.replay.sweep) whose
points are judged by the metrics of docs/metrics.md (infertap.analysis.slo).

``run_sweep`` writes each point's capture under the sweep's folder and, after every point,
``sweep.json`` there: the SLOs, every point's figures, the capacity (the highest passing load with
its achieved request rate, goodput and output tokens per second) and the knee (between the last passing and
the first failing load). A sweep cut short keeps what it found.
"""

from __future__ import annotations

import json
import math
import os
import socket
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from infertap.apis import read_request
from infertap.capture.redact import Redactor
from infertap.errors import ConfigError
from infertap.replay.runner import ReplayStats
from infertap.replay.sweep import (
    Load,
    Lost,
    Point,
    Sweep,
    SweepConfig,
    behind_loads,
    capacity_of,
    inconsistent,
    unmeasured_passes,
)
from infertap.replay.workload import load

from .cache import cache_root
from .slo import SLO, evaluate
from .store import Analysis

RESULT = "sweep.json"


def run_sweep(
    config: SweepConfig,
    slos: Sequence[SLO],
    *,
    on_point: Callable[[Point], None] | None = None,
    on_point_start: Callable[[Load, int], None] | None = None,
    progress: Callable[[ReplayStats], None] | None = None,
) -> dict[str, Any]:
    """Run the sweep; returns what ``sweep.json`` holds."""
    out = Path(config.replay.out)
    if (out / RESULT).exists():
        raise ConfigError(f"{out} already holds a sweep ({RESULT}); give another --out")
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"{out} is not empty (a point's capture there would be mixed into the new one); give another --out")
    _check_workload(config)
    cache_root()  # each point is judged through the cache: one inside a capture is refused now, not after a point
    _check_target(config)
    results: dict[str, Any] = {}

    def record(point: Point) -> None:
        # Not finished until the last write: a sweep killed between points leaves this said.
        results.update(
            _result(config, slos, sweep.points), warmup=sweep.warmup, source_failed=sweep.source_failed, finished=False
        )
        _write(out / RESULT, results)
        if on_point is not None:
            on_point(point)

    sweep = Sweep(
        config,
        evaluate=lambda folder: judge(folder, slos),
        lost=lambda total: certain_miss(slos, total),
        on_point=record,
        on_point_start=on_point_start,
        progress=progress,
    )
    sweep.run()
    results.update(
        _result(config, slos, sweep.points),
        stopped_early=sweep.stopped,
        aborted=sweep.aborted,
        warmup=sweep.warmup,
        source_failed=sweep.source_failed,
        finished=True,
    )
    out.mkdir(parents=True, exist_ok=True)
    _write(out / RESULT, results)
    return results


def judge(capture: Path, slos: Sequence[SLO]) -> dict[str, Any]:
    """One point's verdict, from its capture: the same metrics ``infertap stats`` prints."""
    with Analysis([capture]) as analysis:
        return evaluate(analysis, slos)


def certain_miss(slos: Sequence[SLO], total: int) -> Lost:
    """Whether a point running ``total`` generation requests can no longer pass, from its live stats: more
    requests already past an ``e2e`` bound (finished, or still in flight), or failed (a failed request
    is over every latency bound, analysis.slo), than a latency percentile allows, or more errors than
    ``error_rate`` allows; twice over, so that only a clearly lost point is cut short. Other latency
    SLOs can't be judged on the requests that succeed before the point ends. A failure here is what
    ``error_rate`` counts: a request not answered 2xx in full, answered by a stream the target ended
    with no finish reason, or by a 2xx whose body reports an error or is none an adapter reads
    (``generation_failed``: read from each answer's last events as it ends, or whole on a worker
    thread, as vLLM's bench and GuideLLM count an in-band error errored). A 2xx answer kept only in
    part (``--max-response-mb``) is unknown, in neither."""
    e2e = [(s.bound, allowed) for s in slos if s.metric == "e2e" and (allowed := _allowed(s, total)) is not None]
    failures = [allowed for s in slos if s.latency and (allowed := _allowed(s, total)) is not None]
    budget = next((s.limit * total for s in slos if s.metric == "error_rate"), None)

    done = [0] * len(e2e)  # finished requests past each bound, counted once each
    seen = [0]  # how many of stats.intervals are counted: each check looks only at the new ones

    def lost(stats: ReplayStats) -> bool:
        now = stats.elapsed_ns()
        fresh = stats.intervals[seen[0] :]
        seen[0] += len(fresh)
        for i, (bound, allowed) in enumerate(e2e):
            done[i] += sum(1 for sent, end in fresh if end - sent > bound)
            waiting = sum(1 for sent in stats.open_ns.values() if now - sent > bound)
            if done[i] + waiting > 2 * allowed + 2:
                return True
        if budget is not None and stats.generation_failed > 2 * budget + 2:  # generation requests, as error_rate counts
            return True
        return any(stats.generation_failed > 2 * allowed + 2 for allowed in failures)

    return lost


def _allowed(slo: SLO, total: int) -> int | None:
    """How many of ``total`` values may be failures (+infinity, analysis.slo) with the statistic still
    within the bound: the percentile falls at (total - 1) * q (slo._stat), so ``m`` failures keep it
    finite while (total - 1) * q, rounded up, is below total - m: floor((total - 1) * (1 - q)). A
    miss that is finite may be one more (the statistic interpolates towards it), which the live
    check's margin covers. Exact: (1 - 0.9) * 10 is 0.999... in floats."""
    if slo.stat == "max":
        return 0
    if slo.stat.startswith("p"):
        return max(math.floor((100 - Fraction(slo.stat[1:])) * (total - 1) / 100), 0)
    return None  # a mean: no count of misses decides it


def _check_target(config: SweepConfig) -> None:
    """A target nobody answers at fails here, before the first point (probe or not)."""
    parts = urlsplit(config.replay.target)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname or "", port), timeout=config.replay.connect_timeout).close()
    except OSError as exc:
        raise ConfigError(f"the target {parts.hostname}:{port} refuses connections, nothing was sent: {exc}") from exc


def _check_workload(config: SweepConfig) -> None:
    base = config.replay
    items, _ = load(base.capture, filters=base.filters, limit=base.limit)
    if not any(read_request({"path": i.path, "request_body": i.body}).generation for i in items):
        raise ConfigError(
            f"{', '.join(map(str, base.captures))}: no generation requests to replay: a sweep would measure nothing"
        )


def _result(config: SweepConfig, slos: Sequence[SLO], points: Sequence[Point]) -> dict[str, Any]:
    best, first_fail = capacity_of(points)
    kind = "concurrency" if config.concurrency_levels else "speed"
    capacity = None
    if best is not None:
        capacity = {
            kind: best.load.value,
            "requests_per_s": best.verdict.get("requests_per_s"),
            "output_tokens_per_s": best.verdict.get("output_tokens_per_s"),
            "goodput": best.verdict.get("goodput"),
        }
    return {
        "kind": kind,
        "source": [str(c) for c in config.replay.captures],  # a list: a path may hold a comma
        "target": points[0].summary.get("target") if points else Redactor().url(config.replay.target),
        "target_kind": points[0].summary.get("target_kind") if points else None,
        "slo": [s.describe() for s in slos],
        "capacity": capacity,
        "knee": {"passed": best.load.value if best else None, "failed": first_fail.load.value if first_fail else None},
        "inconsistent": inconsistent(points),  # passed above a failure: not counted towards the capacity
        "replayer_behind": behind_loads(points),  # passed, the replayer behind its schedule: not counted either
        "unmeasured": unmeasured_passes(points),  # passed without measuring the target there, and why: not counted
        "points": [p.describe() for p in sorted(points, key=lambda p: p.load.value)],
    }


def write_result(folder: Path, result: dict[str, Any]) -> None:
    """A sweep's result into ``folder``'s sweep.json (the command line's, after a Ctrl-C between points)."""
    _write(folder / RESULT, result)


def _write(path: Path, result: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=2, default=str))
    tmp.replace(path)


def read_sweep(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """A sweep's results, as ``run_sweep`` wrote them; ``source`` a list, from older files too."""
    path = Path(folder) / RESULT
    try:
        result = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{folder}: not a sweep (no {RESULT})") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not a sweep's result (not JSON: {exc})") from None
    if not isinstance(result, dict) or not {"kind", "points", "capacity"} <= set(result):
        raise ConfigError(f"{path}: not a sweep's result (no kind, points and capacity in it)")
    if isinstance(result.get("source"), str):
        result["source"] = _joined_source(result["source"])
    return result


def _joined_source(text: str) -> list[str]:
    """An older sweep.json's ``source``, one string: one capture, or several joined by ", ". A path
    may hold ", " itself, so the string alone can't tell; the disk can: split where the whole names
    no path and every part names one, else kept as one entry (a capture moved since can't be told)."""
    parts = text.split(", ")
    if len(parts) > 1 and not os.path.exists(text) and all(os.path.exists(p) for p in parts):
        return parts
    return [text]
