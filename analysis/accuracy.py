"""Accuracy against known answers, as a number with its uncertainty and its noise floor.

A net score hides traffic both ways, and a handful of items hides chance: the paired items are
reduced to the four flip counts of ``compare`` (right on both, wrong on both, right to wrong,
wrong to right), which hold everything a paired comparison of two proportions needs: each side's
rate, the difference with a bootstrap interval (items resampled as pairs), and McNemar's exact
test on the items that flipped. A baseline (a second run of A's own configuration) gives the
flips that happen with nothing changed: a difference that doesn't clear it is no finding.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import Any

FLIPS = ("right_both", "wrong_both", "right_to_wrong", "wrong_to_right")


def accuracy(counts: Mapping[str, int], baseline: Mapping[str, int] | None = None) -> dict[str, Any] | None:
    """A against B on the items with a known answer; None when no paired item had one."""
    rb, wb, rw, wr = (int(counts.get(k, 0)) for k in FLIPS)
    n = rb + wb + rw + wr
    if n == 0:
        return None
    a_right, b_right = rb + rw, rb + wr
    out: dict[str, Any] = {
        "items": n,
        "a_right": a_right,
        "b_right": b_right,
        "a_rate": a_right / n,
        "b_rate": b_right / n,
        "difference_points": 100 * (b_right - a_right) / n,
        "difference_ci95_points": difference_interval(n, rw, wr),
        "right_to_wrong": rw,
        "wrong_to_right": wr,
        "mcnemar_p": mcnemar_exact(rw, wr),
    }
    noise = accuracy(baseline) if baseline else None
    if noise is not None:
        out["noise_floor"] = {
            "items": noise["items"],
            "flips": noise["right_to_wrong"] + noise["wrong_to_right"],
            "difference_points": noise["difference_points"],
            "difference_ci95_points": noise["difference_ci95_points"],
        }
    out["verdict"] = _verdict(out)
    return out


def difference_interval(n: int, rw: int, wr: int, *, rounds: int = 2000, seed: int = 0) -> tuple[float, float] | None:
    """95% interval, in points, of B's rate minus A's, resampling the n items as pairs.

    A resample of paired items is a multinomial draw over the flip categories; only the two kinds of
    flip move the difference, so each round draws those two counts (two binomials) and nothing else.
    """
    if n < 2:
        return None
    rng = random.Random(seed)
    p_wr = wr / n
    p_rw_rest = rw / (n - wr) if n > wr else 0.0
    diffs = []
    for _ in range(rounds):
        k_wr = rng.binomialvariate(n, p_wr)
        k_rw = rng.binomialvariate(n - k_wr, p_rw_rest)
        diffs.append(100 * (k_wr - k_rw) / n)
    diffs.sort()
    return diffs[int(0.025 * rounds)], diffs[min(rounds - 1, int(0.975 * rounds))]


def mcnemar_exact(rw: int, wr: int) -> float:
    """Two-sided exact McNemar p: how likely flips this lopsided are if neither side is better.

    Under that hypothesis each of the m flipped items goes either way with probability 1/2
    (a binomial test on the discordant pairs); above 1,000 flips, the normal approximation with
    continuity correction, whose error is then far below any decision's.
    """
    m, k = rw + wr, min(rw, wr)
    if m == 0:
        return 1.0
    if m > 1000:
        z = (abs(rw - wr) - 1) / math.sqrt(m)
        return min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))
    tail = sum(math.comb(m, i) for i in range(k + 1))
    return min(1.0, 2 * tail / 2**m)


def _verdict(acc: dict[str, Any]) -> str:
    n = acc["items"]
    ci = acc["difference_ci95_points"]
    text = (
        f"B right on {acc['b_right']} of {n} ({acc['b_rate']:.0%}), A on {acc['a_right']} ({acc['a_rate']:.0%}): "
        f"{acc['difference_points']:+.1f} points"
        + (f" (95% CI {ci[0]:+.1f} to {ci[1]:+.1f})" if ci else "")
        + f"; {acc['wrong_to_right']} wrong->right, {acc['right_to_wrong']} right->wrong (exact McNemar p = {acc['mcnemar_p']:.3g})"
    )
    noise = acc.get("noise_floor")
    if noise is not None:
        flips = acc["wrong_to_right"] + acc["right_to_wrong"]
        text += f"; A against its own second run flipped {noise['flips']} of {noise['items']}"
        if flips <= noise["flips"]:
            text += ": no more flips than the noise floor, no finding"
    if acc["mcnemar_p"] >= 0.05:
        text += "; not distinguishable from chance at this size"
    return text
