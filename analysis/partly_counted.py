"""The figures that rest on output token counts, where some ok answers have none (docs/metrics.md).

A body not streamed, with no usage and no enrichment, has no output token count: output tok/s and
the output token total add the other answers' tokens only, so they are lower bounds, and J per
output token is J per request over the counted answers' mean. One rule, so that ``stats`` (beside
each figure) and ``claim`` (its card's ``figures.unknown``) say it alike.
"""

from __future__ import annotations

from typing import Any

LOWER_BOUND = "a lower bound: the counted answers' tokens only"
OVER_MEAN = "per request over the counted answers' mean output tokens"
#: A group's figures (dotted paths in ``stats --json``) that rest on the counts, and what each then is.
FIGURES = {
    "throughput.output_tokens_per_s": LOWER_BOUND,
    "workload.output_tokens.total": LOWER_BOUND,
    "energy.joules_per_output_token": OVER_MEAN,
}
_WHY = (
    "no usage in the answer, not streamed, no enrichment: ask the engine for usage, or run `infertap enrich CAPTURE --engine URL`"
)


def note(uncounted: int, ok: int) -> str | None:
    """What the per-token figures are over, where ``uncounted`` of ``ok`` answers have no output
    token count; None where every one has."""
    if not uncounted:
        return None
    if uncounted >= ok:
        return f"output tokens unknown for all {ok} ok answers ({_WHY}): no output tok/s nor J per output token"
    return (
        f"output tokens unknown for {uncounted} of {ok} ok answers ({_WHY}): output tok/s and the output token total "
        f"count the other {ok - uncounted} answers' tokens only (lower bounds), J per output token is per request "
        "over their mean"
    )


def partly_counted(group: dict[str, Any]) -> dict[str, Any] | None:
    """A ``stats`` group's note and each of its figures that has a value resting on partly known
    counts (path -> what it is); None where every ok answer's count is known."""
    said = note(group["throughput"]["output_tokens_unknown"], group["ok"])
    if said is None:
        return None
    return {"note": said, "figures": {path: how for path, how in FIGURES.items() if _at(group, path) is not None}}


def _at(group: dict[str, Any], path: str) -> Any:
    value: Any = group
    for name in path.split("."):
        value = value.get(name) if isinstance(value, dict) else None
    return value
