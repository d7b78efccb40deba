"""Telemetry sources one at a time: Prometheus text (an engine's /metrics, a DCGM exporter),
GPUs through nvidia-smi and through NVML, the host's RAPL counters. The GPU is a stand-in (an
nvidia-smi answering the documented CSV, a pynvml-shaped module); the rest is real."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from infertap.telemetry.gpu import NvmlSource, SmiSource, gpu_source
from infertap.telemetry.host import HostSource
from infertap.telemetry.prometheus import PrometheusSource, parse
from infertap.telemetry.samples import PartialRound, Sample, SourceError
from tests import sdk_shapes
from tests.fake_upstream import ServerThread
from tests.telemetry.stand_ins import (
    MISSING,
    NVML_ERROR_NOT_SUPPORTED,
    SMI_FIELDS,
    SMI_FIELDS_OLD,
    DcgmExporter,
    Exposition,
    NVMLError,
    constant_gpus,
    fake_nvml,
    gpus_on_path,
    holding_output,
    no_gpu,
    nvidia_smi,
    nvml_device,
    smi_calls,
)
from tests.telemetry.test_sampler import wait_for

# vLLM's exposition (prometheus_client's text format), abridged: gauges, a counter, a histogram.
VLLM = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-8B"} 3.0
vllm:num_requests_running{engine="1",model_name="Qwen/Qwen3-8B"} 5.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-8B"} 2.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-8B"} 0.4375
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="Qwen/Qwen3-8B"} 17.0
# HELP vllm:e2e_request_latency_seconds Histogram of e2e request latency in seconds.
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{engine="0",le="0.3",model_name="Qwen/Qwen3-8B"} 1.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="0.5",model_name="Qwen/Qwen3-8B"} 2.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="Qwen/Qwen3-8B"} 4.0
vllm:e2e_request_latency_seconds_count{engine="0",model_name="Qwen/Qwen3-8B"} 4.0
vllm:e2e_request_latency_seconds_sum{engine="0",model_name="Qwen/Qwen3-8B"} 2.75
"""


def by_name(samples: list[Sample]) -> dict[str, list[Sample]]:
    out: dict[str, list[Sample]] = {}
    for s in samples:
        out.setdefault(s.name, []).append(s)
    return out


# -- Prometheus -------------------------------------------------------------------------------------


def test_prometheus_text_keeps_gauges_counters_and_histogram_summaries_but_not_buckets():
    samples = parse(VLLM)
    names = by_name(samples)
    assert not [s for s in samples if s.name.endswith("_bucket")], "histogram buckets must be dropped"
    assert set(names) == {
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:num_preemptions_total",
        "vllm:e2e_request_latency_seconds_count",
        "vllm:e2e_request_latency_seconds_sum",
    }
    # The histogram's summaries are kept, with their labels; the counter is its raw running total.
    assert names["vllm:e2e_request_latency_seconds_sum"] == [
        Sample("vllm:e2e_request_latency_seconds_sum", {"engine": "0", "model_name": "Qwen/Qwen3-8B"}, 2.75)
    ]
    assert [s.value for s in names["vllm:e2e_request_latency_seconds_count"]] == [4.0]
    assert [s.value for s in names["vllm:num_preemptions_total"]] == [17.0]
    # One series per label set: the two engines' gauges are told apart, never merged.
    running = {s.labels["engine"]: s.value for s in names["vllm:num_requests_running"]}
    assert running == {"0": 3.0, "1": 5.0}
    assert names["vllm:kv_cache_usage_perc"][0].labels == {"engine": "0", "model_name": "Qwen/Qwen3-8B"}


def test_two_expositions_that_differ_in_one_value_parse_differently():
    assert parse(VLLM) == parse(VLLM)
    changed = VLLM.replace(
        'vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-8B"} 2.0',
        'vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-8B"} 9.0',
    )
    assert parse(changed) != parse(VLLM)
    [waiting] = by_name(parse(changed))["vllm:num_requests_waiting"]
    assert waiting.value == 9.0


@pytest.mark.parametrize(
    "text",
    [
        "<html><body><h1>404 Not Found</h1></body></html>",
        '{"detail": "Not Found"}',
        'vllm:num_requests_running{engine="0" 3\n',
        "vllm:num_requests_running three\n",
    ],
    ids=["html", "json", "unclosed-labels", "not-a-number"],
)
def test_text_that_is_not_prometheus_is_a_source_error_naming_where(text):
    with pytest.raises(SourceError, match=r"^http://gpu-node:9400/metrics: not Prometheus text"):
        parse(text, "http://gpu-node:9400/metrics")


def test_sample_names_are_recorded_as_the_endpoint_exposes_them():
    exporter = DcgmExporter(200.0)
    llama = "# HELP llamacpp:n_tokens_max Largest observed sequence length\n# TYPE llamacpp:n_tokens_max counter\nllamacpp:n_tokens_max 38\n"
    names = {s.name for s in parse(exporter.text() + llama)}
    assert "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" in names
    assert "llamacpp:n_tokens_max" in names


def test_prometheus_source_reads_an_exporter_and_says_why_it_cannot():
    exporter = DcgmExporter(200.0)
    with ServerThread(exporter) as server:
        source = PrometheusSource(server.url + "/metrics", "exporter")
        try:
            samples = by_name(source.sample())
            assert [s.value for s in samples["DCGM_FI_DEV_POWER_USAGE"]] == [200.0]
            assert samples["DCGM_FI_DEV_POWER_USAGE"][0].labels["gpu"] == "0"
            wrong = PrometheusSource(server.url + "/not-metrics", "exporter")
            with pytest.raises(SourceError, match=r"/not-metrics answered 404$"):  # no hint about llama-server's flag
                wrong.sample()
            wrong.close()
            engine = PrometheusSource(server.url + "/not-metrics", "engine")
            with pytest.raises(SourceError, match=r"/not-metrics answered 404$"):  # llama-cpp-python's: no such route
                engine.sample()
            engine.close()
        finally:
            source.close()


def test_the_hint_about_llama_servers_flag_is_given_only_for_its_501():
    """llama-server without --metrics answers 501; llama-cpp-python has no /metrics (404), and a hint
    naming llama-server's flag sent its users looking for a flag their engine doesn't have."""
    no_metrics = {"code": 501, "message": "This server does not support metrics endpoint.", "type": "not_supported_error"}
    page = Exposition(json.dumps(sdk_shapes.llamacpp_error({"error": no_metrics})), status=501)
    with ServerThread(page) as server:
        for status, said in ((501, " (llama-server serves /metrics only with --metrics)"), (404, "")):
            page.status = status
            engine = PrometheusSource(server.url + "/metrics", "engine")
            try:
                with pytest.raises(SourceError) as caught:
                    engine.sample()
                assert str(caught.value) == f"{server.url}/metrics answered {status}{said}"
            finally:
                engine.close()


def test_a_page_that_is_not_prometheus_text_is_an_error_not_samples():
    page = Exposition("<html>login required</html>")
    with ServerThread(page) as server:
        source = PrometheusSource(server.url + "/metrics", "engine")
        with pytest.raises(SourceError, match="not Prometheus text"):
            source.sample()
        page.text = "llamacpp:requests_processing 1\n"  # the same endpoint, now answering
        assert source.sample() == [Sample("llamacpp:requests_processing", {}, 1.0)]
        source.close()


def test_credentials_in_an_exporter_url_never_reach_the_message():
    page = Exposition(status=503)
    with ServerThread(page) as server:
        port = server.url.rsplit(":", 1)[1]
        url = f"http://admin:hunter2@127.0.0.1:{port}/metrics?token=s3cr3t"
        source = PrometheusSource(url, "exporter")
        with pytest.raises(SourceError) as answered:
            source.sample()
        source.close()
    assert "answered 503" in str(answered.value)
    refused = PrometheusSource(url, "exporter", timeout=1.0)  # the server is gone: connection refused
    with pytest.raises(SourceError) as unreachable:
        refused.sample()
    refused.close()
    for message in (str(answered.value), str(unreachable.value)):
        assert "hunter2" not in message and "s3cr3t" not in message, message
        assert f"127.0.0.1:{port}/metrics" in message


# -- nvidia-smi -------------------------------------------------------------------------------------


def test_nvidia_smi_csv_becomes_scaled_samples_per_gpu(tmp_path):
    exe = nvidia_smi(
        tmp_path / "bin",
        [
            "0, 312.45, 87, 40000, 1980, 65, 0x0000000000000004",
            "1, 71.20, 3, 1000, 345, 40, 0x0000000000000001",
        ],
    )
    samples = SmiSource(str(exe)).sample()
    got = {(s.name, s.labels["gpu"]): s.value for s in samples}
    assert got == {
        ("gpu_power_watts", "0"): 312.45,
        ("gpu_utilization_percent", "0"): 87.0,
        ("gpu_memory_used_bytes", "0"): 40000 * 1024 * 1024,  # MiB -> bytes
        ("gpu_sm_clock_mhz", "0"): 1980.0,
        ("gpu_temperature_celsius", "0"): 65.0,
        ("gpu_clock_event_reasons", "0"): 4.0,  # hex bitmask
        ("gpu_power_watts", "1"): 71.2,
        ("gpu_utilization_percent", "1"): 3.0,
        ("gpu_memory_used_bytes", "1"): 1000 * 1024 * 1024,
        ("gpu_sm_clock_mhz", "1"): 345.0,
        ("gpu_temperature_celsius", "1"): 40.0,
        ("gpu_clock_event_reasons", "1"): 1.0,
    }
    assert smi_calls(exe) == [f"--query-gpu={SMI_FIELDS} --format=csv,noheader,nounits"]


def test_cells_nvidia_smi_cannot_fill_are_skipped_and_the_rest_kept(tmp_path):
    exe = nvidia_smi(
        tmp_path / "bin",
        ["0, [N/A], 12, 2048, [Not Supported], 51, [Not Supported]", "1, 250.00, [N/A], 4096, 1410, [N/A], 0x0"],
    )
    got = {(s.name, s.labels["gpu"]): s.value for s in SmiSource(str(exe)).sample()}
    assert got == {
        ("gpu_utilization_percent", "0"): 12.0,
        ("gpu_memory_used_bytes", "0"): 2048 * 1024 * 1024,
        ("gpu_temperature_celsius", "0"): 51.0,
        ("gpu_power_watts", "1"): 250.0,
        ("gpu_memory_used_bytes", "1"): 4096 * 1024 * 1024,
        ("gpu_sm_clock_mhz", "1"): 1410.0,
        ("gpu_clock_event_reasons", "1"): 0.0,
    }


@pytest.mark.parametrize("reject_on", ["stdout", "stderr"])
def test_a_driver_before_535_is_asked_the_older_reasons_field_and_only_once_refused(tmp_path, reject_on):
    exe = nvidia_smi(
        tmp_path / "bin", ["0, 100.00, 50, 1024, 1410, 60, 0x0000000000000020"], old_driver=True, reject_on=reject_on
    )
    source = SmiSource(str(exe))
    first = {s.name: s.value for s in source.sample()}
    second = {s.name: s.value for s in source.sample()}
    assert first == second
    assert first["gpu_clock_event_reasons"] == 0x20 and first["gpu_power_watts"] == 100.0
    new, old = (f"--query-gpu={fields} --format=csv,noheader,nounits" for fields in (SMI_FIELDS, SMI_FIELDS_OLD))
    assert smi_calls(exe) == [new, old, old], "after one refusal the older field is asked directly"


def test_the_newer_field_is_kept_when_the_driver_accepts_it(tmp_path):
    exe = nvidia_smi(tmp_path / "bin", ["0, 100.00, 50, 1024, 1410, 60, 0x0"])
    source = SmiSource(str(exe))
    source.sample()
    source.sample()
    assert all("clocks_event_reasons.active" in call for call in smi_calls(exe))


def test_nvidia_smi_failing_loses_that_round_with_its_message(tmp_path):
    message = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    exe = nvidia_smi(tmp_path / "bin", [], fail=message)
    with pytest.raises(PartialRound, match=r"nvidia-smi exited 9: NVIDIA-SMI has failed because it couldn't communicate") as lost:
        SmiSource(str(exe)).sample()
    assert lost.value.samples == [] and "asked again next round" in str(lost.value)
    assert len(smi_calls(exe)) == 1  # a failure that is not about the reasons field: no second try


def test_nvidia_smi_that_does_not_answer_in_time_fails_the_source(tmp_path):
    exe = nvidia_smi(tmp_path / "bin", constant_gpus(100.0), hang=True)
    with pytest.raises(SourceError, match=r"nvidia-smi did not answer within 0.5 s"):
        SmiSource(str(exe), timeout=0.5).sample()


def test_an_nvidia_smi_that_does_not_exit_when_killed_holds_the_gpus_thread_no_longer_than_a_second(tmp_path, monkeypatch):
    """An nvidia-smi stuck in the driver (uninterruptible) exits only once its call returns, kill or
    not, and subprocess.run waited for it after its kill without end: the GPU's sampling thread was
    held for as long, past the timeout. The wait after the kill is bounded: the round fails saying
    so, the run is kept in ``stuck`` and reaped once it exits. This machine can't make a process
    that outlives SIGKILL: the stand-in's kill is made to reach nothing, as the driver's hold does."""
    exe = nvidia_smi(tmp_path / "bin", constant_gpus(100.0), hang=True)
    source = SmiSource(str(exe), timeout=0.3)
    killed: list[int] = []
    failed: list[str] = []

    def sample() -> None:
        try:
            source.sample()
        except SourceError as exc:
            failed.append(str(exc))

    with monkeypatch.context() as m:
        m.setattr(subprocess.Popen, "kill", lambda self: killed.append(self.pid))
        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        try:
            thread.join(30)
            assert not thread.is_alive(), "the GPU's thread waits on an nvidia-smi that does not exit when killed"
            assert failed == [
                "nvidia-smi did not answer within 0.3 s, nor exited within 1 s of being killed (stuck in the driver): "
                "left to exit on its own"
            ]
            [stuck] = source.stuck
            assert [stuck.pid] == killed and stuck.poll() is None, "it still runs"
        finally:
            for pid in killed:
                os.kill(pid, signal.SIGKILL)  # its call returns at last
            thread.join(30)
    wait_for(lambda: _state(killed[0]) == "Z")  # exited, not yet reaped
    source.close()
    assert source.stuck == [] and _state(killed[0]) is None, "reaped once it exited: no zombie left"


def test_an_nvidia_smi_whose_child_holds_its_output_is_only_timed_out(tmp_path):
    """A run of nvidia-smi that exits when killed while a process it started holds its output open
    is no stuck one (must match a plain timeout): the pipes are not waited on after the kill."""
    exe = holding_output(tmp_path / "bin", constant_gpus(100.0))
    source = SmiSource(str(exe), timeout=0.3)
    try:
        with pytest.raises(SourceError) as timed_out:
            source.sample()
    finally:
        holder = tmp_path / "bin" / "holder.pid"
        if holder.exists():
            os.kill(int(holder.read_text()), signal.SIGKILL)
    assert str(timed_out.value) == "nvidia-smi did not answer within 0.3 s" and source.stuck == []


def _state(pid: int) -> str | None:
    """A process's state letter (``Z``: a zombie, exited and not reaped), None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0]
    except FileNotFoundError:
        return None


@pytest.mark.parametrize(
    ("rows", "named"),
    [
        (["0, 100.00, 50, 1024, 1410, 60, 0x0", "1, abc, 12, 2048, 1410, 60, 0x0"], "'abc'"),  # a cell no number
        (["0, 100.00, 50, 1024, 1410, 60, 0x0", "NVIDIA-SMI couldn't find libnvidia-ml.so library"], "NVIDIA-SMI couldn"),
        (["0, 100.00, 50, 1024, 1410, 60, 0x0", "1, 250.00, 12"], "3 of 7 cells"),  # a line cut short
    ],
)
def test_an_nvidia_smi_answer_that_is_not_its_csv_loses_that_part_and_says_so(tmp_path, rows, named):
    exe = nvidia_smi(tmp_path / "bin", rows)
    with pytest.raises(PartialRound, match="not its --query-gpu CSV") as lost:
        SmiSource(str(exe)).sample()
    assert named in str(lost.value) and "asked again next round" in str(lost.value)
    kept = {(s.name, s.labels["gpu"]): s.value for s in lost.value.samples}
    assert kept[("gpu_power_watts", "0")] == 100.0, "the GPU it did answer for is kept"
    assert ("gpu_power_watts", "1") not in kept


def test_an_nvidia_smi_answer_in_its_csv_is_no_partial_round(tmp_path):
    exe = nvidia_smi(
        tmp_path / "bin", ["0, [N/A], 12, 2048, [Not Supported], 51, [Unknown Error]", "1, 250.00, 3, 10, 1, 2, 0x0"]
    )
    assert {s.name for s in SmiSource(str(exe)).sample() if s.labels["gpu"] == "1"} >= {"gpu_power_watts"}


def test_nvidia_smi_failing_once_answers_the_next_round(tmp_path):
    exe = nvidia_smi(
        tmp_path / "bin", constant_gpus(100.0), fail_once="Unable to determine the device handle for GPU0000:01:00.0"
    )
    source = SmiSource(str(exe))
    with pytest.raises(PartialRound, match="Unable to determine the device handle"):
        source.sample()
    assert {s.name: s.value for s in source.sample()}["gpu_power_watts"] == 100.0


def test_gpu_source_falls_back_to_nvidia_smi_and_says_when_there_is_neither(tmp_path, monkeypatch):
    exe = nvidia_smi(tmp_path / "bin", ["0, 100.00, 50, 1024, 1410, 60, 0x0"])
    gpus_on_path(monkeypatch, tmp_path, exe)
    source = gpu_source()
    assert isinstance(source, SmiSource)
    assert {s.name for s in source.sample()} >= {"gpu_power_watts", "gpu_memory_used_bytes"}
    no_gpu(monkeypatch, tmp_path)
    with pytest.raises(
        SourceError, match="no GPU telemetry: NVML unavailable .*, amdsmi unavailable .*, and no nvidia-smi on PATH"
    ):
        gpu_source()


def test_gpu_source_prefers_nvml_when_it_initialises(tmp_path, monkeypatch):
    exe = nvidia_smi(tmp_path / "bin", ["0, 100.00, 50, 1024, 1410, 60, 0x0"])
    gpus_on_path(monkeypatch, tmp_path, exe)
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([nvml_device()]))
    assert isinstance(gpu_source(), NvmlSource)
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([nvml_device()], init_error=9))  # no driver
    assert isinstance(gpu_source(), SmiSource)


# -- NVML -------------------------------------------------------------------------------------------


def test_nvml_readings_are_scaled_to_watts_joules_and_bytes():
    nvml = fake_nvml([nvml_device(), nvml_device(power=45_500, energy=2_500, event_reasons=0)])
    samples = NvmlSource(nvml).sample()
    got = {(s.name, s.labels["gpu"]): s.value for s in samples}
    assert got == {
        ("gpu_power_watts", "0"): 150.0,  # mW
        ("gpu_energy_joules", "0"): 1_000_000.0,  # mJ
        ("gpu_utilization_percent", "0"): 87.0,
        ("gpu_memory_used_bytes", "0"): float(40 * 1024**3),
        ("gpu_sm_clock_mhz", "0"): 1980.0,
        ("gpu_temperature_celsius", "0"): 65.0,
        ("gpu_clock_event_reasons", "0"): 4.0,
        ("gpu_power_watts", "1"): 45.5,
        ("gpu_energy_joules", "1"): 2.5,
        ("gpu_utilization_percent", "1"): 87.0,
        ("gpu_memory_used_bytes", "1"): float(40 * 1024**3),
        ("gpu_sm_clock_mhz", "1"): 1980.0,
        ("gpu_temperature_celsius", "1"): 65.0,
        ("gpu_clock_event_reasons", "1"): 0.0,
    }


def test_a_reading_nvml_refuses_is_not_asked_again_and_the_others_still_are():
    nvml = fake_nvml([nvml_device(energy=NVMLError(NVML_ERROR_NOT_SUPPORTED))])
    source = NvmlSource(nvml)
    rounds = [{s.name: s.value for s in source.sample()} for _ in range(3)]
    assert all(r == rounds[0] for r in rounds)
    assert "gpu_energy_joules" not in rounds[0]
    assert set(rounds[0]) == {
        "gpu_power_watts",
        "gpu_utilization_percent",
        "gpu_memory_used_bytes",
        "gpu_sm_clock_mhz",
        "gpu_temperature_celsius",
        "gpu_clock_event_reasons",
    }
    assert nvml.calls["nvmlDeviceGetTotalEnergyConsumption"] == 1, "a refused reading is asked once"
    assert nvml.calls["nvmlDeviceGetPowerUsage"] == 3


def test_nvml_failing_to_initialise_is_a_source_error():
    nvml = fake_nvml([nvml_device()], init_error=9)  # NVML_ERROR_DRIVER_NOT_LOADED
    with pytest.raises(SourceError, match=r"^NVML: NVML error 9$"):
        NvmlSource(nvml)


def test_closing_nvml_shuts_it_down():
    nvml = fake_nvml([nvml_device()])
    source = NvmlSource(nvml)
    source.close()
    assert nvml.calls["nvmlShutdown"] == 1


def test_a_reading_one_gpu_refuses_is_still_read_on_the_others():
    nvml = fake_nvml([nvml_device(), nvml_device(energy=NVMLError(NVML_ERROR_NOT_SUPPORTED))])
    source = NvmlSource(nvml)
    for _ in range(3):
        energy = [s for s in source.sample() if s.name == "gpu_energy_joules"]
        assert [s.labels["gpu"] for s in energy] == ["0"]


def test_nvml_on_a_driver_before_535_reads_the_throttle_reasons():
    nvml = fake_nvml([nvml_device(event_reasons=MISSING, throttle_reasons=0x20)])
    source = NvmlSource(nvml)
    for _ in range(2):
        reasons = [s.value for s in source.sample() if s.name == "gpu_clock_event_reasons"]
        assert reasons == [32.0]


# -- the host ---------------------------------------------------------------------------------------


def test_rapl_package_counters_are_read_in_joules_and_sub_zones_and_the_platform_skipped(tmp_path, monkeypatch):
    powercap = tmp_path / "powercap"
    for zone, name, microjoules in (
        ("intel-rapl:0", "package-0", 123_456_789),
        ("intel-rapl:1", "package-1", 5_000_000),
        ("intel-rapl:0:0", "core", 99),  # a sub-zone of package 0: already counted in it
        ("intel-rapl:2", "psys", 250_000_000),  # the whole platform (a laptop's), packages included
    ):
        (powercap / zone).mkdir(parents=True)
        (powercap / zone / "name").write_text(name + "\n")
        (powercap / zone / "energy_uj").write_text(f"{microjoules}\n")
    monkeypatch.setattr("infertap.telemetry.host._RAPL", powercap)
    source = HostSource()
    rapl = {s.labels["zone"]: s.value for s in source.sample() if s.name == "host_rapl_energy_joules"}
    assert rapl == {"intel-rapl:0:package-0": 123.456789, "intel-rapl:1:package-1": 5.0}
    (powercap / "intel-rapl:1" / "energy_uj").write_text("6500000\n")  # the counter moved on
    rapl = {s.labels["zone"]: s.value for s in source.sample() if s.name == "host_rapl_energy_joules"}
    assert rapl == {"intel-rapl:0:package-0": 123.456789, "intel-rapl:1:package-1": 6.5}


def test_the_host_is_sampled_without_rapl(tmp_path, monkeypatch):
    monkeypatch.setattr("infertap.telemetry.host._RAPL", tmp_path / "none")
    samples = HostSource().sample()
    assert [s.name for s in samples] == ["host_cpu_percent"]
    assert 0.0 <= samples[0].value <= 100.0


# -- AMD (amdsmi) ------------------------------------------------------------------------------------


def fake_amdsmi(devices: list[dict[str, Any]], *, init_error: bool = False) -> ModuleType:
    """A module shaped like ROCm's amdsmi bindings: dict-returning readers, its own exception."""
    amd = ModuleType("amdsmi")

    class AmdSmiException(Exception):
        pass

    def init() -> None:
        if init_error:
            raise AmdSmiException("AMDSMI_STATUS_DRIVER_NOT_LOADED")

    def reader(key: str) -> Any:
        def read(handle: int) -> Any:
            value = devices[handle][key]
            if isinstance(value, Exception):
                raise AmdSmiException(str(value))
            return value

        return read

    amd.AmdSmiException = AmdSmiException  # type: ignore[attr-defined]
    amd.amdsmi_init = init  # type: ignore[attr-defined]
    amd.amdsmi_shut_down = lambda: None  # type: ignore[attr-defined]
    amd.amdsmi_get_processor_handles = lambda: list(range(len(devices)))  # type: ignore[attr-defined]
    for key in ("power_info", "energy_count", "gpu_activity", "gpu_vram_usage"):
        setattr(amd, f"amdsmi_get_{key}", reader(key))
    return amd


def amd_device(**over: Any) -> dict[str, Any]:
    device = {
        "power_info": {"current_socket_power": 612, "average_socket_power": 600, "gfx_voltage": 900},
        "energy_count": {"energy_accumulator": 1_000_000, "counter_resolution": 15.3, "timestamp": 1},
        "gpu_activity": {"gfx_activity": 97, "umc_activity": 40, "mm_activity": "N/A"},
        "gpu_vram_usage": {"vram_total": 196_592, "vram_used": 150_000},
    }
    device.update(over)
    return device


def test_amdsmi_readings_are_scaled_like_nvidias():
    from infertap.telemetry.gpu import AmdSource

    older = amd_device(
        power_info={"current_socket_power": "N/A", "average_socket_power": 300},
        energy_count={"power": 2_000_000, "counter_resolution": 15.3},
    )
    got = {(s.name, s.labels["gpu"]): s.value for s in AmdSource(fake_amdsmi([amd_device(), older])).sample()}
    assert got == {
        ("gpu_power_watts", "0"): 612.0,
        ("gpu_energy_joules", "0"): pytest.approx(15.3),  # 1e6 ticks of 15.3 µJ
        ("gpu_utilization_percent", "0"): 97.0,
        ("gpu_memory_used_bytes", "0"): 150_000 * 1024 * 1024,
        ("gpu_power_watts", "1"): 300.0,  # an MI200's current power is N/A: its average
        ("gpu_energy_joules", "1"): pytest.approx(30.6),  # the accumulator's older key
        ("gpu_utilization_percent", "1"): 97.0,
        ("gpu_memory_used_bytes", "1"): 150_000 * 1024 * 1024,
    }


def test_an_amd_reading_that_fails_is_skipped_for_that_gpu_only(monkeypatch):
    from infertap.telemetry.gpu import AmdSource

    source = AmdSource(fake_amdsmi([amd_device(energy_count=RuntimeError("AMDSMI_STATUS_NOT_SUPPORTED")), amd_device()]))
    for _ in range(2):
        names = {(s.name, s.labels["gpu"]) for s in source.sample()}
        assert ("gpu_energy_joules", "0") not in names and ("gpu_energy_joules", "1") in names
        assert ("gpu_power_watts", "0") in names


def test_gpu_source_takes_amdsmi_when_nvml_is_absent(tmp_path, monkeypatch):
    from infertap.telemetry.gpu import AmdSource

    no_gpu(monkeypatch, tmp_path)
    monkeypatch.setitem(sys.modules, "amdsmi", fake_amdsmi([amd_device()]))
    assert isinstance(gpu_source(), AmdSource)
    monkeypatch.setitem(sys.modules, "amdsmi", fake_amdsmi([amd_device()], init_error=True))
    with pytest.raises(SourceError, match="amdsmi unavailable .*AMDSMI_STATUS_DRIVER_NOT_LOADED"):
        gpu_source()


NVML_ERROR_TIMEOUT = 10  # an error that may pass: not the device refusing the reading


def test_a_reading_that_fails_for_a_passing_reason_is_skipped_that_round_only():
    from infertap.telemetry.samples import PartialRound

    device = nvml_device(power=NVMLError(NVML_ERROR_TIMEOUT))
    source = NvmlSource(fake_nvml([device, nvml_device()]))
    with pytest.raises(PartialRound, match="gpu 0 gpu_power_watts: NVML error 10") as failed:
        source.sample()
    kept = {(s.name, s.labels["gpu"]) for s in failed.value.samples}
    assert ("gpu_power_watts", "0") not in kept and {("gpu_energy_joules", "0"), ("gpu_power_watts", "1")} <= kept
    device["power"] = 200_000  # the driver answers again
    for _ in range(2):
        power = {s.labels["gpu"]: s.value for s in source.sample() if s.name == "gpu_power_watts"}
        assert power == {"0": 200.0, "1": 150.0}


def test_an_amd_reading_that_fails_for_a_passing_reason_is_asked_again():
    from infertap.telemetry.gpu import AmdSource
    from infertap.telemetry.samples import PartialRound

    device = amd_device(energy_count=RuntimeError("AMDSMI_STATUS_BUSY - Device busy"))
    source = AmdSource(fake_amdsmi([device]))
    with pytest.raises(PartialRound, match="gpu 0 gpu_energy_joules: AMDSMI_STATUS_BUSY") as failed:
        source.sample()
    assert ("gpu_power_watts", 612.0) in [(s.name, s.value) for s in failed.value.samples]
    device["energy_count"] = {"energy_accumulator": 2_000_000, "counter_resolution": 15.3}
    assert [s.value for s in source.sample() if s.name == "gpu_energy_joules"] == [pytest.approx(30.6)]
