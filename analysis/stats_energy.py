"""A group's energy as ``stats`` states it, worded once: ``stats`` prints it on one line and the
report tabulates the same figures (a run's groups, or each side of a comparison), so neither gives a
figure, its decimals or the reason it is missing otherwise than the other (docs/metrics.md, energy).
"""

from __future__ import annotations

from typing import Any

from .sampled import interpolated, no_energy, partly_unsampled

#: The figures ``stats`` prints, in its order: (key in ``energy``, unit, decimals as printed).
FIGURES = (
    ("joules", "J", 1),
    ("joules_per_request", "J", 3),
    ("joules_per_output_token", "J", 4),
    ("watt_hours_per_session", "Wh", 4),
    ("mean_watts", "W", 1),
    ("idle_watts", "W", 1),
)
_DECIMALS = {key: digits for key, _, digits in FIGURES}


def fixed(value: Any, digits: int = 1) -> str:
    """A figure as ``stats`` prints it: ``digits`` decimals with thousands separators, "-" where none."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}"


def figure(energy: dict[str, Any], key: str) -> str:
    """One of ``FIGURES`` of ``energy``, to its decimals."""
    return fixed(energy.get(key), _DECIMALS[key])


def not_measured(energy: dict[str, Any] | None, sampled: dict[str, Any] | None) -> str | None:
    """Why a group has no energy figure, in the words ``stats`` prints after "energy: "; None where
    it has figures. ``sampled``: the group's ``telemetry`` (runs recorded with --no-telemetry)."""
    if energy is None:
        return no_energy(sampled)
    if energy.get("unknown") and energy["joules"] is None:
        return f"unknown: {energy['unknown']}"
    return None


def measured_by(energy: dict[str, Any]) -> str:
    """What measured the energy: its sources (and how much, where partly) and how many devices."""
    return f"{energy['source']}, {energy['devices']} device(s)"


def over(energy: dict[str, Any]) -> str | None:
    """The time the energy is over, where the group's runs were a while apart: their active time
    only; None where nothing between them was left out."""
    measured = energy.get("measured") or {}
    if not measured.get("between_runs_s"):
        return None
    return f"over {fixed(measured['seconds'], 2)} s active, the {fixed(measured['between_runs_s'], 2)} s between runs left out"


def figures_line(energy: dict[str, Any], per_token: str = "") -> str:
    """The figures as ``stats`` prints them, each named (``per_token``: what J per output token is
    over, where some answers' tokens are unknown, with its leading space)."""
    line = ", ".join(
        f"{key} {figure(energy, key)}" + (per_token if key == "joules_per_output_token" else "") for key, *_ in FIGURES
    )
    return line + (f"; {time}" if (time := over(energy)) else "")


def notes(energy: dict[str, Any], sampled: dict[str, Any] | None) -> list[str]:
    """What ``stats`` says after the figures: how much of them was interpolated across a gap in
    the power samples, and the runs recorded with --no-telemetry (the figures are over the others)."""
    return [said for said in (interpolated(energy, lambda v: fixed(v, 2)), partly_unsampled(sampled)) if said]
