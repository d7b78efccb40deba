"""The one percentile definition infertap prints everywhere: linear interpolation between order
statistics (DuckDB's ``quantile_cont``, numpy's default ``linear``), so ``stats``, ``compare`` and
the replay summary give the same p99 for the same values."""

from __future__ import annotations

import math
from collections.abc import Sequence


def quantile(ordered: Sequence[float], p: float) -> float:
    """The ``p`` quantile (0..1) of values already sorted ascending; at least one value."""
    h = (len(ordered) - 1) * p
    lo = math.floor(h)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (h - lo) * (ordered[hi] - ordered[lo])
