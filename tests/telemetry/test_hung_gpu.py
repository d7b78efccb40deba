"""A GPU whose driver hangs while a run is recorded, through the commands a user runs (``replay``,
``record``, then ``stats --json``). The GPU is a stand-in (an ``nvidia-smi`` that stops answering
mid-run, an NVML whose readings never return) and the CPU packages' RAPL counter a stand-in
powercap tree (this machine has neither); the recorders, the sampler, analysis and the CLI are real.

Every source was sampled on one thread: a hung nvidia-smi stopped the host's RAPL rounds with it, so
the CPU side had a gap the GPU caused, and a GPU stuck for good kept the recorder from exiting.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import httpx
from click.testing import CliRunner

from infertap.capture.reader import CaptureReader
from infertap.cli import cli
from tests.helpers import write_capture
from tests.telemetry.stand_ins import constant_gpus, gpus_on_path, hung_after, hung_nvml, nvidia_smi, rapl_zone


def invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def stats(capture: Path) -> dict[str, Any]:
    """The one group of `infertap stats --json`."""
    [group] = json.loads(invoke("stats", str(capture), "--json"))["groups"]
    return group


def machine_unread(group: dict[str, Any]) -> list[str]:
    """What the group's telemetry could not read of the machine (not the fake engine's absent /metrics)."""
    return [why for why in group["telemetry_unread"] if why.startswith(("gpu:", "host:"))]


def test_a_gpu_that_hangs_mid_replay_leaves_its_own_gap_not_the_cpus(fake, tmp_path, monkeypatch):
    """nvidia-smi hangs mid-run and is still hung when the replay ends (its 5 s timeout comes after).
    The host's rounds stopped with it, RAPL read nothing from the hang to the close, and neither
    covered the run: no energy, no word of why. RAPL is read to the end now, and `stats` says the
    GPU's samples stop short of the run while the CPU package's cover it, and that nvidia-smi did
    not answer; with nvidia-smi answering, the GPU measures the run (must match)."""
    _, url = fake
    source = tmp_path / "src"
    write_capture(source, [{"offset_s": i * 0.1, "body": {"model": "m", "messages": []}} for i in range(30)])
    found = {}
    for name, exe in (
        ("answering", nvidia_smi(tmp_path / "ok", constant_gpus(100.0))),
        ("hung", hung_after(tmp_path / "hung", constant_gpus(100.0), rounds=10)),  # about 0.5 s in, of 3 s
    ):
        gpus_on_path(monkeypatch, tmp_path, exe)
        monkeypatch.setattr("infertap.telemetry.host._RAPL", rapl_zone(tmp_path / "powercap"))
        out = tmp_path / name
        invoke("replay", str(source), "--target", url, "--out", str(out), "--no-probe", "--telemetry-interval", "0.05")
        [header] = [r for r in CaptureReader(out).records() if r["type"] == "header"]
        found[name] = (stats(out), header["run_id"], out)
    group, _, _ = found["answering"]
    assert group["energy"]["kinds"] == ["NVML or nvidia-smi"] and group["energy"]["joules"] > 0
    assert group["energy"].get("unknown") is None and machine_unread(group) == []
    group, run_id, out = found["hung"]
    energy = group["energy"]
    assert energy["joules"] is None, energy
    assert re.fullmatch(
        rf"gpu 0(?:'s power samples cover \d+% of| has no power samples in) run {run_id} of {re.escape(str(out))} "
        r"\(zone intel-rapl:0:package-0's cover it\)",
        energy["unknown"],
    ), energy["unknown"]
    assert machine_unread(group) == ["gpu: nvidia-smi did not answer within 5 s"]


def test_record_exits_with_a_gpu_stuck_in_its_driver_and_says_when_it_stopped(record, fake, tmp_path, monkeypatch):
    """NVML stuck in the driver from the first reading: the one sampling thread was stuck with it,
    and `infertap record`, stopped, waited 10 s for it, then read the GPU once more and was stuck
    for good, its capture never closed. It exits, its capture closed cleanly; the host was read to
    the end; the GPU is recorded as stopped answering when its reading was asked, which `stats` says."""
    _, url = fake
    nvml = hung_nvml(tmp_path / "nvml")  # found first by the recorder's process
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(nvml), os.environ.get("PYTHONPATH")])))
    rec = record(url, "--no-probe", "--telemetry-interval", "0.05")
    answer = httpx.post(f"{rec.url}/v1/chat/completions", json={"model": "m", "messages": []}, timeout=10)
    assert answer.status_code == 200
    assert rec.proc.stop(timeout=60) == 0, rec.proc.log_tail()
    reader = CaptureReader(rec.out)
    records = list(reader.records())
    assert reader.closed_cleanly
    gpu = [r for r in records if r["type"] == "telemetry" and r["source"] == "gpu"]
    [stopped] = gpu
    assert re.fullmatch(r"stopped answering at \S+: asked then, it had not answered when sampling stopped", stopped["unknown"]), (
        stopped
    )
    [exchange] = [r for r in records if r["type"] == "exchange"]
    host = [r["wall"] for r in records if r["type"] == "telemetry" and r["source"] == "host"]
    assert stopped["wall"] < exchange["wall"] < max(host), "the GPU stopped before the traffic; the host read past it"
    assert machine_unread(stats(rec.out)) == [f"gpu: {stopped['unknown']}"]
