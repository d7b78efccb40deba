"""The machine's GPUs in each writer's run header, and what energy makes of a list it lacks, through
the commands a user runs (``record``, ``replay``, ``replay --ray``, ``import``, ``enrich``, then
``stats --json``). The GPUs are a stand-in ``nvidia-smi`` and the CPU packages' RAPL counter a
stand-in powercap tree (this machine has neither); the writers, analysis and CLI are the real ones.

A run whose machine's GPU set is unknown is not measured by its CPU packages' RAPL counters alone:
its GPUs, if any, may have drawn most of the power (analysis/energy.py).
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from infertap.capture.reader import CaptureReader
from infertap.cli import cli
from tests.extras import needs
from tests.fake_engines import llama_server_app
from tests.fake_upstream import ServerThread
from tests.helpers import write_capture
from tests.telemetry.stand_ins import SMI_FORMAT, hung_listing, no_gpu, nvidia_smi, rapl_zone, smi_calls
from tests.telemetry.test_energy_arithmetic import LOCAL, PACKAGE0, counter, run

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


def _har(path: Path, started: float, n: int) -> Path:
    """A HAR of ``n`` chat requests to the engine at LOCAL, one a second from ``started`` (wall s)."""
    from datetime import UTC, datetime

    def entry(i: int) -> dict[str, Any]:
        at = datetime.fromtimestamp(started + i, UTC).isoformat().replace("+00:00", "Z")
        answer = {
            "id": "c",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
        }
        return {
            "startedDateTime": at,
            "time": 500,
            "request": {
                "method": "POST",
                "url": f"{LOCAL}/v1/chat/completions",
                "httpVersion": "HTTP/1.1",
                "headers": [],
                "postData": {"mimeType": "application/json", "text": json.dumps({"model": "m", "messages": []})},
            },
            "response": {"status": 200, "headers": [], "content": {"mimeType": "application/json", "text": json.dumps(answer)}},
        }

    path.write_text(json.dumps({"log": {"version": "1.2", "entries": [entry(i) for i in range(n)]}}))
    return path


def test_an_import_claims_no_gpus_and_is_not_measured_by_the_telemetry_of_the_capture_it_joins(tmp_path):
    """An import's header held this machine's facts with no word of its GPUs, and its run, appended
    to a capture whose recorder sampled RAPL over the same time, was measured by it, though its
    traffic was not recorded here. Its header says the list is unknown (not listed), and its run is
    unmeasured, saying why; the recorder's own run is measured as before (must match)."""
    import time

    base = time.time() - 60
    rapl = counter("host_rapl_energy_joules", PACKAGE0, (0, 100.0), (2000, 120.0), (4000, 140.0), source="host")
    capture = run(tmp_path / "cap", [(0, 4000)], rapl, base=base)
    invoke("import", str(_har(tmp_path / "x.har", base + 1, 2)), "--out", str(capture))
    ids = run_ids(capture)
    imported = next(h for h in headers(capture) if h["recorder"]["kind"] == "import")
    assert imported["host"]["gpus"] is None
    assert imported["host"]["gpus_unknown"] == "not listed: an import of a har file, its traffic not recorded on this machine"
    by_run = {e.get("unknown") is None: e for e in energies(capture, "--by", "run")}
    assert by_run[True]["joules"] == pytest.approx(40.0) and by_run[True]["kinds"] == ["RAPL"]
    assert by_run[False]["joules"] is None and by_run[False]["unknown"] == (
        f"run {ids['import']} of {capture} is an import: its traffic was not recorded on this machine, whose telemetry is no measure of it"
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


@pytest.fixture(scope="module")
def ray_on_gpu_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A local Ray cluster whose workers find a stand-in nvidia-smi listing two GPUs (their power
    query answers nothing: no GPU sample), as workers on GPU hosts would; the process that starts
    it, the replay's driver, does not (its PATH as before once the cluster is up)."""
    ray = needs("ray", "scale")
    exe = nvidia_smi(tmp_path_factory.mktemp("ray-gpus") / "bin", [], gpus=2)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


def test_a_ray_shard_lists_the_gpus_of_the_host_it_ran_on(ray_on_gpu_hosts, fake, tmp_path, monkeypatch):
    """`replay --ray`: each shard's run header listed no GPUs; the driver's, which samples for them
    on a machine with no nvidia-smi, said none, and its RAPL counter alone was the energy of shards
    that ran on GPU hosts. Each shard's header lists its host's GPUs, so its run is unmeasured,
    saying which GPU has no power samples; the driver's header still says none (must match)."""
    app, url = fake
    source = tmp_path / "src"
    write_capture(source, [{"offset_s": i * 0.05, "body": {"model": "m", "messages": []}} for i in range(4)])
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    monkeypatch.setattr("infertap.telemetry.host._RAPL", rapl_zone(tmp_path / "powercap"))
    out = tmp_path / "out"
    invoke(
        "replay", str(source), "--target", url, "--out", str(out), "--no-probe",
        "--ray", ray_on_gpu_hosts, "--shards", "2", "--telemetry-interval", "0.05",
    )  # fmt: skip
    shards = [h for h in headers(out) if "shard" in h["recorder"]]
    [driver] = [h for h in headers(out) if h["recorder"]["kind"] == "telemetry"]
    assert len(shards) == 2 and all([g["name"] for g in h["host"]["gpus"]] == ["NVIDIA H200"] * 2 for h in shards)
    assert driver["host"]["gpus"] is None and "gpus_unknown" not in driver["host"]
    groups = {g["key"]["run"]: g["energy"] for g in json.loads(invoke("stats", str(out), "--json"))["groups"]}
    assert sorted(groups) == sorted(h["run_id"] for h in shards)  # a group per shard's run
    for run_id, e in groups.items():
        assert e["joules"] is None and e["devices"] == 0
        assert e["unknown"].startswith(
            f"gpu 0 has no power samples in run {run_id} of {out} (zone intel-rapl:0:package-0's cover it)"
        )
