"""The report's energy table: each run's energy as ``infertap stats`` states it, from the same
values (``Telemetry.energy`` through ``speed_stats``, or a comparison's sides, which read it the
same way) and in the same words (``stats_energy``), so that a report read on its own answers "at
what energy" with the figures stats prints: joules, per request, per output token, per session,
mean and idle power, what measured them, and why a figure is missing where it is.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .in_no_group import apart_line, no_group_line
from .partly_counted import OVER_MEAN
from .stats_energy import FIGURES, figure, fixed, measured_by, not_measured, notes
from .svg import _table

_PER_TOKEN = "energy.joules_per_output_token"


@dataclass(frozen=True, slots=True)
class Column:
    """One run's energy: its name, ``energy`` and ``telemetry`` as stats or compare give them, and
    what J per output token is over where some answers' tokens are unknown (``partly_counted``)."""

    name: str
    energy: dict[str, Any] | None
    sampled: dict[str, Any] | None
    per_token: str | None = None


def stated_energy(stats: dict[str, Any], name: str) -> list[str]:
    """One run's energy section from its ``speed_stats`` (by run): what ``infertap stats`` states of
    it, figure by figure, and the telemetry lines stats prints under them (``name``: the run's, as
    its claim card names it, where it is one group)."""
    groups = stats["groups"]
    if not groups:  # as stats says it: no group, no figure to state, and the requests held apart (refused)
        return ["<h3>Energy</h3>", *(f"<p>{html.escape(line)}</p>" for line in _no_group(stats))]
    out = [
        "<h3>Energy</h3>",
        "<p>As <code>infertap stats</code> states it (docs/metrics.md, energy): the engine's devices over the run's "
        "active time, attributed by time; - where stats can't state a figure either.</p>",
        *energy_table(_stats_columns(groups, name)),
    ]
    for g in groups:
        whose = f"{_run(g)}: " if len(groups) > 1 else ""
        if g["telemetry_urls"]:  # where an exporter's figures came from
            out.append(f"<p>{html.escape(whose + 'telemetry scraped (--telemetry-url): ' + ', '.join(g['telemetry_urls']))}</p>")
        out += [f"<p>{html.escape(f'{whose}telemetry unread: {why}')}</p>" for why in g["telemetry_unread"]]
    return out + [f"<p>{html.escape(line)}</p>" for line in _apart(stats)]


def _apart(stats: dict[str, Any]) -> list[str]:
    """Stats' line after its groups of the requests none holds (a capture of refusals alone beside
    counted traffic); where they lie in several captures of the run, one line per capture, named, with
    its own count, as each capture's claim card states it (as ``_no_group``)."""
    by_capture = stats.get("in_no_group_by_capture") or {}
    lines = [(c["capture"], line) for c in stats["captures"] if (line := apart_line(by_capture.get(c["capture"], {})))]
    if len(lines) < 2:
        return list(filter(None, [apart_line(stats["in_no_group"])]))
    return [f"{capture}: {line}" for capture, line in lines]


def _no_group(stats: dict[str, Any]) -> list[str]:
    """Stats' line for a run of no group; of a run that is several captures, one line per capture with
    its own count, each named: stats' total over them read as one count beside the claim cards, which
    state each capture's."""
    captures = [c["capture"] for c in stats["captures"]]
    if len(captures) < 2:
        return [no_group_line(stats["in_no_group"])]
    by_capture = stats.get("in_no_group_by_capture") or {}
    return [no_group_line(by_capture.get(capture, {}), capture) for capture in captures]


def compared_energy(energy: dict[str, Any]) -> list[str]:
    """Each side of a comparison (``compare``'s ``energy``, each over its whole capture) as
    ``stats`` states it, where either side has figures (compare's lines say why where neither has):
    the report's only statement of each side's figures (compare's lines give the rest, ``tabled``)."""
    if not any(energy[side] and energy[side].get("joules") is not None for side in ("a", "b")):
        return []
    counted = energy.get("partly_counted") or {}
    columns = [
        Column(side.upper(), energy[side], (energy.get("telemetry") or {}).get(side), OVER_MEAN if counted.get(side) else None)
        for side in ("a", "b")
    ]
    return [
        "<p>Each side's energy as <code>infertap stats</code> states it (docs/metrics.md, energy):</p>",
        *energy_table(columns),
    ]


def _run(group: dict[str, Any]) -> str:
    return f"run {str(group['key'].get('run'))[:12]}"


def _stats_columns(groups: Sequence[dict[str, Any]], name: str) -> list[Column]:
    """``speed_stats``' groups of one run (by run, as ``stats`` prints them by default): ``name``
    where it is one group, else each named by its run, as stats names it."""
    return [
        Column(
            name if len(groups) == 1 else _run(g),
            g.get("energy"),
            g.get("telemetry"),
            ((g.get("partly_counted") or {}).get("figures") or {}).get(_PER_TOKEN),
        )
        for g in groups
    ]


def energy_table(columns: Sequence[Column]) -> list[str]:
    """The figures side by side, one column per run; where no run has any, each run's reason in
    the line ``stats`` prints ("energy: no power telemetry (...)"), no table of dashes."""
    whys = [not_measured(c.energy, c.sampled) for c in columns]
    if all(why is not None for why in whys):
        named = len(columns) > 1
        return [
            f"<p>{html.escape((f'{c.name}: ' if named else '') + f'energy: {why}')}</p>"
            for c, why in zip(columns, whys, strict=True)
        ]
    rows: list[list[str]] = []
    for key, unit, _ in FIGURES:
        cells = []
        for c, why in zip(columns, whys, strict=True):
            value = "-" if why is not None or c.energy is None else figure(c.energy, key)
            if key == "joules_per_output_token" and c.per_token and value != "-":
                value += f" ({c.per_token})"
            cells.append(value)
        rows.append([key, unit, *cells])
    rows.append(["measured by", "", *(_source(c, why) for c, why in zip(columns, whys, strict=True))])
    rows.append(["measured", "", *(_coverage(c.energy) if why is None else "-" for c, why in zip(columns, whys, strict=True))])
    said = [
        [] if why is not None or c.energy is None else notes(c.energy, c.sampled) for c, why in zip(columns, whys, strict=True)
    ]
    if any(said):
        rows.append(["notes", "", *("; ".join(each) or "-" for each in said)])
    return [_table(["figure", "unit", *(c.name for c in columns)], rows)]


def _source(c: Column, why: str | None) -> str:
    """Its sources and devices, or why it has none, in stats' words."""
    if why is not None or c.energy is None:
        return f"energy: {why}"
    return measured_by(c.energy)


def _coverage(energy: dict[str, Any] | None) -> str:
    """How much of the run the figures cover (``energy.measured``): its ok requests and runs
    measured, over how many seconds, and the time between its runs left out."""
    m = (energy or {}).get("measured") or {}
    if not m:
        return "-"
    requests = "-" if m.get("requests") is None else m["requests"]
    text = f"{requests} of {m['of']} ok requests, {m['runs']} of {m['of_runs']} runs, over {fixed(m['seconds'], 2)} s active"
    if m.get("between_runs_s"):
        text += f", the {fixed(m['between_runs_s'], 2)} s between runs left out"
    return text
