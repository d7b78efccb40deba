"""Configuration differences between two runs: engine snapshots, effective settings, effective prompts,
what the API did to the input before the model read it.

These come first in a comparison because they are what explains the rest.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from infertap.engines.launch_args import LAUNCH_FACTS

from .divergence import first_divergence

SNAPSHOT_FACTS = (
    # First: how many threads and how large a batch explain a speed ratio on the same model file
    # (llama.cpp's threads and batch sizes; vLLM's batch sizes, parallelism, dtypes, CPU threads).
    *LAUNCH_FACTS,
    "version",
    "models",
    "model_sha256",
    "quantization",
    "dtype",
    "context_size",
    "parallel_slots",
    "chat_template_sha256",
    "bos_token",
    "eos_token",
    "runtime_sha256",
    "model_path",
)


def same(a: Any, b: Any) -> bool:
    """Equal, with a float equal to float32 precision (llama.cpp reports 0.05 as 0.05000000074505806).

    Only a float gets that tolerance: integers (seeds, token counts) compare exactly, since seeds
    20241205 and 20241206 are within 1e-6 of each other and still two different seeds."""
    numbers = isinstance(a, float | int) and isinstance(b, float | int) and not isinstance(a, bool) and not isinstance(b, bool)
    if numbers and (isinstance(a, float) or isinstance(b, float)):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
    return a == b


def _value(snapshot: dict[str, Any] | None, name: str) -> Any:
    if not snapshot:
        return None
    return ((snapshot.get("facts") or {}).get(name) or {}).get("value")


def _per_slot(snapshot: dict[str, Any] | None, name: str) -> bool:
    """Whether the probe read the fact per slot (llama-server's n_ctx under -np N), as its source says."""
    source = (((snapshot or {}).get("facts") or {}).get(name) or {}).get("source")
    return isinstance(source, str) and source.endswith("(per slot)")


def snapshot_diff(
    a: dict[str, Any] | None,
    b: dict[str, Any] | None,
    hosts_unknown: tuple[str | None, str | None] = (None, None),
    probed: tuple[str | None, str | None] = (None, None),
) -> list[dict[str, Any]]:
    """One row per fact: both values, whether they differ (both known) and whether only one side knows it.

    The ``version`` row of two different engine kinds never differs: it carries ``not_compared``
    (why) instead, and its values stay for display beside the kind. ``hosts_unknown``: per side,
    why its snapshot's host facts are not its engine machine's whatever the snapshot says (an
    import's traffic ran on a machine its file does not name; an ``enrich`` probed this one):
    that side's host rows are unknown, ``why_unknown`` saying so. ``probed``: per side, why its
    snapshot's engine facts may not be its traffic's (an import's ``enrich`` probed the engine
    afterwards): each row that side knows keeps its value, ``probed`` (``{"A": why}``) saying so."""
    rows: list[dict[str, Any]] = [{"fact": "kind", "a": a.get("kind") if a else None, "b": b.get("kind") if b else None}]
    rows += [{"fact": name, "a": _value(a, name), "b": _value(b, name)} for name in SNAPSHOT_FACTS]
    for row in rows[1:]:  # a value per slot is said so, as probe says it: 1024 per slot is not a context of 1024
        if _per_slot(a, row["fact"]) or _per_slot(b, row["fact"]):
            row["per_slot"] = [_per_slot(a, row["fact"]), _per_slot(b, row["fact"])]
    da, db = _value(a, "defaults") or {}, _value(b, "defaults") or {}
    from infertap.engines.base import SAMPLING, canonical

    ca = {canonical(k): v for k, v in da.items()}
    cb = {canonical(k): v for k, v in db.items()}
    for name in sorted((set(ca) | set(cb)) & set(SAMPLING)):
        rows.append({"fact": f"default {name}", "a": ca.get(name), "b": cb.get(name)})
    # The recording machine is the engine's only where the engine runs on it: another client
    # machine in front of the same remote engine is no difference of the engine's.
    host_a, host_b = (
        ((snap or {}).get("host") or {}) if (snap or {}).get("host_is_engine_host") and not unknown else {}
        for snap, unknown in zip((a, b), hosts_unknown, strict=True)
    )
    why = {side: reason for side, reason in zip("AB", hosts_unknown, strict=True) if reason}
    hosts = [
        {"fact": "host cpu", "a": host_a.get("cpu"), "b": host_b.get("cpu")},
        {
            "fact": "host gpus",
            "a": [g["name"] for g in host_a.get("gpus") or ()] or None,
            "b": [g["name"] for g in host_b.get("gpus") or ()] or None,
        },
    ]
    rows += [{**row, "why_unknown": why} if why else row for row in hosts]
    for row in rows:  # the host rows too: a recording's machine beside an import's is the recording's engine's only
        after = {
            side: note for side, note, value in zip("AB", probed, (row["a"], row["b"]), strict=True) if note and value is not None
        }
        if after:
            row["probed"] = after
    for row in rows:
        known = (row["a"] is not None) + (row["b"] is not None)
        # An unknown beside a known value is not a difference: it may not differ at all.
        row["differs"] = known == 2 and not same(row["a"], row["b"])
        row["unknown"] = known < 2
        row["one_side"] = known == 1  # known on one side only
    row = {r["fact"]: r for r in rows}
    kind = row["kind"]
    if kind["differs"]:
        # llama-cpp-python 0.3.36 against vllm 0.32.0: true, but the versions (and builds) of two
        # engines don't compare, and the kind already differs. Shown beside the kind, not counted.
        for name in ("version", "runtime_sha256"):
            row[name]["differs"] = False
            row[name]["not_compared"] = f"{name.split('_')[0]}s of different engines ({kind['a']}, {kind['b']}) don't compare"
    if row["model_path"]["differs"] and not row["model_sha256"]["unknown"] and not row["model_sha256"]["differs"]:
        row["model_path"]["differs"] = False
        row["model_path"]["not_compared"] = "the same file (model_sha256) at another path"
    return rows


def why_unknown_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """What ``snapshot_diff``'s ``why_unknown`` says, a line per side and reason, as compare and
    the report print it: ``host cpu and host gpus of A unknown: <why>``."""
    facts: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        for side, why in (row.get("why_unknown") or {}).items():
            facts.setdefault((side, why), []).append(row["fact"])
    return [f"{' and '.join(names)} of {side} unknown: {why}" for (side, why), names in facts.items()]


def probed_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """What ``snapshot_diff``'s ``probed`` says, a line per side, as compare and the report print
    it: ``kind, version and models of A probed by `infertap enrich` at <time>, after ...``."""
    facts: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        for side, why in (row.get("probed") or {}).items():
            facts.setdefault((side, why), []).append(row["fact"])
    return [f"{_and(names)} of {side} {why}" for (side, why), names in facts.items()]


def _and(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def several_configurations(a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]]) -> str | None:
    """Why ``snapshot_diff`` of each side's last snapshot doesn't describe a whole side: a side
    whose snapshots hold several engine configurations (``fingerprint``, ``kind``, ``url`` each; a
    model or flags swapped mid-run) ran its exchanges under each of them. None: one each, or none."""
    said = [
        f"{name} ran under {len(seen)} engine configurations ("
        + ", ".join(f"{c.get('kind')} at {c.get('url')} (fingerprint {c.get('fingerprint')})" for c in seen)
        + ")"
        for name, seen in (("A", a), ("B", b))
        if len(seen) > 1
    ]
    if not said:
        return None
    return "; ".join(said) + ": the snapshot rows compare each side's last one, not the configuration of every exchange"


def _shown(value: Any) -> str:
    """A setting as the user wrote it: an engine that keeps it in float32 reports 0.05 as 0.05000000074505806."""
    if isinstance(value, float) and len(repr(value)) > 10:
        return f"{value:.7g}"
    return repr(value)


def settings_diff(pairs: Sequence[tuple[dict[str, Any] | None, dict[str, Any] | None]]) -> list[dict[str, Any]]:
    """Effective sampling settings that differ between paired exchanges: which values, how often, from where."""
    diffs: dict[str, Counter[tuple[str, str]]] = {}
    for ea, eb in pairs:
        if not ea or not eb:
            continue
        sa, sb = ea.get("settings") or {}, eb.get("settings") or {}
        for name in sorted(set(sa) | set(sb)):
            va, vb = sa.get(name, {}), sb.get(name, {})
            if not same(va.get("value"), vb.get("value")):
                key = (
                    f"{_shown(va.get('value'))} ({va.get('source', 'absent')})",
                    f"{_shown(vb.get('value'))} ({vb.get('source', 'absent')})",
                )
                diffs.setdefault(name, Counter())[key] += 1
    rows = [{"setting": name, "a": a, "b": b, "exchanges": n} for name, c in diffs.items() for (a, b), n in c.most_common()]
    # Differences known on both sides first: those are the ones that explain something.
    return sorted(
        rows,
        key=lambda r: (
            "(unknown)" in r["a"] or "(unknown)" in r["b"] or "(absent)" in r["a"] or "(absent)" in r["b"],
            -r["exchanges"],
        ),
    )


def prompt_diff(
    ea: dict[str, Any] | None, eb: dict[str, Any] | None, distrusted: tuple[bool, bool] = (False, False)
) -> dict[str, Any] | None:
    """Effective prompt tokens of one pair compared, with a readable explanation where one fits.

    ``distrusted``: whether a side's rebuilt prompts disagreed anywhere with its engine's own count
    (usage): the engine renders prompts otherwise than its probed template says (llama-cpp-python
    started with ``--chat_format``), so its rebuilt ids are not the prompt it ran, equal or not."""
    if not ea or not eb:
        return None
    if any(distrusted):
        sides = "both sides" if all(distrusted) else "A" if distrusted[0] else "B"
        return {
            "equal": None,
            "why": f"rebuilt prompts disagree with the engine's own count on {sides} (a chat format the engine was started with?)",
        }
    ta, tb = ea.get("prompt_tokens") or {}, eb.get("prompt_tokens") or {}
    ia, ib = ta.get("ids"), tb.get("ids")
    if ia is None or ib is None:
        return {
            "equal": None,
            "why": "prompt token ids unknown on " + ("both sides" if ia is None and ib is None else "one side"),
        }
    at = first_divergence(ia, ib)
    if at is None:
        return {"equal": True, "count": len(ia)}
    out: dict[str, Any] = {"equal": False, "first_difference": at, "count_a": len(ia), "count_b": len(ib)}
    ra, rb = ta.get("rendered"), tb.get("rendered")
    if len(ia) > 1 and ia[0] == ia[1] and ia[1:] == ib:
        out["why"] = f"A repeats its first token ({ia[0]}): a duplicated BOS"
    elif len(ib) > 1 and ib[0] == ib[1] and ib[1:] == ia:
        out["why"] = f"B repeats its first token ({ib[0]}): a duplicated BOS"
    elif ib[1:] == ia:
        out["why"] = f"B has one extra leading token ({ib[0]}): an added BOS or special token"
    elif ia[1:] == ib:
        out["why"] = f"A has one extra leading token ({ia[0]}): an added BOS or special token"
    elif ra is not None and rb is not None and ra != rb:
        cut = first_divergence(ra, rb) or 0
        out["why"] = (
            f"different templates: the rendered prompts differ at character {cut} ({ra[cut : cut + 30]!r} vs {rb[cut : cut + 30]!r})"
        )
    elif ra is not None and ra == rb:
        out["why"] = "the same rendered text, tokenized differently"
    else:
        out["why"] = f"the token ids differ from position {at}"
    return out


def served(counts: Mapping[str, int]) -> dict[str, int] | None:
    """How many exchanges of each side said how the server served them beyond their words (Bedrock's
    ``trace``: a guardrail's assessment, the model a prompt router chose; ``performanceConfig``: the
    latency tier; a model's other ``additionalModelResponseFields``), and in how many pairs that
    differs, from the divergence's counts: answers in the same words served otherwise are not the
    same run. None where no side said any."""
    a, b, differ = (counts.get(k, 0) for k in ("served_a", "served_b", "served_differ"))
    return {"a": a, "b": b, "pairs_differ": differ} if a or b else None


def input_changes(counts: Mapping[str, int]) -> dict[str, int] | None:
    """How many exchanges of each side had their input changed by the API before the model read it
    (Anthropic's context edits applied, thinking blocks dropped; the tools an MCP server listed to the
    Responses API, which the model reads as it reads the request's tools), and in how many pairs the changes
    differ (one side only, or other changes), from the divergence's counts; None where no side's
    input was changed: the same request is then the same effective input on both sides."""
    a, b, differ = (counts.get(k, 0) for k in ("input_changed_a", "input_changed_b", "input_changes_differ"))
    return {"a": a, "b": b, "pairs_differ": differ} if a or b else None
