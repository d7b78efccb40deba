"""The sampling threads (infertap.telemetry.Sampler), one per source: rounds at their interval, a
source that can't be read recorded once per reason, exporters and the engine told apart, one that
hangs holding no other, close() that stops them whatever a source does.
Sources are real (Prometheus endpoints on loopback, the host) or stand-ins for a GPU."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from infertap.telemetry import Sampler, TelemetryConfig, start_telemetry
from infertap.telemetry.sampler import backoff
from tests.fake_upstream import ServerThread
from tests.telemetry.stand_ins import (
    DcgmExporter,
    Exposition,
    Hung,
    constant_gpus,
    fake_nvml,
    gpus_on_path,
    hung_after,
    no_gpu,
    nvidia_smi,
    nvml_device,
    rapl_zone,
    slow_once,
    smi_calls,
)

LLAMA = "# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 2\n"


class Records:
    """What the sampler writes (a capture writer's ``write`` in the recorders)."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def __call__(self, record: Mapping[str, Any]) -> None:
        self.items.append(dict(record))

    def of(self, source: str) -> list[dict[str, Any]]:
        return [r for r in list(self.items) if r["source"] == source]

    def unknown(self, source: str) -> list[str]:
        return [r["unknown"] for r in self.of(source) if "unknown" in r]

    def sampled(self, source: str) -> list[dict[str, Any]]:
        return [r for r in self.of(source) if "unknown" not in r]


def wait_for(condition: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def telemetry_threads() -> list[threading.Thread]:
    """Every sampler's threads, one per source."""
    return [t for t in threading.enumerate() if t.name.startswith("infertap-telemetry-")]


def walls(records: list[dict[str, Any]], after: float, before: float) -> list[float]:
    return [r["wall"] for r in records if after < r["wall"] < before]


class Schedule:
    """The clock and the wait a sampler schedules its rounds by, moved on by hand: a wait moves the
    clock on by what it was asked, a read of the GPU (``took``) by its duration; the ``rounds``-th
    wait is for the sampler's stop, as a real one past the run's end is. ``waits``: each asked."""

    def __init__(self, rounds: int, took: float) -> None:
        self.now = 1_000.0
        self.rounds = rounds
        self.took = took
        self.waits: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        self.waits.append(seconds)
        if len(self.waits) >= self.rounds:
            return stop.wait()
        self.now += seconds
        return stop.is_set()


def test_each_round_is_due_its_interval_after_the_last_began(tmp_path, monkeypatch):
    """A round is due its interval after the one before it began, the read's own time counted in:
    a read of 30 ms at 0.1 s waits 70 ms, so rounds are stamped 0.1 s apart (at 0.5 s, 0.5 s apart:
    must differ); a read longer than the interval is followed by the next at once, never by a
    negative wait or a whole interval more. Then the round at close."""
    from infertap.telemetry import gpu

    gpus_on_path(monkeypatch, tmp_path, nvidia_smi(tmp_path / "bin", constant_gpus(150.0)))
    read = gpu.SmiSource.sample
    found = {}
    for interval, took in ((0.1, 0.03), (0.5, 0.03), (0.1, 0.15)):
        schedule = Schedule(rounds=5, took=took)

        def timed(self: gpu.SmiSource, schedule: Schedule = schedule) -> list[Any]:
            samples = read(self)
            schedule.now += schedule.took  # the read took that long
            return samples

        monkeypatch.setattr(gpu.SmiSource, "sample", timed)
        records = Records()
        config = TelemetryConfig(host=False, interval_s=interval)
        with Sampler(config, records, schedule.monotonic, monotonic=schedule.monotonic, wait=schedule.wait):
            wait_for(lambda schedule=schedule: len(schedule.waits) >= schedule.rounds)
        rounds = records.sampled("gpu")
        assert len(rounds) == 5 + 1, "five rounds, then one at close"
        gaps = [b["wall"] - a["wall"] for a, b in zip(rounds[:5], rounds[1:5], strict=False)]
        found[interval, took] = (schedule.waits, gaps)
        # Each round: one source's samples, [name, labels, value], the same names every time.
        assert rounds[0]["type"] == "telemetry" and ["gpu_power_watts", {"gpu": "0"}, 150.0] in rounds[0]["samples"]
        assert all({s[0] for s in r["samples"]} == {s[0] for s in rounds[0]["samples"]} for r in rounds)
        assert not records.of("host") and not records.of("engine"), "only what was asked for"
    assert found[0.1, 0.03] == (pytest.approx([0.07] * 5), pytest.approx([0.1] * 4))
    assert found[0.5, 0.03] == (pytest.approx([0.47] * 5), pytest.approx([0.5] * 4))
    assert found[0.1, 0.15] == ([0.0] * 5, pytest.approx([0.15] * 4)), "late: the next round at once"


def test_a_source_that_cannot_be_read_is_recorded_once_per_reason(tmp_path, monkeypatch):
    no_gpu(monkeypatch, tmp_path)
    page = Exposition(status=404)
    records = Records()
    with ServerThread(page) as server:
        url = server.url + "/metrics"
        config = TelemetryConfig(exporters=(url,), gpu=False, host=False, engine_interval_s=0.05, retry_s=0.05)
        with Sampler(config, records):
            wait_for(lambda: page.asked["/metrics"] >= 6)  # retried over and over, the same 404
            assert len(records.unknown("exporter")) == 1
            assert records.unknown("exporter")[0] == f"{url} answered 404"  # an exporter: no llama-server hint
            page.status = 500  # another reason: recorded
            wait_for(lambda: len(records.unknown("exporter")) == 2)
            asked = page.asked["/metrics"]
            wait_for(lambda: page.asked["/metrics"] >= asked + 4)
            assert len(records.unknown("exporter")) == 2, "the same reason again is not recorded again"
            assert "answered 500" in records.unknown("exporter")[1]
            page.status, page.text = 200, LLAMA  # it comes back
            wait_for(lambda: bool(records.sampled("exporter")))
            assert records.sampled("exporter")[0]["samples"] == [["llamacpp:requests_processing", {}, 2.0]]
            page.status = 500  # and fails again, for the reason it failed before: recorded again
            wait_for(lambda: len(records.unknown("exporter")) == 3)
    assert [r.split(" answered ")[1][:3] for r in records.unknown("exporter")] == ["404", "500", "500"]
    assert not records.of("gpu") and not records.of("host")


def test_a_gpu_that_is_not_there_is_recorded_once_and_found_when_it_appears(tmp_path, monkeypatch):
    no_gpu(monkeypatch, tmp_path)
    records = Records()
    with Sampler(TelemetryConfig(interval_s=0.05, retry_s=0.05), records):
        wait_for(lambda: len(records.sampled("host")) >= 8)  # the host goes on being sampled meanwhile
        [reason] = records.unknown("gpu")
        assert reason.startswith("no GPU telemetry: NVML unavailable") and reason.endswith("and no nvidia-smi on PATH")
        gpus_on_path(monkeypatch, tmp_path, nvidia_smi(tmp_path / "bin", constant_gpus(80.0)))  # the driver arrives
        wait_for(lambda: bool(records.sampled("gpu")))
    assert len(records.unknown("gpu")) == 1
    assert ["gpu_power_watts", {"gpu": "0"}, 80.0] in records.sampled("gpu")[0]["samples"]
    assert all(r["samples"][0][0] == "host_cpu_percent" for r in records.sampled("host"))


def test_the_engine_and_exporters_are_told_apart_and_only_the_engine_gets_its_key(tmp_path, monkeypatch):
    no_gpu(monkeypatch, tmp_path)
    engine, exporter = Exposition(LLAMA), Exposition(DcgmExporter(120.0, energy_counter=False).text())
    records = Records()
    with ServerThread(engine) as e, ServerThread(exporter) as x:
        config = TelemetryConfig(
            engine_url=e.url + "/",
            exporters=(x.url + "/metrics",),
            gpu=False,
            host=False,
            engine_interval_s=0.1,
            headers={"Authorization": "Bearer engine-key"},
        )
        with Sampler(config, records):
            wait_for(lambda: len(records.sampled("engine")) >= 2 and len(records.sampled("exporter")) >= 2)
    engine_names = {s[0] for r in records.sampled("engine") for s in r["samples"]}
    exporter_names = {s[0] for r in records.sampled("exporter") for s in r["samples"]}
    assert engine_names == {"llamacpp:requests_processing"}
    assert exporter_names == {"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_SM_CLOCK"}
    power = [s for r in records.sampled("exporter") for s in r["samples"] if s[0] == "DCGM_FI_DEV_POWER_USAGE"]
    assert all(s[1]["gpu"] == "0" and s[2] == 120.0 for s in power)
    assert set(engine.asked) == {"/metrics"} and set(exporter.asked) == {"/metrics"}
    assert all(h.get("authorization") == "Bearer engine-key" for h in engine.headers)
    assert not any("authorization" in h for h in exporter.headers), "the engine's key is not sent to exporters"


def test_a_source_that_breaks_does_not_stop_the_others(tmp_path, monkeypatch):
    gpus_on_path(monkeypatch, tmp_path, nvidia_smi(tmp_path / "bin", constant_gpus(150.0)))

    def broken(self: Any) -> list[Any]:
        raise RuntimeError("psutil exploded")

    monkeypatch.setattr("infertap.telemetry.host.HostSource.sample", broken)
    records = Records()
    with Sampler(TelemetryConfig(interval_s=0.05, retry_s=0.05), records):
        wait_for(lambda: len(records.sampled("gpu")) >= 5)
    assert records.unknown("host") == ["RuntimeError('psutil exploded')"]
    assert not records.sampled("host")


def test_close_stops_the_thread_and_nothing_is_written_after(tmp_path, monkeypatch):
    gpus_on_path(monkeypatch, tmp_path, nvidia_smi(tmp_path / "bin", constant_gpus(150.0)))
    records = Records()
    page = Exposition(LLAMA)
    before = set(telemetry_threads())  # any other test's sampler left running is not this one's
    with ServerThread(page) as server:
        sampler = start_telemetry(True, server.url, (), 0.05, {}, records)
        assert sampler is not None
        wait_for(lambda: len(records.sampled("gpu")) >= 3 and len(records.sampled("engine")) >= 1)
        mine = set(telemetry_threads()) - before
        assert {t.name for t in mine} == {"infertap-telemetry-engine", "infertap-telemetry-gpu", "infertap-telemetry-host"}
        sampler.close()
        # Every thread joined within close_s, none left behind stuck: nothing said to have stopped answering.
        assert not any(t.is_alive() for t in mine)
        assert not [why for source in ("engine", "gpu", "host") for why in records.unknown(source)]
    assert start_telemetry(False, "http://127.0.0.1:9", (), 0.25, {}, records) is None
    assert set(telemetry_threads()) <= before


def test_close_does_not_wait_out_a_long_interval(tmp_path, monkeypatch):
    """The next round an hour away, past close_s: a close that did not wake the thread would leave
    it waiting (alive) and read the host no more."""
    no_gpu(monkeypatch, tmp_path)
    records = Records()
    before = set(telemetry_threads())
    sampler = Sampler(TelemetryConfig(gpu=False, interval_s=3600.0, close_s=1.0), records).start()
    wait_for(lambda: len(records.sampled("host")) == 1)
    [mine] = set(telemetry_threads()) - before
    sampler.close()
    assert not mine.is_alive(), "close() must wake the thread, not wait for the next round"
    assert len(records.sampled("host")) == 2, "and read the host once more"


def test_nvidia_smi_is_run_once_per_round_for_every_gpu(tmp_path, monkeypatch):
    exe = nvidia_smi(tmp_path / "bin", constant_gpus(150.0, 50.0))
    gpus_on_path(monkeypatch, tmp_path, exe)
    records = Records()
    with Sampler(TelemetryConfig(host=False, interval_s=0.05), records):
        wait_for(lambda: len(records.sampled("gpu")) >= 4)
    assert len(smi_calls(exe)) == len(records.sampled("gpu")), "one nvidia-smi process per round, both GPUs in it"
    assert all(len(r["samples"]) == 12 for r in records.sampled("gpu"))


def test_a_gpu_reading_that_fails_once_is_recorded_and_read_again_the_next_rounds(tmp_path, monkeypatch):
    from tests.telemetry.stand_ins import NVMLError, fake_nvml, nvml_device

    device = nvml_device(power=NVMLError(10))  # NVML_ERROR_TIMEOUT: a passing failure, not "not supported"
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([device]))
    records = Records()
    with Sampler(TelemetryConfig(host=False, interval_s=0.05, retry_s=3600), records):
        wait_for(lambda: bool(records.unknown("gpu")))
        device["power"] = 200_000  # the driver answers again
        wait_for(lambda: sum(["gpu_power_watts", {"gpu": "0"}, 200.0] in r["samples"] for r in records.sampled("gpu")) >= 3)
    [reason] = records.unknown("gpu")  # recorded once, though every round failed until it passed
    assert "gpu 0 gpu_power_watts: NVML error 10" in reason
    failed = [r for r in records.sampled("gpu") if not any(s[0] == "gpu_power_watts" for s in r["samples"])]
    assert failed and all(any(s[0] == "gpu_energy_joules" for s in r["samples"]) for r in failed), "the round kept the rest"


def test_nvidia_smi_failing_once_loses_that_round_only_and_close_still_reads_the_last(tmp_path, monkeypatch):
    """One nvidia-smi hiccup (a non-zero exit) must not stop a GPU's power for ``retry_s``, nor the
    round at close that a run's energy ends on."""
    exe = nvidia_smi(tmp_path / "bin", constant_gpus(150.0), fail_once="Unable to determine the device handle for GPU0")
    gpus_on_path(monkeypatch, tmp_path, exe)
    records = Records()
    with Sampler(TelemetryConfig(host=False, interval_s=0.05, retry_s=3600), records):
        wait_for(lambda: len(records.sampled("gpu")) >= 3)  # the rounds after the failed one, not an hour later
    [reason] = records.unknown("gpu")
    assert "nvidia-smi exited 9: Unable to determine the device handle" in reason
    once = nvidia_smi(tmp_path / "bin-2", constant_gpus(150.0), fail_once="Unable to determine the device handle for GPU0")
    gpus_on_path(monkeypatch, tmp_path, once)
    records = Records()
    sampler = Sampler(TelemetryConfig(host=False, interval_s=3600, retry_s=3600), records).start()
    wait_for(lambda: bool(records.unknown("gpu")))  # the first round failed; the next is an hour away
    sampler.close()
    assert len(records.sampled("gpu")) == 1, "close() reads the GPU once more"


def test_a_hung_nvidia_smi_is_recorded_once_asked_again_and_holds_no_other_source(tmp_path, monkeypatch):
    """A driver that never answers: nvidia-smi timed out every round, and each round held the one
    sampling thread for the timeout, the engine's rounds with it. The engine's rounds go on; the GPU
    is recorded once, though asked again (ever more rarely: ``backoff``), not after retry_s."""
    from infertap.telemetry import gpu

    exe = nvidia_smi(tmp_path / "bin", constant_gpus(100.0), hang=True)
    gpus_on_path(monkeypatch, tmp_path, exe)
    monkeypatch.setattr(gpu.SmiSource.__init__, "__defaults__", (0.3,))  # its timeout, 5 s in use
    records = Records()
    with ServerThread(Exposition(LLAMA)) as engine:
        config = TelemetryConfig(engine_url=engine.url, host=False, interval_s=0.05, engine_interval_s=0.05, retry_s=3600)
        with Sampler(config, records):
            wait_for(lambda: bool(records.unknown("gpu")))
            seen = len(records.sampled("engine"))
            wait_for(lambda: len(records.sampled("engine")) >= seen + 10)  # the engine's rounds go on
            wait_for(lambda: len(smi_calls(exe)) >= 2)  # asked again, not an hour (retry_s) later
    assert records.unknown("gpu") == ["nvidia-smi did not answer within 0.3 s"]
    assert not records.sampled("gpu")


@pytest.mark.parametrize("dies_on_kill", [False, True])
def test_an_nvidia_smi_stuck_after_its_kill_is_not_joined_by_another_each_retry(tmp_path, monkeypatch, dies_on_kill):
    """An nvidia-smi stuck in the driver does not exit when killed, and every retry of the GPU
    started another, stuck behind it: one more process stuck per retry. While one is stuck none
    is started, and the GPU's state says why; one that exits when killed is run again at each
    retry as before (must differ). The rounds are scheduled by a hand-moved clock and wait; this
    machine can't make a process that outlives SIGKILL: the stand-in's kill reaches nothing."""
    import os
    import signal
    import subprocess

    from infertap.telemetry import gpu

    exe = nvidia_smi(tmp_path / "bin", constant_gpus(100.0), hang=True)
    gpus_on_path(monkeypatch, tmp_path, exe)
    monkeypatch.setattr(gpu.SmiSource.__init__, "__defaults__", (0.3,))  # its timeout, 5 s in use
    monkeypatch.setattr(gpu, "KILL_WAIT_S", 0.2)
    made: list[gpu.SmiSource] = []
    monkeypatch.setattr(gpu, "gpu_source", lambda: made.append(gpu.SmiSource(str(exe))) or made[-1])
    killed: list[subprocess.Popen[str]] = []
    kill = subprocess.Popen.kill
    if not dies_on_kill:
        monkeypatch.setattr(subprocess.Popen, "kill", lambda self: killed.append(self))
    schedule = Schedule(rounds=4, took=0.0)  # four rounds, the last wait for the stop
    records = Records()
    try:
        with Sampler(TelemetryConfig(host=False, interval_s=0.1), records, monotonic=schedule.monotonic, wait=schedule.wait):
            wait_for(lambda: len(schedule.waits) >= schedule.rounds)
        calls = [c for c in smi_calls(exe) if c.startswith("--query-gpu=index")]
        [source] = made
        if dies_on_kill:
            assert len(calls) == 4 and source.stuck == []
            assert records.unknown("gpu") == ["nvidia-smi did not answer within 0.3 s"]
            return
        assert len(calls) == 1, "no second run while the first is stuck"
        assert [p.pid for p in source.stuck] == [p.pid for p in killed] and len(killed) == 1
        assert records.unknown("gpu") == [
            "nvidia-smi did not answer within 0.3 s, nor exited within 0.2 s of being killed (stuck in the driver): "
            "left to exit on its own",
            f"nvidia-smi not run again: its last run (pid {killed[0].pid}) is still stuck in the driver since it was killed; "
            "run again once it exits",
        ]
    finally:
        for proc in killed:
            os.kill(proc.pid, signal.SIGKILL)  # its call returns at last
            proc.wait(30)
    monkeypatch.setattr(subprocess.Popen, "kill", kill)
    with pytest.raises(gpu.SourceError, match="did not answer within 0.3 s$"):
        source.sample()  # exited: it is run again (and times out, as the driver still hangs)
    assert len([c for c in smi_calls(exe) if c.startswith("--query-gpu=index")]) == 2


def test_one_nvidia_smi_call_that_times_out_costs_a_round_not_retry_s(tmp_path, monkeypatch):
    """After one nvidia-smi call timed out, the GPU rested retry_s (30 s) before it was asked again:
    a replay shorter than that lost all of its GPU samples to one slow call. It is asked again after
    its interval: the timeout is recorded, and the samples after it arrive."""
    from infertap.telemetry import gpu

    exe = slow_once(tmp_path / "bin", constant_gpus(120.0))
    gpus_on_path(monkeypatch, tmp_path, exe)
    monkeypatch.setattr(gpu.SmiSource.__init__, "__defaults__", (0.3,))  # its timeout, 5 s in use
    records = Records()
    with Sampler(TelemetryConfig(host=False, interval_s=0.05, retry_s=3600), records):
        wait_for(lambda: len(records.sampled("gpu")) >= 3)
    assert records.unknown("gpu") == ["nvidia-smi did not answer within 0.3 s"]
    first, *later = records.of("gpu")
    assert "unknown" in first and all(r["wall"] > first["wall"] for r in later), "the slow call first, the samples after it"
    assert all(["gpu_power_watts", {"gpu": "0"}, 120.0] in r["samples"] for r in later)


@pytest.mark.parametrize(
    ("failures", "rest"),
    [(1, 0.25), (2, 0.5), (3, 1.0), (7, 16.0), (8, 30.0), (9, 30.0), (10_000, 30.0)],
)
def test_a_source_failing_in_a_row_rests_from_its_interval_doubling_up_to_retry_s(failures, rest):
    """The first rest is the interval (one slow call costs a round), each failure in a row doubles
    it, and retry_s caps it, however long the source stays down."""
    assert backoff(0.25, failures, 30.0) == rest
    assert backoff(60.0, 1, 30.0) == 30.0  # an interval past retry_s: retry_s


def rounds_while_the_gpu_hangs(records: Records, hang: float | None) -> tuple[float, float]:
    """The stretch from the GPU's third answer (after which ``hung_after(..., rounds=3)`` hangs) to
    its failure, the time out (``hang`` None), or ``hang`` seconds long, once both sources read past it."""
    wait_for(lambda: len(records.sampled("gpu")) >= 3)
    start = records.sampled("gpu")[2]["wall"]
    if hang is None:
        wait_for(lambda: bool(records.unknown("gpu")))
        [end] = [r["wall"] for r in records.of("gpu") if "unknown" in r]
        return start, end
    wait_for(lambda: min(records.sampled("host")[-1]["wall"], records.sampled("gpu")[-1]["wall"]) > start + hang)
    return start, start + hang


def test_the_host_and_rapl_are_read_on_through_a_gpu_hang(tmp_path, monkeypatch):
    """All sources shared one thread: while nvidia-smi hung (up to its timeout), the host's CPU and
    RAPL rounds stopped too, a gap in the CPU side's energy that the GPU caused. Each source has its
    own thread now: the host is read as often through the GPU's hang as beside an nvidia-smi that
    answers (must match), and the GPU's own rounds are what stop (must differ)."""
    from infertap.telemetry import gpu

    monkeypatch.setattr(gpu.SmiSource.__init__, "__defaults__", (1.0,))  # its timeout, 5 s in use
    config = TelemetryConfig(interval_s=0.05, retry_s=3600)
    host, gpus, hang = {}, {}, None
    for name, exe in (
        ("hung", hung_after(tmp_path / "hung", constant_gpus(100.0), rounds=3)),
        ("answering", nvidia_smi(tmp_path / "ok", constant_gpus(100.0))),  # over as long a stretch
    ):
        gpus_on_path(monkeypatch, tmp_path, exe)
        monkeypatch.setattr("infertap.telemetry.host._RAPL", rapl_zone(tmp_path / "powercap"))
        records = Records()
        with Sampler(config, records):
            start, end = rounds_while_the_gpu_hangs(records, hang)
        hang = end - start
        host[name] = walls(records.sampled("host"), start, end)
        gpus[name] = walls(records.sampled("gpu"), start, end)
        assert records.sampled("host") and all(
            ["host_rapl_energy_joules", {"zone": "intel-rapl:0:package-0"}, 5.0] in r["samples"] for r in records.sampled("host")
        )
        assert records.unknown("gpu") == (["nvidia-smi did not answer within 1 s"] if name == "hung" else [])
    assert len(host["answering"]) >= 5, host  # about 20 in the second
    assert len(host["hung"]) >= len(host["answering"]) / 2, host  # as many: one round where the thread was shared
    assert gpus["hung"] == [] and len(gpus["answering"]) >= 5, gpus


def test_close_is_bounded_by_a_stuck_source_and_says_when_it_stopped_answering(tmp_path, monkeypatch):
    """A GPU whose driver never returns a reading (NVML stuck on a GPU fallen off the bus) held the
    one sampling thread for good, and close() waited 10 s on it, then read it once more on the
    caller's thread and was stuck there too: the recorder never exited. close() returns within
    close_s, the stuck source left to its daemon thread and recorded as having stopped answering
    when its reading was asked; the host is read to the end; and when the call returns at last,
    nothing more is written."""
    from datetime import UTC, datetime

    stuck = Hung(150_000)  # mW
    nvml = fake_nvml([nvml_device(power=stuck)])
    no_gpu(monkeypatch, tmp_path)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.setattr("infertap.telemetry.host._RAPL", rapl_zone(tmp_path / "powercap"))
    records = Records()
    before = set(telemetry_threads())
    sampler = Sampler(TelemetryConfig(interval_s=0.05, close_s=0.5), records).start()
    try:
        assert stuck.entered.wait(15)
        seen = len(records.sampled("host"))
        wait_for(lambda: len(records.sampled("host")) >= seen + 5)  # read on meanwhile
        closing = threading.Thread(target=sampler.close)
        closing.start()
        closing.join(60)
        assert not closing.is_alive(), "close() waits on a source stuck for good"
        written = list(records.items)
    finally:
        stuck.release()
    [stopped] = [r for r in records.of("gpu") if "unknown" in r]
    when = datetime.fromtimestamp(stopped["wall"], UTC).isoformat(timespec="milliseconds")
    assert stopped["unknown"] == f"stopped answering at {when}: asked then, it had not answered when sampling stopped"
    assert not records.sampled("gpu")
    assert stopped["wall"] < records.sampled("host")[-5]["wall"], "stamped when it was asked, not at close"
    mine = [t for t in set(telemetry_threads()) - before if t.name == "infertap-telemetry-gpu"]
    wait_for(lambda: not any(t.is_alive() for t in mine))  # its call returned at last: its thread ends
    assert records.items == written, "nothing written after close"
    assert nvml.calls["nvmlShutdown"] == 1, "its source closed by its own thread once it returned"


def test_start_waiting_for_the_openings_returns_past_open_s_on_one_that_hangs(tmp_path, monkeypatch):
    """NVML's init stuck in the driver: start() opened every source on its caller's thread and was
    stuck there, and with it the replay or recorder that started it. Asked to wait for the openings
    (as a replay does), it returns past open_s while the init is still stuck (the stand-in released
    only after), the GPU recorded as not opened; the host is sampled meanwhile; at close the GPU is
    recorded as having stopped answering when it was asked to open; once the init returns at last,
    its thread closes it and writes nothing."""
    from datetime import UTC, datetime

    stuck = Hung(None)
    nvml = fake_nvml([nvml_device()], init_hung=stuck)
    no_gpu(monkeypatch, tmp_path)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.setattr("infertap.telemetry.host._RAPL", rapl_zone(tmp_path / "powercap"))
    records = Records()
    sampler = Sampler(TelemetryConfig(interval_s=0.05, open_s=0.2, close_s=0.5), records)
    before = set(telemetry_threads())
    started = threading.Event()
    unknown_at_start: list[str] = []

    def start() -> None:
        sampler.start(wait=True)
        unknown_at_start.extend(records.unknown("gpu"))
        started.set()

    try:
        threading.Thread(target=start, daemon=True).start()
        assert stuck.entered.wait(15), "the GPU is opened"
        assert started.wait(15), "start() waits on a source's opening"
        wait_for(lambda: len(records.sampled("host")) >= 3)  # the other sources are read meanwhile
        sampler.close()
        written = list(records.items)
    finally:
        stuck.release()
    assert unknown_at_start == ["did not open within 0.2 s: sampling went on without it, and reads it if it opens"]
    not_opened, stopped = records.of("gpu")
    when = datetime.fromtimestamp(stopped["wall"], UTC).isoformat(timespec="milliseconds")
    assert stopped["unknown"] == f"stopped answering at {when}: asked to open then, it had not answered when sampling stopped"
    assert stopped["wall"] < not_opened["wall"] < records.sampled("host")[-1]["wall"], "stamped when it was asked to open"
    mine = [t for t in set(telemetry_threads()) - before if t.name == "infertap-telemetry-gpu"]
    wait_for(lambda: not any(t.is_alive() for t in mine))
    assert records.items == written, "nothing written after close"
    assert nvml.calls["nvmlShutdown"] == 1 and nvml.calls["nvmlDeviceGetPowerUsage"] == 0, "closed by its thread, not read"


def test_a_recorders_start_does_not_wait_for_an_nvml_init_that_hangs(tmp_path, monkeypatch):
    """A proxy's start waited up to open_s (5 s) on its caller's thread for an NVML init stuck in
    the driver. start_telemetry, as record and mitm call it, returns while the init is still stuck
    with nothing said of the GPU yet (a start that waited would have recorded it as not opened
    first); the sampler's own watch records it as not opened once open_s has passed, the host read
    meanwhile; released, the GPU is read."""
    stuck = Hung(None)
    no_gpu(monkeypatch, tmp_path)
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([nvml_device()], init_hung=stuck))
    monkeypatch.setattr("infertap.telemetry.host._RAPL", rapl_zone(tmp_path / "powercap"))
    records = Records()
    sampler = start_telemetry(True, None, (), 0.05, {}, records)
    assert sampler is not None
    try:
        assert records.unknown("gpu") == [], "start() waited on the stuck init"
        assert stuck.entered.wait(15), "the GPU is asked to open, on its own thread"
        wait_for(lambda: records.unknown("gpu") != [])
        assert records.unknown("gpu") == ["did not open within 5 s: sampling went on without it, and reads it if it opens"]
        assert records.sampled("host"), "the host is read meanwhile"
        stuck.release()
        wait_for(lambda: len(records.sampled("gpu")) >= 1)
    finally:
        stuck.release()
        sampler.close()


def test_a_source_slow_to_open_is_read_once_it_opens(tmp_path, monkeypatch):
    """An NVML init that takes longer than open_s: the run goes on without it, said so, and its
    samples come once it opens, stamped when read, not when its opening was asked (a counter's
    first sample stamped early read as a lower rate)."""
    slow = Hung(None)
    no_gpu(monkeypatch, tmp_path)
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([nvml_device()], init_hung=slow))
    records = Records()
    with Sampler(TelemetryConfig(host=False, interval_s=0.05, open_s=0.05), records):
        wait_for(lambda: records.unknown("gpu") != [])  # said by the sampler's watch, once open_s has passed
        assert records.unknown("gpu") == ["did not open within 0.05 s: sampling went on without it, and reads it if it opens"]
        assert not records.sampled("gpu")
        released = time.time()
        slow.release()
        wait_for(lambda: len(records.sampled("gpu")) >= 2)
    first = records.sampled("gpu")[0]
    assert ["gpu_power_watts", {"gpu": "0"}, 150.0] in first["samples"] and first["wall"] >= released


def test_a_source_that_breaks_as_it_opens_is_recorded_and_the_others_sampled(tmp_path, monkeypatch):
    """A source's opening that raised anything but SourceError (a bug, an unforeseen error of its
    library) came out of start(), and the recorder failed to start. It is recorded as a source
    failing in a read is, and the others are sampled."""
    gpus_on_path(monkeypatch, tmp_path, nvidia_smi(tmp_path / "bin", constant_gpus(150.0)))

    def broken(self: Any, engine_port: int | None = None) -> None:
        raise RuntimeError("psutil exploded")

    monkeypatch.setattr("infertap.telemetry.host.HostSource.__init__", broken)
    records = Records()
    with Sampler(TelemetryConfig(interval_s=0.05, retry_s=0.05), records):
        wait_for(lambda: len(records.sampled("gpu")) >= 3)
    assert records.unknown("host") == ["RuntimeError('psutil exploded')"]
    assert not records.sampled("host")


def test_start_does_not_wait_on_an_nvidia_smi_that_hangs(tmp_path, monkeypatch):
    """An nvidia-smi stuck in the driver from its first call (the stand-in never answers): start()
    returns with nothing said of the GPU, its hang not yet timed out (5 s) nor waited out (open_s);
    the host is read meanwhile; close records the GPU as having stopped answering when it was asked."""
    exe = nvidia_smi(tmp_path / "bin", constant_gpus(150.0), hang=True)
    gpus_on_path(monkeypatch, tmp_path, exe)
    monkeypatch.setattr("infertap.telemetry.host._RAPL", rapl_zone(tmp_path / "powercap"))
    records = Records()
    sampler = Sampler(TelemetryConfig(interval_s=0.05, close_s=0.5), records).start()
    try:
        assert records.unknown("gpu") == [], "start() waited on the hung nvidia-smi"
        wait_for(lambda: any(call.startswith("--query-gpu=") for call in smi_calls(exe)))  # it is asked, and hangs
        wait_for(lambda: len(records.sampled("host")) >= 3)
        assert not records.of("gpu"), "still hung: no round of it"
    finally:
        sampler.close()
    [stopped] = records.unknown("gpu")
    assert stopped.startswith("stopped answering at ") and stopped.endswith(
        ": asked then, it had not answered when sampling stopped"
    )
