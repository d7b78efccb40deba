"""Paired ratios with their intervals, and distributions: how compare states a B/A figure.

Both take plain sequences or numpy arrays of floats (compare hands over a million values as arrays);
the numbers are the same either way: numpy's median of an even count is the mean of the middle two,
as ``statistics.median``'s, and the mean is ``fsum`` over the count, as ``statistics.fmean``'s.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from typing import Any

import numpy as np

from infertap.quantiles import quantile

_BOOTSTRAP_MAX_PAIRS = 5000
#: Fewer pairs get no interval: resampling 2 to 5 pairs gives a "95%" interval that misses a ratio of
#: 1 between equal runs a tenth to a half of the time (measured by simulation); from about 8 pairs on
#: it holds its 95%.
MIN_INTERVAL_PAIRS = 10
_ROUNDS_AT_ONCE = 100  # resamples held at once: 100 x 5,000 indices and values


def bootstrap_ratio(
    a: Sequence[float] | np.ndarray[Any, Any], b: Sequence[float] | np.ndarray[Any, Any], *, rounds: int = 1000, seed: int = 0
) -> tuple[float, float] | None:
    """95% interval of median(B)/median(A), resampling pairs (they are the same requests).

    Above 5,000 pairs the resampling runs on a seeded random 5,000 of them: the interval is then a
    little wider than the full data would give (conservative), and stays cheap. None below
    ``MIN_INTERVAL_PAIRS``."""
    if len(a) < MIN_INTERVAL_PAIRS:
        return None
    # Every number is the one resampling in pure Python gives (the same draws, the same medians),
    # the rounds done by numpy: 1,000 rounds of 5,000 pairs cost seconds in Python per metric.
    rng = random.Random(seed)
    va, vb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if len(va) > _BOOTSTRAP_MAX_PAIRS:
        keep = rng.sample(range(len(va)), _BOOTSTRAP_MAX_PAIRS)
        va, vb = va[keep], vb[keep]
    n = len(va)
    ratios = []
    draws = _Randranges(rng, n)
    for start in range(0, rounds, _ROUNDS_AT_ONCE):
        at_once = min(_ROUNDS_AT_ONCE, rounds - start)
        idx = draws.take(at_once * n).reshape(at_once, n)
        for ma, mb in zip(np.median(va[idx], axis=1).tolist(), np.median(vb[idx], axis=1).tolist(), strict=True):
            if ma > 0:
                ratios.append(mb / ma)
    if not ratios:
        return None
    ratios.sort()
    return ratios[int(0.025 * len(ratios))], ratios[min(len(ratios) - 1, int(0.975 * len(ratios)))]


class _Randranges:
    """``rng.randrange(n)`` over and over: the same numbers, drawn by numpy a block at a time (``rng``
    itself is left as it was: the caller has no use for it afterwards).

    ``randrange(n)`` takes the top ``n.bit_length()`` bits of each 32-bit Mersenne Twister output
    and rejects those ``>= n`` (CPython's ``_randbelow_with_getrandbits``); numpy's MT19937 started
    from ``rng``'s state gives the same outputs."""

    def __init__(self, rng: random.Random, n: int) -> None:
        self.rng, self.n, self.k = rng, n, n.bit_length()
        self.left = np.empty(0, dtype=np.intp)
        if self.k <= 32:
            _, state, _ = rng.getstate()
            self.bits = np.random.MT19937()
            self.bits.state = {
                "bit_generator": "MT19937",
                "state": {"key": np.array(state[:624], dtype=np.uint32), "pos": state[624]},
            }

    def take(self, count: int) -> np.ndarray[Any, Any]:
        if self.k > 32:  # not drawn from one output each: as Python draws them
            return np.array([self.rng.randrange(self.n) for _ in range(count)], dtype=np.intp)
        got = [self.left]
        have = len(self.left)
        while have < count:
            words = self.bits.random_raw(max(1024, int((count - have) * 1.05 * (1 << self.k) / self.n)))
            top = (words >> np.uint64(32 - self.k)).astype(np.intp)
            got.append(top[top < self.n])
            have += len(got[-1])
        drawn = np.concatenate(got)
        self.left = drawn[count:]
        return drawn[:count]


def distribution(values: Sequence[float] | np.ndarray[Any, Any]) -> dict[str, float | None]:
    if not len(values):
        return {"n": 0, "p50": None, "p90": None, "p99": None, "mean": None}
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    return {
        "n": len(ordered),
        **{f"p{round(p * 100)}": float(quantile(ordered, p)) for p in (0.5, 0.9, 0.99)},  # type: ignore[arg-type]
        # fsum is exact whatever the order or grouping: fed a slice at a time, ten million values
        # don't become ten million Python floats at once (320 MB).
        "mean": math.fsum(itertools.chain.from_iterable(ordered[i : i + _SLICE].tolist() for i in range(0, len(ordered), _SLICE)))
        / len(ordered),
    }


_SLICE = 65_536
