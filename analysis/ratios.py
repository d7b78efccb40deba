"""Paired ratios with their intervals, and distributions: how compare states a B/A figure."""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence

from infertap.quantiles import quantile

_BOOTSTRAP_MAX_PAIRS = 5000


def bootstrap_ratio(a: Sequence[float], b: Sequence[float], *, rounds: int = 1000, seed: int = 0) -> tuple[float, float] | None:
    """95% interval of median(B)/median(A), resampling pairs (they are the same requests).

    Above 5,000 pairs the resampling runs on a seeded random 5,000 of them: the interval is then a
    little wider than the full data would give (conservative), and stays cheap."""
    if len(a) < 2:
        return None
    rng = random.Random(seed)
    if len(a) > _BOOTSTRAP_MAX_PAIRS:
        keep = rng.sample(range(len(a)), _BOOTSTRAP_MAX_PAIRS)
        a, b = [a[i] for i in keep], [b[i] for i in keep]
    n = len(a)
    ratios = []
    for _ in range(rounds):
        idx = [rng.randrange(n) for _ in range(n)]
        ma = statistics.median([a[i] for i in idx])
        if ma > 0:
            ratios.append(statistics.median([b[i] for i in idx]) / ma)
    if not ratios:
        return None
    ratios.sort()
    return ratios[int(0.025 * len(ratios))], ratios[min(len(ratios) - 1, int(0.975 * len(ratios)))]


def distribution(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"n": 0, "p50": None, "p90": None, "p99": None, "mean": None}
    ordered = sorted(values)
    return {
        "n": len(ordered),
        **{f"p{round(p * 100)}": quantile(ordered, p) for p in (0.5, 0.9, 0.99)},
        "mean": statistics.fmean(ordered),
    }
