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


def _differing_labels(analysis: Analysis, capture: str, described: Mapping[str, str]) -> str:
    """The device labels whose value differs between the runs the card describes, as ``gpu=H100, gpu=H200``."""
    rows = analysis.query(
        "SELECT labels FROM runs WHERE capture = ? AND list_contains(?::VARCHAR[], run_id) ORDER BY wall",
        [capture, list(described)],
    ).rows
    values: dict[str, list[str]] = {}
    for (text,) in rows:
        for key, value in (json.loads(text) if text else {}).items():
            if key in DEVICE_LABELS and str(value) not in values.setdefault(key, []):
                values[key].append(str(value))
    return "; ".join(", ".join(f"{k}={v}" for v in vs) for k, vs in values.items() if len(vs) > 1)
