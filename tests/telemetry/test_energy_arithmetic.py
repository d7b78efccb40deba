"""The energy arithmetic on hand-made telemetry whose figures follow from the documented rules
(docs/metrics.md): counters that reset, engine counters across a restart, a run recorded without
telemetry after one with it, devices and captures measured by different sources, and the clock
samples are stamped with."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal
from unittest import mock

import pytest
from click.testing import CliRunner

from infertap.analysis import Analysis, speed_stats
from infertap.analysis.compare import compare
from infertap.analysis.report import render
from infertap.capture.hostfacts import host_facts
from infertap.capture.records import new_telemetry
from infertap.capture.writer import CaptureWriter
from infertap.cli import cli
from infertap.telemetry import Sampler, TelemetryConfig
from tests.analysis_builders import JSON_HEADERS, body, event, exchange, sse
from tests.telemetry.stand_ins import SMI_LOST

GPU0, GPU1 = {"gpu": "0"}, {"gpu": "1"}
ENGINE = {"engine": "0", "model_name": "m"}
Sample = tuple[float, str, str, dict[str, str], float]  # (ms from the run's start, source, name, labels, value)


LOCAL = "http://127.0.0.1:8080"  # an engine on the recording machine: its GPUs are the engine's
HOUR = 3_600_000  # ms


def run(
    path: Path,
    busy: list[tuple[float, float]],
    samples: list[Sample],
    model: str = "m",
    *,
    upstream: str = LOCAL,
    host: str | None = None,
    session: str | None = None,
    base: float | None = None,
    interval_s: float | None = None,
    failed: Sequence[float] = (),
    gpus: int | None | Literal["unlisted"] = None,
    snapshot_gpus: int | None = None,
) -> Path:
    """One run appended to ``path``: a request for each (start ms, end ms) sent to ``upstream``,
    and the samples; recorded on a machine named ``host`` (this one's name by default). Times are
    ms from the writer's start, or from the wall time ``base`` (s), one clock for several captures;
    ``failed``: when (ms) the GPUs' source recorded a failed round, as the sampler records one;
    ``gpus``: how many GPUs the header lists (by default null, as a recorder writes it where there
    is no nvidia-smi; "unlisted": no list, as headers written before it); ``snapshot_gpus``: how many
    the run's engine snapshot lists, where the probe writes nvidia-smi's list (no snapshot by default)."""
    facts = {**host_facts(), **({"hostname": host} if host else {})}
    listing = {"name": "NVIDIA H200", "driver": "570.86.15", "memory_mib": 143771, "vbios": None, "cuda": "12.8"}
    if gpus != "unlisted":
        facts["gpus"] = None if gpus is None else [listing] * gpus
    # ``interval_s``: the GPUs' sampling interval the run's header says it asked for (none: older captures').
    recorder = {"kind": "test", **({"telemetry_intervals_s": {"gpu": interval_s}} if interval_s else {})}
    with mock.patch("infertap.capture.writer.host_facts", lambda: facts), CaptureWriter(path, recorder=recorder) as w:
        zero = w.started_wall if base is None else base
        if snapshot_gpus is not None:
            w.write(
                {
                    "type": "engine",
                    "url": upstream,
                    "wall": zero,
                    "kind": "generic",
                    "facts": {},
                    "unknown": [],
                    "notes": [],
                    "raw": {},
                    "host": {**facts, "gpus": [listing] * snapshot_gpus},
                    "host_is_engine_host": True,
                    "labels": {},
                    "fingerprint": "0" * 16,
                }
            )
        shift = (zero - w.started_wall) * 1e3  # ms from the writer's start to ``zero``
        for i, (start, end) in enumerate(busy):
            events = [
                event("x", role="assistant"),
                event(finish="stop", usage={"prompt_tokens": 3, "completion_tokens": 5}),
                "[DONE]",
            ]
            chunks = [(1.0, sse(*events))]
            w.write(
                exchange(
                    f"{path.name}-{i}",
                    sent_ms=shift + start,
                    chunks=chunks,
                    end_ms=end - start,
                    seq=i,
                    request=body(model=model),
                    upstream=upstream,
                    session=session,
                )
            )
        for at, source, name, labels, value in samples:
            w.write(new_telemetry(source, zero + at / 1e3, [[name, labels, value]]))
        for at in failed:
            w.write(new_telemetry("gpu", zero + at / 1e3, [], unknown=f"nvidia-smi failed: {SMI_LOST}"))
    return path


def groups(paths: list[Path], tmp_path: Path, by: tuple[str, ...] = ("run",)) -> list[dict[str, Any]]:
    with Analysis([str(p) for p in paths], cache_dir=tmp_path / "cache") as a:
        return speed_stats(a, list(by))["groups"]


def counter(name: str, labels: dict[str, str], *points: tuple[float, float], source: str = "gpu") -> list[Sample]:
    return [(at, source, name, labels, value) for at, value in points]


PACKAGE0 = {"zone": "intel-rapl:0:package-0"}


@pytest.mark.parametrize(
    ("name", "source", "labels", "points"),
    [
        ("gpu_energy_joules", "gpu", GPU0, [(0, 1000.0), (2000, 1200.0), (2500, 10.0), (4000, 160.0)]),  # a driver reload
        (
            "host_rapl_energy_joules",
            "host",
            PACKAGE0,
            [(0, 262100.0), (2000, 262140.0), (3000, 17.0), (4000, 37.0)],
        ),  # RAPL's wrap
    ],
)
def test_a_counter_that_resets_counts_from_zero_after_it(
    tmp_path: Path, name: str, source: str, labels: dict[str, str], points: list[tuple[float, float]]
) -> None:
    (g,) = groups([run(tmp_path / "c", [(0, 4000)], counter(name, labels, *points, source=source))], tmp_path)
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


def test_rapls_platform_zone_is_not_added_to_the_packages_it_includes(tmp_path: Path) -> None:
    """A capture recorded where ``psys`` (the whole platform: packages, memory, the rest) was read
    beside ``package-0``: the CPU's energy is the package's, not the two summed."""
    package = counter("host_rapl_energy_joules", PACKAGE0, (0, 100.0), (4000, 140.0), source="host")
    platform = counter("host_rapl_energy_joules", {"zone": "intel-rapl:1:psys"}, (0, 500.0), (4000, 600.0), source="host")
    (g,) = groups([run(tmp_path / "laptop", [(0, 4000)], [*package, *platform])], tmp_path)
    assert g["energy"]["joules"] == pytest.approx(40.0) and g["energy"]["devices"] == 1


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


def power(
    labels: dict[str, str], watts: float, until_ms: int = 4000, source: str = "gpu", name: str = "gpu_power_watts"
) -> list[Sample]:
    return [(t, source, name, labels, watts) for t in range(0, until_ms + 1, 250)]


DCGM = {"gpu": "0", "UUID": "GPU-5a3c1e2b", "device": "nvidia0", "modelName": "NVIDIA H200", "Hostname": "gpu-node"}


def test_a_remote_engines_energy_is_not_the_recording_machines_own_gpus(tmp_path: Path) -> None:
    local_gpu = power(GPU0, 50.0)  # this machine's own GPU, idle: not the engine's
    (g,) = groups([run(tmp_path / "remote", [(0, 4000)], local_gpu, upstream="http://gpu-node:8000")], tmp_path)
    assert g["energy"]["joules"] is None and g["energy"]["joules_per_output_token"] is None
    assert "gpu-node, not the recording machine" in g["energy"]["unknown"]
    from click.testing import CliRunner

    from infertap.cli import cli

    said = CliRunner().invoke(cli, ["stats", str(tmp_path / "remote"), "--cache-dir", str(tmp_path / "cache")])
    assert said.exit_code == 0 and "energy: unknown: " in said.output and "gpu-node" in said.output, said.output
    # The engine node's DCGM exporter (its Hostname label names it) is the engine's energy.
    dcgm = power(DCGM, 400.0, source="exporter", name="DCGM_FI_DEV_POWER_USAGE")
    (g,) = groups([run(tmp_path / "node", [(0, 4000)], [*local_gpu, *dcgm], upstream="http://gpu-node:8000")], tmp_path)
    assert g["energy"]["joules"] == pytest.approx(400.0 * 4)
    assert g["energy"]["source"] == "GPU power samples, integrated (DCGM exporter)"
    # On the recording machine, its own GPU is the engine's, and another machine's exporter is not.
    (g,) = groups([run(tmp_path / "here", [(0, 4000)], [*local_gpu, *dcgm])], tmp_path)
    assert g["energy"]["joules"] == pytest.approx(50.0 * 4) and g["energy"]["devices"] == 1


def test_an_exporter_on_another_domains_machine_of_the_same_short_name_is_not_the_engine(tmp_path: Path) -> None:
    """``gpu1.dc-a`` and ``gpu1.dc-b`` are two machines; ``gpu1`` and ``gpu1.dc-a`` are one."""
    upstream = "http://gpu1.dc-a.example.com:8000"
    other = power({**DCGM, "Hostname": "gpu1.dc-b.example.com"}, 400.0, source="exporter", name="DCGM_FI_DEV_POWER_USAGE")
    (g,) = groups([run(tmp_path / "other", [(0, 4000)], other, upstream=upstream)], tmp_path)
    assert g["energy"]["joules"] is None
    short = power({**DCGM, "Hostname": "gpu1"}, 400.0, source="exporter", name="DCGM_FI_DEV_POWER_USAGE")
    (g,) = groups([run(tmp_path / "short", [(0, 4000)], short, upstream=upstream)], tmp_path)
    assert g["energy"]["joules"] == pytest.approx(400.0 * 4)


def test_two_recorders_on_one_machine_count_its_gpus_once(tmp_path: Path) -> None:
    gpus = [*counter("gpu_energy_joules", GPU0, *((t, 1e6 + 0.3 * t) for t in range(0, 4001, 250)))]
    gpus += counter("gpu_energy_joules", GPU1, *((t, 2e6 + 0.1 * t) for t in range(0, 4001, 250)))
    base = time.time() + 5  # one wall clock for both: the time writing x took (seconds, on a loaded machine) no part of the span
    x = run(tmp_path / "recorder-x", [(0, 4000)], gpus, base=base)
    y = run(tmp_path / "recorder-y", [(0, 4000)], gpus, base=base)  # the same two GPUs, read again
    (g,) = groups([x, y], tmp_path, by=("model",))
    assert g["energy"]["devices"] == 2
    assert g["energy"]["joules"] == pytest.approx(300 * 4 + 100 * 4, rel=0.02)  # not twice that
    assert g["energy"]["joules_per_request"] == pytest.approx(g["energy"]["joules"] / 2)


def test_two_recorders_rounds_out_of_order_are_no_counter_reset(tmp_path: Path) -> None:
    """Each recorder stamps a round just before it reads, on its own writer's clock: recorder y's
    round can be stamped a moment before x's yet read the counter after it. Merged in time order
    that reading is followed by a lower one, which is no reset: each capture's counter is read on
    its own. Every other round y reads 4 ms after x but is stamped 1 ms after it: merged, that is
    1.2 kW for a millisecond, which the idle power must not take either."""
    base = time.time() + 5  # one wall clock for both captures

    def joules(t: float) -> float:  # the GPU's counter: 300 W, 1 MJ since the driver loaded
        return 1e6 + 0.3 * t

    x = counter("gpu_energy_joules", GPU0, *((t, joules(t)) for t in range(0, 4001, 250)))
    y = counter(
        "gpu_energy_joules", GPU0, *((t - 2, joules(t + 1)) if t % 500 else (t + 1, joules(t + 4)) for t in range(0, 4001, 250))
    )
    busy = [(0, 1000), (3000, 4000)]  # idle between
    paths = [run(tmp_path / "recorder-x", busy, x, base=base), run(tmp_path / "recorder-y", busy, y, base=base)]
    (g,) = groups(paths, tmp_path, by=("model",))
    assert g["energy"]["devices"] == 1
    assert g["energy"]["joules"] == pytest.approx(300 * 4, rel=0.01)  # not a million joules per inverted pair
    assert g["energy"]["idle_watts"] == pytest.approx(300, rel=0.02)


def engine_counters(offset: float) -> list[Sample]:
    """One engine's counters as a recorder scraping it every second reads them, ``offset`` ms after
    the engine's own clock: 2 preemptions a second, 40 prefix cache hits of 100 queries."""
    ts = [offset + t for t in range(0, 4001, 1000)]
    return [
        *counter("vllm:num_preemptions_total", ENGINE, *((t, 7 + 0.002 * t) for t in ts), source="engine"),
        *counter("vllm:prefix_cache_hits_total", ENGINE, *((t, 0.04 * t) for t in ts), source="engine"),
        *counter("vllm:prefix_cache_queries_total", ENGINE, *((t, 0.1 * t) for t in ts), source="engine"),
    ]


@pytest.mark.parametrize(
    ("second", "engines"),
    [
        ({}, 1),  # a second proxy in front of the same engine: the same counters, read again
        ({"upstream": "http://localhost:8080/"}, 1),  # the same engine by another loopback name
        ({"upstream": "http://127.0.0.1:8081"}, 2),  # another engine on this machine
        ({"host": "other-machine"}, 2),  # another machine's own 127.0.0.1:8080
        ({"upstream": "http://gpu-1:8000"}, 2),  # a remote engine
    ],
)
def test_engine_counters_two_recorders_scraped_from_one_engine_count_once(
    tmp_path: Path, second: dict[str, Any], engines: int
) -> None:
    base = time.time() + 5  # one wall clock for both captures
    busy = [(500, 3500)]
    x = run(tmp_path / "proxy-x", busy, engine_counters(0), base=base)
    y = run(tmp_path / "proxy-y", busy, engine_counters(300), base=base, **second)  # its rounds 300 ms after x's
    (g,) = groups([x, y], tmp_path, by=("model",))
    assert g["engine_state"]["preemptions"] == pytest.approx(engines * 0.002 * 3000)  # 6 an engine, over 3 s
    assert g["engine_state"]["prefix_cache_hit_rate"] == pytest.approx(0.4)
    alone = [groups([p], tmp_path / f"cache-{p.name}")[0]["engine_state"]["preemptions"] for p in (x, y)]
    assert alone == pytest.approx([6.0, 6.0])


@pytest.mark.parametrize("from_ms", [0, 3000])
def test_an_engine_not_read_across_the_stretch_leaves_the_sum_unknown_not_short(tmp_path: Path, from_ms: int) -> None:
    """Two engines behind two recorders, busy together: where the second's counters were read only near
    the end (its scrapes began late), its preemptions were left out of the sum unsaid: 6 for 12."""
    base = time.time() + 5
    busy = [(500, 3500)]
    x = run(tmp_path / "proxy-x", busy, engine_counters(0), base=base)
    late = [sample for sample in engine_counters(0) if sample[0] >= from_ms]
    y = run(tmp_path / "proxy-y", busy, late, base=base, upstream="http://127.0.0.1:8081")
    (g,) = groups([x, y], tmp_path, by=("model",))
    if from_ms == 0:  # both read across it: they add
        assert g["engine_state"]["preemptions"] == pytest.approx(12.0)
    else:
        assert g["engine_state"]["preemptions"] is None
        assert "preemptions" in " ".join(g["engine_state"]["unknown"]), g["engine_state"]


def _engine_over_a_run(start: float, preempted: float, kv: float) -> list[Sample]:
    """A vLLM engine's /metrics as a run of 2 s from ``start`` ms scraped it every second: a
    preemption a second from ``preempted`` on, 40 prefix cache hits of 100 queries a second, its
    KV cache at ``kv``."""
    ts = [start + t for t in range(0, 2001, 1000)]
    return [
        *counter("vllm:num_preemptions_total", ENGINE, *((t, preempted + 0.001 * (t - start)) for t in ts), source="engine"),
        *counter(
            "vllm:prefix_cache_hits_total", ENGINE, *((t, 40 * preempted + 0.04 * (t - start)) for t in ts), source="engine"
        ),
        *counter(
            "vllm:prefix_cache_queries_total", ENGINE, *((t, 90 * preempted + 0.1 * (t - start)) for t in ts), source="engine"
        ),
        *counter("vllm:kv_cache_usage_perc", ENGINE, *((t, kv) for t in ts), source="engine"),
    ]


def _an_hour_apart(tmp_path: Path, apart: str, later: list[Sample]) -> list[Path]:
    """A run of 2 s and another an hour later, against one engine: in two captures, or in one (a
    replay appended). The first run's recorder read the engine once more half way (others' traffic
    filling its KV cache), as a recorder left running does."""
    base = time.time() + 5
    first = [*_engine_over_a_run(0, 5, 0.3), (HOUR / 2, "engine", "vllm:kv_cache_usage_perc", ENGINE, 0.95)]
    if apart == "captures":
        return [
            run(tmp_path / "morning", [(0, 2000)], first, base=base),
            run(tmp_path / "later", [(HOUR, HOUR + 2000)], later, base=base),
        ]
    path = tmp_path / "recorded-then-replayed"
    run(path, [(0, 2000)], first, base=base)
    run(path, [(HOUR, HOUR + 2000)], later, base=base)
    return [path]


@pytest.mark.parametrize("apart", ["captures", "runs"])
def test_engine_state_of_runs_an_hour_apart_is_each_runs_own_added(tmp_path: Path, apart: str) -> None:
    """Two runs an hour apart read together (--by model): no series reaches both ends of the
    group's span, and one that does (one capture) counts the hour's preemptions, 895 of others'
    traffic. Each run's stretch is read on its own: increases added, peaks the highest."""
    paths = _an_hour_apart(tmp_path, apart, _engine_over_a_run(HOUR, 900, 0.6))
    (g,) = groups(paths, tmp_path, by=("model",))
    state = g["engine_state"]
    # Must differ from the span's reading: None over two captures, 897 across the hour in one.
    assert state["preemptions"] == pytest.approx(2 + 2)
    assert state["prefix_cache_hit_rate"] == pytest.approx(0.4)
    assert state["kv_cache_usage_max"] == pytest.approx(0.6)  # not the 0.95 read between the runs
    assert "unknown" not in state
    # Must match: each run alone reads as it did, and the group's is theirs added.
    alone = [x["engine_state"] for x in groups(paths, tmp_path)]
    assert [x["preemptions"] for x in alone] == pytest.approx([2.0, 2.0])
    assert [x["kv_cache_usage_max"] for x in alone] == pytest.approx([0.3, 0.6])


def test_engine_state_is_unknown_where_a_stretch_of_the_group_was_not_read_and_says_which(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The later run recorded with --no-telemetry: its preemptions are not known, so neither are the
    group's; the run that was not read is named."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    paths = _an_hour_apart(tmp_path, "captures", [])
    (g,) = groups(paths, tmp_path, by=("model",))
    state = g["engine_state"]
    assert state["preemptions"] is None and state["prefix_cache_hit_rate"] is None and state["kv_cache_usage_max"] is None
    assert set(state["unknown"]) == {"kv_cache_usage_max", "preemptions", "prefix_cache_hit_rate"}
    why = state["unknown"]["preemptions"]
    assert "in 1 of the 2 stretches" in why and f"of {paths[1]}" in why and f"of {paths[0]})" not in why
    said = CliRunner().invoke(cli, ["stats", *map(str, paths), "--by", "model", "--cache-dir", str(tmp_path / "cache")])
    assert said.exit_code == 0, said.output
    assert f"engine: preemptions unknown: {why}" in " ".join(said.output.split())
    # compare says it too, on a capture whose replay was appended with --no-telemetry, and lists no difference of it.
    [both] = _an_hour_apart(tmp_path / "one", "runs", [])
    result = compare(both, both)
    assert result["config"]["engine_state"] == []  # why a figure is unknown is no difference of it
    assert "in 1 of the 2 stretches" in result["energy"]["engine_state"]["a"]["unknown"]["preemptions"]
    said = CliRunner().invoke(cli, ["compare", str(both), str(both)])
    assert said.exit_code == 0, said.output
    assert "engine state A: preemptions unknown: no series reaching both ends" in " ".join(said.output.split())


def test_a_group_partly_measured_divides_by_the_measured_requests_only(tmp_path: Path) -> None:
    measured = run(tmp_path / "host-1", [(0, 4000)], power(GPU0, 300.0), host="host-1")
    dark = run(tmp_path / "host-2", [(0, 4000)], [], host="host-2")  # another machine, no telemetry
    (g,) = groups([measured, dark], tmp_path, by=("model",))
    e = g["energy"]
    assert e["joules"] == pytest.approx(300.0 * 4)
    assert e["joules_per_request"] == pytest.approx(1200.0) and e["joules_per_output_token"] == pytest.approx(1200.0 / 5)
    assert e["measured"]["requests"] == 1 and e["measured"]["of"] == 2 and e["measured"]["share"] == 0.5
    assert "partly measured: 1 of 2 captures, 1 of 2 ok requests" in e["source"] and "host-2" in e["source"]


def test_compare_says_partly_measured_apart_from_the_kind_of_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two captures of two runs each, measured by one kind of source (NVML), the second's later run
    recorded with --no-telemetry: measured alike, one side only partly, which compare says as such."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))

    def two_runs(path: Path, later: list[Sample]) -> Path:
        run(path, [(0, 2000)], [(t, "gpu", "gpu_power_watts", GPU0, 300.0) for t in range(0, 2001, 250)])
        return run(path, [(3000, 5000)], later)

    whole = two_runs(tmp_path / "whole", [(t, "gpu", "gpu_power_watts", GPU0, 300.0) for t in range(3000, 5001, 250)])
    partly = two_runs(tmp_path / "partly", [])
    for b, said in ((partly, "1 of 2 runs, 1 of 2 ok requests"), (whole, None)):  # must differ, must match
        result = compare(whole, b)["energy"]
        assert result["kinds"] == {"a": ["NVML or nvidia-smi"], "b": ["NVML or nvidia-smi"]} and result["unlike"] is None
        assert result["same_source"] is True and result["partly_measured"]["a"] is None
        assert result["partly_measured"]["b"] == said
        out = CliRunner().invoke(cli, ["compare", str(whole), str(b)])
        assert out.exit_code == 0, out.output
        text = " ".join(out.output.split())
        assert "different sources" not in text
        assert ("(B partly measured: over its measured runs only)" in text) == (said is not None)


def test_energy_per_token_counts_only_answers_whose_tokens_are_known(tmp_path: Path) -> None:
    answer = json.dumps(
        {
            "object": "chat.completion",
            "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "a b c d"}, "finish_reason": "stop"}],
        }
    ).encode()
    path = tmp_path / "no-usage"
    with CaptureWriter(path, recorder={"kind": "test"}) as w:
        for i in range(4):  # not streamed, no usage: one body whatever it holds, no token count
            x = exchange(f"x{i}", sent_ms=i * 1000, chunks=[(900.0, answer)], end_ms=900.0, seq=i, request=body(stream=False))
            w.write({**x, "response_headers": JSON_HEADERS, "upstream": LOCAL})
        for t in range(0, 4001, 250):
            w.write(new_telemetry("gpu", w.started_wall + t / 1e3, [["gpu_power_watts", GPU0, 100.0]]))
    (g,) = groups([path], tmp_path)
    assert g["energy"]["joules_per_request"] == pytest.approx(g["energy"]["joules"] / 4)
    assert g["energy"]["joules_per_output_token"] is None  # not J per request again
    assert g["energy"]["measured"]["tokens_known_for"] == 0


@pytest.mark.parametrize("apart", ["devices", "machines"])
def test_idle_watts_sum_devices_sampled_at_different_instants(tmp_path: Path, apart: str) -> None:
    busy = [(0, 1000), (3000, 4000)]  # 300 W while they run, 100 W between them (1000-3000 ms)

    def watts(t: int) -> float:
        return 300.0 if t <= 1000 or t >= 3000 else 100.0

    if apart == "devices":  # GPU0 by its energy counter (rates between samples), GPU1 by power samples
        energy, total = [], 1e6
        for t in range(0, 4001, 250):
            total += (300.0 if t <= 1000 or t > 3000 else 100.0) * 0.25 if t else 0.0  # the step that ends at t
            energy.append((t, "gpu", "gpu_energy_joules", GPU0, total))
        gpu1 = [(t, "gpu", "gpu_power_watts", GPU1, watts(t)) for t in range(0, 4001, 250)]
        paths = [run(tmp_path / "one", busy, [*energy, *gpu1])]
    else:  # two machines, one GPU each, sampled 125 ms apart
        paths = [
            run(
                tmp_path / name, busy, [(t, "gpu", "gpu_power_watts", GPU0, watts(t)) for t in range(phase, 4001, 250)], host=name
            )
            for name, phase in (("host-1", 0), ("host-2", 125))
        ]
    (g,) = groups(paths, tmp_path, by=("model",))
    assert g["energy"]["devices"] == 2
    assert g["energy"]["idle_watts"] == pytest.approx(200.0, rel=0.05)  # 100 W each, not their mean


def test_runs_read_together_a_while_apart_are_each_measured_over_their_own_time(tmp_path: Path) -> None:
    morning = run(tmp_path / "morning", [(0, 2000)], power(GPU0, 200.0, until_ms=2000))
    later = [(t + 3000, source, name, labels, watts) for t, source, name, labels, watts in power(GPU0, 200.0, until_ms=2000)]
    afternoon = run(tmp_path / "afternoon", [(3000, 5000)], later)  # a second apart: no sample in between
    (g,) = groups([morning, afternoon], tmp_path, by=("model",))
    assert g["span_s"] >= 5.0
    assert g["energy"]["joules"] == pytest.approx(200.0 * 4) and g["energy"]["mean_watts"] == pytest.approx(200.0)
    assert g["energy"]["joules_per_request"] == pytest.approx(400.0) and g["energy"]["measured"]["share"] == 1.0


def _recorded_then_replayed_an_hour_later(path: Path, samples: Callable[[float], list[Sample]]) -> Path:
    """One capture, two runs of one request each: 0-2000 ms, and a replay appended an hour later
    (HOUR to HOUR + 2000 ms), each run sampled while it ran (``samples(ms)``, every 250 ms)."""
    base = time.time() + 5  # one wall clock for both runs
    for start in (0, HOUR):
        run(path, [(start, start + 2000)], [x for t in range(start, start + 2001, 250) for x in samples(t)], base=base)
    return path


def _gpu_counter(t: float) -> list[Sample]:
    """The GPU's energy counter: 200 W while a run is busy, 50 W through the idle hour between them."""
    busy = min(t, 2000) + max(0.0, t - HOUR)
    return counter("gpu_energy_joules", GPU0, (t, 1e6 + 0.2 * busy + 0.05 * (min(max(t, 2000), HOUR) - 2000)))


def test_runs_an_hour_apart_are_measured_over_their_active_time_not_the_hour_between(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``stats --by model`` on a capture with a replay appended an hour after the recording: the GPU
    counted 50 W through the idle hour, 180 kJ that neither run drew; the energy is over the runs'
    active time, as their rates are (active_s), and says what it left out."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    path = _recorded_then_replayed_an_hour_later(tmp_path / "recorded-then-replayed", _gpu_counter)
    (g,) = groups([path], tmp_path, by=("model",))
    e = g["energy"]
    assert g["runs"] == 2 and g["active_s"] == pytest.approx(4.0) and g["span_s"] == pytest.approx(3602.0)
    # Must differ from the span's: 200 W over 4 s, not 800 J + 50 W x 3598 s.
    assert e["joules"] == pytest.approx(200.0 * 4, rel=1e-6)
    assert e["mean_watts"] == pytest.approx(200.0, rel=1e-6)
    assert e["joules_per_request"] == pytest.approx(400.0, rel=1e-6)
    assert e["joules_per_output_token"] == pytest.approx(400.0 / 5, rel=1e-6)
    assert e["measured"]["seconds"] == pytest.approx(4.0) and e["measured"]["between_runs_s"] == pytest.approx(3598.0)
    assert e["measured"]["runs"] == e["measured"]["of_runs"] == 2
    # Must match: each run alone is measured as it always was, and the two add up to the group's.
    alone = [x["energy"] for x in groups([path], tmp_path)]
    assert [x["joules"] for x in alone] == pytest.approx([400.0, 400.0], rel=1e-6)
    assert [x["measured"]["between_runs_s"] for x in alone] == [0.0, 0.0]
    # compare reads a capture's energy over the same active time; stats says what it left out.
    first = _recorded_then_replayed_an_hour_later(tmp_path / "again", _gpu_counter)
    side = compare(path, first)["energy"]["a"]
    assert side["joules"] == pytest.approx(e["joules"], rel=1e-6) and side["mean_watts"] == pytest.approx(200.0, rel=1e-6)
    said = CliRunner().invoke(cli, ["stats", str(path), "--by", "model"])
    assert said.exit_code == 0, said.output
    assert "over 4.00 s active, the 3,598.00 s between runs left out" in said.output


def test_a_capture_sampled_more_sparsely_is_measured_by_its_own_sampling_interval(tmp_path: Path) -> None:
    """A run sampled every 2 s (``--telemetry-interval 2``) is measured where its own samples come
    within two of its intervals of its ends, whatever another capture read with it sampled at."""
    base = time.time() + 5
    dense = [(t, "gpu", "gpu_power_watts", GPU0, 300.0) for t in range(0, 4001, 250)]  # every 250 ms
    sparse = [(t, "gpu", "gpu_power_watts", GPU0, 300.0) for t in range(59000, 71001, 2000)]  # a minute later, every 2 s
    b = run(tmp_path / "dense", [(0, 4000)], dense, base=base)
    a = run(tmp_path / "sparse", [(60000, 70000)], sparse, base=base)
    (alone,) = groups([a], tmp_path)
    assert alone["energy"]["joules"] == pytest.approx(300.0 * 10)
    (g,) = groups([b, a], tmp_path, by=("model",))
    assert g["energy"]["measured"]["share"] == 1.0 and g["energy"]["measured"]["captures"] == 2
    assert g["energy"]["joules"] == pytest.approx(300.0 * (4 + 10))


def test_data_parallel_engines_are_read_alike_by_stats_and_the_report(tmp_path: Path) -> None:
    """vLLM's --data-parallel-size 2: one series per engine on one /metrics. Queues add up; each
    engine's KV cache is its own, so the reading is the fullest one, never the sum."""
    samples: list[Sample] = []
    for t in range(0, 4001, 1000):
        for engine, kv in (("0", 0.6), ("1", 0.7)):
            labels = {"engine": engine, "model_name": "m"}
            samples += [
                (t, "engine", "vllm:kv_cache_usage_perc", labels, kv),
                (t, "engine", "vllm:num_requests_waiting", labels, 5.0),
                (t, "engine", "vllm:num_requests_running", labels, 8.0),
            ]
    path = run(tmp_path / "dp2", [(0, 4000)], samples)
    (g,) = groups([path], tmp_path)
    assert g["engine_state"]["kv_cache_usage_max"] == pytest.approx(0.7)
    assert g["engine_state"]["requests_waiting_max"] == 10.0
    html = render(path)
    plotted = {}
    for title in ("KV cache usage", "requests waiting in the engine", "requests running in the engine"):
        section = html.split(f"<h3>{title} over time</h3>", 1)[1].split("</svg>", 1)[0]
        plotted[title] = {float(v) for v in re.findall(r"<title>[^<]*: [\d.,]+, ([\d.]+)</title></circle>", section)}
    assert plotted == {
        "KV cache usage": {0.7},
        "requests waiting in the engine": {10.0},
        "requests running in the engine": {16.0},
    }


@pytest.mark.parametrize(("names", "sessions"), [(("s-1", "s-1"), 1), (("s-1", "s-2"), 2)])
def test_watt_hours_per_session_count_sessions_as_captures_read_together_link_them(
    tmp_path: Path, names: tuple[str, str], sessions: int
) -> None:
    """Two gateways' captures read together are linked as one (analysis/joined_sessions.py): a
    session "s-1" recorded by both is one session, its energy divided by one; "s-1" and "s-2" by two."""
    gpu = power(GPU0, 100.0)
    paths = [run(tmp_path / name, [(0, 4000)], gpu, session=s) for name, s in zip(("gw-a", "gw-b"), names, strict=True)]
    (g,) = groups(paths, tmp_path, by=("model",))
    assert g["energy"]["watt_hours_per_session"] == pytest.approx(g["energy"]["joules"] / 3600 / sessions)


def test_a_session_two_recorders_share_is_one_session_of_a_partly_measured_group(tmp_path: Path) -> None:
    """Two gateways' turns of session s-1 are one session (linked as one, docs/metrics.md Sessions),
    also where another machine's run, not measured, makes the group partly measured."""
    base = time.time() + 5  # one wall clock for every capture
    gpu = power(GPU0, 300.0)
    x = run(tmp_path / "gw-a", [(0, 1500)], gpu, session="s-1", base=base)
    y = run(tmp_path / "gw-b", [(2500, 4000)], gpu, session="s-1", base=base)  # its second turn, on the other gateway
    dark = run(tmp_path / "host-2", [(0, 4000)], [], host="host-2", base=base)  # another machine, no telemetry
    # Must match: whole or partly measured, the two turns are one session.
    (whole,) = groups([x, y], tmp_path, by=("model",))
    assert whole["energy"]["watt_hours_per_session"] == pytest.approx(whole["energy"]["joules"] / 3600)
    (g,) = groups([x, y, dark], tmp_path, by=("model",))
    e = g["energy"]
    assert e["measured"]["requests"] == 2 and e["measured"]["of"] == 3
    assert e["watt_hours_per_session"] == pytest.approx(e["joules"] / 3600)
    # Must differ: two sessions of their own where the turns name none.
    a = run(tmp_path / "own-a", [(0, 1500)], gpu, base=base)
    b = run(tmp_path / "own-b", [(2500, 4000)], gpu, base=base)
    (g,) = groups([a, b, dark], tmp_path, by=("model",))
    assert g["energy"]["watt_hours_per_session"] == pytest.approx(g["energy"]["joules"] / 3600 / 2)


def test_a_gap_is_judged_by_the_sampling_interval_asked_for_never_less_than_the_samples_kept(tmp_path: Path) -> None:
    """A gap is two samples further apart than two sampling intervals: the interval the run's header
    says was asked for (the longest of a capture's runs), or the median gap between the samples where
    that is longer. The median alone held a run sampled every 2 s appended to one sampled every 250 ms
    to the 250 ms: each of its intervals read as a gap, bridged by a line, and said so."""

    def gpu(times: list[int]) -> list[Sample]:
        return [(t, "gpu", "gpu_power_watts", GPU0, 100.0) for t in times]

    def interpolated(path: Path) -> Any:
        (g,) = groups([path], tmp_path / f"{path.name}-cache", by=("model",))
        return g["energy"]["interpolated"]

    # Asked every 250 ms: a gap just over two intervals (1000 -> 1510 ms) is said, one just under (2000 -> 2490) not.
    times = [*range(0, 1001, 250), *range(1510, 2001, 245), *range(2490, 4001, 250)]
    said = interpolated(run(tmp_path / "gap", [(0, 4000)], gpu(times), interval_s=0.25))
    assert said is not None and said["seconds"] == pytest.approx(0.51)

    # A run asked every 2 s appended to one asked every 250 ms: its 2 s steps are its interval, no gap.
    both = run(tmp_path / "both", [(0, 8000)], gpu(list(range(0, 8251, 250))), interval_s=0.25)  # a sample past each end
    run(both, [(500, 8000)], gpu(list(range(0, 10001, 2000))), interval_s=2.0, base=time.time() + 60)
    assert interpolated(both) is None

    # Asked every 50 ms, sampled every 250 ms throughout (an nvidia-smi slower than that, the sources
    # sharing one thread): its samples' own spacing is the interval, none of it a gap.
    assert interpolated(run(tmp_path / "slow", [(0, 4000)], gpu(list(range(0, 4001, 250))), interval_s=0.05)) is None


def test_a_run_of_a_capture_is_judged_by_its_own_sampling_interval_not_its_capture_longest(tmp_path: Path) -> None:
    """Each run's samples are judged by the interval that run asked for: a run appended every 2 s
    (or a recorder restarted with --telemetry-interval 2) held the capture's other run, asked every
    250 ms, to 2 s, and its 3 s gap (within two 2 s intervals) went unsaid, a straight line."""

    def gpu(times: list[int]) -> list[Sample]:
        return [(t, "gpu", "gpu_power_watts", GPU0, 100.0) for t in times]

    def interpolated(path: Path) -> Any:
        (g,) = groups([path], tmp_path / f"{path.name}-cache", by=("model",))
        return g["energy"]["interpolated"]

    gapped = [*range(0, 2001, 250), *range(5000, 8251, 250)]  # every 250 ms, none from 2 s to 5 s
    # Must differ: the 3 s gap of the run asked every 250 ms is said, with a 2 s run appended or not.
    alone = interpolated(run(tmp_path / "alone", [(0, 8000)], gpu(gapped), interval_s=0.25))
    both = run(tmp_path / "both", [(0, 8000)], gpu(gapped), interval_s=0.25)
    run(both, [(500, 8000)], gpu(list(range(0, 10001, 2000))), interval_s=2.0, base=time.time() + 60)
    said = interpolated(both)
    assert alone is not None and alone["seconds"] == pytest.approx(3.0)
    assert said is not None and said["seconds"] == pytest.approx(3.0)  # the 2 s run's own steps: no gap
    # Must match: without the gap, neither run has one.
    whole = run(tmp_path / "whole", [(0, 8000)], gpu(list(range(0, 8251, 250))), interval_s=0.25)
    run(whole, [(500, 8000)], gpu(list(range(0, 10001, 2000))), interval_s=2.0, base=time.time() + 60)
    assert interpolated(whole) is None


def test_a_series_mostly_of_lost_rounds_is_said_and_leaves_its_run_unmeasured(tmp_path: Path) -> None:
    """An nvidia-smi that fails two rounds in three leaves a sample every 750 ms where 250 ms was
    asked: the median step (750 ms) stood for the interval, so no step was a gap and 6 s of power,
    mostly a straight line across lost rounds, read as measured. A step with a failure recorded in it
    is no spacing of the source's: every step is a gap, and a run whose samples cover less than half
    of it is not measured, its energy unknown, saying why."""
    kept = list(range(0, 6751, 750))
    lost = [t + 250 for t in kept[:-1]]  # each step's first failed round, recorded after a clean one
    gpu = [(t, "gpu", "gpu_power_watts", GPU0, 100.0) for t in kept]
    (g,) = groups([run(tmp_path / "lossy", [(0, 6000)], gpu, interval_s=0.25, failed=lost)], tmp_path)
    e = g["energy"]
    assert e["joules"] is None and e["devices"] == 0
    assert "gpu 0's power samples cover 0% of run" in e["unknown"] and "the rest gaps in them" in e["unknown"]
    said = CliRunner().invoke(cli, ["stats", str(tmp_path / "lossy")])
    assert said.exit_code == 0 and "power samples cover 0% of run" in said.output, said.output
    # Read with a run measured throughout: the group is partly measured, the lossy run left out.
    base = time.time() + 5
    lossy = run(tmp_path / "lossy2", [(0, 6000)], gpu, interval_s=0.25, failed=lost, base=base)
    dense = [(t, "gpu", "gpu_power_watts", GPU0, 100.0) for t in range(60000, 66001, 250)]
    fine = run(tmp_path / "fine", [(60000, 66000)], dense, interval_s=0.25, base=base)
    (g,) = groups([lossy, fine], tmp_path / "two", by=("model",))
    assert g["energy"]["joules"] == pytest.approx(100.0 * 6) and g["energy"]["measured"]["runs"] == 1
    assert "cover 0% of run" in g["energy"]["partly_measured"]
    # Must not be flagged: the same spacing with no failure recorded is a source slower than asked.
    (g,) = groups([run(tmp_path / "slow", [(0, 6000)], gpu, interval_s=0.25)], tmp_path / "slow-cache")
    assert g["energy"]["joules"] == pytest.approx(100.0 * 6) and g["energy"]["interpolated"] is None


def test_a_gpu_that_does_not_cover_a_run_leaves_it_unmeasured_never_measured_by_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An engine on two GPUs: a run that one of them does not cover (its samples stop halfway, it
    has none in that run, or only the header lists it) was measured by the other alone, half its
    energy presented as the whole. A device the capture says exists and that does not cover a run
    leaves the run unmeasured, saying which device covered how much of it."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    # Must match: both GPUs cover the run, it is measured whole, both added.
    (g,) = groups([run(tmp_path / "both", [(0, 4000)], [*power(GPU0, 300.0), *power(GPU1, 200.0)], gpus=2)], tmp_path)
    e = g["energy"]
    assert e["joules"] == pytest.approx((300.0 + 200.0) * 4) and e["devices"] == 2 and e["partly_measured"] is None
    assert e["joules_per_output_token"] == pytest.approx((300.0 + 200.0) * 4 / 5)
    # Must differ: GPU1's samples stop halfway through the run; not GPU0's 1200 J as the whole.
    half = run(tmp_path / "half", [(0, 4000)], [*power(GPU0, 300.0), *power(GPU1, 200.0, until_ms=2000)])
    (g,) = groups([half], tmp_path)
    e = g["energy"]
    assert e["joules"] is None and e["joules_per_output_token"] is None and e["devices"] == 0
    assert "gpu 1's power samples cover 50% of run" in e["unknown"] and str(half) in e["unknown"]
    said = CliRunner().invoke(cli, ["stats", str(half)])
    assert said.exit_code == 0, said.output
    assert "energy: unknown: gpu 1's power samples cover 50% of run" in " ".join(said.output.split())
    # Must differ: GPU1 reported in the capture's first run, none in the replay appended to it.
    base = time.time() + 5
    appended = tmp_path / "appended"
    run(appended, [(0, 4000)], [*power(GPU0, 300.0), *power(GPU1, 200.0)], base=base)
    later = [(t + 10000, s, n, labels, w) for t, s, n, labels, w in power(GPU0, 300.0)]
    run(appended, [(10000, 14000)], later, base=base)
    first, second = groups([appended], tmp_path)
    assert first["energy"]["joules"] == pytest.approx(2000.0) and first["energy"]["partly_measured"] is None
    assert second["energy"]["joules"] is None and "gpu 1 has no power samples in run" in second["energy"]["unknown"]
    (g,) = groups([appended], tmp_path, by=("model",))  # read together: partly measured, the first run only
    e = g["energy"]
    assert e["joules"] == pytest.approx(2000.0) and e["measured"]["runs"] == 1 and e["measured"]["of_runs"] == 2
    assert "1 of 2 runs, 1 of 2 ok requests" in e["partly_measured"] and "gpu 1 has no power samples" in e["partly_measured"]
    # compare says it too, on the side whose replay GPU1 missed.
    result = compare(tmp_path / "both", appended)["energy"]
    assert result["partly_measured"]["a"] is None and "gpu 1 has no power samples" in result["partly_measured"]["b"]
    # Must differ: the header lists two GPUs, only GPU0 has samples.
    (g,) = groups([run(tmp_path / "listed", [(0, 4000)], power(GPU0, 300.0), gpus=2)], tmp_path)
    assert g["energy"]["joules"] is None and "gpu 1 has no power samples in run" in g["energy"]["unknown"]
    # Must match: a header listing one GPU, which covers the run.
    (g,) = groups([run(tmp_path / "one", [(0, 4000)], power(GPU0, 300.0), gpus=1)], tmp_path)
    assert g["energy"]["joules"] == pytest.approx(1200.0) and g["energy"]["partly_measured"] is None


def test_a_run_appended_without_telemetry_is_not_given_the_engine_state_of_the_run_before(tmp_path: Path) -> None:
    """A replay appended with --no-telemetry a moment after a recorded run: the recorded run's last
    scrape, within two Prometheus intervals of both its ends, was held flat over it, its preemptions
    read 0 as measured. Each run's engine series is its own: the appended run's are unknown, saying
    which run; a run with its own scrapes reads them, never the other's."""
    base = time.time() + 5
    dark = tmp_path / "dark"
    run(dark, [(0, 2000)], _engine_over_a_run(0, 0, 0.6), base=base)
    run(dark, [(2600, 3400)], [], base=base)
    recorded, appended = (g["engine_state"] for g in groups([dark], tmp_path))
    assert recorded["preemptions"] == pytest.approx(2.0) and recorded["kv_cache_usage_max"] == pytest.approx(0.6)
    # Must differ: not 0 preemptions from the recorded run's samples.
    assert appended["preemptions"] is None and appended["prefix_cache_hit_rate"] is None
    assert "in 1 of the 1 stretches" in appended["unknown"]["preemptions"] and str(dark) in appended["unknown"]["preemptions"]
    # Must match: a run appended with its own scrapes reads its own, the first run's unchanged.
    lit = tmp_path / "lit"
    run(lit, [(0, 2000)], _engine_over_a_run(0, 0, 0.6), base=base)
    run(lit, [(2600, 4600)], _engine_over_a_run(2600, 100, 0.3), base=base)
    first, second = (g["engine_state"] for g in groups([lit], tmp_path / "lit-cache"))
    assert first["preemptions"] == pytest.approx(2.0) and first["kv_cache_usage_max"] == pytest.approx(0.6)
    assert second["preemptions"] == pytest.approx(2.0) and second["kv_cache_usage_max"] == pytest.approx(0.3)
    assert "unknown" not in first and "unknown" not in second


def test_a_machine_whose_gpus_are_listed_is_not_measured_by_its_cpu_packages_alone(tmp_path: Path) -> None:
    """GPUs nvidia-smi lists on the engine's machine, none of whose power was read (their telemetry
    failed to start): RAPL's counters alone were the energy, given whole, the GPUs' draw left out
    unsaid. The run is unmeasured, saying the GPUs have no power samples; with no GPU listed RAPL
    measures it as before."""
    rapl = counter("host_rapl_energy_joules", PACKAGE0, (0, 100.0), (2000, 120.0), (4000, 140.0), source="host")
    # Must match: no GPU listed, the CPU packages measure the run.
    (g,) = groups([run(tmp_path / "cpu", [(0, 4000)], rapl)], tmp_path)
    e = g["energy"]
    assert e["joules"] == pytest.approx(40.0) and e["source"] == "CPU package energy counter (RAPL)"
    assert e["kinds"] == ["RAPL"] and e["partly_measured"] is None and e["joules_per_output_token"] == pytest.approx(8.0)
    # Must differ: two GPUs listed, where the probe writes nvidia-smi's list (the engine snapshot) or in the header.
    for where, listed in (("snapshot", {"snapshot_gpus": 2}), ("header", {"gpus": 2})):
        captured = run(tmp_path / where, [(0, 4000)], rapl, **listed)
        (g,) = groups([captured], tmp_path)
        e = g["energy"]
        assert e["joules"] is None and e["joules_per_output_token"] is None and e["devices"] == 0, where
        for gpu in ("gpu 0", "gpu 1"):
            assert f"{gpu} has no power samples in run" in e["unknown"] and str(captured) in e["unknown"], where
        said = CliRunner().invoke(cli, ["stats", str(captured)])
        assert said.exit_code == 0, said.output
        assert "energy: unknown: gpu 0 has no power samples in run" in " ".join(said.output.split())
    # Must differ: a GPU sampled in an earlier run of the capture, none in this one: RAPL alone is not its energy.
    base = time.time() + 5
    appended = tmp_path / "appended"
    run(appended, [(0, 4000)], [*power(GPU0, 300.0), *rapl], base=base)
    run(appended, [(10000, 14000)], [(t + 10000, s, n, labels, v) for t, s, n, labels, v in rapl], base=base)
    first, second = groups([appended], tmp_path)
    assert first["energy"]["joules"] == pytest.approx(1200.0) and first["energy"]["kinds"] == ["NVML or nvidia-smi"]
    assert second["energy"]["joules"] is None and "gpu 0 has no power samples in run" in second["energy"]["unknown"]


def stats_energy(capture: Path) -> dict[str, Any]:
    """The group's energy as `infertap stats --json` prints it."""
    said = CliRunner().invoke(cli, ["stats", str(capture), "--json"])
    assert said.exit_code == 0, said.output
    [group] = json.loads(said.output)["groups"]
    return group["energy"]


def test_a_capture_older_than_the_gpu_list_is_not_measured_by_its_cpu_packages_alone(tmp_path: Path) -> None:
    """A capture written before headers listed the machine's GPUs has no list: read as no GPU, its
    CPU packages' RAPL counters alone were the run's energy, though its GPUs may have drawn most of
    it. Its GPU set is unknown: RAPL alone measures nothing there, saying why; GPUs it sampled still
    measure it, as the coverage rule allows."""
    rapl = counter("host_rapl_energy_joules", PACKAGE0, (0, 100.0), (2000, 120.0), (4000, 140.0), source="host")
    old = run(tmp_path / "old", [(0, 4000)], rapl, gpus="unlisted", host="old-box")
    e = stats_energy(old)
    assert e["joules"] is None and e["joules_per_output_token"] is None and e["devices"] == 0
    assert e["unknown"] == (
        "the GPUs of old-box are unknown (its run header has no GPU list: written before infertap listed a machine's "
        f"GPUs), so its CPU packages' RAPL counters alone do not measure run {_run_id(old)} of {old}"
    )
    # Must match: a header saying there is no nvidia-smi (a list of none), or an engine snapshot of
    # the old capture listing none (the probe asked nvidia-smi), and RAPL measures the run.
    for name, listed in (("none", {"gpus": None}), ("snapshot", {"gpus": "unlisted", "snapshot_gpus": 0})):
        e = stats_energy(run(tmp_path / name, [(0, 4000)], rapl, **listed))  # type: ignore[arg-type]
        assert e["joules"] == pytest.approx(40.0) and e["kinds"] == ["RAPL"] and e.get("unknown") is None, name
    # Must match: an old capture whose GPU sampled it is measured by it (the GPU set unknown, the coverage rule holds).
    e = stats_energy(run(tmp_path / "sampled", [(0, 4000)], [*power(GPU0, 300.0), *rapl], gpus="unlisted"))
    assert e["joules"] == pytest.approx(1200.0) and e["kinds"] == ["NVML or nvidia-smi"]


def _run_id(capture: Path) -> str:
    with Analysis([str(capture)], cache_dir=capture.parent / "ids") as a:
        [(run_id,)] = a.sql("SELECT run_id FROM runs").fetchall()
    return str(run_id)


def test_a_stretch_neither_prefix_cache_counter_reads_is_counted_once(tmp_path: Path) -> None:
    """The hit rate's unknown message counts the stretches unread: one that neither the hits nor
    the queries counter reaches is one stretch, not two ("in 2 of the 2" of a group whose first
    stretch was read)."""
    # Must differ: the later run recorded with --no-telemetry, both counters unread there.
    paths = _an_hour_apart(tmp_path / "none", "captures", [])
    (g,) = groups(paths, tmp_path / "none", by=("model",))
    why = g["engine_state"]["unknown"]["prefix_cache_hit_rate"]
    assert why.startswith("no series reaching both ends of the engine's /metrics in 1 of the 2 stretches"), why
    assert why.count(f"of {paths[1]})") == 1 and f"of {paths[0]})" not in why
    # Must match: the later run scraped the hits but not the queries, the same stretch unread once.
    hits_only = [s for s in _engine_over_a_run(HOUR, 900, 0.6) if s[2] != "vllm:prefix_cache_queries_total"]
    paths = _an_hour_apart(tmp_path / "hits", "captures", hits_only)
    (g,) = groups(paths, tmp_path / "hits", by=("model",))
    state = g["engine_state"]
    assert state["preemptions"] == pytest.approx(2 + 2) and state["prefix_cache_hit_rate"] is None
    why = state["unknown"]["prefix_cache_hit_rate"]
    assert why.startswith("no series reaching both ends of the engine's /metrics in 1 of the 2 stretches"), why
    assert why.count(f"of {paths[1]})") == 1 and f"of {paths[0]})" not in why


def test_the_gpus_a_run_lacks_are_named_by_machine_where_the_captures_runs_are_on_several(tmp_path: Path) -> None:
    # Two runs of one capture, each recorded beside a local engine on its own machine: both machines'
    # "gpu 0" were said alike ("gpu 0 has no power samples in run r of c (gpu 0's cover it)"), so
    # which GPU lacked samples could not be told. Each is named by its machine now.
    base = time.time() + 5
    two = tmp_path / "two-machines"
    run(two, [(0, 4000)], power(GPU0, 300.0), host="box-a", base=base)
    later = [(t + 10000, s, n, labels, w) for t, s, n, labels, w in power(GPU0, 300.0)]
    run(two, [(10000, 14000)], later, host="box-b", base=base)
    a_run, b_run = groups([two], tmp_path)
    first, second = a_run["key"]["run"], b_run["key"]["run"]
    assert a_run["energy"]["joules"] is None and b_run["energy"]["joules"] is None
    assert (
        a_run["energy"]["unknown"] == f"gpu 0 of box-b has no power samples in run {first} of {two} (gpu 0 of box-a's cover it)"
    )
    assert (
        b_run["energy"]["unknown"] == f"gpu 0 of box-a has no power samples in run {second} of {two} (gpu 0 of box-b's cover it)"
    )
    # Must stay: one machine's runs, its GPUs named as before (no machine).
    one = tmp_path / "one-machine"
    run(one, [(0, 4000)], [*power(GPU0, 300.0), *power(GPU1, 200.0)], host="box-a", base=base)
    run(one, [(10000, 14000)], later, host="box-a", base=base)
    _, g = groups([one], tmp_path)
    assert g["energy"]["unknown"] == f"gpu 1 has no power samples in run {g['key']['run']} of {one} (gpu 0's cover it)"
