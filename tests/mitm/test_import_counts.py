"""How to count an import's output tokens, as `stats` and `claim` advise it: a HAR's answers with no
usage, imported with `infertap import`, beside the same answers recorded here (the project's own
writer). The advice said "ask the engine for usage" of an import too, a recording the user can't make
again: it fits where the exchanges came from now."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from infertap.capture.writer import CaptureWriter
from tests.analysis_builders import JSON_HEADERS, exchange
from tests.mitm.test_import_machine import ANSWER, har, invoke, stdout
from tests.telemetry.test_energy_arithmetic import LOCAL

RECORDED = "ask the engine for usage, or run `infertap enrich CAPTURE --engine URL`"
IMPORTED = "the file can't be recorded again with usage: run `infertap enrich CAPTURE --engine URL` against an engine serving the same model"
MIXED = (
    "ask the engine for usage in recordings to come (the imported runs' file can't be recorded again), or run `infertap enrich"
)


def recorded(path: Path) -> Path:
    """The HAR's one exchange as `infertap record` keeps it: the same answer, no usage."""
    with CaptureWriter(path, recorder={"kind": "proxy", "upstream": LOCAL}, wall=time.time() - 120) as w:
        w.write(exchange("r0", chunks=[(500.0, json.dumps(ANSWER).encode())], headers=JSON_HEADERS, upstream=LOCAL))
    return path


def advice(capture: Path, tmp_path: Path) -> dict[str, Any]:
    """What stats' note, the card's figures and its workload say of the missing output counts."""
    [group] = json.loads(invoke("stats", str(capture), "--json", "--by", "model"))["groups"]
    card = json.loads(stdout("claim", str(capture), "--json", "--cache-dir", str(tmp_path / "cache")))
    return {
        "stats": group["partly_counted"]["note"],
        "figures": card["figures"]["unknown"],
        "workload": card["workload"]["unknown"],
    }


def test_an_imports_missing_output_counts_are_not_to_be_asked_of_its_engine_again(tmp_path):
    """All imported: enrich against an engine serving the same model, not usage from an engine the
    file's traffic can't be sent to again. Recorded here: ask the engine for usage (must differ).
    An import appended to a recording: both, said apart."""
    imported = tmp_path / "imported"
    invoke("import", str(har(tmp_path / "a.har", LOCAL, time.time() - 60)), "--out", str(imported))
    mixed = recorded(tmp_path / "mixed")
    invoke("import", str(har(tmp_path / "b.har", LOCAL, time.time() - 60)), "--out", str(mixed))
    said = {name: advice(path, tmp_path) for name, path in (("imported", imported), ("recorded", recorded(tmp_path / "r")))}
    said["mixed"] = advice(mixed, tmp_path)
    for where, text in said["imported"].items():
        assert IMPORTED in text and "ask the engine for usage" not in text, (where, text)
    assert RECORDED in said["recorded"]["stats"] and RECORDED in said["recorded"]["figures"]
    assert "ask the engine for usage, e.g. stream_options.include_usage" in said["recorded"]["workload"]
    assert all("can't be recorded again" not in text for text in said["recorded"].values())
    # stats groups by model: the two runs of the mixed capture are one group, the card one figure note.
    for where, text in said["mixed"].items():
        assert MIXED in text, (where, text)
