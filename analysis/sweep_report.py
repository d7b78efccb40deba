"""``infertap report`` of capacity sweeps (``sweep.json``, infertap.analysis.capacity): one sweep, or
B's compared with A's (the same workload on two targets, judged by the same SLOs).

The page holds each sweep's configuration, one sentence saying which target carries more of the
workload and by how much, the capacity curves (goodput and achieved requests/s against the load;
each SLO's observed statistic against the load with its bound drawn across) and every point in a
table. Self-contained like the capture report: inline SVG, no scripts, no network.

Two capacities are told apart only when their knees don't overlap (B met the SLOs at a load where
A had failed them) and they differ by more than ``SAME``: a sweep's points are that coarse. A sweep
that never failed (or stopped on an error) says nothing above its highest pass: below the other's
capacity, which carries more can't be told.
"""

from __future__ import annotations

import html
import math
import os
from pathlib import Path
from typing import Any

from infertap.errors import ConfigError
from infertap.replay.sweep import load_text

from .capacity import RESULT, read_sweep
from .report import write_page
from .svg import COLORS, STYLE, SWEEP_MARKERS, SWEEP_MARKS, Line, line_svg, number, width
from .svg import _table as table
from .sweep_notes import lowest_not_passed, point_notes

#: Capacities closer than this (relative) are not called different.
SAME = 0.10

#: Each sweep shown: its name (A, B), its folder and its sweep.json.
_Sweeps = list[tuple[str, str, dict[str, Any]]]

#: The points table scrolls sideways in a box of its own and breaks a cell only at a space: at the
#: page's 1200 px its 15 columns or so (one per SLO) were squeezed, the shared style's
#: ``overflow-wrap:anywhere`` cutting figures and words mid-way ("0.33|33", "10|0", "unkno|wn").
POINTS_STYLE = ".points{overflow-x:auto}.points td,.points th{overflow-wrap:normal}.points td{white-space:nowrap}"

_AXIS = {"speed": "speed (× the recorded arrival rate)", "concurrency": "concurrency (requests in flight)"}


def is_sweep(path: str | os.PathLike[str]) -> bool:
    return (Path(path) / RESULT).is_file()


def sweeps_given(a: str | os.PathLike[str], b: str | os.PathLike[str] | None = None) -> bool:
    """Whether A (and B) are sweeps (True) or captures (False); a ConfigError when one is each."""
    if b is None or is_sweep(a) == is_sweep(b):
        return is_sweep(a)
    sweep, capture = (a, b) if is_sweep(a) else (b, a)
    raise ConfigError(
        f"{sweep} is a sweep ({RESULT}) and {capture} a capture: report two sweeps, or two captures, not one of each"
    )


def load_sweeps(a: str | os.PathLike[str], b: str | os.PathLike[str] | None = None) -> _Sweeps:
    """A's sweep (and B's), read; two must share their SLOs and their kind of load, or a ConfigError says why not."""
    sweeps = [("A", str(a), read_sweep(a))] + ([("B", str(b), read_sweep(b))] if b is not None else [])
    if b is not None:
        sa, sb = sweeps[0][2], sweeps[1][2]
        if _slo_key(sa) != _slo_key(sb):
            raise ConfigError(
                f"the two sweeps were judged by different SLOs (A: {_slo_text(sa)}; B: {_slo_text(sb)}): "
                "their capacities don't compare; report each one alone, or sweep both with the same --slo"
            )
        if sa["kind"] != sb["kind"]:
            raise ConfigError(
                f"A is a {sa['kind']} sweep and B a {sb['kind']} sweep: their loads share no axis; "
                "sweep both by speed (--speeds, --search) or both by --concurrency-levels"
            )
    return sweeps


def load_of(point: dict[str, Any], kind: str) -> float:
    """A point's load (its speed or concurrency)."""
    return float(point[kind])


def _slo_key(sweep: dict[str, Any]) -> list[tuple[str, str, float]]:
    """The SLOs as what they hold (``ttft:p99<=2s`` and ``ttft:p99<=2000ms`` are one), in any order."""
    return sorted((s["metric"], s["stat"], float(s["bound"])) for s in sweep["slo"])


def _slo_text(sweep: dict[str, Any]) -> str:
    return ", ".join(s["slo"] for s in sweep["slo"]) or "none"


def _load(kind: str, value: float | None) -> str:
    return "-" if value is None else f"{kind} {load_text(value)}"


def _rate(value: float | None) -> str:
    return "unknown" if value is None else number(value, 3)


def _goodput(cap: dict[str, Any]) -> float | None:
    """The requests/s at the capacity that met every SLO (DistServe's goodput), where achieved
    requests/s count every ``ok`` answer, some of them over a bound the percentile allowed."""
    return (cap.get("goodput") or {}).get("requests_per_s")


def _of_which(*caps: dict[str, Any]) -> str:
    """``of which 1.8/s met every SLO (goodput)`` (``1.8 vs 3.6/s`` for two), said beside achieved requests/s."""
    rates = [_goodput(c) for c in caps]
    if all(r is None for r in rates):
        return "goodput (requests/s that met every SLO) unknown"
    return f"of which {' vs '.join(_rate(r) for r in rates)}/s met every SLO (goodput)"


def _ratio(hi: float | None, lo: float | None) -> float | None:
    return hi / lo if hi is not None and lo else None


def capacity_sentence(sweeps: _Sweeps) -> str:
    """One sentence: a sweep's capacity, or which of two targets carries more of the workload and by how much."""
    if len(sweeps) == 1:
        return _one(*sweeps[0])
    (na, _, sa), (nb, _, sb) = sweeps
    kind, ca, cb = sa["kind"], sa["capacity"], sb["capacity"]
    if ca is None and cb is None:
        if any(not s["points"] or s["points"][0].get("passed") or s["points"][0].get("unjudged") for _, _, s in sweeps):
            return " ".join(_one(*s) for s in sweeps)  # one passed where no pass counted, or judged nothing: each said apart
        lows = [f"{n} {load_text(load_of(s['points'][0], kind))}" for n, _, s in sweeps if s["points"]]
        return f"Neither target met the SLOs at any load tried (lowest {kind}: {', '.join(lows) or 'no point ran'})."
    if ca is None or cb is None:
        (nw, sw), (nl, sl) = ((nb, sb), (na, sa)) if ca is None else ((na, sa), (nb, sb))
        cw = sw["capacity"]
        up_to = f"up to {_load(kind, cw[kind])}, {_rate(cw['requests_per_s'])} requests/s, {_of_which(cw)}"
        if sl["points"] and sl["points"][0].get("passed"):  # it met them too, where no pass counted
            return f"Only {nw}'s capacity is stated ({up_to}); {nl}'s is not: {_unstated(sl)}."
        low = load_text(load_of(sl["points"][0], kind)) if sl["points"] else "none"
        lost = (
            f"{nl} has no judged point (its sweep stopped before the first one ended)"
            if not sl["points"]
            else f"{nl}'s is not stated: {_unjudged_lowest(sl)}"
            if sl["points"][0].get("unjudged")
            else f"{nl} met them at no {kind} tried (lowest: {low})"
        )
        return f"Only {nw} met the SLOs ({up_to}); {lost}."
    return _pair(kind, (na, sa), (nb, sb))


def _one(name: str, _path: str, sweep: dict[str, Any]) -> str:
    kind, cap, knee = sweep["kind"], sweep["capacity"], sweep["knee"]
    if cap is None:
        if not sweep["points"]:
            return f"{name}: no point ran to its end (the sweep was stopped): nothing is judged."
        lowest = load_text(load_of(sweep["points"][0], kind))
        if sweep["points"][0].get("passed"):
            return f"{name}: no capacity is stated: {_unstated(sweep)}."
        if sweep["points"][0].get("unjudged"):  # no failure seen there: the command's words, not "met at no load"
            return f"{name}: no capacity is stated: {_unjudged_lowest(sweep)}."
        if sweep.get("inconsistent"):
            passed = ", ".join(load_text(v) for v in sweep["inconsistent"])
            return f"{name} failed the SLOs at its lowest {kind} tried ({lowest}), then met them at {passed}: no capacity is stated (noise, or a target that recovered)."
        return f"{name} met the SLOs at no load tried (lowest {kind} tried: {lowest})."
    where = (
        f"the knee lies between {load_text(knee['passed'])} and {load_text(knee['failed'])}"
        if knee["failed"] is not None
        else f"the sweep stopped at {_stopped(sweep)}, so how much higher it goes is unknown"
        if sweep.get("aborted")
        else "the sweep did not finish (killed, or still running), so how much higher it goes is unknown"
        if _unfinished(sweep)
        else f"higher loads passed without measuring the target ({kind} {_above(sweep)}), so how much higher it goes is unknown"
        if _above(sweep)
        else "it met them at every load tried, so its capacity may be higher"
    )
    return (
        f"{name} carries this workload up to {_load(kind, cap[kind])} under the SLOs "
        f"({_rate(cap['requests_per_s'])} requests/s, {_of_which(cap)}, {_rate(cap['output_tokens_per_s'])} output tokens/s); {where}."
    )


def _unjudged_lowest(sweep: dict[str, Any]) -> str:
    """Why a sweep whose lowest point judged nothing states no capacity, and where it met the SLOs
    above it (``inconsistent``: passes above a point counted as no pass), which the sentence left out."""
    said = lowest_not_passed(sweep["kind"], sweep["points"][0])
    if passed := sweep.get("inconsistent"):
        said += f", then met the SLOs at {sweep['kind']} {', '.join(load_text(v) for v in passed)} (not counted: above a point that counts as no pass)"
    return said


def _unstated(sweep: dict[str, Any]) -> str:
    """Why a sweep whose lowest load passed states no capacity: no pass measured the target at its load
    (too few requests, a level never reached, an SLO nothing measured: infertap.replay.sweep_checks),
    or the replayer fell behind at every pass."""
    kind, behind = sweep["kind"], sweep.get("replayer_behind") or ()
    others = [u for u in sweep.get("unmeasured") or () if float(u[kind]) not in behind]
    if others:
        why = "; ".join(f"{kind} {load_text(float(u[kind]))}: {', '.join(u['why'])}" for u in others)
        return f"no pass measured the target at its load ({why})"
    loads = ", ".join(load_text(v) for v in behind)
    return f"it met the SLOs only where the replayer fell behind its schedule ({kind} {loads})"


def _above(sweep: dict[str, Any]) -> str:
    """The loads above the capacity that passed without measuring the target (infertap.replay.sweep_checks)."""
    kind, cap = sweep["kind"], sweep["capacity"]
    return ", ".join(load_text(float(u[kind])) for u in sweep.get("unmeasured") or () if float(u[kind]) > float(cap[kind]))


def _unfinished(sweep: dict[str, Any]) -> bool:
    """Written between points and never after the last (a sweep.json of before the field: finished)."""
    return sweep.get("finished") is False and not sweep.get("stopped_early") and not sweep.get("aborted")


def _stopped(sweep: dict[str, Any]) -> str:
    """Where and why a sweep stopped on an error (``aborted``)."""
    kind, aborted = sweep["kind"], sweep["aborted"]
    return f"{kind} {load_text(float(aborted[kind]))} ({aborted['error']})"


def _pair(kind: str, a: tuple[str, dict[str, Any]], b: tuple[str, dict[str, Any]]) -> str:
    """Both met the SLOs somewhere: the one whose knee lies wholly above the other's carries more."""

    def knee(s: dict[str, Any]) -> tuple[float, float]:
        failed = s["knee"]["failed"]
        return s["knee"]["passed"], math.inf if failed is None else failed

    (lo_a, hi_a), (lo_b, hi_b) = knee(a[1]), knee(b[1])
    if lo_b >= hi_a or lo_a >= hi_b:
        (nw, sw), (nl, sl) = (b, a) if lo_b >= hi_a else (a, b)
        cw, cl = sw["capacity"], sl["capacity"]
        loads, rates = _ratio(cw[kind], cl[kind]), _ratio(cw["requests_per_s"], cl["requests_per_s"])
        if loads is not None and loads > 1 + SAME:
            at_least = "at least " if sw["knee"]["failed"] is None else ""
            if rates is None or rates >= 1:
                return (
                    f"{nw} carries {at_least}{number(rates if rates is not None else loads, 3)}x as much of this workload "
                    f"as {nl}: {_rate(cw['requests_per_s'])} vs {_rate(cl['requests_per_s'])} requests/s within the SLOs, "
                    f"{_of_which(cw, cl)}, at {kind} {load_text(cw[kind])} vs {load_text(cl[kind])} ({number(loads, 3)}x)."
                )
            # The higher load held its SLOs with fewer requests/s (slower answers, within the bounds): the
            # load is what it carries more of, and the requests/s are said for what they are, never "0.8x as much".
            return (
                f"{nw} carries {at_least}{number(loads, 3)}x the {kind} of {nl} within the SLOs ({kind} {load_text(cw[kind])} "
                f"vs {load_text(cl[kind])}), though at fewer requests/s: {_rate(cw['requests_per_s'])} vs "
                f"{_rate(cl['requests_per_s'])}, {_of_which(cw, cl)} (its answers took longer, within the bounds)."
            )
    if math.isinf(hi_a) and math.isinf(hi_b):
        return (
            f"Both met the SLOs at every load tried (up to {kind} {load_text(lo_a)} and {load_text(lo_b)}): "
            "sweep higher to tell them apart."
        )
    for (no, lo_o, hi_o), (nx, lo_x, hi_x) in (
        ((a[0], lo_a, hi_a), (b[0], lo_b, hi_b)),
        ((b[0], lo_b, hi_b), (a[0], lo_a, hi_a)),
    ):
        if math.isinf(hi_o) and lo_o < lo_x:  # never failed (or stopped), and never tried as high as the other carries
            return (
                f"Which carries more can't be told: {no} met the SLOs up to {kind} {load_text(lo_o)} and was not judged "
                f"higher, below {nx}'s capacity ({kind} {load_text(lo_x)}); sweep {no} higher to tell them apart."
            )
        if math.isinf(hi_o) and not math.isinf(hi_x):  # it passed within the other's knee, and was not judged higher
            return (
                f"{no} carries at least as much of this workload as {nx}: it met the SLOs up to {kind} {load_text(lo_o)} "
                f"and was not judged higher; {nx}'s knee lies {_knee(lo_x, hi_x)}. Sweep {no} higher to tell by how much."
            )
    ca, cb = a[1]["capacity"], b[1]["capacity"]
    return (
        f"{a[0]} and {b[0]} carry this workload about equally, within the sweeps' resolution ({a[0]}'s knee at {kind} "
        f"{_knee(lo_a, hi_a)}, {b[0]}'s {_knee(lo_b, hi_b)}): {_rate(ca['requests_per_s'])} vs {_rate(cb['requests_per_s'])} "
        f"requests/s at capacity, {_of_which(ca, cb)}."
    )


def _knee(passed: float, failed: float) -> str:
    return f"at least {load_text(passed)}" if math.isinf(failed) else f"between {load_text(passed)} and {load_text(failed)}"


# -- the page -------------------------------------------------------------------------------------


def render_sweeps(a: str | os.PathLike[str], b: str | os.PathLike[str] | None = None) -> str:
    """The report of one sweep, or of B's compared with A's."""
    sweeps = load_sweeps(a, b)
    # The runs' colours, and their points' shapes where there are two: a page printed in grey, or read
    # without telling blue from red, told A from B by nothing else (dashed and hollow say other things).
    legend = "".join(
        f'<span style="color:{c}">■ {name}: {html.escape(path)}{f" ({m})" if len(sweeps) > 1 else ""}</span>'
        for (name, path, _), c, m in zip(sweeps, COLORS, SWEEP_MARKS, strict=False)
    )
    out = [
        f"<!doctype html><html><head><meta charset=utf-8><title>infertap sweep report</title><style>{STYLE}{POINTS_STYLE}</style></head><body>",
        "<h1>infertap sweep report</h1>",
        f'<p class="legend">{legend}</p>',
        "<h2>1. Sweeps</h2>",
        *(_configuration(name, sweep) for name, _, sweep in sweeps),
        *_same_source(sweeps),
        "<h2>2. Capacity</h2>",
        f'<p class="verdict"><b>{html.escape(capacity_sentence(sweeps))}</b></p>',
        _curves(sweeps),
        "<p>Solid: goodput (requests/s that met every SLO); dashed: achieved requests/s (ok answers); hollow marks: "
        "points that failed the SLOs; grey dashed: an SLO's bound"
        + ("; A's points are circles, B's squares" if len(sweeps) > 1 else "")
        + ". Definitions: docs/metrics.md.</p>",
        "<h2>3. Points</h2>",
        *(f"<h3>{name}</h3>{_points_table(sweep)}{_notes(sweep)}" for name, _, sweep in sweeps),
        "</body></html>",
    ]
    return "\n".join(out)


def failed_when_recorded(result: dict[str, Any]) -> str | None:
    """A sentence on the workload's own failures (``source_failed``), where it holds any: replayed as
    recorded they fail again at every load, so a point's failures may not be the load's doing."""
    failed = result.get("source_failed") or {}
    if not failed:
        return None
    statuses = ", ".join(f"{'no answer' if status == 'none' else status} ×{n}" for status, n in failed.items())
    return (
        f"{sum(failed.values())} of the workload's requests failed when recorded ({statuses}): replayed as recorded, "
        "they are likely to fail again at every load, in error_rate and over every latency bound, not for the load; "
        "--filter status=200 sweeps only those that succeeded"
    )


def _configuration(name: str, sweep: dict[str, Any]) -> str:
    kind = sweep["kind"]
    interrupted = "; interrupted: what it found so far" if sweep.get("stopped_early") else ""
    if sweep.get("aborted"):
        interrupted += f"; stopped at {_stopped(sweep)}: what it found so far"
    if _unfinished(sweep):
        interrupted += "; not finished (killed, or still running): what it found so far"
    if warmup := sweep.get("warmup"):  # a sweep.json of before the warm-up ran at the first point's load names none
        load = f"at {kind} {load_text(warmup[kind])}" if warmup.get(kind) is not None else "one at a time"
        interrupted += f"; after a warm-up of {warmup['sent']} requests, {load} (not judged)"
    return (
        f"<p><b>{name}</b>: a {kind} sweep of {_sources(sweep)} against "
        f"{html.escape(str(sweep.get('target') or 'unknown'))} ({html.escape(str(sweep.get('target_kind') or 'engine kind unknown'))}); "
        f"SLOs: {html.escape(_slo_text(sweep))}; {len(sweep['points'])} points{interrupted}.</p>"
        + (f"<p>Note: {html.escape(failed)}.</p>" if (failed := failed_when_recorded(sweep)) else "")
    )


def _sources(sweep: dict[str, Any]) -> str:
    """The captures a sweep replayed, each its own path: several are one workload."""
    paths = [f"<code>{html.escape(str(p))}</code>" for p in sweep.get("source") or ()]
    if len(paths) == 1:
        return paths[0]
    return f"{len(paths)} captures as one workload ({', '.join(paths)})" if paths else "unknown captures"


def _same_source(sweeps: _Sweeps) -> list[str]:
    sources = {tuple(sorted(os.path.normpath(str(p)) for p in s.get("source") or ())) for _, _, s in sweeps}
    if len(sources) < 2:
        return []
    return ["<p>Note: A and B replayed different captures; they compare only if those hold the same workload.</p>"]


def _tick_load(tick: float) -> str:
    """A load axis's tick as the loads are written (``load_text``: "1500", as the table and the
    command have it; ``number`` wrote "1,500"), the float noise of its step dropped (0.1 × 3 is
    0.30000000000000004, a load no one tried)."""
    return load_text(float(f"{tick:.12g}"))


def _curves(sweeps: _Sweeps) -> str:
    """Throughput against load, then each SLO's observed statistic against load, both sweeps on the same axes."""
    kind = sweeps[0][2]["kind"]
    xlabel = _AXIS.get(kind) or str(kind)
    lines = []
    for i, ((name, _, sweep), color) in enumerate(zip(sweeps, COLORS, strict=False)):
        points, hollow = sweep["points"], [not p["passed"] for p in sweep["points"]]
        goodput = [(load_of(p, kind), (p.get("goodput") or {}).get("requests_per_s")) for p in points]
        achieved = [(load_of(p, kind), p.get("requests_per_s")) for p in points]
        stroke = width(i, len(sweeps))
        marker = SWEEP_MARKERS[i % len(SWEEP_MARKERS)]
        lines.append(Line(f"{name} goodput", goodput, color, hollow=hollow, stroke=stroke, marker=marker, x_text=load_text))
        lines.append(
            Line(f"{name} achieved", achieved, color, dashed=True, hollow=hollow, stroke=stroke, marker=marker, x_text=load_text)
        )
    plots = [f"<div><h3>Goodput and achieved requests/s</h3>{line_svg(lines, xlabel, 'requests/s', xtick_text=_tick_load)}</div>"]
    for i, slo in enumerate(sweeps[0][2]["slo"]):
        latency = slo["metric"] != "error_rate"
        scale, unit = (1e6, "ms") if latency else (0.01, "%")
        lines = []
        for j, ((name, _, sweep), color) in enumerate(zip(sweeps, COLORS, strict=False)):
            observed = [_observed(p, slo) for p in sweep["points"]]
            values = [
                (load_of(p, kind), None if v is None else v / scale) for p, v in zip(sweep["points"], observed, strict=True)
            ]
            hollow = [not p["passed"] for p in sweep["points"]]
            marker = SWEEP_MARKERS[j % len(SWEEP_MARKERS)]
            stroke = width(j, len(sweeps))
            lines.append(Line(name, values, color, hollow=hollow, stroke=stroke, marker=marker, x_text=load_text))
        bound = float(slo["bound"]) / scale
        title = f"{slo['stat']} of {slo['metric']} ({unit})" if latency else "error rate (%)"
        svg = line_svg(lines, xlabel, title, hlines=[(bound, f"SLO {slo['slo']}")], xtick_text=_tick_load)
        plots.append(f"<div><h3>SLO {i + 1}: {html.escape(slo['slo'])}</h3>{svg}</div>")
    return f'<div class="plots">{"".join(plots)}</div>'


def _observed(point: dict[str, Any], slo: dict[str, Any]) -> float | None:
    """The point's observed value for ``slo``."""
    return (_result(point, slo) or {}).get("observed")


def _result(point: dict[str, Any], slo: dict[str, Any]) -> dict[str, Any] | None:
    """How the point did against ``slo``, found by what it bounds (the other sweep may have written it differently)."""
    key = (slo["metric"], slo["stat"], float(slo["bound"]))
    for s in point.get("slos") or ():
        if (s["metric"], s["stat"], float(s["bound"])) == key:
            return s
    return None


def verdict_of(point: dict[str, Any]) -> str:
    """A point's verdict in a few words: pass or fail, and whether it measured the target at its load
    (infertap.replay.sweep_checks): the table's, here and in ``infertap sweep``."""
    if point["passed"]:
        verdict = "pass (not measured)" if point.get("unmeasured") else "pass"
    elif point.get("unjudged"):
        verdict = "unknown (no pass)"
    else:
        verdict = (
            "lost (ended early)" if point.get("lost_early") else "fail (not carried)" if point.get("not_carried") else "fail"
        )
    return verdict + (" (replayer behind)" if point.get("replayer_behind") else "")


def _points_table(sweep: dict[str, Any]) -> str:
    kind = sweep["kind"]
    headers = [kind, "verdict", "offered req/s", "req/s", "goodput req/s", "attainment", "errors"]
    headers += [s["slo"] for s in sweep["slo"]] + ["lag p99 ms", "sent", "not sent", "wall s"]
    rows = []
    for p in sweep["points"]:
        rows.append(
            [
                load_text(load_of(p, kind)),
                verdict_of(p),
                # A closed loop offers what it gets: no rate was asked for, which "unknown" misread.
                "closed loop" if kind == "concurrency" else p.get("offered_requests_per_s"),
                p.get("requests_per_s"),
                (p.get("goodput") or {}).get("requests_per_s"),
                _percent(p.get("attainment")),
                errors_text(p, sweep["slo"]) or "unknown",
                *("unknown" if p.get("unjudged") else _shown(s, _result(p, s)) for s in sweep["slo"]),
                (p.get("schedule_lag_ms") or {}).get("p99"),
                p.get("sent"),
                p.get("not_sent"),
                p.get("wall_s"),
            ]
        )
    return f'<div class="points">{table(headers, rows, [not p["passed"] for p in sweep["points"]])}</div>'


def _notes(sweep: dict[str, Any]) -> str:
    """What the points' figures can't say (requests the replayer cancelled, answers of no token
    count, ...), as ``infertap sweep``'s notes say it."""
    lines = [line for p in sweep["points"] for line in point_notes(sweep["kind"], p)]
    if not lines:
        return ""
    return "<p>Notes:</p><ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in lines) + "</ul>"


def _percent(value: float | None, places: int = 0) -> str:
    return "unknown" if value is None else share_text(value, places)


def errors_text(point: dict[str, Any], slos: list[dict[str, Any]]) -> str | None:
    """A point's error rate as the errors column shows it (None where unknown): one decimal, or as
    many more as its ``error_rate`` SLO's cell shows, so that the two agree ("1.0%" stood beside
    "1.04% ✗")."""
    rate = point.get("error_rate")
    if rate is None:
        return None
    text = share_text(rate, 1)
    for slo in slos:
        result = _result(point, slo) if slo["metric"] == "error_rate" else None
        if result is not None and result.get("met") is not None and result.get("observed") == rate:  # judged on it
            text = observed_text(slo, rate, result["met"], text[:-1])
    return text


def share_text(value: float, places: int) -> str:
    """A share as a percentage with ``places`` decimals, or more where those would round a share
    that is neither none nor all to 0% or 100%: one error in 5,000 read "errors 0.0%", one
    request in 300 over a bound "attainment 100%"."""
    text = f"{value:.{places}%}"
    while 0 < value < 1 and float(text[:-1]) in (0, 100) and places < 9:
        places += 1
        text = f"{value:.{places}%}"
    return text


def beside_bound(text: str, value: float, bound: float, met: bool) -> str:
    """``text`` (``value`` rounded for show, in the bound's unit), or ``value`` with as many more
    decimals as put it on the side of ``bound`` it was judged on: an e2e of 150.04 ms over a 150 ms
    bound read "150.0 ms ✗", an error rate of 1/96 over 1% "1.0% ✗", 120 µs over 100 µs "0.1 ms ✗"."""
    bound = round(bound, 9)  # as written: 0.29 x 100 is 28.999999999999996 in floats

    def sided(shown: str) -> bool:
        return (float(shown.replace(",", "")) <= bound) == met

    places, comma = len(text.partition(".")[2]), "," if "," in text else ""
    while not sided(text) and places < 9:
        places += 1
        text = f"{value:{comma}.{places}f}"
    return text


def observed_text(slo: dict[str, Any], value: float, met: bool, shown: str | None = None) -> str:
    """An SLO's observed value as the command and the report print it (ms, or % for ``error_rate``),
    ``shown`` its rounding there, widened where rounding would put it on the wrong side of the bound."""
    scale, unit = (100, "%") if slo["metric"] == "error_rate" else (1e-6, " ms")
    value, bound = value * scale, float(slo["bound"]) * scale
    return beside_bound(shown if shown is not None else f"{value:.1f}", value, bound, met) + unit


def _shown(slo: dict[str, Any], result: dict[str, Any] | None) -> str:
    """An SLO's cell: the observed value; over the bound where its statistic falls on a request that
    failed or lacked the metric; not measurable where nothing in the point had the metric."""
    if result is None:
        return "-"
    if "met" in result and result["met"] is None:
        return "not measurable"
    value = result.get("observed")
    if value is None:
        return "over ✗" if result.get("met") is False else "-"
    met = result["met"] if "met" in result else value <= float(slo["bound"])  # compared exactly where it was judged
    text = observed_text(slo, value, met, None if slo["metric"] == "error_rate" else number(value / 1e6, 3))
    return text if met else text + " ✗"


def write_sweep_report(out: str | os.PathLike[str], a: str | os.PathLike[str], b: str | os.PathLike[str] | None = None) -> None:
    page = render_sweeps(a, b)
    write_page(out, page)
