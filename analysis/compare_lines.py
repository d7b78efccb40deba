"""The lines ``compare`` prints on energy, the engines' state and sessions, worded once: the CLI
prints them and the HTML report shows them, from the same comparison, so the two never give a
figure differently."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .partly_counted import OVER_MEAN
from .sampled import IMPORTED, NO_POWER, NOT_SAMPLED, interpolated, no_energy, partly_unsampled
from .stats_energy import measured_by, not_measured
from .svg import number

#: A line and whether it warns (yellow in the terminal, highlighted in the report).
Said = tuple[str, bool]


def _num(v: float | None) -> str:
    return "unknown" if v is None else number(v, 3)


def ratio_text(v: float | None) -> str:
    """A B/A ratio to three significant digits, zeros kept (1.00, 0.987), "-" where unknown."""
    return "-" if v is None else number(v, 3, trim=False)


def interval_text(ci: Sequence[float] | None) -> str:
    return f"{ratio_text(ci[0])}–{ratio_text(ci[1])}" if ci else "-"


#: Where a run has no idle power: as ``stats`` prints "idle_watts -", said why.
NO_IDLE = "idle W unknown (no power sample while nothing was in flight)"


def _energy_line(x: dict[str, Any], num: Callable[[float | None], str], counted: str | None = None) -> str:
    """One run's energy, each figure ``stats`` prints for it (docs/metrics.md) and what measured it,
    as ``stats`` says that; where its runs were a while apart, the active time it is over; where
    some answers' output tokens are unknown (``counted``: stats' note), what J per output token is
    over, beside it as stats gives it."""
    idle = NO_IDLE if x.get("idle_watts") is None else f"{num(x['idle_watts'])} W idle"
    per_token = f" ({OVER_MEAN})" if counted and x["joules_per_output_token"] is not None else ""
    line = f"{num(x['joules_per_output_token'])} J per output token{per_token}, {num(x['joules_per_request'])} J per request, "
    line += f"{num(x['mean_watts'])} W mean, {idle}, {num(x.get('watt_hours_per_session'))} Wh per session, "
    line += f"{num(x['joules'])} J in all ({measured_by(x)})"
    measured = x.get("measured") or {}
    if measured.get("between_runs_s"):
        line += f", over {num(measured['seconds'])} s active, the {num(measured['between_runs_s'])} s between its runs left out"
    if bridged := interpolated(x, num):
        line += f"; {bridged}"
    return line


def energy_lines(e: dict[str, Any], tabled: bool = False) -> list[Said]:
    """Energy beside speed (compare's ``energy``): per output token and per request, B over A, or why
    neither run measured any; then the engine's state on each side. ``tabled``: each side's figures
    (or why it has none) and the notes on them are tabulated above (the report's, report_energy):
    not said again here, only what the table does not hold."""
    out: list[Said] = []
    sampled = e.get("telemetry") or {}
    # Why each side has none, as stats says it: the same on both sides is said once.
    why = {side: no_energy(sampled.get(side)) for side in ("a", "b")}
    if not e["a"] and not e["b"] and why["a"] == why["b"] == NO_POWER:
        out.append(
            (
                "energy: neither run measured energy: no power telemetry in either run (a GPU through NVML or nvidia-smi, "
                "a DCGM exporter, or RAPL)",
                False,
            )
        )
    elif not e["a"] and not e["b"] and why["a"] == why["b"] == NOT_SAMPLED:
        out.append((f"energy: neither run measured energy: {NOT_SAMPLED} in either run", False))
    elif not e["a"] and not e["b"] and why["a"] == why["b"] == IMPORTED:
        out.append((f"energy: neither run measured energy: both {IMPORTED}", False))
    else:
        counted = e.get("partly_counted") or {}
        for side in ("a", "b"):
            x = e[side]
            said = no_energy(sampled.get(side), "no power telemetry") if not x else not_measured(x, sampled.get(side))
            if not tabled:
                out.append(
                    (f"energy {side.upper()}: " + (_energy_line(x, _num, counted.get(side)) if said is None else said), False)
                )
            if said is None and counted.get(side):  # as stats says it under its figures
                out.append((f"energy {side.upper()}: note: {counted[side]}", False))
            part = partly_unsampled(sampled.get(side))
            if x and part and not (tabled and said is None):  # its figure is over the runs that sampled telemetry
                out.append((f"energy {side.upper()}: {part}", False))
            if e["telemetry_urls"][side]:  # where an exporter's figures came from, as stats names them
                out.append(
                    (f"energy {side.upper()}: telemetry scraped (--telemetry-url): {', '.join(e['telemetry_urls'][side])}", False)
                )
        if e["measured"] == "neither":
            out.append(("energy: neither run measured energy: nothing to compare", False))
        if e["unlike"]:
            out.append((f"energy: {e['unlike']}", True))
        if e["ratio_joules_per_output_token"] is not None:
            partly = [side.upper() for side in ("a", "b") if e["partly_measured"][side]]
            note = "" if e["same_source"] else " (measured by different sources: compare with care)"
            if partly:  # over the measured runs' requests only (energy.measured), which the line above gives
                note += (
                    f" ({' and '.join(partly)} partly measured: over {'their' if len(partly) > 1 else 'its'} measured runs only)"
                )
            if uncounted := [side.upper() for side in ("a", "b") if counted.get(side)]:
                note += f" ({' and '.join(uncounted)}: J per output token {OVER_MEAN})"
            out.append(
                (
                    f"energy B/A: {_num(e['ratio_joules_per_output_token'])}x per output token, "
                    f"{_num(e['ratio_joules_per_request'])}x per request{note}",
                    False,
                )
            )
    for side in ("a", "b"):
        state = e["engine_state"][side]
        if state:
            shown = ", ".join(f"{k} {_num(v)}" for k, v in state.items() if v is not None and k != "unknown")
            out.append((f"engine state {side.upper()}: {shown}", False))
            for name, why in state.get("unknown", {}).items():
                out.append((f"engine state {side.upper()}: {name} unknown: {why}", False))
    return out


def _seconds(v: float | None) -> str:
    return "-" if v is None else f"{number(v, 2)} s"


def session_lines(s: dict[str, Any] | None) -> list[str]:
    """Sessions as units of work (compare's ``sessions``): makespan B/A, and the turn at which answers
    first differ; none where no session has more than one turn."""
    if not s or not s["multi_turn"]:
        return []
    a, b = s["makespan_s"]["a"], s["makespan_s"]["b"]
    first = s["first_differing_turn"]
    turns = ", ".join(f"turn {t} ×{n}" for t, n in first["by_turn"].items()) or "none"
    why = {"unpaired": "a turn unpaired", "failed": "a turn failed on B", "unfinished": "a turn unfinished on B"}
    reasons = ", ".join(f"{n} {why[k]}" for k, n in s["partial_by_reason"].items() if n)
    left = f", {s['partial']} left out ({reasons})" if s["partial"] else ""
    # Each line after the first over the same sessions, the compared ones, as its lead says.
    over = f"  over the {s['compared']} compared:"
    return [
        f"sessions: {s['sessions']} in A ({s['multi_turn']} with more than one turn); {s['compared']} compared, "
        f"every turn answered on B ({s['compared_multi_turn']} with more than one turn){left}",
        f"{over} makespan p50 A {_seconds(a['p50'])}, B {_seconds(b['p50'])}, B/A {ratio_text(s['ratio_p50'])} "
        f"(95% CI {interval_text(s['ratio_ci95'])})",
        f"{over} answers first differ at: {turns}; identical sessions {first['identical']} ({s['note']})",
    ]
