"""The figures that rest on token counts, where some ok answers (or some requests' prompts) have none (docs/metrics.md).

A body not streamed, with no usage and no enrichment, has no output token count: output tok/s and
the output token total add the other answers' tokens only, so they are lower bounds, and J per
output token is J per request over the counted answers' mean. A prompt of no count leaves the
prompt token total a lower bound as well; output per prompt rests on both totals. One rule, so that
``stats`` (beside each figure) and ``claim`` (its card's ``figures.unknown``, its workload's
``unknown``) say it alike.
"""

from __future__ import annotations

from typing import Any, Literal

LOWER_BOUND = "a lower bound: the counted answers' tokens only"
OVER_MEAN = "per request over the counted answers' mean output tokens"
PROMPT_LOWER_BOUND = "a lower bound: the counted requests' tokens only"
OF_COUNTED = "of the counted tokens only: a total it rests on is a lower bound"
#: A group's figures (dotted paths in ``stats --json``) that rest on the output counts, and what each then is.
FIGURES = {
    "throughput.output_tokens_per_s": LOWER_BOUND,
    "workload.output_tokens.total": LOWER_BOUND,
    "workload.output_per_prompt": OF_COUNTED,
    "energy.joules_per_output_token": OVER_MEAN,
}
#: Those that a cut answer of no count leaves out (energy is per ok answer: no cut answer is in it).
OUTPUT_TOTALS = {key: FIGURES[key] for key in ("throughput.output_tokens_per_s", "workload.output_tokens.total")}
#: Those that rest on every request's prompt count.
PROMPT_FIGURES = {"workload.prompt_tokens.total": PROMPT_LOWER_BOUND}
#: Those that rest on the ok answers' prompt counts only: a failed request's missing count is none of theirs.
OK_PROMPT_FIGURES = {"workload.output_per_prompt": OF_COUNTED}
#: Where a group's exchanges came from (``sampled.origin``): recorded here, all imported from a
#: file, or some of each. The advice differs: an imported file can't be recorded again with usage.
Origin = Literal["recorded", "imported", "mixed"]
#: How to get the counts, by where the exchanges came from.
ADVICE: dict[Origin, str] = {
    "recorded": "ask the engine for usage, or run `infertap enrich CAPTURE --engine URL`",
    "imported": "the file can't be recorded again with usage: run `infertap enrich CAPTURE --engine URL` "
    "against an engine serving the same model to count them",
    "mixed": "ask the engine for usage in recordings to come (the imported runs' file can't be recorded again), "
    "or run `infertap enrich CAPTURE --engine URL`",
}


def note(uncounted: int, ok: int, origin: Origin = "recorded") -> str | None:
    """What the per-token figures are over, where ``uncounted`` of ``ok`` answers have no output
    token count, and how to count them for exchanges of that ``origin``; None where every one has."""
    if not uncounted:
        return None
    why = f"no usage in the answer, not streamed, no enrichment: {ADVICE[origin]}"
    if uncounted >= ok:
        return f"output tokens unknown for all {ok} ok answers ({why}): no output tok/s nor J per output token"
    return (
        f"output tokens unknown for {uncounted} of {ok} ok answers ({why}): output tok/s and the output token total "
        f"count the other {ok - uncounted} answers' tokens only (lower bounds), J per output token is per request "
        "over their mean"
    )


def cut_note(uncounted: int) -> str | None:
    """What the output token totals leave out, where ``uncounted`` 2xx answers were kept only in part
    (``response_not_kept``) with no usage in their kept tail; None where there are none."""
    if not uncounted:
        return None
    return (
        f"{uncounted} answers kept only in part (response_not_kept) have no usage in their kept tail: output tok/s and the "
        "output token total leave their tokens out (lower bounds)"
    )


def prompt_note(known: int, requests: int) -> str | None:
    """What the prompt token total is over, where ``known`` of ``requests`` came with a count; None
    where all did, or none did (the total is then unknown, not partial)."""
    if not known or known >= requests:
        return None
    return f"prompt_tokens counts {known} of {requests} requests: {requests - known} came with no count"


def partly_counted(group: dict[str, Any]) -> dict[str, Any] | None:
    """A ``stats`` group's note and each of its figures that has a value resting on partly known
    counts (path -> what it is); None where every ok answer's and every prompt's count is known."""
    w = group["workload"]
    counted = group["ok"] + (group.get("response_not_kept_counted") or 0)  # the answers whose output tokens are summed
    ok_uncounted = (w["prompt_tokens"].get("known_ok") or 0) < counted  # an ok answer's prompt of no count
    prompt_figures = PROMPT_FIGURES | (OK_PROMPT_FIGURES if ok_uncounted else {})
    said = [
        (text, figures)
        for text, figures in (
            (note(group["throughput"]["output_tokens_unknown"], group["ok"], origin(group.get("telemetry"))), FIGURES),
            (cut_note(group.get("response_not_kept_uncounted") or 0), OUTPUT_TOTALS),
            (prompt_note(w["prompt_tokens"]["known"], w["requests"]), prompt_figures),
        )
        if text
    ]
    if not said:
        return None
    rests = {path: how for _, figures in said for path, how in figures.items() if _at(group, path) is not None}
    return {"note": "; ".join(text for text, _ in said), "figures": rests}


def origin(telemetry: dict[str, Any] | None) -> Origin:
    """Where a group's exchanges came from, by its ``telemetry`` (``sampled.sampled``): all imported
    (``machines.imported_only``, as it judged it), some, or none."""
    if telemetry and telemetry.get("all_imported"):
        return "imported"
    return "mixed" if telemetry and telemetry.get("imported") else "recorded"


def _at(group: dict[str, Any], path: str) -> Any:
    value: Any = group
    for name in path.split("."):
        value = value.get(name) if isinstance(value, dict) else None
    return value
