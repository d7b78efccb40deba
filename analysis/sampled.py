"""Whether a group's runs sampled telemetry at all (``runs.telemetry``, from each run header's
``recorder.telemetry``): energy unknown because its runs were recorded with --no-telemetry is said
so, apart from a machine that was looked at and had no power telemetry; and how much of a figure that
was sampled rests on a straight line across a gap in the samples (``interpolated``)."""

from collections.abc import Callable
from typing import Any

from .machines import imported_only

NO_POWER = "no power telemetry (a GPU through NVML or nvidia-smi, a DCGM exporter, or RAPL)"
NOT_SAMPLED = "not sampled (recorded with --no-telemetry)"
IMPORTED = (
    "not measured: imported from a file, which does not say the machine its traffic ran on (the recording machine is unknown)"
)


def sampled(
    runs: list[tuple[str, str]], said: dict[tuple[str, str], bool | None], kinds: dict[tuple[str, str], str]
) -> dict[str, Any]:
    """A group's ``telemetry``: its runs, the ids of those recorded with --no-telemetry, how many
    say neither (captures older than ``recorder.telemetry``), the ids of the imported ones, whose
    machine no telemetry here was of, and whether all of its traffic was (``imported_only``, by
    ``kinds``: each run's recorder kind)."""
    keys = list(dict.fromkeys(runs))
    imported = {k for k in keys if kinds.get(k) == "import"}
    return {
        "runs": len(keys),
        "not_sampled": [r for c, r in keys if said.get((c, r)) is False],
        "unsaid": sum(said.get(k) is None and k not in imported for k in keys),
        "imported": [r for c, r in keys if (c, r) in imported],
        "all_imported": imported_only(kinds.get(k) or "" for k in keys),
    }


def all_unsampled(telemetry: dict[str, Any] | None) -> bool:
    return bool(telemetry and telemetry["not_sampled"] and len(telemetry["not_sampled"]) == telemetry["runs"])


def all_imported(telemetry: dict[str, Any] | None) -> bool:
    """Whether all of a group's traffic was imported (``machines.imported_only``, as ``sampled`` judged it)."""
    return bool(telemetry and telemetry.get("all_imported"))


def no_energy(telemetry: dict[str, Any] | None, no_power: str = NO_POWER) -> str:
    """Why a group has no energy figure: not sampled, imported, no power telemetry, or each in some
    of its runs (and no power telemetry only where some run was sampled and not imported)."""
    if all_unsampled(telemetry):
        return NOT_SAMPLED
    if all_imported(telemetry):
        return IMPORTED
    part = "; ".join(filter(None, (partly_unsampled(telemetry), partly_imported(telemetry))))
    if part and telemetry and len({*telemetry["not_sampled"], *telemetry["imported"]}) >= telemetry["runs"]:
        return part  # every run either not sampled or imported: none was looked at for power telemetry
    return f"{no_power} in its other runs; {part}" if part else no_power


def partly_imported(telemetry: dict[str, Any] | None) -> str | None:
    """Which of a group's runs were imported, where only some were; None where all or none were."""
    imported = (telemetry or {}).get("imported") or []
    if not telemetry or not imported or all_imported(telemetry):
        return None
    return f"{len(imported)} of {telemetry['runs']} runs imported from a file (their machine unknown): {', '.join(imported)}"


def partly_unsampled(telemetry: dict[str, Any] | None) -> str | None:
    """Which of a group's runs were recorded with --no-telemetry, where only some were (its energy,
    if any, is over the others); None where all or none were."""
    if not telemetry or not telemetry["not_sampled"] or all_unsampled(telemetry):
        return None
    off = telemetry["not_sampled"]
    return f"not sampled in {len(off)} of {telemetry['runs']} runs (recorded with --no-telemetry): {', '.join(off)}"


def interpolated(energy: dict[str, Any] | None, num: Callable[[float], str]) -> str:
    """The clause an energy figure carries where some device's power samples had a gap in its
    window (``energy.interpolated``): how many of its seconds were a straight line across it, per
    device; empty where none had."""
    bridged = (energy or {}).get("interpolated")
    if not bridged:
        return ""
    each = ", ".join(f"{device} {num(s)} s" for device, s in bridged["devices"].items())
    return f"{num(bridged['seconds'])} s of it interpolated across a gap in the power samples ({each})"
