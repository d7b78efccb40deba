"""The machine's GPUs in each writer's run header, and what energy makes of a list it lacks, through
the commands a user runs (``record``, ``replay``, ``enrich``, then
``stats --json``). The GPUs are a stand-in ``nvidia-smi`` and the CPU packages' RAPL counter a
stand-in powercap tree (this machine has neither); the writers, analysis and CLI are the real ones.

A run whose machine's GPU set is unknown is not measured by its CPU packages' RAPL counters alone:
its GPUs, if any, may have drawn most of the power (analysis/energy.py).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from infertap.capture.reader import CaptureReader
from infertap.cli import cli
from tests.fake_engines import llama_server_app
from tests.fake_upstream import ServerThread
from tests.helpers import write_capture
from tests.telemetry.stand_ins import SMI_FORMAT, hung_listing, no_gpu, nvidia_smi, rapl_zone, smi_calls
from tests.telemetry.test_energy_arithmetic import PACKAGE0, counter, run

HERE = socket.gethostname()
HUNG = "nvidia-smi did not answer within 2 s"


def invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def energies(capture: Path, *by: str) -> list[dict[str, Any]]:
    """Each group's energy as `infertap stats --json` prints it."""
    return [g["energy"] for g in json.loads(invoke("stats", str(capture), *by, "--json"))["groups"]]


def headers(capture: Path) -> list[dict[str, Any]]:
    return [r for r in CaptureReader(capture).records() if r["type"] == "header"]


def run_ids(capture: Path) -> dict[str, str]:
    """Each run's id by its recorder's kind."""
    return {h["recorder"]["kind"]: h["run_id"] for h in headers(capture)}


def test_a_hung_nvidia_smi_holds_records_start_once_and_does_not_read_as_no_gpu(record, fake, tmp_path, monkeypatch):
    """`infertap record` asked a hung nvidia-smi for the GPUs before it served, and again without
    the VBIOS when the first timed out (seconds each), then wrote its silence as no nvidia-smi, a
    machine with no GPU. It asks once, waits 2 s at most, and the header says the list is unknown
    and why; one that answers is listed (must match)."""
    app, url = fake
    path = os.environ["PATH"]
    hosts, asked = {}, {}
    for name, exe in (("hung", hung_listing(tmp_path / "hung")), ("listed", nvidia_smi(tmp_path / "ok", [], gpus=2))):
        monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{path}")
        rec = record(url, "--no-probe", name=name)  # waits for it to listen
        assert httpx.post(f"{rec.url}/v1/chat/completions", json={"model": "m", "messages": []}, timeout=10).status_code == 200
        rec.stop()
        [header] = headers(rec.out)
        hosts[name] = header["host"]
        asked[name] = [call for call in smi_calls(exe) if call.startswith("--query-gpu=name")]
    assert hosts["hung"]["gpus"] is None and hosts["hung"]["gpus_unknown"] == HUNG
    assert asked["hung"] == [f"--query-gpu=name,driver_version,memory.total,vbios_version {SMI_FORMAT}"]
    assert [g["name"] for g in hosts["listed"]["gpus"]] == ["NVIDIA H200"] * 2 and "gpus_unknown" not in hosts["listed"]
    assert asked["listed"] == asked["hung"]


def test_a_replay_whose_nvidia_smi_did_not_list_the_gpus_is_not_measured_by_rapl_alone(fake, tmp_path, monkeypatch):
    """A replay on a machine whose nvidia-smi never listed the GPUs: its header said none (no
    nvidia-smi), and the CPU packages' RAPL counter alone was the run's energy. The list is unknown,
    and so is the energy, saying why; with no nvidia-smi at all RAPL measures the run (must match)."""
    app, url = fake
    source = tmp_path / "src"
    write_capture(source, [{"offset_s": i * 0.05, "body": {"model": "m", "messages": []}} for i in range(4)])
    path = os.environ["PATH"]  # its sleep, for the hung stand-in
    no_gpu(monkeypatch, tmp_path)
    monkeypatch.setattr("infertap.telemetry.host._RAPL", rapl_zone(tmp_path / "powercap"))
    out = {}
    for name in ("none", "hung"):
        if name == "hung":
            monkeypatch.setenv("PATH", f"{hung_listing(tmp_path / 'bin').parent}{os.pathsep}{path}")
        out[name] = tmp_path / name
        invoke("replay", str(source), "--target", url, "--out", str(out[name]), "--no-probe", "--telemetry-interval", "0.05")
    [header] = headers(out["hung"])
    assert header["host"]["gpus"] is None and header["host"]["gpus_unknown"] == HUNG
    [none] = energies(out["none"])
    assert none["kinds"] == ["RAPL"] and none["joules"] == pytest.approx(0.0)  # the stand-in's counter did not move
    [hung] = energies(out["hung"])
    assert hung["joules"] is None and hung["devices"] == 0
    assert hung["unknown"] == (
        f"the GPUs of {HERE.lower()} are unknown (its run header: {HUNG}), so its CPU packages' RAPL counters alone "
        f"do not measure run {header['run_id']} of {out['hung']}"
    )


@pytest.fixture
def engine() -> Iterator[str]:
    """An engine the probe knows (llama-server's documented answers)."""
    with ServerThread(llama_server_app()) as server:
        yield server.url


def test_enrich_lists_the_gpus_of_an_old_capture_only_where_nvidia_smi_answers(engine, tmp_path, monkeypatch):
    """`infertap enrich` on a capture older than the GPU list: its probe's snapshot lists this
    machine's GPUs, read for the capture's machine. Where nvidia-smi did not answer, the snapshot
    said none (no nvidia-smi) and RAPL alone measured the run; now it says the list is unknown and
    the run stays unmeasured. Listed GPUs leave it unmeasured; no nvidia-smi lets RAPL measure it (must match)."""
    rapl = counter("host_rapl_energy_joules", PACKAGE0, (0, 100.0), (2000, 120.0), (4000, 140.0), source="host")
    path = os.environ["PATH"]  # its sleep, for the hung stand-in
    no_gpu(monkeypatch, tmp_path)
    found = {}
    for name, exe in (
        ("none", None),
        ("hung", hung_listing(tmp_path / "hung")),
        ("listed", nvidia_smi(tmp_path / "ok", [], gpus=2)),
    ):
        monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{path}" if exe else str(tmp_path / "empty-bin"))
        capture = run(tmp_path / name, [(0, 4000)], rapl, gpus="unlisted")
        invoke("enrich", str(capture), "--engine", engine)
        snapshot = next(r for r in CaptureReader(capture).records() if r["type"] == "engine")
        found[name] = (snapshot["host"], energies(capture)[0], run_ids(capture)["test"], capture)
    host, e, _, _ = found["none"]
    assert host["gpus"] is None and "gpus_unknown" not in host
    assert e["joules"] == pytest.approx(40.0) and e["kinds"] == ["RAPL"]
    host, e, run_id, capture = found["hung"]
    assert host["gpus"] is None and host["gpus_unknown"] == HUNG and e["joules"] is None
    assert e["unknown"] == (
        f"the GPUs of {HERE.lower()} are unknown (its run header has no GPU list: written before infertap listed a "
        f"machine's GPUs; its engine snapshot: {HUNG}), so its CPU packages' RAPL counters alone do not measure run {run_id} of {capture}"
    )
    host, e, run_id, capture = found["listed"]
    assert len(host["gpus"]) == 2 and e["joules"] is None
    assert e["unknown"].startswith(f"gpu 0 has no power samples in run {run_id} of {capture}")
