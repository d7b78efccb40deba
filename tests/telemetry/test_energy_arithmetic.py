"""The energy arithmetic on hand-made telemetry whose figures follow from the documented rules
(docs/metrics.md): counters that reset, engine counters across a restart, a run recorded without
telemetry after one with it, devices and captures measured by different sources, and the clock
samples are stamped with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infertap.analysis import Analysis, speed_stats
from infertap.capture.records import new_telemetry
from infertap.capture.writer import CaptureWriter
from infertap.telemetry import Sampler, TelemetryConfig
from tests.analysis_builders import body, event, exchange, sse

GPU0, GPU1 = {"gpu": "0"}, {"gpu": "1"}
ENGINE = {"engine": "0", "model_name": "m"}
Sample = tuple[float, str, str, dict[str, str], float]  # (ms from the run's start, source, name, labels, value)


def run(path: Path, busy: list[tuple[float, float]], samples: list[Sample], model: str = "m") -> Path:
    """One run appended to ``path``: a request for each (start ms, end ms), and the samples."""
    with CaptureWriter(path, recorder={"kind": "test"}) as w:
        for i, (start, end) in enumerate(busy):
            events = [
                event("x", role="assistant"),
                event(finish="stop", usage={"prompt_tokens": 3, "completion_tokens": 5}),
                "[DONE]",
            ]
            chunks = [(1.0, sse(*events))]
            w.write(
                exchange(f"{path.name}-{i}", sent_ms=start, chunks=chunks, end_ms=end - start, seq=i, request=body(model=model))
            )
        for at, source, name, labels, value in samples:
            w.write(new_telemetry(source, w.started_wall + at / 1e3, [[name, labels, value]]))
    return path


def groups(paths: list[Path], tmp_path: Path, by: tuple[str, ...] = ("run",)) -> list[dict[str, Any]]:
    with Analysis([str(p) for p in paths], cache_dir=tmp_path / "cache") as a:
        return speed_stats(a, list(by))["groups"]


def counter(name: str, labels: dict[str, str], *points: tuple[float, float], source: str = "gpu") -> list[Sample]:
    return [(at, source, name, labels, value) for at, value in points]


@pytest.mark.parametrize(
    ("name", "source", "points"),
    [
        ("gpu_energy_joules", "gpu", [(0, 1000.0), (2000, 1200.0), (2500, 10.0), (4000, 160.0)]),  # a driver reload
        ("host_rapl_energy_joules", "host", [(0, 262100.0), (2000, 262140.0), (3000, 17.0), (4000, 37.0)]),  # RAPL's wrap
    ],
)
def test_a_counter_that_resets_counts_from_zero_after_it(
    tmp_path: Path, name: str, source: str, points: list[tuple[float, float]]
) -> None:
    (g,) = groups([run(tmp_path / "c", [(0, 4000)], counter(name, GPU0, *points, source=source))], tmp_path)
    values = [v for _, v in points]
    steps = [b - a if b >= a else b for a, b in zip(values, values[1:], strict=False)]  # after a reset: from zero
    assert g["energy"]["joules"] == pytest.approx(sum(steps)) and g["energy"]["joules"] > 0
    assert g["energy"]["mean_watts"] == pytest.approx(sum(steps) / 4)


def test_engine_counters_across_a_restart(tmp_path: Path) -> None:
    samples = [
        *counter("vllm:num_preemptions_total", ENGINE, (0, 5), (1000, 8), (2000, 0), (3000, 2), source="engine"),
        *counter("vllm:prefix_cache_hits_total", ENGINE, (0, 50), (1000, 60), (2000, 0), (3000, 10), source="engine"),
        *counter("vllm:prefix_cache_queries_total", ENGINE, (0, 100), (1000, 120), (2000, 0), (3000, 40), source="engine"),
    ]
    (g,) = groups([run(tmp_path / "e", [(0, 3000)], samples)], tmp_path)
    state = g["engine_state"]
    assert state["preemptions"] == (8 - 5) + 0 + 2
    assert state["prefix_cache_hit_rate"] == pytest.approx(((60 - 50) + 0 + 10) / ((120 - 100) + 0 + 40))


def test_a_run_without_telemetry_is_not_given_the_last_runs(tmp_path: Path) -> None:
    path = tmp_path / "two-runs"
    power = [(t, "gpu", "gpu_power_watts", GPU0, 300.0) for t in range(0, 2001, 250)]
    run(path, [(0, 2000)], power)
    run(path, [(3000, 3500)], [])  # recorded again, with --no-telemetry, a moment later
    measured, unmeasured = sorted(groups([path], tmp_path), key=lambda g: g["energy"] is None)
    assert measured["energy"]["joules"] == pytest.approx(300.0 * 2)
    assert unmeasured["energy"] is None  # not 300 W held flat over its span
    # ...and a run whose counter restarted (a reboot between the runs) counts from zero.
    reboot = tmp_path / "reboot"
    run(reboot, [(0, 2000)], counter("gpu_energy_joules", GPU0, *((t, 50000.0 + t / 10) for t in range(0, 2001, 250))))
    later = counter("gpu_energy_joules", GPU0, *((3000 + t, 10.0 + t / 10) for t in range(0, 2001, 250)))
    run(reboot, [(3000, 5000)], later)
    assert [g["energy"]["joules"] for g in groups([reboot], tmp_path)] == [pytest.approx(200.0), pytest.approx(200.0)]


def test_each_device_and_capture_is_measured_by_the_best_source_it_has(tmp_path: Path) -> None:
    energy0 = counter("gpu_energy_joules", GPU0, (0, 1000.0), (2000, 1200.0), (4000, 1400.0))
    power0 = [(t, "gpu", "gpu_power_watts", GPU0, 90.0) for t in (0, 2000, 4000)]  # the counter is preferred
    power1 = [(t, "gpu", "gpu_power_watts", GPU1, 200.0) for t in (0, 2000, 4000)]  # GPU1 has no counter
    (g,) = groups([run(tmp_path / "mixed", [(0, 4000)], [*energy0, *power0, *power1])], tmp_path)
    assert g["energy"]["joules"] == pytest.approx((1400 - 1000) + 200 * 4)
    assert g["energy"]["devices"] == 2 and "counter" in g["energy"]["source"] and "power" in g["energy"]["source"]
    a = run(tmp_path / "a", [(0, 4000)], energy0)
    b = run(tmp_path / "b", [(0, 4000)], power1)
    (both,) = groups([a, b], tmp_path, by=("model",))  # b was written a moment after a: its span is a bit longer
    assert both["energy"]["joules"] == pytest.approx(400 + 200 * both["span_s"]) and both["energy"]["devices"] == 2


def test_samples_are_stamped_on_the_writers_clock(tmp_path: Path) -> None:
    """The writer's wall_now (its start's wall time plus monotonic time since) is the clock of its
    exchanges; a sampler given it stamps samples with it, not with a wall clock that may step."""
    written: list[dict[str, Any]] = []
    with CaptureWriter(tmp_path / "clock", recorder={"kind": "test"}) as w:
        stamps = iter([w.started_wall + 1.5, w.started_wall + 2.5, w.started_wall + 3.5])
        sampler = Sampler(TelemetryConfig(gpu=False, host=True, interval_s=60), written.append, lambda: next(stamps))
        sampler.start()
        sampler.close()
        assert abs(w.wall_now() - w.started_wall) < 60
    host = [r for r in written if r["source"] == "host" and r["samples"]]
    assert (
        host and host[0]["wall"] == pytest.approx(written[0]["wall"]) and written[0]["wall"] - w.started_wall in (1.5, 2.5, 3.5)
    )
