"""The report's telemetry plots: power, KV cache usage and requests waiting over time, on the same
time axis as the latency plot (seconds since each run's first request), every run on one set of axes."""

from __future__ import annotations

import os
from collections.abc import Sequence

from infertap.telemetry.gauges import per_scrape

from .active import COUNTED, PART, run_parts
from .energy import KV_CACHE, RUNNING, WAITING, Telemetry
from .store import Analysis
from .svg import COLORS, Line, line_svg, width

_Series = list[tuple[float, float | None]]


def telemetry_plots(runs: Sequence[tuple[str, str, int]]) -> str:
    """``runs``: (name, capture path, first send in wall ns). One plot per quantity some run has."""
    series = [(name, _series(path, t0)) for name, path, t0 in runs]
    plots = []
    for key, title, ylabel in (
        ("power", "power over time", "W"),
        ("kv", "KV cache usage over time", "fraction of the cache"),
        ("waiting", "requests waiting in the engine over time", "requests"),
        ("running", "requests running in the engine over time", "requests"),
    ):
        lines = [
            Line(
                f"{name}: {label}",
                points,
                COLORS[i % len(COLORS)],
                dashed=i > 0,
                hollow=[i > 0] * len(points),
                stroke=width(i, len(series)),
            )
            for i, (name, found) in enumerate(series)
            if key in found
            for label, points in [found[key]]
        ]
        if lines:
            plots.append(f"<div><h3>{title}</h3>{line_svg(lines, 's since the first request', ylabel)}</div>")
    if not plots:
        return "<p>No power, KV cache or queue telemetry in these runs (see docs/metrics.md: energy and engine state).</p>"
    return f'<div class="plots">{"".join(plots)}</div>'


def _series(path: str | os.PathLike[str], t0: int) -> dict[str, tuple[str, _Series]]:
    """Each quantity in seconds from t0: the power of the devices ``stats`` counts the engine's
    energy on (``Telemetry.power_series``: a remote engine's is not the recording machine's own
    GPUs), summed over them; the engine's state read per scrape as ``stats`` reads it
    (``gauges.per_scrape``), each from its first available source."""
    with Analysis([path]) as analysis:
        rows = analysis.sql(
            "SELECT name, wall_ns, list(value) FROM telemetry WHERE name IS NOT NULL AND value IS NOT NULL "
            "GROUP BY name, wall_ns ORDER BY wall_ns"
        ).fetchall()
        parts = run_parts(
            analysis.sql(f"SELECT capture, run_id, {PART} FROM metrics WHERE {COUNTED} GROUP BY capture, run_id").fetchall()
        )
        power = Telemetry(analysis).power_series(parts) if parts else None
    by_name: dict[str, list[tuple[int, float]]] = {}
    state = {*KV_CACHE, *WAITING, *RUNNING}
    for name, wall_ns, values in rows:
        if name in state:
            by_name.setdefault(name, []).append((wall_ns, per_scrape(name, values)))
    found: dict[str, tuple[str, _Series]] = {}
    if power is not None:
        found["power"] = (power[0], [((t - t0) / 1e9, v) for t, v in power[1]])
    for key, names in (("kv", KV_CACHE), ("waiting", WAITING), ("running", RUNNING)):
        name = next((n for n in names if n in by_name), None)
        if name is not None:
            found[key] = (name, [((t - t0) / 1e9, v) for t, v in by_name[name]])
    return found
