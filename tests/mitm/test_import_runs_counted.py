"""Which runs a capture's configuration describes, where one of its runs carried no generation
request: a recording that only listed the models (GET /v1/models) or carried nothing at all, and a
HAR imported into its capture with `infertap import`. `compare` reads its energy over the runs of
generation requests and its configuration (all imported or not, why no snapshot) now over the same
ones; `info` and the claim card say why there is no engine snapshot by the runs that carried traffic.
Captures written by the project's own writer and its importer."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from infertap.analysis.machines import IMPORTED
from infertap.capture.hostfacts import host_facts
from infertap.capture.records import new_telemetry
from infertap.capture.writer import CaptureWriter
from tests.analysis_builders import JSON_HEADERS, body, exchange
from tests.mitm.test_import_machine import har, invoke, stdout
from tests.mitm.test_import_mixed import HAR_DEVICE
from tests.telemetry.test_energy_arithmetic import DCGM, LOCAL, groups, power, run

IMPORT = "imported from a file: an import probes no engine"
NO_PROBE = "recorded with --no-probe, or the probe failed"


def snapshot(wall: float) -> dict[str, Any]:
    """An engine snapshot as the recorder's probe writes it, of a local engine on this machine."""
    return {
        "type": "engine", "url": LOCAL, "wall": wall, "kind": "generic", "facts": {}, "unknown": [], "notes": [], "raw": {},
        "host": host_facts(), "host_is_engine_host": True, "labels": {}, "fingerprint": "0" * 16,
    }  # fmt: skip


def recording(
    path: Path,
    *,
    probed: bool,
    generation: bool | None,
    imported: bool = True,
    sampled: bool = False,
    labels: dict[str, str] | None = None,
    refused: bool = False,
) -> Path:
    """A recording (its engine probed or not) that carried a chat request (``generation``), only a
    GET /v1/models (False), or nothing (None), both of the local engine; its GPU's power sampled
    (``sampled``) from its start to the import's time, its header holding ``labels`` (``--label``),
    a chat request infertap refused (``refused``: a body over --max-body-mb, never sent); then
    (``imported``) a HAR of one chat request imported into it."""
    wall = time.time() - 120
    with CaptureWriter(path, recorder={"kind": "proxy", "upstream": LOCAL}, wall=wall, labels=labels) as w:
        if probed:
            w.write(snapshot(wall))
        for s in range(0, 121 if sampled else 0):
            w.write(new_telemetry("gpu", wall + s, [["gpu_power_watts", {"gpu": "0"}, 100.0]]))
        if refused:
            too_large = [(0.0, b'{"error": "request body too large"}')]
            w.write(exchange("refused", status=413, end="refused", chunks=too_large, headers=JSON_HEADERS, upstream=LOCAL))
        if generation:
            sent = body(content="other") if imported else body(model="m")  # alone, as B's request: a pair
            w.write(exchange("chat", request=sent, headers=JSON_HEADERS, upstream=LOCAL))
        elif generation is False:
            listed = [(5.0, b'{"object": "list", "data": []}')]
            w.write(
                exchange(
                    "models", method="GET", path="/v1/models", request=b"", chunks=listed, headers=JSON_HEADERS, upstream=LOCAL
                )
            )
    if not imported:
        return path
    file = har(path.parent / f"{path.name}.har", LOCAL, time.time() - 60)
    log = json.loads(file.read_text())
    log["log"]["entries"][0]["request"]["postData"]["text"] = body(model="m").decode()  # as B's request: a pair
    file.write_text(json.dumps(log))
    invoke("import", str(file), "--out", str(path))
    return path


def compared(a: Path, b: Path) -> dict[str, Any]:
    return json.loads(stdout("compare", str(a), str(b), "--json"))


def test_compare_describes_the_configuration_of_the_runs_its_figures_are_over(tmp_path):
    """A's figures are its import's only (the recording listed the models, no generation request):
    its energy said "imported", while its configuration counted the recording as traffic and showed
    this machine's CPU as the imported traffic's. The configuration is the counted runs' now: the
    host unknown, as imported. A recording that carried a chat request keeps its machine (must differ)."""
    b = run(tmp_path / "b", [(0, 1000)], [])
    found = {
        name: compared(recording(tmp_path / name, probed=True, generation=generation), b)
        for name, generation in (("listed", False), ("chatted", True))
    }
    listed, chatted = found["listed"], found["chatted"]
    assert listed["energy"]["telemetry"]["a"]["all_imported"], "the figures: the import's only"
    rows = {r["fact"]: r for r in listed["config"]["snapshots"]}
    assert rows["host cpu"]["a"] is None and rows["host cpu"]["why_unknown"] == {"A": IMPORTED}, rows["host cpu"]
    assert not chatted["energy"]["telemetry"]["a"]["all_imported"]
    rows = {r["fact"]: r for r in chatted["config"]["snapshots"]}
    assert rows["host cpu"]["a"] == host_facts()["cpu"] and "A" not in (rows["host cpu"].get("why_unknown") or {})


def test_no_snapshot_is_blamed_on_a_run_that_carried_no_traffic(tmp_path):
    """A recording with no engine snapshot that carried no chat request, a HAR imported beside it:
    compare, the card and `info` said the capture had none because it was "imported ...; recorded
    with --no-probe, or the probe failed", blaming a run that needed none. They say the import's
    reason alone; a recording that carried traffic is still named (must differ); a capture of no
    traffic says so."""
    b = run(tmp_path / "b", [(0, 1000)], [])
    listed = recording(tmp_path / "listed", probed=False, generation=False)
    empty = recording(tmp_path / "empty", probed=False, generation=None)
    chatted = recording(tmp_path / "chatted", probed=False, generation=True)
    assert compared(listed, b)["config"]["snapshot_missing_reason"]["A"] == IMPORT
    assert compared(chatted, b)["config"]["snapshot_missing_reason"]["A"] == f"{IMPORT}; {NO_PROBE}"

    def card(capture: Path) -> str:
        said = json.loads(stdout("claim", str(capture), "--json", "--cache-dir", str(tmp_path / "cache")))
        return said["runtime"]["unknown"]

    assert card(empty) == f"the capture has no engine snapshot ({IMPORT}): run `infertap enrich CAPTURE --engine URL`"
    assert f"({IMPORT}; {NO_PROBE})" in card(chatted)

    def info(capture: Path) -> str:
        return " ".join(invoke("info", str(capture)).split())

    assert f"no snapshot ({IMPORT}) server header" in info(empty)
    assert f"no snapshot ({IMPORT}; {NO_PROBE})" in info(chatted)
    nothing = tmp_path / "nothing"
    with CaptureWriter(nothing, recorder={"kind": "proxy", "upstream": LOCAL}):
        pass
    assert "no snapshot (no run carried any traffic: no engine served a request to describe)" in info(nothing)


def test_the_card_describes_the_runs_its_figures_are_over(tmp_path):
    """A recording that only listed the models (GET /v1/models), a HAR of a chat request imported
    into its capture: the card's figures and energy were the import's alone ("imported"), while its
    device named this machine's CPU, its measuring side the recording's proxy (of "2 runs of different
    recorders") and its snapshot "the engine of that run's traffic", counting the recording as traffic.
    The card now judges by the runs of its counted generation requests, as compare does: all imported,
    the device unknown, the import the measuring side, the snapshot's run said to carry none of the
    traffic (must differ). A recording that generated, with an import and alone, keeps its machine and
    its proxy (must match); each card says all imported exactly where compare does."""
    b = run(tmp_path / "b", [(0, 1000)], [])
    captures = {
        "listed": recording(tmp_path / "listed", probed=True, generation=False),
        "chatted": recording(tmp_path / "chatted", probed=True, generation=True),
        "alone": recording(tmp_path / "alone", probed=True, generation=True, imported=False),
    }
    cards = {name: card(capture, tmp_path) for name, capture in captures.items()}
    for name, capture in captures.items():  # one rule: compare's config and the card agree
        rows = {r["fact"]: r for r in compared(capture, b)["config"]["snapshots"]}
        assert (rows["host cpu"]["a"] is None) == (cards[name]["device"]["value"] is None), name
    listed, chatted, alone = cards["listed"], cards["chatted"], cards["alone"]
    assert listed["figures"]["telemetry"]["all_imported"], "the figures: the import's only"
    assert listed["device"] == {"value": None, "source": "none", "unknown": HAR_DEVICE}
    assert listed["measuring_side"]["value"]["recorder"] == "import" and "unknown" not in listed["measuring_side"]
    assert "different schedules" not in listed["concurrency"].get("unknown", "")
    assert "which carried none of the traffic" in listed["runtime"]["unknown"], listed["runtime"]

    assert not chatted["figures"]["runs"][0]["telemetry"]["all_imported"]
    assert chatted["device"]["value"]["cpu"] == host_facts()["cpu"]
    assert chatted["measuring_side"]["value"]["recorder"] == "proxy"
    assert "different recorders (proxy, import)" in chatted["measuring_side"]["unknown"]
    assert "the engine of that run's traffic; the engine of the imported run(s)" in chatted["runtime"]["unknown"]
    assert alone["device"]["value"]["cpu"] == host_facts()["cpu"]
    assert alone["measuring_side"]["value"]["recorder"] == "proxy" and "unknown" not in alone["measuring_side"]
    assert "probed by" not in (alone["runtime"].get("unknown") or "")


def card(capture: Path, tmp_path: Path) -> dict[str, Any]:
    return json.loads(stdout("claim", str(capture), "--json", "--cache-dir", str(tmp_path / "cache")))


def test_energy_judges_all_imported_by_the_runs_its_figures_are_over(tmp_path):
    """A recording that only listed the models of its local engine, its GPU sampled, and a HAR
    imported into its capture: energy judged "all imported" over every run holding exchanges, so the
    recording's loopback upstream made the engine local, and the import's energy unknown only as
    "an import" measured here, not as traffic of an unknown machine, as the card and compare say it.
    It judges by the counted runs now (must differ); a recording that generated keeps its engine on
    this machine, its own run measured by the GPU and the import's still unmeasured (must match)."""
    listed = recording(tmp_path / "listed", probed=False, generation=False, sampled=True)
    chatted = recording(tmp_path / "chatted", probed=False, generation=True, sampled=True)
    (imported,) = groups([listed], tmp_path)
    assert imported["energy"]["joules"] is None and imported["energy"]["unknown"] == IMPORTED, imported["energy"]
    recorded, imported = sorted(groups([chatted], tmp_path), key=lambda g: g["key"]["recorder"] != "proxy")
    assert recorded["energy"]["devices"] == 1 and recorded["energy"]["joules"] is not None, recorded["energy"]
    assert imported["energy"]["joules"] is None and "is an import" in imported["energy"]["unknown"], imported["energy"]
    assert card(listed, tmp_path)["figures"]["telemetry"]["all_imported"]


def test_the_cards_labels_are_those_of_the_runs_it_describes(tmp_path):
    """A recording run with `--label gpu=...` that only listed the models, a HAR imported into its
    capture: the card is all imported, yet its device showed the recording's label as the device's
    ("only the labels describe its device"), which describes the recording machine, not the one the
    imported traffic ran on. The labels are read from the runs the card describes: the device is
    unknown (must differ); a recording that generated keeps its label beside its machine's facts (must match)."""
    gpu = {"gpu": "NVIDIA H200"}
    listed = card(recording(tmp_path / "listed", probed=True, generation=False, labels=gpu), tmp_path)
    chatted = card(recording(tmp_path / "chatted", probed=True, generation=True, labels=gpu), tmp_path)
    assert listed["figures"]["telemetry"]["all_imported"]
    assert listed["device"] == {"value": None, "source": "none", "unknown": HAR_DEVICE}, listed["device"]
    assert chatted["device"]["value"]["labels"] == gpu and chatted["device"]["value"]["cpu"] == host_facts()["cpu"]


def test_energy_places_the_engine_by_the_runs_its_figures_are_over(tmp_path):
    """A recording that only listed the models of a loopback engine, then a run of chat requests
    to a remote engine whose DCGM exporter was scraped: energy took the upstreams of every run, so
    the engine was "on several machines" and its energy unknown. It reads them from the counted runs
    now: the remote engine's exporter measures it, as it does the run alone (must match); a capture
    whose generating runs went to both machines is still on several (must differ)."""
    dcgm = power(DCGM, 400.0, source="exporter", name="DCGM_FI_DEV_POWER_USAGE")
    remote = "http://gpu-node:8000"
    listed = recording(tmp_path / "listed", probed=False, generation=False, imported=False)
    run(listed, [(0, 4000)], dcgm, upstream=remote)
    alone = run(tmp_path / "alone", [(0, 4000)], dcgm, upstream=remote)
    both = run(run(tmp_path / "both", [(0, 4000)], []), [(0, 4000)], dcgm, upstream=remote)

    def energy(capture: Path) -> list[dict[str, Any]]:
        return [g["energy"] for g in groups([capture], tmp_path / f"{capture.name}-cache") if g["requests"]]

    assert [e["joules"] for e in energy(listed)] == [pytest.approx(400.0 * 4)], energy(listed)
    assert [e["joules"] for e in energy(alone)] == [pytest.approx(400.0 * 4)]
    assert [e["joules"] for e in energy(both)] == [None, None]
    assert all("engines on several machines" in e["unknown"] for e in energy(both)), energy(both)


def test_the_card_counts_the_engines_of_the_runs_it_describes(tmp_path):
    """A recording that only listed the models, its engine probed, then a run of chat requests to an
    engine of another configuration (another fingerprint): the card said "the capture holds 2 engine
    configurations", counting the snapshot of a run that carried none of its figures. It counts the
    snapshots of the runs it describes now: one engine (must differ); where both runs generated,
    two (must match the old sentence)."""

    def chats(path: Path) -> Path:
        with CaptureWriter(path, recorder={"kind": "proxy", "upstream": LOCAL}) as w:
            w.write({**snapshot(w.started_wall), "fingerprint": "1" * 16})
            w.write(exchange("chat", request=body(model="m"), headers=JSON_HEADERS, upstream=LOCAL))
        return path

    listed = chats(recording(tmp_path / "listed", probed=True, generation=False, imported=False))
    chatted = chats(recording(tmp_path / "chatted", probed=True, generation=True, imported=False))
    several = "the capture holds 2 engine configurations"
    assert several not in (card(listed, tmp_path)["runtime"].get("unknown") or ""), card(listed, tmp_path)["runtime"]
    assert several in card(chatted, tmp_path)["runtime"]["unknown"]


def test_info_names_the_recorders_of_the_runs_that_carried_traffic(tmp_path):
    """`info`'s traffic_recorders (why there is no engine snapshot) counted every run holding an
    exchange: a recording whose only request infertap refused, or that only listed the models,
    beside an import, was blamed ("recorded with --no-probe, or the probe failed") though it sent
    the engine nothing. It counts the runs the card and compare describe (``counted_runs``); a
    recording that carried a chat request is still named (must differ), and one of refusals alone,
    with no traffic beside it, is what the capture holds (must stay)."""

    def info(capture: Path) -> tuple[list[str], str]:
        said = json.loads(stdout("info", str(capture), "--json"))
        return said["traffic_recorders"], " ".join(invoke("info", str(capture)).split())

    for name, refused, generation in (("refused", True, None), ("listed", False, False)):
        recorders, text = info(recording(tmp_path / name, probed=False, generation=generation, refused=refused))
        assert recorders == ["import"] and f"no snapshot ({IMPORT}) server header" in text, (name, recorders, text)
    recorders, text = info(recording(tmp_path / "chatted", probed=False, generation=True, refused=True))
    assert recorders == ["import", "proxy"] and f"no snapshot ({IMPORT}; {NO_PROBE})" in text
    recorders, text = info(recording(tmp_path / "alone", probed=False, generation=None, refused=True, imported=False))
    assert recorders == ["proxy"] and f"no snapshot ({NO_PROBE})" in text
