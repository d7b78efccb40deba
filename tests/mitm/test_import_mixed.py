"""Imports beside recordings, as a user makes them: `infertap record` (a stand-in llama-server) and
`infertap import` of a HAR into the same capture, then `stats`, `claim` and `compare`. Whether all of
a capture's traffic was imported is one rule (``machines.imported_only`` over the runs that hold its
exchanges) in every command: a run that carried none makes no import a recording, and the engine
snapshot is said to be the run's that took it, never the import's."""

from __future__ import annotations

import json
import time

from infertap.analysis.machines import IMPORTED
from infertap.capture.records import new_telemetry
from infertap.capture.writer import CaptureWriter
from infertap.mitm.importer import recorded_on
from tests.analysis_builders import JSON_HEADERS, exchange
from tests.mitm.test_import_machine import invoke
from tests.telemetry.test_energy_arithmetic import LOCAL, PACKAGE0


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
                record = exchange(f"x{i}", sent_ms=i * 1000.0, chunks=[(500.0, b'{"choices": []}')], headers=JSON_HEADERS)
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
