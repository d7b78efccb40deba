"""Imports beside recordings, as a user makes them: `infertap record` (a stand-in llama-server) and
`infertap import` of a HAR into the same capture, then `stats`, `claim` and `compare`. Whether all of
a capture's traffic was imported is one rule (``machines.imported_only`` over the runs that hold its
exchanges) in every command: a run that carried none makes no import a recording, and the engine
snapshot is said to be the run's that took it, never the import's."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from infertap.analysis.machines import IMPORTED
from infertap.capture.reader import CaptureReader
from infertap.capture.records import new_telemetry
from infertap.capture.writer import CaptureWriter
from infertap.mitm.importer import recorded_on
from tests.analysis_builders import JSON_HEADERS, body, exchange
from tests.fake_engines import llama_server_app
from tests.fake_upstream import ServerThread
from tests.mitm.test_import_machine import ANSWER, CHAT, har, invoke, stdout
from tests.telemetry.test_energy_arithmetic import LOCAL, PACKAGE0, counter, run

HAR_DEVICE = (
    "the traffic was imported from a har file, which does not say the machine it ran on: the recording machine is unknown"
)


def card(capture: Path, tmp_path: Path) -> dict[str, Any]:
    return json.loads(stdout("claim", str(capture), "--json", "--cache-dir", str(tmp_path / "cache")))


def run_ids(capture: Path) -> dict[str, str]:
    """Each run's recorder kind, by run id."""
    return {r["run_id"]: r["recorder"]["kind"] for r in CaptureReader(capture).records() if r["type"] == "header"}


def snapshot_time(capture: Path) -> str:
    [snap] = [r for r in CaptureReader(capture).records() if r["type"] == "engine"]
    return datetime.fromtimestamp(snap["wall"], UTC).isoformat(timespec="seconds")


def words(*args: str) -> str:
    return " ".join(invoke(*args).split())


def test_an_import_beside_a_recording_that_carried_no_traffic_is_all_imported(record, tmp_path):
    """A recording stopped before any request, a HAR then imported into its capture: stats said its
    energy was not measured, the traffic being imported, while the card named this machine as its
    engine's device and compare compared this machine's CPU as the import's, counting the empty
    recording as traffic. Every command now judges by the runs that hold exchanges: the device and
    hosts are unknown, the snapshot said to be the empty recording's, and compare says each side's
    energy as stats does. A recording that carried traffic keeps its machine (must differ)."""
    with ServerThread(llama_server_app()) as server:
        empty = record(server.url, "--no-telemetry", name="empty")
        assert empty.stop() == 0
        full = record(server.url, "--no-telemetry", name="full")
        httpx.post(f"{full.url}/v1/chat/completions", json=CHAT, timeout=30).raise_for_status()
        assert full.stop() == 0
    invoke("import", str(har(tmp_path / "a.har", LOCAL, time.time() - 60)), "--out", str(empty.out))
    invoke("import", str(har(tmp_path / "b.har", LOCAL, time.time() - 60)), "--out", str(full.out))
    [proxy] = [r for r, kind in run_ids(empty.out).items() if kind == "proxy"]

    cards = {"empty": card(empty.out, tmp_path), "full": card(full.out, tmp_path)}
    assert cards["empty"]["device"] == {"value": None, "source": "none", "unknown": HAR_DEVICE}
    probed = (
        f"probed by run {proxy} (proxy) at {snapshot_time(empty.out)}, which carried none of the traffic: "
        "the imported file does not say which engine served it"
    )
    assert f"the engine's kind, version and digest {probed}" in cards["empty"]["runtime"]["unknown"]
    assert cards["full"]["device"]["value"]["hostname"] is not None, "a recording's own machine, kept"
    side = {name: c["measuring_side"] for name, c in cards.items()}
    assert side["empty"]["value"]["recorder"] == "import" and "unknown" not in side["empty"], "the run that carried it"
    assert side["empty"]["value"]["clock"] == "coarse: one chunk per response, times from the file"
    assert side["full"]["value"]["recorder"] == "proxy" and "different recorders (proxy, import)" in side["full"]["unknown"]

    rows = {r["fact"]: r for r in json.loads(stdout("compare", str(empty.out), str(full.out), "--json"))["config"]["snapshots"]}
    assert rows["host cpu"]["a"] is None and rows["host cpu"]["why_unknown"] == {"A": IMPORTED}
    assert rows["host cpu"]["b"] is not None
    assert rows["version"]["probed"]["A"] == probed
    text = words("compare", str(empty.out), str(full.out))
    assert "energy A: not measured: imported from a file" in text and "no power telemetry" not in text
    assert "energy B: not sampled in 1 of 2 runs (recorded with --no-telemetry)" in text
    [group] = json.loads(invoke("stats", str(empty.out), "--json"))["groups"]
    assert group["telemetry"]["all_imported"] and "energy: not measured: imported" in words("stats", str(empty.out))


def test_a_recording_with_an_import_appended_says_whose_engine_was_probed(record, tmp_path):
    """A HAR imported into a capture recorded here: the card and compare showed the recording's engine
    snapshot as the engine of every run, the import's too, which its file does not name. They say the
    snapshot is the recording's run's, and the import's engine unknown (the card's device once: it said
    the imported runs' machine unknown twice); a recording alone says neither
    (must differ), its facts the same (must match). stats said a group of such a recording, made with
    --no-telemetry, and the import had "no power telemetry in its other runs" where it had no other
    run: it says each run's reason alone, and "no power telemetry" where a run was looked at (must differ)."""
    with ServerThread(llama_server_app()) as server:
        recs = []
        for name in ("mixed", "alone"):
            rec = record(server.url, "--no-telemetry", name=name)
            httpx.post(f"{rec.url}/v1/chat/completions", json=CHAT, timeout=30).raise_for_status()
            assert rec.stop() == 0
            recs.append(rec.out)
    mixed, alone = recs
    invoke("import", str(har(tmp_path / "a.har", LOCAL, time.time() - 60)), "--out", str(mixed))
    kinds = run_ids(mixed)
    [proxy] = [r for r, kind in kinds.items() if kind == "proxy"]
    [imported] = [r for r, kind in kinds.items() if kind == "import"]
    probed = (
        f"probed by run {proxy} (proxy) at {snapshot_time(mixed)}: the engine of that run's traffic; "
        f"the engine of the imported run(s) {imported} is unknown (the imported file does not say it)"
    )

    cards = {"mixed": card(mixed, tmp_path), "alone": card(alone, tmp_path)}
    for field, what in (("runtime", "the engine's kind, version and digest"), ("model", "the engine's models and file")):
        assert f"{what} {probed}" in cards["mixed"][field]["unknown"], cards["mixed"][field]
        assert "probed by" not in (cards["alone"][field].get("unknown") or "")
    assert cards["mixed"]["runtime"]["value"]["version"] == cards["alone"]["runtime"]["value"]["version"] is not None
    assert f"the machine's facts {probed}" in cards["mixed"]["device"]["unknown"]
    # Said once: the device also said "the 1 imported run(s): the traffic was imported from a har file, ...".
    assert cards["mixed"]["device"]["unknown"].count("imported run(s)") == 1, cards["mixed"]["device"]
    assert HAR_DEVICE not in cards["mixed"]["device"]["unknown"]

    rows = {r["fact"]: r for r in json.loads(stdout("compare", str(alone), str(mixed), "--json"))["config"]["snapshots"]}
    assert rows["version"]["probed"] == {"B": probed} and not rows["version"]["differs"]
    assert rows["host cpu"]["probed"] == {"B": probed} and rows["host cpu"]["b"] is not None, "the recording's machine"
    assert f"of B {probed}" in words("compare", str(alone), str(mixed))
    assert "probed by" not in words("compare", str(alone), str(alone))

    said = words("stats", str(mixed), "--by", "model")
    assert (
        f"energy: not sampled in 1 of 2 runs (recorded with --no-telemetry): {proxy}; "
        f"1 of 2 runs imported from a file (their machine unknown): {imported}"
    ) in said
    assert "no power telemetry" not in said
    run(mixed, [(0, 1000)], [])  # a run that says nothing of its telemetry: looked at, no power found
    said = words("stats", str(mixed), "--by", "model")
    assert "no power telemetry (a GPU through NVML or nvidia-smi, a DCGM exporter, or RAPL) in its other runs; " in said


def test_an_import_whose_exchanges_name_no_upstream_is_still_imported(tmp_path):
    """An import whose exchanges name no upstream (its file gave no host) was not counted as imported
    by energy: the capture's engine was "unknown (no engine snapshot, no upstream recorded)", or with
    a snapshot an enrich took here, this machine's devices. Whether it is imported is judged by every
    run holding exchanges: its energy is unknown because it was imported, as an import's that names
    its upstream is (must match). A telemetry run written beside it samples this machine's RAPL."""
    found = {}
    for name, upstream in (("no-upstream", None), ("upstream", LOCAL)):
        capture = tmp_path / name
        base = time.time() - 60
        recorder = {"kind": "import", "from": "har", "file": "a.har"}
        with CaptureWriter(capture, recorder=recorder, wall=base, host=recorded_on("har")) as w:
            for i in range(2):
                record = exchange(
                    f"x{i}", sent_ms=i * 1000.0, chunks=[(500.0, json.dumps(ANSWER).encode())], headers=JSON_HEADERS
                )
                record["imported"] = "har"
                if upstream is None:
                    del record["upstream"]
                else:
                    record["upstream"] = upstream
                w.write(record)
        with CaptureWriter(capture, recorder={"kind": "telemetry"}, wall=base) as w:
            for at, joules in ((0.0, 100.0), (1.0, 120.0), (2.0, 140.0)):
                w.write(new_telemetry("host", base + at, [["host_rapl_energy_joules", PACKAGE0, joules]]))
        [group] = json.loads(invoke("stats", str(capture), "--json"))["groups"]
        found[name] = group["energy"]
    assert found["no-upstream"] == found["upstream"]
    assert found["no-upstream"]["joules"] is None and found["no-upstream"]["unknown"] == IMPORTED


def test_compare_says_an_imported_sides_energy_is_from_no_source_because_it_was_imported(tmp_path):
    """A run measured here compared with an import: compare said the import's energy was from "none
    (no power telemetry of its engine)", as if its machine had been looked at. It says the import's
    traffic ran on a machine its file does not name; a run recorded here with no power telemetry
    is still said to have none (must differ)."""
    base = time.time() - 60
    rapl = counter("host_rapl_energy_joules", PACKAGE0, (0, 100.0), (2000, 120.0), (4000, 140.0), source="host")
    measured = run(tmp_path / "measured", [(0, 4000)], rapl, base=base)
    dark = run(tmp_path / "dark", [(0, 4000)], [], base=base)
    imported, file = tmp_path / "imported", har(tmp_path / "a.har", LOCAL, base)
    log = json.loads(file.read_text())
    log["log"]["entries"][0]["request"]["postData"]["text"] = body(model="m").decode()  # the recorded request: a pair
    file.write_text(json.dumps(log))
    invoke("import", str(file), "--out", str(imported))
    unlike = {
        name: json.loads(stdout("compare", str(measured), str(other), "--json"))["energy"]["unlike"]
        for name, other in (("imported", imported), ("dark", dark))
    }
    assert unlike["imported"] == (
        "A's energy is from RAPL, B's from none (imported from a file, which does not say the machine its traffic ran on): "
        "not measured alike, so their energy figures are not like for like"
    )
    assert "B's from none (no power telemetry of its engine)" in unlike["dark"]
