"""Accuracy against known answers, as a number with its uncertainty and its noise floor.

A net score hides traffic both ways, and a handful of items hides chance: the paired items are
reduced to the four flip counts of ``compare`` (right on both, wrong on both, right to wrong,
wrong to right), which hold everything a paired comparison of two proportions needs: each side's
rate, the difference with Newcombe's score interval for paired proportions (a bootstrap of the
flips collapses to a point where a kind of flip is empty: +100 to +100 on two items), and
McNemar's exact test on the items that flipped. A baseline (a second run of A's own configuration)
gives the difference that happens with nothing changed: a difference inside its interval is no
finding. Items a side did not answer (an error, a failed request) are not wrong answers: they are
left out and counted, so that availability doesn't pass for accuracy. An answer the grader read nothing in
(no number, letter, JSON value or match: empty, or cut short before its answer) is wrong, as benchmarks
grade it, and counted per side (``unread``), so that a grader's limits are seen beside the score.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

FLIPS = ("right_both", "wrong_both", "right_to_wrong", "wrong_to_right")
#: Flips counted by the exact test below this many; past it, the normal approximation.
EXACT_UP_TO = 1000
_Z95 = 1.959963984540054


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
        "difference_ci95_points": difference_interval(rb, wb, rw, wr),
        "right_to_wrong": rw,
        "wrong_to_right": wr,
        "mcnemar_p": mcnemar_exact(rw, wr),
        "mcnemar_test": "exact" if rw + wr <= EXACT_UP_TO else "normal approximation",
        "unanswered": int(counts.get("known_unanswered", 0)),
        # of each side's wrong answers, those the grader read nothing in (no number, letter, JSON value or match)
        "unread": {"a": int(counts.get("known_unread_a", 0)), "b": int(counts.get("known_unread_b", 0))},
        # readings and comparisons the grader gave up on (math-verify's timeout): no answer, not a crash
        "timed_out": int(counts.get("extract_timed_out", 0)),
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


def none_graded(counts: Mapping[str, int]) -> str | None:
    """Where no item with a known answer was graded (``accuracy`` is None) but some were left out, the line
    that says so: all of them unanswered is no score, and no silence either."""
    unanswered = int(counts.get("known_unanswered", 0))
    if not unanswered:
        return None
    return f"known answers: none graded, all left out: {unanswered} not answered on a side (an error or a failed request)"


def unread_words(unread: Mapping[str, int]) -> str:
    """``accuracy``'s ``unread`` in words: the wrong answers the grader read nothing in, per side."""
    return f"counted wrong, no answer read in them: A's {unread['a']}, B's {unread['b']} (nothing the grader reads)"


def difference_interval(rb: int, wb: int, rw: int, wr: int) -> tuple[float, float] | None:
    """95% interval, in points, of B's rate minus A's on the same items: Newcombe's score interval for
    paired proportions (his method 10, 1998), from each side's Wilson interval and the correlation of
    the pairs, corrected for continuity as he gives it (recommended by Fagerland, Lydersen and Laake
    2013). Unlike a bootstrap of the flips, it doesn't collapse where a kind of flip is empty (six
    items all flipping one way: +44.8 to +100, not +100 to +100), nor where none flipped (-16.7 to
    +16.7 on ten items half right, -1.9 to +1.9 on a hundred); like any approximate interval, on a
    handful of items it can exclude 0 where the exact test can't tell the difference from chance,
    which the verdict then says."""
    n = rb + wb + rw + wr
    if n < 2:
        return None
    pa, pb = (rb + rw) / n, (rb + wr) / n
    la, ua = _wilson(rb + rw, n)
    lb, ub = _wilson(rb + wr, n)
    phi = _phi(rb, wb, rw, wr)
    d = pb - pa
    low = d - math.sqrt(max(0.0, (pb - lb) ** 2 - 2 * phi * (pb - lb) * (ua - pa) + (ua - pa) ** 2))
    high = d + math.sqrt(max(0.0, (ub - pb) ** 2 - 2 * phi * (ub - pb) * (pa - la) + (pa - la) ** 2))
    return 100 * max(-1.0, low), 100 * min(1.0, high)


def _phi(rb: int, wb: int, rw: int, wr: int) -> float:
    """The correlation of the pairs as Newcombe's method 10 takes it: continuity-corrected, by N/2
    toward 0 where positive, and 0 where a margin is empty. Uncorrected, nothing flipped on 50%
    made it 1, and the interval collapsed to 0 to 0 on any number of items."""
    spread = (rb + rw) * (wb + wr) * (rb + wr) * (wb + rw)
    if not spread:
        return 0.0
    cross: float = rb * wb - rw * wr
    if cross > 0:
        cross = max(cross - (rb + wb + rw + wr) / 2, 0.0)
    return cross / math.sqrt(spread)


def _wilson(k: int, n: int) -> tuple[float, float]:
    """Wilson's 95% score interval of the proportion k of n."""
    p, z2 = k / n, _Z95 * _Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = _Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def mcnemar_exact(rw: int, wr: int) -> float:
    """Two-sided exact McNemar p: how likely flips this lopsided are if neither side is better.

    Under that hypothesis each of the m flipped items goes either way with probability 1/2
    (a binomial test on the discordant pairs); above 1,000 flips, the normal approximation with
    continuity correction, whose error is then far below any decision's.
    """
    m, k = rw + wr, min(rw, wr)
    if m == 0:
        return 1.0
    if m > EXACT_UP_TO:
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
        + f"; {acc['wrong_to_right']} wrong->right, {acc['right_to_wrong']} right->wrong "
        + f"({acc['mcnemar_test']} McNemar p = {acc['mcnemar_p']:.3g})"
    )
    if acc["unanswered"]:
        text += f"; {acc['unanswered']} left out, not answered on a side (an error or a failed request)"
    if any(acc["unread"].values()):
        text += f"; {unread_words(acc['unread'])}"
    if acc["timed_out"]:
        text += f"; {acc['timed_out']} readings or comparisons took too long and were given up: no answer, not the same"
    chance = acc["mcnemar_p"] >= 0.05
    noise = acc.get("noise_floor")
    if noise is not None:
        low, high = noise["difference_ci95_points"] or (noise["difference_points"], noise["difference_points"])
        text += (
            f"; A against its own second run flipped {noise['flips']} of {noise['items']}, "
            f"{noise['difference_points']:+.1f} points ({low:+.1f} to {high:+.1f})"
        )
        if not chance and low <= acc["difference_points"] <= high:
            text += ": B's difference is within that noise floor, no finding"
    if chance:
        text += "; not distinguishable from chance at this size"
        if ci and (ci[0] > 0 or ci[1] < 0):
            text += " (the interval, approximate, is too narrow on so few flips)"
    return text
