"""Whether a capture's runs ran on more than one machine, for the claim card's ``device``.

An engine's fingerprint is of its configuration, not of the machine under it: the same llama-server
build and model on an H100 box and on an H200 box probe alike. A capture holding a run of each (a
replay appended from another machine, two recordings copied into one folder) then showed one
configuration and the last run's device as every figure's. The machine is the snapshot's host where
the engine was local to its recorder, else the engine URL's host; the ``--label``s that describe a
device (``gpu=H100``) are compared run by run as well, since the card showed the last run's only.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from infertap.capture.hostfacts import engine_is_local, url_parts

from .machines import describes
from .store import Analysis

#: The ``--label`` names the card's device reads (``claim._device``).
DEVICE_LABELS = ("gpu", "gpus", "driver", "vbios", "firmware", "cuda", "device")


def several_machines(analysis: Analysis, capture: str, held: Collection[str], described: Mapping[str, str]) -> str | None:
    """Why the card's device, the last snapshot's machine, doesn't describe every figure: the
    snapshots of the runs it describes (``describes``, as ``claim._several_engines`` reads them)
    name more than one engine machine, or those runs carry different device labels; else None."""
    rows = analysis.query("SELECT url, host, run_id FROM engines WHERE capture = ? ORDER BY wall NULLS LAST", [capture]).rows
    machines: dict[str, list[str]] = {}
    for url, host, run_id in rows:
        if not describes(None if run_id is None else str(run_id), held, described):
            continue
        facts: dict[str, Any] = json.loads(host) if host else {}
        if engine_is_local(url or ""):
            name = str(facts.get("hostname") or "an unnamed machine")
            gpus = [str(g.get("name")) for g in facts.get("gpus") or () if isinstance(g, dict)]
        else:
            name, gpus = (url_parts(url or "").hostname or "an unknown host").lower(), []
        machines.setdefault(name, gpus)
    said = []
    if len(machines) > 1:
        named = "; ".join(f"{m}: {', '.join(g)}" if g else m for m, g in machines.items())
        said.append(f"the capture's engines ran on {len(machines)} machines ({named})")
    labels = _differing_labels(analysis, capture, described)
    if labels:
        said.append(f"its runs are labelled {labels}")
    if not said:
        return None
    return f"{' and '.join(said)}: this field is the last one's, the figures are of them all"


def run_labels(analysis: Analysis, capture: str, described: Mapping[str, str]) -> list[dict[str, str]]:
    """The ``--label``s of each run the card describes, in the runs' order; an import's left out: it
    takes no ``--label``, so its lacking one says nothing (its machine is said unknown apart)."""
    labelled = [run for run, kind in described.items() if kind != "import"]
    rows = analysis.query(
        "SELECT labels FROM runs WHERE capture = ? AND list_contains(?::VARCHAR[], run_id) ORDER BY wall",
        [capture, labelled],
    ).rows
    return [{str(k): str(v) for k, v in (json.loads(text) if text else {}).items()} for (text,) in rows]


#: How a run given no ``--label`` of a name that another run has reads: not known for it, never the other's.
NOT_GIVEN = "not given"


def merged_labels(runs: list[dict[str, str]]) -> dict[str, str]:
    """One value per label name over the runs: the value where every run has the same one, else each
    run's in order (``run 1: H100; run 2: not given``). A label one run lacks says nothing of that
    run's machine: showing the other run's value for it would claim a device it was never given."""
    names = list(dict.fromkeys(k for labels in runs for k in labels))
    out: dict[str, str] = {}
    for name in names:
        values = [labels.get(name) for labels in runs]
        if len(set(values)) == 1 and values[0] is not None:
            out[name] = values[0]
        else:
            out[name] = "; ".join(f"run {i}: {NOT_GIVEN if v is None else v}" for i, v in enumerate(values, 1))
    return out


def _differing_labels(analysis: Analysis, capture: str, described: Mapping[str, str]) -> str:
    """The device labels whose value differs between the runs the card describes, a run given none of
    that name included, as ``gpu=H100, gpu=H200`` or ``gpu=H100, gpu not given``."""
    runs = run_labels(analysis, capture, described)
    said = []
    for key in dict.fromkeys(k for labels in runs for k in labels if k in DEVICE_LABELS):
        values = list(dict.fromkeys(labels.get(key) for labels in runs))
        if len(values) > 1:
            said.append(", ".join(f"{key} {NOT_GIVEN}" if v is None else f"{key}={v}" for v in values))
    return "; ".join(said)
