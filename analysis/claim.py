"""The claim card: a run's headline numbers with the nine facts that make them reproducible.

"Numbers do not travel; configs travel." ``claim(path)`` returns one object with exactly the
fields of ``FIELDS`` plus ``figures`` (the run's headline numbers from ``stats``, energy included) and
``warnings`` (stats' own: a capture still being written, whose figures leave out what is in flight;
and each match of the naming glob left out, also listed in ``left_out`` as ``stats --json`` lists them).
Each field is ``{"value": ..., "source": ...}``; a field whose value is unknown has ``value`` None
and ``unknown`` saying why; a field known only in part keeps its ``value`` and names the missing
parts in ``unknown``. ``unknown_fields(card)`` lists both kinds (what ``--strict`` refuses).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from infertap.capture.hostfacts import engine_is_local
from infertap.capture.identity import (
    bodies_unknown,
    relation_to_source,
    schedule_not_kept,
    schedule_words,
    traffic_runs,
)
from infertap.capture.info import no_snapshot_reason
from infertap.engines.runtime_digest import runtime_digest

from .active import COUNTED
from .claim_machines import DEVICE_LABELS, merged_labels, run_labels, several_machines
from .errors import AnalysisError
from .in_no_group import no_group_line, not_text_words
from .machines import counted_runs, described_snapshot, describes, imported_only, probed_by
from .media import not_text
from .model_load_fact import load_line, model_load_fact
from .partly_counted import ADVICE, Origin, note, prompt_note
from .sampled import all_imported, interpolated, no_energy, partly_unsampled
from .sources import LeftOut
from .stats import QUANTILES, live_warnings, speed_stats, ttft_mix
from .store import Analysis
from .svg import number
from .workload_identity import asked_header_sets, asked_words, recorders_by_run, workload

FIELDS = (
    "device",
    "runtime",
    "model",
    "quantization",
    "workload",
    "concurrency",
    "sampling",
    "measuring_side",
    "aggregation",
)
_TOKENS = ("prompt_tokens", "output_tokens")  # the workload's token totals


def _field(value: Any, source: str, unknown: str | None = None) -> dict[str, Any]:
    out = {"value": value, "source": source}
    if unknown:
        out["unknown"] = unknown
    return out


def _unknown(reason: str, source: str = "none") -> dict[str, Any]:
    return {"value": None, "source": source, "unknown": reason}


def _loads(text: str | None) -> Any:
    return json.loads(text) if text else None


def _fact(facts: dict[str, Any], name: str) -> tuple[Any, str]:
    f = facts.get(name) or {}
    return (f.get("value"), f.get("source") or "") if isinstance(f, dict) else (f, "engine snapshot")


def claim(
    path: str | os.PathLike[str], *, cache_dir: str | os.PathLike[str] | None = None, left_out: Sequence[LeftOut] = ()
) -> dict[str, Any]:
    """The claim card of the capture at ``path`` (a recording or a replay). A folder of several
    captures is refused: a card of its path, which no capture holds, would state none of their
    traffic. ``left_out``: what the glob that named it matched besides, listed and warned of as
    ``stats`` does, since a card read as JSON alone would otherwise not say that the glob named more than it."""
    with Analysis([path], cache_dir=cache_dir) as analysis:
        capture = str(Path(path).resolve())
        held = [str(c) for (c,) in analysis.query("SELECT capture FROM captures ORDER BY capture").rows]
        if held != [capture]:
            raise AnalysisError(f"{path} holds {len(held)} captures, a claim card is of one: give one of them: {', '.join(held)}")
        made = card(analysis, capture)
    return with_left_out(made, left_out)


def with_left_out(made: dict[str, Any], left_out: Sequence[LeftOut]) -> dict[str, Any]:
    """The card ``made`` with what the glob that named its run matched besides (``left_out``), listed
    as ``stats --json`` lists them and first among its warnings: ``claim`` and ``report`` say it alike."""
    return {**made, "left_out": [x.as_json() for x in left_out], "warnings": [*map(str, left_out), *made["warnings"]]}


def card(analysis: Analysis, capture: str, stats: dict[str, Any] | None = None) -> dict[str, Any]:
    """The claim card of one loaded capture (its ``capture`` column value); ``stats``: its
    ``speed_stats`` by run where the caller has it (the report states its energy too)."""
    stats = stats if stats is not None else speed_stats(analysis, ("run",), derivations=False)
    groups = [g for g in stats["groups"] if g["key"].get("capture") == capture]
    whole = _whole(groups)  # the facts describe what the identity does, the whole capture; the figures are per run
    by_run = recorders_by_run(capture)
    runs = list(by_run.values())
    # The runs its figures are over (``counted_runs``): an import among them ran on an engine its
    # file does not name, so the snapshot (another run's, or enrich's afterwards) is said to be whose
    # it is; and a run that carried no generation request (a recording stopped before any request,
    # or that only listed the models) is not its measuring side, nor its device's, nor its engines'.
    held = _held(analysis, capture)
    carried = _carried(analysis, capture, by_run)
    snap = _last_snapshot(analysis, capture, held, carried)
    several = _several_engines(analysis, capture, held, carried, snap)
    traffic = traffic_runs([r for run_id, r in by_run.items() if run_id in carried]) or traffic_runs(runs)
    recorder = next((r for r in traffic if r.get("kind")), runs[0] if runs else {})
    labels = _labels(analysis, capture, carried)
    no_snap = _no_snapshot(carried.values())
    captures = [c for c in stats["captures"] if c["capture"] == capture]
    torn = [str(t) for c in captures for t in c["torn"]]
    imported = [r for r, kind in carried.items() if kind == "import"]
    only = imported_only(carried.values())
    origin: Origin = "imported" if only else "mixed" if imported else "recorded"  # how its missing counts can be had
    probed = probed_by(snap["recorder"], snap["run_id"], snap["wall"], imported, only=only) if snap else None
    concurrency = _concurrency(recorder, whole, snap, len(groups), several, no_snap)
    sampling = _sampling(analysis, capture, snap, no_snap)
    files = [str(by_run.get(r, {}).get("from") or "HAR or flow") for r in imported]
    return {
        "capture": capture,
        "device": _also(
            _also(
                _also(_device(snap, labels, files, only, no_snap), several), several_machines(analysis, capture, held, carried)
            ),
            _said("the machine's facts", probed),
        ),
        "runtime": _also(_also(_runtime(snap, no_snap), several), _said("the engine's kind, version and digest", probed)),
        "model": _also(_also(_model(snap, analysis, capture, no_snap), several), _said("the engine's models and file", probed)),
        "quantization": _also(_also(_quantization(snap, no_snap), several), _said("the quantization", probed)),
        "workload": _also(_workload(analysis, capture, whole, _uncounted(groups), origin), _torn(torn)),
        "concurrency": _also(
            _also(concurrency, _several_schedules(traffic)),
            _said("the engine slots", probed if (concurrency["value"] or {}).get("engine_slots") is not None else None),
        ),
        "sampling": _also(sampling, _said("the engine defaults", probed if _engine_defaults(sampling) else None)),
        "measuring_side": _also(_measuring_side(recorder, whole), _several_recorders(traffic)),
        "aggregation": _aggregation(whole),
        "figures": _figures(groups, origin, stats.get("in_no_group_by_capture", {}).get(capture, {})),
        # stats' check of a recorder still writing, of this capture only (a report loads several),
        # and its torn tails, as stats warns of them
        "warnings": live_warnings(captures) + torn,
    }


def unknown_fields(card: dict[str, Any]) -> dict[str, str]:
    """Each field not fully known, with the reason, and ``figures`` where its per-token figures are
    over some answers only: what ``claim --strict`` refuses."""
    return {name: card[name]["unknown"] for name in (*FIELDS, "figures") if card[name].get("unknown")}


# -- the facts -----------------------------------------------------------------------------------


def _last_snapshot(analysis: Analysis, capture: str, held: set[str], carried: dict[str, str]) -> dict[str, Any] | None:
    """The capture's engine snapshot, with the run that took it and that run's recorder kind: the
    last one of a run that describes its engine (``described_snapshot``: one the card describes,
    ``carried``, or one that holds no exchange, ``held``), never that of a run of another engine
    appended to it whose exchanges are none of its traffic (refusals, a list of the models)."""
    rows = analysis.query(
        "SELECT e.kind, e.url, e.wall, e.fingerprint, e.facts, e.host, e.labels, e.run_id, r.recorder FROM engines e "
        "LEFT JOIN runs r ON r.capture = e.capture AND r.run_id = e.run_id "
        "WHERE e.capture = ? ORDER BY e.wall NULLS FIRST",
        [capture],
    ).records()
    taken_by = [None if r["run_id"] is None else str(r["run_id"]) for r in rows]
    chosen = described_snapshot(taken_by, held, carried, imported=imported_only(carried.values()))
    if chosen is None:
        return None
    snap = rows[chosen]
    snap["facts"] = _loads(snap["facts"]) or {}
    snap["host"] = _loads(snap["host"]) or {}
    snap["labels"] = _loads(snap["labels"]) or {}
    return snap


def _held(analysis: Analysis, capture: str) -> set[str]:
    """The runs of ``capture`` that hold an exchange."""
    return {str(r) for (r,) in analysis.query("SELECT DISTINCT run_id FROM exchanges WHERE capture = ?", [capture]).rows}


def _carried(analysis: Analysis, capture: str, by_run: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The runs the card's facts describe, with their recorder kinds (``by_run``'s, else the
    exchanges'), in order: those of its counted generation requests, as compare's (``counted_runs``)."""
    rows = analysis.query(
        f"SELECT run_id, any_value(recorder), bool_or({COUNTED}) FROM exchanges WHERE capture = ? "
        "GROUP BY run_id ORDER BY min(sent_wall_ns)",
        [capture],
    ).rows
    carried = {str(r): str(by_run.get(str(r), {}).get("kind") or kind or "") for r, kind, _ in rows}
    return counted_runs(carried, (str(r) for r, _, counted in rows if counted))


def _several_engines(
    analysis: Analysis, capture: str, held: set[str], described: dict[str, str], shown: dict[str, Any] | None
) -> str | None:
    """Why the last snapshot (``shown``) doesn't describe every figure: it and the snapshots of the
    runs that describe its engine (``describes``: those the card describes, ``_carried``, and runs that
    hold no exchange, ``enrich``'s, a probe alone) hold more than one engine configuration (a model swapped mid-run, a mitm capture
    of two engines); else None. A run whose exchanges are none of its counted traffic (one that only
    listed the models) probed no engine of its figures."""
    rows = analysis.query(
        "SELECT fingerprint, kind, url, run_id, wall FROM engines WHERE capture = ? ORDER BY wall NULLS LAST", [capture]
    ).rows
    last = (shown["fingerprint"], shown["run_id"], shown["wall"]) if shown else None
    seen: dict[str, tuple[Any, Any]] = {}
    for fp, kind, url, run_id, wall in rows:
        if describes(None if run_id is None else str(run_id), held, described) or (fp, run_id, wall) == last:
            seen.setdefault(fp, (kind, url))
    if len(seen) < 2:
        return None
    named = ", ".join(f"{kind} at {url} (fingerprint {fp})" for fp, (kind, url) in seen.items())
    return f"the capture holds {len(seen)} engine configurations ({named}): this field is the last one's, the figures are of them all"


def _several_recorders(runs: list[dict[str, Any]]) -> str | None:
    """Why the first run's recorder doesn't describe every figure: the capture's runs (``traffic_runs``)
    were taken by different recorders (a recording and a replay appended to it); else None."""
    kinds = list(dict.fromkeys(r.get("kind") or "unknown" for r in runs))
    if len(kinds) < 2:
        return None
    return f"the capture holds {len(runs)} runs of different recorders ({', '.join(kinds)}): this field is the first one's, the figures are of them all"


def _several_schedules(runs: list[dict[str, Any]]) -> str | None:
    """Why the first run's schedule doesn't describe every figure: the capture's runs sent their
    requests on different schedules (two replays at different --concurrency appended); else None."""
    schedules = [f"{r.get('kind') or 'unknown'}: {schedule_words(r)}" for r in runs]
    if len(set(schedules)) < 2:
        return None
    return (
        f"the capture holds {len(runs)} runs of different schedules ({'; '.join(schedules)}): "
        "the schedule is the first one's, the achieved concurrency is of them all"
    )


def _said(what: str, probed: str | None) -> str | None:
    """``what`` of a snapshot that is not (or not only) its traffic's engine, where some was imported (``probed_by``); None where not."""
    return f"{what} {probed}" if probed else None


def _engine_defaults(sampling: dict[str, Any]) -> bool:
    """Whether some setting of the card's ``sampling`` is the engine's default, as the engine reported it."""
    value = sampling["value"] if isinstance(sampling["value"], dict) else {}
    return any(
        isinstance(v, dict) and v.get("source") == "engine_default" for vs in value.values() if isinstance(vs, list) for v in vs
    )


def _torn(torn: list[str]) -> str | None:
    """What a torn tail leaves out of the workload: the records after it are lost, so its identity,
    requests and token totals are of those read before it, not the workload the clients sent."""
    if not torn:
        return None
    return (
        f"the capture's tail is torn in {len(torn)} segment(s) (records after the tear are lost): the identity, "
        "requests and token totals are of the records before it"
    )


def _also(field: dict[str, Any], why: str | None) -> dict[str, Any]:
    """``field`` with ``why`` added to what is unknown of it."""
    if why is None or field["value"] is None:
        return field
    return {**field, "unknown": "; ".join(filter(None, (field.get("unknown"), why)))}


def _labels(analysis: Analysis, capture: str, carried: Mapping[str, str]) -> dict[str, str]:
    """The ``--label``s of the runs the card describes (``_carried``), merged (``merged_labels``: a
    label one run lacks reads as not given for it): another run's (a recording that only listed the
    models, an ``enrich``) describe the machine it ran on, which an import's traffic, say, did not."""
    return merged_labels(run_labels(analysis, capture, carried))


def _no_snapshot(carried: Iterable[str]) -> str:
    """Why the card has no engine snapshot to read, by the recorders of the runs its figures are over
    (``_carried``; an import, a mitm recording probe none; a recording or a replay was run with
    --no-probe; a run that carried no generation request needed none)."""
    reason = no_snapshot_reason(carried)
    return f"the capture has no engine snapshot ({reason}): run `infertap enrich CAPTURE --engine URL`"


def _device(snap: dict[str, Any] | None, labels: dict[str, str], imported: list[str], only: bool, no_snap: str) -> dict[str, Any]:
    """GPU and CPU of the engine's machine: the snapshot's host facts when the engine was local, else
    the ``--label``s of the runs the card describes (``_labels``). An import's traffic ran on a machine its file does not name: a snapshot taken here
    (``enrich``) is of this machine, not that one. ``imported``: the file kind of each imported run
    its figures are over; ``only``: all the traffic is theirs (``imported_only``). Where only some
    is, the card's ``probed_by`` note says the imported runs' engine is unknown."""
    label_gpu = {k: v for k, v in labels.items() if k in DEVICE_LABELS}
    if only:  # import takes no --label (``labels`` are its runs'): nothing here describes that machine
        return _unknown(_imported(imported))
    local = snap is not None and engine_is_local(snap["url"] or "")
    if not local:
        reason = no_snap if snap is None else f"the engine at {snap['url']} is not on the recording machine"
        if label_gpu:
            return _field({"labels": label_gpu}, "user labels (--label)", f"{reason}: only the labels describe its device")
        return _unknown(f"{reason}; describe its device with --label gpu=... --label driver=...")
    host = snap["host"] if snap else {}
    gpus = host.get("gpus")
    value: dict[str, Any] = {
        "cpu": host.get("cpu"),
        "cpu_count": host.get("cpu_count"),
        "memory_bytes": host.get("memory_bytes"),
        "hostname": host.get("hostname"),
        "gpus": gpus,
        "gpu_count": len(gpus) if gpus else 0 if gpus == [] else None,
        **({"labels": label_gpu} if label_gpu else {}),
    }
    source = "engine snapshot's host facts (/proc/cpuinfo, sysconf; GPUs from nvidia-smi)"
    missing = []
    if gpus is None and host.get("gpus_unknown"):  # nvidia-smi hung or failed: the machine may well have GPUs
        missing.append(
            f"GPU model, count, driver, VBIOS and CUDA: the GPUs of the engine's machine are unknown, not none ({host['gpus_unknown']})"
        )
    elif gpus is None:
        missing.append(
            "GPU model, count, driver, VBIOS and CUDA: no nvidia-smi on the engine's machine (no NVIDIA GPU, or its tools are not installed)"
        )
    elif gpus:
        absent = [what for key, what in (("vbios", "VBIOS"), ("cuda", "CUDA version")) if any(g.get(key) is None for g in gpus)]
        if absent:
            why = "not in the snapshot (an older infertap asked nvidia-smi for name, driver and memory only)"
            if all("vbios" in g for g in gpus):
                why = "nvidia-smi did not give it (an older driver, or [N/A])"
            missing.append(f"{' and '.join(absent)}: {why}")
    # Imports appended to a recording: that the snapshot's machine is the recorded runs' only is the
    # card's note of whose snapshot it is (``probed_by``, added to the field), said once, not here too.
    return _field(value, source, "; ".join(missing) or None)


def _imported(files: list[str]) -> str:
    """Why an imported run's machine is unknown, as the card says it."""
    kinds = " and ".join(f"{k} file" for k in dict.fromkeys(files))
    return f"the traffic was imported from a {kinds}, which does not say the machine it ran on: the recording machine is unknown"


def _runtime(snap: dict[str, Any] | None, no_snap: str) -> dict[str, Any]:
    if snap is None:
        return _unknown(no_snap)
    facts = snap["facts"]
    version, version_source = _fact(facts, "version")
    digest, digest_source = _digest(snap)
    value = {
        "kind": snap["kind"],
        "version": version,
        "build": version if version else None,
        "digest": digest,
        "fingerprint": snap["fingerprint"],
        # The --labels given with the snapshot (``enrich --label``, a recording's), said beside the
        # engine they were given for: stored, they were read by nothing.
        "labels": dict(snap["labels"] or {}),
    }
    missing = []
    if version is None:
        missing.append(f"version: {version_source or 'not exposed'}")
    if digest["sha256"] is None:
        missing.append(f"digest: {digest['found']}")
    source = f"engine snapshot of {snap['url']} (version: {version_source}); digest: {digest_source}"
    if value["labels"]:
        source += "; labels: --label given to the probe that took the snapshot (enrich, record, replay)"
    return _field(value, source, "; ".join(missing) or None)


def _digest(snap: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The runtime's digest (``sha256``, ``path``, how it was ``found`` or why not) as the snapshot
    recorded it; for a snapshot without one (an older infertap), looked up now through the process
    on the upstream's port, if that still runs here and started before the snapshot."""
    facts = snap["facts"]
    if "runtime_sha256" in facts:
        sha, found = _fact(facts, "runtime_sha256")
        path, _ = _fact(facts, "runtime_path")
        # The snapshot names the files in words only (RuntimeDigest.how): the count of the others is read back.
        others = re.search(r" and the (\d+) other engine libraries", found or "")
        files = 1 + int(others.group(1)) if others else 1
        return {"sha256": sha, "path": path, "files": files, "found": found}, "recorded in the engine snapshot"
    now = runtime_digest(snap["url"] or "", snap["kind"], (snap["host"] or {}).get("hostname"), snap["wall"])
    files = max(1, len(now.files))
    value = {"sha256": now.sha256, "path": now.path, "files": files, "found": now.how if now.sha256 else now.what}
    return value, "not in the snapshot (an older infertap): looked up now, through the process on the upstream's port"


#: The exchanges the card's figures count (``active.COUNTED``): a request infertap refused was never
#: sent, so neither its model nor its settings are any the engine served.
_COUNTED_IDS = f"SELECT capture, exchange_id FROM exchanges WHERE {COUNTED}"


def _model(snap: dict[str, Any] | None, analysis: Analysis, capture: str, no_snap: str) -> dict[str, Any]:
    """The models the counted exchanges were served (``_COUNTED_IDS``), beside the snapshot's."""
    served = [
        r[0]
        for r in analysis.query(
            f"SELECT DISTINCT coalesce(response_model, model) FROM exchanges WHERE capture = ? AND {COUNTED} "
            "AND coalesce(response_model, model) IS NOT NULL ORDER BY 1",
            [capture],
        ).rows
    ]
    if snap is None:
        if served:
            return _field(
                {"served": served, "path": None, "sha256": None},
                "request and response bodies",
                f"artifact and sha256: {no_snap}",
            )
        return _unknown(no_snap)
    facts = snap["facts"]
    models, _ = _fact(facts, "models")
    path, path_source = _fact(facts, "model_path")
    sha, sha_source = _fact(facts, "model_sha256")
    value = {"served": served or models, "engine_models": models, "path": path, "sha256": sha}
    missing = [
        f"{name}: {why or 'not exposed'}"
        for name, v, why in (("path", path, path_source), ("sha256", sha, sha_source))
        if v is None
    ]
    return _field(value, f"exchanges' model names; engine snapshot ({sha_source or path_source})", "; ".join(missing) or None)


def _quantization(snap: dict[str, Any] | None, no_snap: str) -> dict[str, Any]:
    """The quantization scheme and the weights' dtype, each from its snapshot fact, as the snapshot
    labels them: a GGUF's tensor types by share of the weights, a checkpoint's ``torch_dtype``."""
    if snap is None:
        return _unknown(no_snap)
    facts = snap["facts"]
    scheme, scheme_source = _fact(facts, "quantization")
    scheme_source = scheme_source or "the engine does not say (give the GGUF with --model-file)"
    if "dtype" in facts:
        dtype, dtype_source = _fact(facts, "dtype")
        dtype_source = dtype_source or "not exposed"
    else:
        dtype, dtype_source = None, "not in the snapshot (an older infertap recorded no dtype)"
    missing = "; ".join(
        f"{name}: {why}" for name, v, why in (("scheme", scheme, scheme_source), ("dtype", dtype, dtype_source)) if v is None
    )
    if scheme is None and dtype is None:
        return _unknown(missing, "engine snapshot")
    value = {"scheme": scheme, "dtype": dtype, "dtype_of": _dtype_of(dtype_source) if dtype is not None else None}
    return _field(value, f"engine snapshot: scheme from {scheme_source}; dtype from {dtype_source}", missing or None)


def _dtype_of(source: str) -> str:
    """What a ``dtype`` fact describes, in a few words, from its source (infertap/engines/*.py)."""
    if source.startswith("GGUF tensor types"):
        return "tensor types"
    if "checkpoint's, config.json" in source:
        return "checkpoint torch_dtype" if "torch_dtype" in source.split(";")[0] else "checkpoint dtype"
    if "--dtype" in source:
        return "--dtype"
    return "dtype"


def _whole(groups: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What the facts read of a capture's runs together: token totals and prefix reuse summed, the
    metrics' counts summed, concurrency's mean weighted by each run's span and its greatest max."""
    if len(groups) <= 1:
        return groups[0] if groups else None
    reuse: dict[str, dict[str, Any]] = {}
    for g in groups:
        for r in g["workload"].get("prefix_reuse", []):
            into = reuse.setdefault(r["unit"], {"unit": r["unit"], "shared": 0, "length": 0})
            into["shared"] += r["shared"] or 0
            into["length"] += r["length"] or 0
    for r in reuse.values():
        r["share"] = r["shared"] / r["length"] if r["length"] else None
    spans = [g["span_s"] or 0 for g in groups]
    means = [(g["concurrency"] or {}).get("mean") for g in groups]
    weighted = sum(m * s for m, s in zip(means, spans, strict=True) if m is not None)
    # A run of no count adds nothing; no run's count known: unknown, not 0.
    counted = {name: [t for g in groups if (t := (g["workload"].get(name) or {}).get("total")) is not None] for name in _TOKENS}
    totals = {
        name: {"total": sum(counted[name]) if counted[name] else None, "known": sum(g["workload"][name]["known"] for g in groups)}
        for name in _TOKENS
    }
    return {
        "workload": {**totals, "requests": sum(g["workload"]["requests"] for g in groups), "prefix_reuse": list(reuse.values())},
        "concurrency": {
            "mean": weighted / sum(spans) if sum(spans) else None,
            "max": max(((g["concurrency"] or {}).get("max") or 0 for g in groups), default=None),
        },
        "metrics": {
            name: {"n": sum((g["metrics"].get(name) or {}).get("n") or 0 for g in groups)} for name in groups[0]["metrics"]
        },
        "server_timings": next((g["server_timings"] for g in groups if g.get("server_timings")), None),
    }


def _uncounted(groups: list[dict[str, Any]]) -> tuple[int, int]:
    """The ok answers of no output token count, and the ok answers, of the capture's runs."""
    return sum(g["throughput"]["output_tokens_unknown"] for g in groups), sum(g["ok"] for g in groups)


def _workload(
    analysis: Analysis, capture: str, group: dict[str, Any] | None, uncounted_ok: tuple[int, int], origin: Origin = "recorded"
) -> dict[str, Any]:
    w = workload(analysis, capture)
    profile: dict[str, Any] = group["workload"] if group else {}
    value: dict[str, Any] = {
        "identity": w["workload"],
        "short": w["short"],
        "schedule_identity": w["schedule"],
        "schedule_resolution_ms": w["resolution_ms"],
        "requests": w["requests"],
        "prompt_tokens": (profile.get("prompt_tokens") or {}).get("total"),
        "output_tokens": (profile.get("output_tokens") or {}).get("total"),
        "prefix_reuse": [{k: r[k] for k in ("unit", "share", "shared", "length")} for r in profile.get("prefix_reuse", [])],
        "request_set": w["request_set"],
        **{
            k: w[k]
            for k in (
                "source",
                "derived_by",
                "same_as_source",
                "same_requests_as_source",
                "same_text_as_source",
                "same_text_requests_as_source",
                "same_media_as_source",
                "same_media_requests_as_source",
                "media_change",
                "same_embeddings_as_source",
                "same_embeddings_requests_as_source",
                "embeddings_change",
                "same_schedule_as_source",
                "schedule_by",
            )
            if k in w
        },
        "schedule_not_kept": schedule_not_kept(w),
        "bodies_unknown": w["bodies_unknown"],  # sent with a body not kept: in no identity
        "asked_headers": asked_header_sets(analysis, capture),  # in the identity; named, since it can't say them
        "not_text": not_text(analysis, capture),  # image, video, speech generation: in no figure nor the identity
        "media_identity": w["media"] or None,  # theirs: the same text workload beside other media requests is other traffic
        "media_short": w["media_short"],  # as `infertap info` and compare show it: its version tag, 16 hex digits
        "media_schedule": w["media_schedule"] or None,  # their send times: a schedule is the text's and theirs
        # The embeddings requests' own identity, as the media's: the same text beside other embedded texts is other traffic.
        "embeddings_requests": w["embeddings_requests"],
        "embeddings_identity": w["embeddings"] or None,
        "embeddings_short": w["embeddings_short"],
        "embeddings_schedule": w["embeddings_schedule"] or None,
    }
    uncounted = " and ".join(name for name in _TOKENS if value["requests"] and value[name] is None)
    advice = (
        "ask the engine for usage, e.g. stream_options.include_usage, or run `infertap enrich CAPTURE --engine URL`"
        if origin == "recorded"
        else ADVICE[origin]  # an imported file can't be recorded again with usage
    )
    why = f"{uncounted} unknown: no request's count came with its answer (usage) or from an enrichment ({advice})"
    missing = [why] if uncounted else []
    if unknown := bodies_unknown(w):  # the identity is of the others: an equal one is no proof
        missing.insert(0, f"identity of the other requests only: {unknown}")
    unknown_ok, ok = uncounted_ok
    if unknown_ok and value["output_tokens"] is not None:  # a total of some answers only: said, not passed off as all
        missing.append(f"output_tokens counts {ok - unknown_ok} of {ok} ok answers: {unknown_ok} came with no count")
    prompts, known = profile.get("requests") or 0, (profile.get("prompt_tokens") or {}).get("known") or 0
    if value["prompt_tokens"] is not None and (partly := prompt_note(known, prompts)):  # a lower bound, as stats flags it
        missing.append(partly)
    return _field(
        value,
        "sha256 of the generation requests (method, path, the headers that change what they ask, exact body bytes) "
        "in send order; " + _token_sources(group),
        "; ".join(missing) or None,
    )


#: How each source counts an answer's output tokens (docs/metrics.md, ``output_tokens``).
_OUTPUT_SOURCES = {"usage": "usage", "tokenize": "the engine's tokenizer", "chunks": "a stream's token events (an approximation)"}


def _token_sources(group: dict[str, Any] | None) -> str:
    """Where the token totals came from, the output's by answers as stats counts them: a stream's
    token events counted where neither usage nor an enrichment did, said so, not passed off as the
    engine's count (a card that said "from usage or the engine's tokenizer" of every total)."""
    by = (group or {}).get("output_tokens_source") or {}
    said = ", ".join(f"{_OUTPUT_SOURCES.get(k, k)} ×{n}" for k, n in by.items())
    rule = "token totals from usage, else the engine's tokenizer (an enrichment), else (output only) a stream's token events"
    return rule + (f"; output tokens of the ok answers by {said}" if said else "")


def _concurrency(
    recorder: dict[str, Any],
    group: dict[str, Any] | None,
    snap: dict[str, Any] | None,
    runs: int,
    several: str | None,
    no_snap: str,
) -> dict[str, Any]:
    if recorder.get("kind") == "replay":
        schedule: Any = recorder.get("schedule") or {}
        schedule_source = "the replay's schedule (capture header)"
    else:
        schedule = "as recorded: the clients' own timing and concurrency"
        schedule_source = f"recorded by {recorder.get('kind') or 'an unknown recorder'}"
    slots, slots_source = _fact(snap["facts"], "parallel_slots") if snap else (None, no_snap)
    c = (group or {}).get("concurrency") or {}
    value = {"schedule": schedule, "achieved_mean": c.get("mean"), "achieved_max": c.get("max"), "engine_slots": slots}
    missing = None if slots is not None else f"engine slots: {slots_source or 'not exposed'}"
    if several and slots is not None:  # the slots are the last engine's
        missing = f"engine slots: {several}"
    over = f"over the capture's {runs} runs (the mean weighted by each run's span)" if runs > 1 else "from send and end times"
    return _field(value, f"{schedule_source}; achieved in flight {over} (docs/metrics.md); slots: {slots_source}", missing)


def _sampling(analysis: Analysis, capture: str, snap: dict[str, Any] | None, no_snap: str) -> dict[str, Any]:
    """Each effective setting's values and where each came from, counted over the enriched exchanges
    the figures count (``_COUNTED_IDS``); with no enrichment, what the requests set themselves
    (``_sent_sampling``)."""
    rows = analysis.query(
        f"SELECT e.settings FROM enrichment_latest e JOIN ({_COUNTED_IDS}) x USING (capture, exchange_id) "
        "WHERE e.capture = ? AND e.settings IS NOT NULL",
        [capture],
    ).rows
    if not rows:
        return _sent_sampling(analysis, capture, snap, no_snap)
    tally: dict[str, dict[tuple[str, str], int]] = {}
    for (text,) in rows:
        for name, s in (_loads(text) or {}).items():
            key = (json.dumps(_as_set(s.get("value"))), str(s.get("source")))
            tally.setdefault(name, {})
            tally[name][key] = tally[name].get(key, 0) + 1
    unsent = _unenriched(analysis, capture, tally)
    value = {
        name: [{"value": json.loads(v), "source": src, "requests": n} for (v, src), n in sorted(counts.items())]
        for name, counts in sorted(tally.items())
    }
    unknown = sorted(name for name, vs in value.items() if name in DECISIVE and any(v["source"] == "unknown" for v in vs))
    missing = [f"no value known for {', '.join(unknown)} (neither sent nor reported by the engine)"] if unknown else []
    generation = analysis.query(f"SELECT count(*) FROM exchanges WHERE capture = ? AND {COUNTED}", [capture]).rows[0][0]
    if left := [name for name in DECISIVE if unsent.get(name)]:
        by_count: dict[int, list[str]] = {}
        for name in left:
            by_count.setdefault(unsent[name], []).append(name)
        said = "; ".join(f"{', '.join(names)} not sent by {n} of them" for n, names in by_count.items())
        missing.append(
            f"effective settings known for {len(rows)} of {generation} generation requests (the others were not "
            f"enriched: their own settings are listed as request; {said}: the engine's defaults, unknown)"
        )
    return _field(
        value,
        f"enrichments: each setting from the request, else the engine's default as it reports it ({len(rows)} requests)",
        "; ".join(missing) or None,
    )


def _unenriched(analysis: Analysis, capture: str, tally: dict[str, dict[tuple[str, str], int]]) -> dict[str, int]:
    """Add to ``tally`` the settings the counted requests with no enrichment sent themselves (what
    the engine used: they were listed as unknown, or left out beside the enriched ones' values), and
    how many of them left each setting unsent (the engine's default, unknown): returned by name."""
    rows = analysis.query(
        f"SELECT r.sampling FROM requests r JOIN ({_COUNTED_IDS}) x USING (capture, exchange_id) WHERE r.capture = ? "
        "AND NOT EXISTS (SELECT 1 FROM enrichment_latest e WHERE e.capture = r.capture "
        "AND e.exchange_id = r.exchange_id AND e.settings IS NOT NULL)",
        [capture],
    ).rows
    unsent: dict[str, int] = {}
    for (text,) in rows:
        sent = _loads(text) or {}
        for name in sorted(set(tally) | set(sent) | set(DECISIVE)):
            key = (json.dumps(_as_set(sent[name])), "request") if name in sent else ("null", "not sent")
            if name not in sent:
                unsent[name] = unsent.get(name, 0) + 1
                if name not in tally:
                    continue  # a setting neither the engine nor any request named: said unknown in the count only
            counts = tally.setdefault(name, {})
            counts[key] = counts.get(key, 0) + 1
    return unsent


def _sent_sampling(analysis: Analysis, capture: str, snap: dict[str, Any] | None, no_snap: str) -> dict[str, Any]:
    """The settings the requests set themselves, counted over the generation requests the figures
    count (``_COUNTED_IDS``, refused ones not): a setting a request sends is the one the engine used
    (``temperature=0`` needs no engine to be known), so only what the requests left to the engine's
    defaults is unknown without an enrichment."""
    rows = analysis.query(
        f"SELECT r.sampling FROM requests r JOIN ({_COUNTED_IDS}) x USING (capture, exchange_id) WHERE r.capture = ?",
        [capture],
    ).rows
    n = len(rows)
    tally: dict[str, dict[str, int]] = {}
    for (text,) in rows:
        for name, v in (_loads(text) or {}).items():
            counts = tally.setdefault(name, {})
            key = json.dumps(_as_set(v))
            counts[key] = counts.get(key, 0) + 1
    value: dict[str, list[dict[str, Any]]] = {}
    for name, counts in sorted(tally.items()):
        values = sorted(((json.loads(v), c) for v, c in counts.items()), key=lambda vc: _order(vc[0]))
        value[name] = [{"value": v, "source": "request", "requests": c} for v, c in values]
        if (unsent := n - sum(counts.values())) > 0:  # the rest left it to the engine
            value[name].append({"value": None, "source": "not sent", "requests": unsent})
    why = "no enrichment records them " + (
        f"and {no_snap}" if snap is None else "(record with probing on, or run `infertap enrich CAPTURE --engine URL`)"
    )
    if not value:
        return _unknown(f"no request set a sampling setting: each is the engine's default, and {why}", "request bodies")
    never = [name for name in DECISIVE if name not in value]
    left = [f"{', '.join(never)} not set by any request"] if never else []
    left += [
        f"{name} not set by {value[name][-1]['requests']} of {n} requests"
        for name in DECISIVE
        if name in value and value[name][-1]["source"] == "not sent"
    ]
    return _field(
        value,
        f"the requests' own settings (request bodies, {n} generation requests); no enrichment",
        f"{'; '.join(left)}: the engine's defaults, and {why}" if left else None,
    )


def _order(value: Any) -> tuple[int, Any]:
    """Numbers in numeric order (64 before 104), then anything else by its JSON."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, value)
    return (1, json.dumps(value))


def _as_set(value: Any) -> Any:
    """A setting as the user set it: an engine that keeps it in float32 reports 0.05 as
    0.05000000074505806, which is no other value."""
    return float(f"{value:.7g}") if isinstance(value, float) and math.isfinite(value) else value


#: The settings that change what a sampler picks: one of them unknown leaves the sampling unknown
#: (others the engine doesn't report, such as ``typical_p`` on llama-cpp-python, are listed as unknown only).
DECISIVE = ("temperature", "top_p", "top_k", "min_p", "repeat_penalty", "presence_penalty", "frequency_penalty")


def _measuring_side(recorder: dict[str, Any], group: dict[str, Any] | None) -> dict[str, Any]:
    kind = recorder.get("kind") or "unknown"
    side = {
        "replay": "replayer: infertap replay is the client; times are taken where requests leave and responses arrive",
        "proxy": "recorder: infertap record, a proxy between the clients and the engine; times are taken at the proxy, on the client side of the engine's wire",
        "mitm": "recorder: infertap mitm, an HTTPS proxy between the clients and the engine; client side of the engine's wire",
    }.get(kind, f"recorded by {kind}")
    server = ((group or {}).get("server_timings") or {}).get("source")
    value = {
        "recorder": kind,
        "side": side,
        # An import's times are its file's (a HAR's wall clock, in ms), not a monotonic clock's.
        "clock": recorder.get("timing") or "the recording process's monotonic clock (ns), wall clock only to anchor runs",
        "server_timings": f"reported separately, labelled: {server}" if server else "none reported by the engine",
    }
    return _field(value, "capture header's recorder; docs/metrics.md")


def _aggregation(group: dict[str, Any] | None) -> dict[str, Any]:
    metrics = (group or {}).get("metrics") or {}
    value = {
        "percentiles": [f"p{round(q * 100)}" for q in QUANTILES],
        "definition": "linear interpolation between closest ranks (DuckDB quantile_cont), over the successful generation requests",
        "n": {name: m.get("n") for name, m in metrics.items()},
        "throughput": "ok requests (and their output tokens) over the span from the first send to the last end",
        "intervals": "none for one run's percentiles; `infertap compare` gives 95% bootstrap intervals of median ratios (1,000 resamples)",
    }
    return _field(value, "analysis/stats.py; docs/metrics.md")


def _figures(groups: list[dict[str, Any]], origin: Origin = "recorded", apart: dict[str, int] | None = None) -> dict[str, Any]:
    """``apart``: the capture's requests no group holds (refused, a body not kept), said as stats says them."""
    heads = [_headline(g) for g in groups]
    if not heads:
        line = no_group_line(apart or {}, "this capture")
        return {"runs": [], "note": f"{line} (no figures)" if apart and any(apart.values()) else f"{line}: no figures"}
    figures = heads[0] if len(heads) == 1 else {"runs": heads, "note": f"{len(heads)} runs in this capture: figures per run"}
    said = note(sum(h["output_tokens_unknown"] for h in heads), sum(h["ok"] for h in heads), origin)
    if said:  # stats' rule (analysis/partly_counted.py), over the capture's runs
        figures["unknown"] = said
    return figures


def _headline(g: dict[str, Any]) -> dict[str, Any]:
    m = g["metrics"]
    pick = ("p50", "p90", "p99", "mean", "n")
    return {
        "run": g["key"].get("run"),
        "requests": g["requests"],
        "ok": g["ok"],
        "error_rate": g["error_rate"],
        "span_s": g["span_s"],
        **{f"{name}_ms": {k: m[name].get(k) for k in pick} for name in ("ttft", "ttft_content", "tpot", "itl", "e2e")},
        # ttft of an answer not streamed is its time to the whole body: said beside the figure.
        "ttft_kinds": g["ttft_kinds"],
        "output_tokens": {k: m["output_tokens"].get(k) for k in pick},
        "output_tokens_unknown": g["throughput"]["output_tokens_unknown"],  # ok answers of no count
        "throughput": g["throughput"],
        "concurrency": g["concurrency"],
        "energy": g.get("energy"),
        "telemetry_urls": g["telemetry_urls"],  # the exporters scraped (--telemetry-url, redacted)
        "telemetry": g["telemetry"],  # its runs, and those recorded with --no-telemetry
        "model_load": model_load_fact((g.get("server_timings") or {}).get("load")),
    }


# -- in words ------------------------------------------------------------------------------------


def short(value: Any) -> str:
    """A field's value in one line."""
    if value is None:
        return "unknown"
    if isinstance(value, dict):
        return "; ".join(f"{k}: {short(v)}" for k, v in value.items() if v not in (None, [], {}))
    if isinstance(value, list):
        return ", ".join(short(v) for v in value) or "-"
    if isinstance(value, float):
        return number(value)  # plain, as the report writes numbers: 19,250, never 1.925e+04
    return str(value)


def figure_lines(fig: dict[str, Any]) -> list[str]:
    """The card's headline figures in lines for people (``claim``, the report's claim cards), with
    what they are over where some answers' tokens are unknown."""
    heads = fig["runs"] if "runs" in fig else [fig]
    if not heads:
        return [fig["note"]]
    lines = []
    for h in heads:
        # A capture of several runs has a line each: named by run (as stats names them), or none could be told apart.
        whose = f"run {str(h['run'])[:12]}: " if len(heads) > 1 and h.get("run") else ""
        lat = ", ".join(_latency(h, m) for m in ("ttft", "tpot", "e2e"))
        t = h["throughput"]
        energy = h.get("energy")
        scraped = f"; telemetry scraped from {', '.join(h['telemetry_urls'])}" if h.get("telemetry_urls") else ""
        rates = (
            _rate(t["requests_per_s"], "req/s", "no span to measure it over"),
            _rate(t["output_tokens_per_s"], "output tok/s", "no output token count"),
        )
        lines.append(
            f"{whose}{h['ok']}/{h['requests']} ok; {lat}; {', '.join(rates)}; concurrency mean {short(h['concurrency']['mean'])}, "
            f"max {short(h['concurrency']['max'])}" + f"; {_energy_line(energy, h.get('telemetry'))}" + scraped
        )
        if said := load_line(h.get("model_load")):  # none where the engine reports no load time (the field says why)
            lines.append(f"{whose}{said}")
    if fig.get("unknown"):  # per-token figures over some answers only, or none
        lines.append(f"unknown: {fig['unknown']}")
    return lines


def _latency(h: dict[str, Any], m: str) -> str:
    """A latency's p50 and p99 in ms, or, where no answer measured it, why, once: "tpot p50 unknown /
    p99 unknown ms" put a unit after no number and said nothing of the cause."""
    ms = h[f"{m}_ms"]
    if ms["p50"] is None:
        return f"{m}: {_unmeasured(h, m)}"
    return f"{m} p50 {short(ms['p50'])} / p99 {short(ms['p99'])} ms" + (_ttft_kinds(h.get("ttft_kinds")) if m == "ttft" else "")


def _unmeasured(h: dict[str, Any], m: str) -> str:
    """Why no answer gave latency ``m`` (docs/metrics.md's definitions)."""
    if not h["ok"]:
        return "no ok answer"
    if m != "tpot":
        return "no answer measured it"
    if not (h.get("ttft_kinds") or {}).get("streamed"):
        return "no streamed answer"  # a body in one piece: no spacing between its tokens was observed
    if not h["output_tokens"].get("n"):
        return "no output token count"
    return "no answer of 2 tokens or more in 2 chunks or more (of one choice)"


def _rate(value: float | None, unit: str, why: str) -> str:
    return f"{unit}: {why}" if value is None else f"{short(value)} {unit}"


def _ttft_kinds(kinds: dict[str, int] | None) -> str:
    """What the ttft figure is where some answers were not streamed (their ttft is the time to the
    whole body, docs/metrics.md): a card read far from stats' note would take it for the first token's."""
    if not kinds or not kinds.get("whole_body"):
        return ""
    if not kinds.get("streamed"):
        return " (ttft: no answer streamed, so it is the time to the whole body)"
    return f" ({ttft_mix(kinds['streamed'], kinds['whole_body'])})"


def _energy_line(energy: dict[str, Any] | None, sampled: dict[str, Any] | None = None) -> str:
    """A run's energy in one short clause: its total, per request, per output token and mean power,
    and what measured it (the whole figure is in ``--json``); ``sampled``: its runs recorded with
    --no-telemetry, said apart from no power telemetry."""
    part = partly_unsampled(sampled)
    if not energy:
        if all_imported(sampled):
            return f"energy: {no_energy(sampled)}"
        if sampled is None or sampled["unsaid"] == sampled["runs"]:  # runs (or a card) older than the field
            return "energy: no telemetry"
        return f"energy: {no_energy(sampled, 'no power telemetry')}"
    if part:
        return f"{_energy_line(energy)}; {part}"
    if energy.get("joules") is None:
        return f"energy {energy.get('source') or 'unknown'}"
    units = (
        ("joules", "J"),
        ("joules_per_request", "J/request"),
        ("joules_per_output_token", "J/output token"),
        ("mean_watts", "W mean"),
    )
    said = ", ".join(f"{short(energy[k])} {unit}" for k, unit in units if energy.get(k) is not None)
    bridged = interpolated(energy, short)
    return f"energy {said} ({energy.get('source')}{'; ' + bridged if bridged else ''})"


def value_text(name: str, value: Any) -> str:
    """A field's value in one line for people (``claim``, the report's claim cards)."""
    if value is None:
        return "unknown"
    if name == "workload":
        line = (
            f"{value['short']}, {value['requests']} generation requests"
            f"{_and_unknown(value.get('bodies_unknown'))}, schedule {value['schedule_identity'][:16]} "
            f"({value['schedule_resolution_ms']:g} ms), prompt_tokens {short(value['prompt_tokens'])}, "
            f"output_tokens {short(value['output_tokens'])}"
        )
        if "source" in value and not value.get("source"):
            line += "; a replay whose source identity was not recorded"
        elif "source" in value:
            named = f"source {value['source'].get('short', '?')}"
            line += f"; {relation_to_source(value, value['schedule_identity'], named)}"
        if value.get("schedule_not_kept"):
            line += f"; {value['schedule_not_kept']}"
        if value.get("not_text"):
            media = f"; media {value['media_short']}" if value.get("media_short") else ""
            line += f"; apart: {not_text_words(value['not_text'])} (no text tokens to time: in no figure nor the identity{media})"
        if n := value.get("embeddings_requests"):
            plural = "s" if n != 1 else ""
            line += (
                f"; apart: {n} embeddings request{plural} (in no figure nor the identity; embeddings {value['embeddings_short']})"
            )
        if any(h != "none" for h in value.get("asked_headers") or ()):
            line += f"; headers asked: {asked_words(value['asked_headers'])}"
        return line
    if name == "runtime":
        d = value["digest"]
        # A digest of several files is no file's own sha256: `sha256sum PATH` gives another.
        others = (d.get("files") or 1) - 1
        more = (
            f" and {others} other engine librar{'y' if others == 1 else 'ies'} (of their sorted sha256sum lines)"
            if others
            else ""
        )
        digest = f"sha256 {d['sha256'][:16]}… of {d['path']}{more}" if d["sha256"] else "digest unknown"
        labels = ", ".join(f"{k}={v}" for k, v in (value.get("labels") or {}).items())
        said = f"{value['kind']} {value['version'] or '(version unknown)'}, {digest}, fingerprint {value['fingerprint']}"
        return f"{said}, labels {labels}" if labels else said
    if name == "quantization":
        scheme = "unknown" if value["scheme"] is None else str(value["scheme"])
        if value["dtype"] is None:
            return scheme
        if value["dtype_of"] == "tensor types":  # the scheme is one of them: name the mix
            return f"{scheme} (tensor types: {value['dtype']})"
        return f"{scheme}, {value['dtype']} ({value['dtype_of']})"
    if name == "sampling":
        return "; ".join(f"{k}={_setting_text(vs)}" for k, vs in value.items())
    return short(value)


def _and_unknown(n: int | None) -> str:
    """`` (and N sent with a body not kept)`` beside the requests an identity hashes, where any were."""
    return f" (and {n} sent with a body not kept)" if n else ""


def _setting_text(values: list[dict[str, Any]]) -> str:
    """One setting's values, each with its source and count; more than two numbers of one source as
    their range (max_tokens 64-256 over 20 requests, not 20 values)."""
    parts = []
    for source in dict.fromkeys(v["source"] for v in values):
        of = [v for v in values if v["source"] == source]
        numbers = [v["value"] for v in of if _order(v["value"])[0] == 0]
        if len(of) > 2 and len(numbers) == len(of):
            parts.append(f"{short(min(numbers))}-{short(max(numbers))} ({source}, {sum(v['requests'] for v in of)})")
        else:
            parts += [f"{short(v['value'])} ({source}, {v['requests']})" for v in of]
    return "/".join(parts)


def field_text(name: str, field: dict[str, Any]) -> str:
    """A field in one line (``claim``, the report's claim cards): its value, and what is unknown of it
    with the reason, "unknown" said once: a field wholly unknown reads "unknown: no engine snapshot",
    not "unknown (unknown: no engine snapshot)", and a reason that names what it leaves unknown
    ("prompt_tokens and output_tokens unknown: ...") stands in its brackets as it is."""
    why = field.get("unknown")
    if field["value"] is None and why:
        return f"unknown: {why}"
    said = why and "unknown" in why.split(":", 1)[0]
    note = f" ({why})" if said else f" (unknown: {why})" if why else ""
    return value_text(name, field["value"]) + note
