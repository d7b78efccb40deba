"""The concurrency each side of a comparison achieved, said beside its speed ratios.

A replay at the recording's timing against a slower engine piles requests up: each one waits for
the engine's slots behind the ones before it, and its latencies hold that wait. A B that ran 8.7
requests in flight on average against A's 1.0 has a ttft many times A's that says as much about
the load it ended up under as about the engine. So compare shows each side's achieved concurrency
(mean and max in flight, as ``stats`` computes it, docs/metrics.md) and says when one side ran at a
much higher one than the other.
"""

from __future__ import annotations

from typing import Any

from .active import COUNTED, PART, active, run_parts, seconds

#: One side's mean in flight this many times the other's, and this much more, is "much higher".
MUCH_HIGHER = 1.5
MUCH_MORE = 0.5


def achieved(con: Any, metrics: str) -> dict[str, Any]:
    """A run's mean in flight (the time its requests were in flight over its active time, as ``stats``
    has it) and the most at once; ``metrics``: its rows in compare's workspace (``<name>_m``)."""
    timed = f"{COUNTED} AND sent_wall_ns IS NOT NULL AND end_wall_ns IS NOT NULL"
    (busy,) = con.execute(f"SELECT sum(end_wall_ns - sent_wall_ns) FROM {metrics} WHERE {timed}").fetchall()[0]
    parts = run_parts(con.execute(f"SELECT capture, run_id, {PART} FROM {metrics} WHERE {timed} GROUP BY ALL").fetchall())
    active_s = seconds(active(parts)) if parts else 0.0
    # A running sum over sends (+1) and ends (-1), ends first on a tie, as stats' peak.
    (peak,) = con.execute(
        f"SELECT max(n) FROM (SELECT sum(d) OVER (ORDER BY t, d ROWS UNBOUNDED PRECEDING) AS n FROM ("
        f"SELECT sent_wall_ns AS t, 1 AS d FROM {metrics} WHERE {timed} "
        f"UNION ALL SELECT end_wall_ns AS t, -1 AS d FROM {metrics} WHERE {timed}))"
    ).fetchall()[0]
    return {"mean": busy / 1e9 / active_s if busy is not None and active_s else None, "max": peak}


def concurrency(con: Any, a: str, b: str) -> dict[str, Any]:
    """Each side's achieved concurrency (runs ``a``, ``b``), and which one ran at a much higher one (or None)."""
    ca, cb = achieved(con, f"{a}_m"), achieved(con, f"{b}_m")
    higher = "b" if _much_higher(cb["mean"], ca["mean"]) else "a" if _much_higher(ca["mean"], cb["mean"]) else None
    return {"a": ca, "b": cb, "much_higher": higher}


def _much_higher(x: float | None, y: float | None) -> bool:
    return x is not None and y is not None and x >= MUCH_HIGHER * y and x - y >= MUCH_MORE


def _in_flight(c: dict[str, Any]) -> str:
    mean = "unknown" if c["mean"] is None else f"{c['mean']:.1f}"
    return f"{mean} mean, {c['max'] if c['max'] is not None else 'unknown'} max"


def concurrency_line(c: dict[str, Any]) -> str:
    """``achieved concurrency (in flight): A 1.0 mean, 1 max; B 8.7 mean, 12 max``."""
    return f"achieved concurrency (requests in flight): A {_in_flight(c['a'])}; B {_in_flight(c['b'])}"


def concurrency_note(c: dict[str, Any] | None) -> str | None:
    """Where one side ran at a much higher concurrency: its latencies hold queueing the other's don't."""
    if not c or not c.get("much_higher"):
        return None
    hi, lo = c["much_higher"], "a" if c["much_higher"] == "b" else "b"
    return (
        f"{hi.upper()} ran at {c[hi]['mean']:.1f} requests in flight on average against {lo.upper()}'s "
        f"{c[lo]['mean']:.1f}: its latencies include the time its requests queued behind each other, "
        "which the engine's slots did not absorb; B/A compares the load each side ended up under as much as the engines"
    )
