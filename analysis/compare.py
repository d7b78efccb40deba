"""``compare``: two runs of the same workload, in the order that explains them.

1. configuration (engine snapshots, effective settings, effective prompts), 2. speed side by side
with B/A ratios and bootstrap intervals, 3. divergence of the outputs, 4. the most divergent
exchanges with an inline diff. With a baseline (a second run of A's own configuration), B's
divergence is shown next to A's divergence from itself: the noise floor.
"""

from __future__ import annotations

import math
import os
import statistics
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from infertap.apis import Output, read_request, read_response
from infertap.capture.reader import CaptureReader

from .configdiff import prompt_diff, settings_diff, snapshot_diff
from .divergence import first_divergence, kl_shared_prefix, logprob_positions, similarity, text_diff, tool_call_diff
from .energy import Telemetry
from .errors import AnalysisError
from .extract import extractor
from .pairing import Pairs, pair
from .ratios import bootstrap_ratio, distribution
from .sessions import session_comparison
from .store import Analysis
from .workload_identity import traffic

SPEED_METRICS = ("ttft", "ttft_content", "tpot", "e2e")


class Run:
    """One side of a comparison: its exchanges, enrichments, last engine snapshot and metrics."""

    def __init__(self, path: str | os.PathLike[str], analysis: Analysis) -> None:
        self.path = str(path)
        reader = CaptureReader(path)
        self.exchanges: list[dict[str, Any]] = []
        self.enrichments: dict[str, dict[str, Any]] = {}
        self.snapshot: dict[str, Any] | None = None
        for record in reader.records():
            kind = record["type"]
            if kind == "exchange":
                self.exchanges.append(record)
            elif kind == "enrichment":
                self.enrichments[record["exchange_id"]] = record
            elif kind == "engine":
                self.snapshot = record
        self.torn = [str(t) for t in reader.torn]
        self.metrics = {r["exchange_id"]: r for r in analysis.query("SELECT * FROM metrics").records()}
        self.energy, self.engine_state = _power(analysis)


def _power(analysis: Analysis) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The run's energy and engine state over the span of its generation requests (docs/metrics.md)."""
    first, last, ok, tokens, sessions, captures = analysis.sql(
        "SELECT min(sent_wall_ns), max(end_wall_ns), count(*) FILTER (WHERE ok), coalesce(sum(output_tokens) FILTER (WHERE ok), 0), "
        "count(DISTINCT session), list(DISTINCT capture) FROM metrics WHERE generation"
    ).fetchall()[0]
    if first is None or last is None:
        return None, None
    telemetry = Telemetry(analysis)
    return telemetry.energy(captures, first, last, ok, tokens, sessions), telemetry.engine_state(captures, first, last)


def _load(path: str | os.PathLike[str]) -> Run:
    with Analysis([path]) as analysis:
        return Run(path, analysis)


def speed(a: Run, b: Run, pairs: Pairs) -> list[dict[str, Any]]:
    """Per metric, A and B over the exchanges paired and ok on both sides, with B/A and its interval."""
    rows = []
    for name in SPEED_METRICS:
        va, vb = [], []
        for x, y in pairs.pairs:
            ma, mb = a.metrics.get(x["id"]), b.metrics.get(y["id"])
            if not ma or not mb or not ma["ok"] or not mb["ok"]:
                continue
            ta, tb = ma.get(f"{name}_ns"), mb.get(f"{name}_ns")
            if ta is not None and tb is not None:
                va.append(ta / 1e6)
                vb.append(tb / 1e6)
        da, db = distribution(va), distribution(vb)
        ratio = db["p50"] / da["p50"] if da["p50"] and db["p50"] is not None else None
        rows.append({"metric": name, "unit": "ms", "a": da, "b": db, "ratio_p50": ratio, "ratio_ci95": bootstrap_ratio(va, vb)})
    return rows


def energy(a: Run, b: Run) -> dict[str, Any]:
    """Each run's energy over its whole span (attributed by time, docs/metrics.md), B/A per request
    and per output token, and the engine's state (peak KV cache, queue, preemptions) on each side."""
    ea, eb = a.energy or {}, b.energy or {}
    ratios = {
        f"ratio_{k}": _ratio_of(eb.get(k), ea.get(k)) for k in ("joules_per_request", "joules_per_output_token", "mean_watts")
    }
    return {
        "a": a.energy,
        "b": b.energy,
        **ratios,
        "same_source": bool(a.energy and b.energy and ea.get("source") == eb.get("source")),
        "engine_state": {"a": a.engine_state, "b": b.engine_state},
    }


def engine_state_diff(a: dict[str, Any] | None, b: dict[str, Any] | None) -> list[dict[str, Any]]:
    """What the engine went through that differs between the runs (queueing, cache, preemptions):
    a cause to read before the speed, listed where both sides know it and the values differ."""
    if not a or not b:
        return []
    return [
        {"name": name, "a": a[name], "b": b[name]}
        for name in a
        if a[name] is not None and b.get(name) is not None and not math.isclose(a[name], b[name], rel_tol=0.05, abs_tol=1e-9)
    ]


def _ratio_of(b: float | None, a: float | None) -> float | None:
    return b / a if a and b is not None else None


def divergence(
    a: Run,
    b: Run,
    pairs: Pairs,
    extract: Callable[[str], str | None] | None,
    top: int,
    references: Mapping[str, str] | None = None,
    exact: list[bool] | None = None,
) -> dict[str, Any]:
    """How the paired outputs differ, exchange by exchange and in total; each pair's exactness is
    added to ``exact`` when given (sessions are judged on it)."""
    counts: Counter[str] = Counter()
    readability: dict[str, Counter[str]] = {}
    per_pair = [_pair_divergence(a, b, x, y, counts, readability, extract, references) for x, y in pairs.pairs]
    if exact is not None:
        exact.extend(bool(p["exact"]) for p in per_pair)
    summary = _divergence_summary(per_pair, counts, readability)
    summary["most_divergent"] = _most_divergent(per_pair, top)
    return summary


def _pair_divergence(
    a: Run,
    b: Run,
    x: dict[str, Any],
    y: dict[str, Any],
    counts: Counter[str],
    readability: dict[str, Counter[str]],
    extract: Callable[[str], str | None] | None,
    references: Mapping[str, str] | None,
) -> dict[str, Any]:
    """One pair's differences; adds to ``counts`` as it goes, since their first-seen order is the output's."""
    pa, pb = read_response(x), read_response(y)
    item: dict[str, Any] = {"a_id": x["id"], "b_id": y["id"], "path": x["path"], "api": [pa.api, pb.api]}
    _count_readable(readability, x, pa, pb)
    if not (pa.readable and pb.readable):
        # Nothing to compare is not agreement: two bodies no adapter read are never equal.
        counts["unreadable"] += 1
        item["unreadable"] = [pa.error if not pa.readable else None, pb.error if not pb.readable else None]
    same_text = pa.text == pb.text and pa.reasoning == pb.reasoning and pa.error_message == pb.error_message
    tools = tool_call_diff(pa.tool_calls, pb.tool_calls)
    item["exact"] = pa.readable and pb.readable and same_text and tools["arguments_equal"] and x.get("status") == y.get("status")
    counts["exact"] += item["exact"]
    at, unit = _first_divergence(pa, pb, a.enrichments.get(x["id"]), b.enrichments.get(y["id"]))
    item["first_divergence"] = {"at": at, "unit": unit}
    # Similarity of outputs needs two outputs: an unreadable side, or an error against an answer, scores 0.
    both = pa.readable and pb.readable and (pa.error_message is None) == (pb.error_message is None)
    item["similarity"] = similarity(pa.reasoning + pa.text, pb.reasoning + pb.text) if both else 0.0
    _count_changes(item, counts, x, y, pa, pb, tools)
    if extract is not None:
        _count_answers(item, counts, x, pa, pb, extract, references)
    kl = _logprob_kl(pa, pb, at, unit)
    if kl:
        item["kl"] = kl
    item["text"] = [pa.text, pb.text]
    return item


def _count_readable(readability: dict[str, Counter[str]], x: dict[str, Any], pa: Output, pb: Output) -> None:
    """Per method and path, so that a body no adapter reads shows where it came from."""
    read = readability.setdefault(f"{x['method']} {x['path'].split('?')[0]}", Counter())
    read["pairs"] += 1
    read["read_both"] += pa.readable and pb.readable
    read["unreadable_a"] += not pa.readable
    read["unreadable_b"] += not pb.readable


def _first_divergence(pa: Output, pb: Output, ea: dict[str, Any] | None, eb: dict[str, Any] | None) -> tuple[int | None, str]:
    """In the finest unit both sides have: the engine's token ids, else re-tokenized ids, else characters."""
    out_a = (ea or {}).get("output_tokens") or {}
    out_b = (eb or {}).get("output_tokens") or {}
    if pa.token_ids and pb.token_ids:
        return first_divergence(pa.token_ids, pb.token_ids), "token (engine ids)"
    if out_a.get("ids") is not None and out_b.get("ids") is not None:
        return first_divergence(out_a["ids"], out_b["ids"]), "token (re-tokenized)"
    return first_divergence(pa.text, pb.text), "character"


def _count_changes(
    item: dict[str, Any],
    counts: Counter[str],
    x: dict[str, Any],
    y: dict[str, Any],
    pa: Output,
    pb: Output,
    tools: dict[str, Any],
) -> None:
    """What changed besides the text: finish reason, tool calls, where the text landed, status and ending."""
    if pa.finish_reason != pb.finish_reason:
        counts["finish_reason_changed"] += 1
        item["finish_reason"] = [pa.finish_reason, pb.finish_reason]
        item["finish_reason_raw"] = [pa.finish_reason_raw, pb.finish_reason_raw]
    if pa.tool_calls or pb.tool_calls:
        counts["with_tool_calls"] += 1
        counts["tool_calls_differ"] += not tools["arguments_equal"]
        item["tool_calls"] = tools
    landed_a = "reasoning" if pa.reasoning and not pa.text else "content"
    landed_b = "reasoning" if pb.reasoning and not pb.text else "content"
    if landed_a != landed_b:
        counts["text_moved"] += 1
        item["landed"] = [landed_a, landed_b]
    if x.get("status") != y.get("status") or x.get("end") != y.get("end"):
        counts["status_or_end_differs"] += 1
        item["status"] = [[x.get("status"), x.get("end"), x.get("error")], [y.get("status"), y.get("end"), y.get("error")]]


_FLIPS = {
    (True, True): "right_both",
    (False, False): "wrong_both",
    (True, False): "right_to_wrong",
    (False, True): "wrong_to_right",
}


def _count_answers(
    item: dict[str, Any],
    counts: Counter[str],
    x: dict[str, Any],
    pa: Output,
    pb: Output,
    extract: Callable[[str], str | None],
    references: Mapping[str, str] | None,
) -> None:
    """Different words can carry the same answer: extracted answers, and flips against a known one."""
    ans_a, ans_b = extract(pa.text), extract(pb.text)
    item["answer"] = [ans_a, ans_b]
    counts["answer_changed" if ans_a != ans_b else "answer_unchanged"] += 1
    reference = (references or {}).get(read_request(x).last_user or "")
    if reference is not None:
        item["reference"] = reference
        counts[_FLIPS[(ans_a == reference, ans_b == reference)]] += 1


def _logprob_kl(pa: Output, pb: Output, at: int | None, unit: str) -> dict[str, Any] | None:
    """KL over the positions before the first divergence, when both engines reported logprobs."""
    lp_a, lp_b = logprob_positions(pa.objects), logprob_positions(pb.objects)
    if not (lp_a and lp_b):
        return None
    return kl_shared_prefix(lp_a, lp_b, at if at is not None and unit != "character" else min(len(lp_a), len(lp_b)))


def _divergence_summary(
    per_pair: list[dict[str, Any]], counts: Counter[str], readability: dict[str, Counter[str]]
) -> dict[str, Any]:
    """The totals over all pairs (the most divergent are added by the caller, last)."""
    n = len(per_pair)
    positions = [p["first_divergence"]["at"] for p in per_pair if p["first_divergence"]["at"] is not None]
    kls = [p["kl"] for p in per_pair if "kl" in p]
    summary: dict[str, Any] = {
        "pairs": n,
        "exact_match_rate": counts["exact"] / n if n else None,
        "similarity_mean": statistics.fmean(p["similarity"] for p in per_pair) if n else None,
        "first_divergence_median": statistics.median(positions) if positions else None,
        "first_divergence_histogram": dict(sorted(Counter(min(p // 8 * 8, 256) for p in positions).items())),
        "counts": dict(counts),
        # Per method and path: how many pairs had a body on each side that its API adapter could read.
        "readable": {
            path: {k: c[k] for k in ("pairs", "read_both", "unreadable_a", "unreadable_b")} for path, c in readability.items()
        },
    }
    if kls:
        summary["logprobs"] = {
            "pairs": len(kls),
            "kl_mean": statistics.fmean(k["kl_mean"] for k in kls),
            "top1_agreement": statistics.fmean(k["top1_agreement"] for k in kls),
        }
    return summary


def _most_divergent(per_pair: list[dict[str, Any]], top: int) -> list[dict[str, Any]]:
    """The ``top`` least similar inexact pairs, each with an inline diff (computed for those only: it is slow)."""
    worst = sorted((p for p in per_pair if not p["exact"]), key=lambda p: p["similarity"])[:top]
    for p in worst:
        p["diff"] = text_diff(*p["text"])
    return worst


def compare(
    a_path: str | os.PathLike[str],
    b_path: str | os.PathLike[str],
    *,
    baseline: str | os.PathLike[str] | None = None,
    extract: str | None = None,
    top: int = 5,
    references: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The full comparison of B against A (and of A's baseline run against A, when given).

    ``references`` maps a request's last user message (or prompt) to its known answer: with an
    extractor, flips are then counted in both directions, right-to-wrong and wrong-to-right.
    """
    extract_fn = extractor(extract) if extract else None
    a, b = _load(a_path), _load(b_path)
    pairs = pair(a.exchanges, b.exchanges)
    if not pairs.pairs:
        raise AnalysisError(f"no exchange of {b_path} matches one of {a_path}: {pairs.explain()}")
    enr = [(a.enrichments.get(x["id"]), b.enrichments.get(y["id"])) for x, y in pairs.pairs]
    prompts = [d for d in (prompt_diff(ea, eb) for ea, eb in enr) if d is not None]
    why = Counter(d.get("why", "equal") if d.get("equal") is not True else "equal" for d in prompts)
    exact: list[bool] = []
    result: dict[str, Any] = {
        "a": {"path": a.path, "exchanges": len(a.exchanges), "torn": a.torn},
        "b": {"path": b.path, "exchanges": len(b.exchanges), "torn": b.torn},
        "pairing": {
            "pairs": len(pairs.pairs),
            "by": pairs.by,
            "unpaired_a": len(pairs.unpaired_a),
            "unpaired_b": len(pairs.unpaired_b),
            "explain": pairs.explain(),
        },
        "config": {
            "snapshots": snapshot_diff(a.snapshot, b.snapshot),
            "snapshot_missing": [side for side, run in (("A", a), ("B", b)) if run.snapshot is None],
            "settings": settings_diff(enr),
            "engine_state": engine_state_diff(a.engine_state, b.engine_state),
            "prompts": {"compared": len(prompts), "equal": why.pop("equal", 0), "differences": dict(why.most_common())},
        },
        "speed": speed(a, b, pairs),
        "energy": energy(a, b),
        "divergence": divergence(a, b, pairs, extract_fn, top, references, exact),
        "sessions": session_comparison(a.metrics, b.metrics, pairs.pairs, exact),
    }
    result["traffic"] = traffic(a_path, b_path)  # analysis/workload_identity.py: did A and B see identical traffic?
    for row in result["speed"]:
        row["same_workload"] = result["traffic"]["identical"]
    if baseline is not None:
        base = _load(baseline)
        base_pairs = pair(a.exchanges, base.exchanges)
        result["baseline"] = {
            "path": str(baseline),
            "pairing": base_pairs.explain(),
            "divergence": divergence(a, base, base_pairs, extract_fn, 0, references) if base_pairs.pairs else None,
        }
    return result
