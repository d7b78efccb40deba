"""Energy and engine state over a group's span, from the captures' telemetry (docs/metrics.md).

Energy is attributed by time, not per request: the group's joules are the energy the measured
devices drew from the group's first send to its last end, divided among its requests and output
tokens. Each device is measured by the best source it has: its energy counter (NVML or amdsmi),
else its power samples integrated over time; NVML's devices first, else a DCGM exporter's (the same
GPUs under other names: never both), else the CPU package's RAPL counter; the result names the
sources used. A counter that goes down was reset (a driver reload, an engine restart, RAPL's wrap)
and counts from zero after it, as Prometheus's ``increase`` counts. A series counts for a span only
where it has a sample within two of its own sampling intervals of both its ends: a run recorded
without telemetry is not given the last run's samples. Groups that overlap in time (``--by model`` on mixed traffic) each see
the whole draw of their span.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from infertap.engines import load

from .store import Analysis

#: Energy sources, best first: (telemetry name, kind, scale to joules or watts, what the result says).
SOURCES = (
    ("gpu_energy_joules", "counter", 1.0, "GPU energy counter (NVML or amdsmi)"),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", 1e-3, "GPU energy counter (DCGM exporter)"),
    ("gpu_power_watts", "power", 1.0, "GPU power samples, integrated (NVML, amdsmi or nvidia-smi)"),
    ("DCGM_FI_DEV_POWER_USAGE", "power", 1.0, "GPU power samples, integrated (DCGM exporter)"),
    ("host_rapl_energy_joules", "counter", 1.0, "CPU package energy counter (RAPL)"),
)
#: Sources that name the same devices the same way, best family first; within a family each
#: device takes the first of its sources it has (a counter before power samples).
FAMILIES = (
    ("gpu_energy_joules", "gpu_power_watts"),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_POWER_USAGE"),
    ("host_rapl_energy_joules",),
)
_SOURCE = {name: (kind, scale, label) for name, kind, scale, label in SOURCES}
#: Engine state: gauges whose peak matters, per engine family (vLLM, SGLang, llama-server --metrics).
KV_CACHE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage", "llamacpp:kv_cache_usage_ratio")
WAITING = tuple(load.WAITING.values())
RUNNING = tuple(load.RUNNING.values())
PREEMPTIONS = ("vllm:num_preemptions_total", "vllm:num_preemptions")
PREFIX_HITS = ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total")
PREFIX_QUERIES = ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total")

_Series = list[tuple[int, float]]  # (wall ns, value), in time order


class Telemetry:
    """A capture set's telemetry, loaded once, then asked per group."""

    def __init__(self, analysis: Analysis) -> None:
        names = [s[0] for s in SOURCES] + [*KV_CACHE, *WAITING, *PREEMPTIONS, *PREFIX_HITS, *PREFIX_QUERIES]
        placeholders = ", ".join("?" for _ in names)
        rows = analysis.sql(
            f"SELECT capture, name, coalesce(device, labels), wall_ns, value FROM telemetry "
            f"WHERE name IN ({placeholders}) AND value IS NOT NULL ORDER BY wall_ns",
            names,
        ).fetchall()
        # capture -> name -> series key (a device, a label set) -> samples
        self.series: dict[str, dict[str, dict[str, _Series]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
        for capture, name, key, wall_ns, value in rows:
            self.series[capture][name][str(key)].append((wall_ns, value))
        self.reach = {id(s): _reach(s) for named in self.series.values() for by_key in named.values() for s in by_key.values()}
        self.analysis = analysis

    def _covers(self, samples: _Series, first: int, last: int) -> bool:
        return _reaches(samples, first, last, self.reach[id(samples)])

    def _idle_samples(self, capture: str, power: _Series, first: int, last: int) -> _Series:
        """The power samples in [first, last] taken while no request of ``capture`` was in flight.

        The spans are asked of DuckDB for just these instants (a range join), so that a run of
        millions of requests is never read into Python for a few thousand samples."""
        inside = [(t, v) for t, v in power if first <= t <= last]
        if not inside:
            return []
        busy = {
            t
            for (t,) in self.analysis.sql(
                "SELECT DISTINCT s.t FROM (SELECT unnest(?::BIGINT[]) AS t) s JOIN metrics m "
                "ON m.capture = ? AND m.end_wall_ns IS NOT NULL AND m.sent_wall_ns <= s.t AND s.t <= m.end_wall_ns",
                [sorted({t for t, _ in inside}), capture],
            ).fetchall()
        }
        return [(t, v) for t, v in inside if t not in busy]

    def _measured(self, capture: str, first: int, last: int) -> list[tuple[str, _Series]]:
        """(source name, samples) for each device of ``capture`` measured over [first, last]: the
        first family that measures any, each of its devices by its best source that reaches the span."""
        named = self.series.get(capture, {})
        for family in FAMILIES:
            chosen: dict[str, tuple[str, _Series]] = {}
            for name in family:
                for device, samples in named.get(name, {}).items():
                    if device not in chosen and self._covers(samples, first, last):
                        chosen[device] = (name, samples)
            if chosen:
                return list(chosen.values())
        return []

    def energy(
        self, captures: Sequence[str], first: int, last: int, ok: int, tokens: int, sessions: int
    ) -> dict[str, Any] | None:
        """Joules over [first, last] and what they come to per request, token and session; None without power telemetry."""
        joules = 0.0
        idle: dict[int, float] = defaultdict(float)  # sample time -> watts summed over the devices sampled then
        labels: list[str] = []
        devices = 0
        for capture in captures:
            for name, samples in self._measured(capture, first, last):
                kind, scale, label = _SOURCE[name]
                if kind == "counter":
                    joules += increase(samples, first, last) * scale
                    power = counter_rates(samples, scale)
                else:
                    power = [(t, v * scale) for t, v in samples]
                    joules += _integral(power, first, last)
                for t, watts in self._idle_samples(capture, power, first, last):
                    idle[t] += watts
                devices += 1
                labels += [label] if label not in labels else []
        if not devices:
            return None
        span_s = (last - first) / 1e9
        return {
            "joules": joules,
            "joules_per_request": joules / ok if ok else None,
            "joules_per_output_token": joules / tokens if tokens else None,
            "watt_hours_per_session": joules / 3600 / sessions if sessions else None,
            "mean_watts": joules / span_s if span_s > 0 else None,
            # Idle, as mean_watts, summed over the devices: each instant's draw when nothing was in flight.
            "idle_watts": sum(idle.values()) / len(idle) if idle else None,
            "source": "; ".join(labels),
            "devices": devices,
        }

    def engine_state(self, captures: Sequence[str], first: int, last: int) -> dict[str, Any] | None:
        """The engine's peak KV cache usage and queue, its preemptions and prefix cache hit rate over the span."""
        state = {
            "kv_cache_usage_max": self._peak(captures, KV_CACHE, first, last),
            "requests_waiting_max": self._peak(captures, WAITING, first, last),
            "preemptions": self._delta(captures, PREEMPTIONS, first, last),
            "prefix_cache_hit_rate": _ratio(
                self._delta(captures, PREFIX_HITS, first, last), self._delta(captures, PREFIX_QUERIES, first, last)
            ),
        }
        return state if any(v is not None for v in state.values()) else None

    def _pick(self, captures: Sequence[str], names: Sequence[str]) -> list[_Series]:
        for name in names:  # the first name any capture has: one engine family's
            found = [s for c in captures for s in self.series.get(c, {}).get(name, {}).values()]
            if found:
                return found
        return []

    def _peak(self, captures: Sequence[str], names: Sequence[str], first: int, last: int) -> float | None:
        values = [v for s in self._pick(captures, names) for t, v in s if first <= t <= last]
        return max(values) if values else None

    def _delta(self, captures: Sequence[str], names: Sequence[str], first: int, last: int) -> float | None:
        series = [s for s in self._pick(captures, names) if self._covers(s, first, last)]
        return sum(increase(s, first, last) for s in series) if series else None


def _at(samples: _Series, t: int) -> float:
    """A counter's value at ``t``, linear between samples, held flat beyond them."""
    i = bisect.bisect_left(samples, (t, float("-inf")))
    if i == 0:
        return samples[0][1]
    if i == len(samples):
        return samples[-1][1]
    (t0, v0), (t1, v1) = samples[i - 1], samples[i]
    return v0 + (v1 - v0) * (t - t0) / (t1 - t0) if t1 > t0 else v1


def increase(samples: _Series, first: int, last: int) -> float:
    """A counter's increase over [first, last]: each step between samples, linear within it, its
    share of the span taken; a step down is a reset, after which the counter counted from zero."""
    total = 0.0
    # The steps that overlap the span: from the last sample at or before ``first`` to the first at or after ``last``.
    i = max(0, bisect.bisect_right(samples, (first, float("inf"))) - 1)
    j = bisect.bisect_left(samples, (last, float("-inf"))) + 1
    span = samples[i:j]
    for (t0, v0), (t1, v1) in zip(span, span[1:], strict=False):
        if t1 <= first or t0 >= last or t1 <= t0:
            continue
        step = v1 - v0 if v1 >= v0 else v1
        total += step * (min(t1, last) - max(t0, first)) / (t1 - t0)
    return total


def _reaches(samples: _Series, first: int, last: int, reach: int) -> bool:
    """Whether ``samples`` has one within ``reach`` of both ends of [first, last]: a short span
    between two samples counts, a span after the samples stopped doesn't."""
    i = bisect.bisect_left(samples, (first - reach, float("-inf")))
    j = bisect.bisect_right(samples, (last + reach, float("inf")))
    return i < j and samples[i][0] <= first + reach and samples[j - 1][0] >= last - reach


def _reach(samples: _Series) -> int:
    """How far from a span's end a series' sample may be and still tell its value there (ns): two of
    its usual sampling intervals (the median gap); a lone sample reaches nothing beyond itself."""
    gaps = sorted(t1 - t0 for (t0, _), (t1, _) in zip(samples, samples[1:], strict=False))
    return 2 * gaps[len(gaps) // 2] if gaps else 0


def counter_rates(samples: _Series, scale: float) -> _Series:
    """A counter as power: the rate between consecutive samples, placed at their midpoint (a reset is skipped)."""
    return [
        ((t0 + t1) // 2, (v1 - v0) * scale / ((t1 - t0) / 1e9))
        for (t0, v0), (t1, v1) in zip(samples, samples[1:], strict=False)
        if t1 > t0 and v1 >= v0
    ]


def _integral(power: _Series, first: int, last: int) -> float:
    """Joules: power (W) over [first, last], trapezoids between samples, each end held flat."""
    if not power or last <= first:
        return 0.0
    points = [(first, _at(power, first)), *((t, v) for t, v in power if first < t < last), (last, _at(power, last))]
    return sum((t1 - t0) / 1e9 * (v0 + v1) / 2 for (t0, v0), (t1, v1) in zip(points, points[1:], strict=False))


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None
