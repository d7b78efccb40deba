"""A recording, then a run of another recorder appended to its capture that carried none of its
traffic (its only requests refused by infertap, or a list of the models), on another machine or in
front of another engine: the card and energy took that run's snapshot (the newest) and machine as
the capture's. They take those of the runs its figures are over (``machines.counted_runs``), and of
runs that hold no exchange (an ``enrich``); a run that carried traffic still counts (must match).
Captures written by the project's own writer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from infertap.analysis.claim import claim
from infertap.capture.hostfacts import host_facts
from infertap.capture.records import new_telemetry
from infertap.capture.writer import CaptureWriter
from tests.analysis_builders import JSON_HEADERS, body, exchange
from tests.telemetry.test_energy_arithmetic import GPU0, LOCAL, groups, power, run

OTHER = "http://10.1.2.3:8000"  # another machine's engine


def appended(path: Path, traffic: str, *, snapshot: bool, sampled: bool = False) -> Path:
    """A proxy run appended to ``path`` on the machine ``box-b``: its engine at ``OTHER`` probed
    (``snapshot``), its own GPU sampled (``sampled``, after the recording), and ``traffic``: a
    chat request ``refused`` by infertap, the models ``listed``, or a ``chat`` sent."""
    facts = {**host_facts(), "hostname": "box-b", "gpus": None}
    with mock.patch("infertap.capture.writer.host_facts", lambda: facts), CaptureWriter(path, recorder={"kind": "proxy"}) as w:
        if snapshot:
            w.write(
                {
                    "type": "engine", "url": OTHER, "wall": w.started_wall, "kind": "vllm", "facts": {}, "unknown": [],
                    "notes": [], "raw": {}, "host": facts, "host_is_engine_host": False, "labels": {}, "fingerprint": "f" * 16,
                }
            )  # fmt: skip
        for t in range(0, 4001, 250) if sampled else ():
            w.write(new_telemetry("gpu", w.started_wall + 10 + t / 1e3, [["gpu_power_watts", GPU0, 300.0]]))
        if traffic == "refused":
            too_large = [(0.0, b'{"error": "request body too large"}')]
            w.write(exchange("b", status=413, end="refused", chunks=too_large, headers=JSON_HEADERS, upstream=OTHER))
        elif traffic == "listed":
            listed = [(5.0, b'{"object": "list", "data": []}')]
            w.write(
                exchange("b", method="GET", path="/v1/models", request=b"", chunks=listed, headers=JSON_HEADERS, upstream=OTHER)
            )
        else:
            w.write(exchange("b", request=body(model="m"), headers=JSON_HEADERS, upstream=OTHER))
    return path


def recorded(path: Path) -> Path:
    """A recording of this machine's engine (probed), its GPU at 100 W through its one request."""
    return run(path, [(0, 4000)], power(GPU0, 100.0), snapshot_gpus=1)


def card(path: Path, tmp_path: Path) -> dict[str, Any]:
    return json.loads(json.dumps(claim(path, cache_dir=tmp_path / "cache"), default=str))


@pytest.mark.parametrize("traffic", ["refused", "listed"])
def test_the_card_and_energy_describe_the_recordings_engine_not_an_appended_runs(tmp_path: Path, traffic: str) -> None:
    path = appended(recorded(tmp_path / "cap"), traffic, snapshot=True)
    said = card(path, tmp_path)
    assert (said["runtime"]["value"]["kind"], said["runtime"]["source"].split(" (")[0]) == (
        "generic",
        f"engine snapshot of {LOCAL}",
    )
    assert said["device"]["value"]["hostname"] == host_facts()["hostname"]
    assert "engine configurations" not in json.dumps(said)
    [g] = groups([path], tmp_path)  # the recording's run: only it carried traffic
    assert g["energy"]["joules"] == pytest.approx(100.0 * 4), g["energy"]


def test_a_run_that_carried_traffic_still_names_its_engine(tmp_path: Path) -> None:
    """Must match what was: an appended run that sent a chat request is one the figures are over,
    so its snapshot is the newest of the capture's engines, and two configurations are said."""
    said = card(appended(recorded(tmp_path / "cap"), "chat", snapshot=True), tmp_path)
    assert said["runtime"]["value"]["kind"] == "vllm" and "2 engine configurations" in said["runtime"]["unknown"]


def test_energy_counts_the_machine_of_the_runs_that_carried_traffic(tmp_path: Path) -> None:
    """No snapshot in the appended run: its machine (box-b, its GPU sampled after the recording) was
    taken as the engine's too, and the recording's energy was left unknown for want of box-b's
    samples in it. The recording's machine alone is the engine's now; where the appended run sent a
    chat request to the same local engine, both machines are (must differ)."""
    refused = appended(recorded(tmp_path / "refused"), "refused", snapshot=False, sampled=True)
    [g] = groups([refused], tmp_path)
    assert g["energy"]["joules"] == pytest.approx(100.0 * 4) and not g["energy"].get("unknown"), g["energy"]
    chatted = recorded(tmp_path / "chatted")
    facts = {**host_facts(), "hostname": "box-b", "gpus": None}
    with mock.patch("infertap.capture.writer.host_facts", lambda: facts), CaptureWriter(chatted, recorder={"kind": "proxy"}) as w:
        for t in range(0, 4001, 250):
            w.write(new_telemetry("gpu", w.started_wall + 10 + t / 1e3, [["gpu_power_watts", GPU0, 300.0]]))
        w.write(exchange("b", request=body(model="m"), headers=JSON_HEADERS, upstream=LOCAL, sent_ms=10_000))
    first = groups([chatted], tmp_path / "c")[0]
    # The capture's runs are on two machines, each with its own "gpu 0": the text names which lacks samples.
    assert first["energy"]["joules"] is None and "gpu 0 of box-b has no power samples in run" in first["energy"]["unknown"]
