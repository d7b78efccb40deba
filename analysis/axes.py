"""The reports' scales: where an axis's ticks fall, and when one is drawn by log10.

No pixels here but the ones a caller gives: ``svg`` places the ticks and draws them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass


def ticks(hi: float, *, whole: bool = False) -> list[float]:
    """4 to 6 ticks from 0 to at least ``hi``, 1, 2 or 5 × 10^k apart, so every label is a round number.

    ``whole``: for counts, whose ticks stay whole (0, 1, 2, 3 when the most is 1).
    """
    hi = hi if hi > 0 and math.isfinite(hi) else 1.0
    scale = 10.0 ** math.floor(math.log10(hi / 5))
    # The smallest step giving at most 5 intervals; the one before it gave more, so this one gives at least 3.
    step = next(m * scale for m in (1, 2, 5, 10) if hi / (m * scale) <= 5 + 1e-9)
    step = max(step, 1.0) if whole else step
    return [i * step for i in range(max(3, math.ceil(hi / step - 1e-9)) + 1)]


#: A spread beyond which a linear axis squashes a run: two runs' largest values this far apart, or a
#: run's largest this far above its median (a run of 2 s answers beside one of 150 s drew the first in
#: its axis's first 7 px).
LOG_SPREAD = 20.0


def wants_log(series: Sequence[Sequence[float]]) -> bool:
    """Whether these runs' values are drawn on a log axis (``LOG_SPREAD``): only where every value is
    above 0, which a log axis can place."""
    runs = [sorted(s) for s in series if s]
    if not runs or runs[0][0] <= 0 or any(s[0] <= 0 for s in runs):
        return False
    tops = [s[-1] for s in runs]
    return max(tops) / min(tops) > LOG_SPREAD or any(s[-1] / s[(len(s) - 1) // 2] > LOG_SPREAD for s in runs)


def _round(v: float, *, below: bool) -> float:
    """The 1-2-5 number next to ``v``: strictly below it (``below``), else at or above it."""
    k = math.floor(math.log10(v))
    steps = [m * 10.0**e for e in (k - 1, k, k + 1) for m in (1, 2, 5)]
    if below:
        return max(s for s in steps if s < v * (1 - 1e-9))
    return min(s for s in steps if s >= v * (1 - 1e-9))


@dataclass(frozen=True, slots=True)
class LogAxis:
    """An axis from ``lo`` to ``hi`` by log10, ticks at 1, 2 and 5 of each decade between them."""

    lo: float
    hi: float

    @classmethod
    def over(cls, lo: float, hi: float) -> LogAxis:
        """The 1-2-5 ticks around ``lo`` and ``hi`` (both above 0), so the ends are round numbers.
        The start lies below ``lo``, never on it: a run whose values all equal a round number (a tpot
        of 100 ms each time) was drawn on the other axis's own line, and read as that axis."""
        start, end = _round(lo, below=True), _round(hi, below=False)
        return cls(start, end if end > start else start * 2)

    def ticks(self) -> list[float]:
        k, out = math.floor(math.log10(self.lo)), []
        while 10.0**k <= self.hi * (1 + 1e-9):
            out += [m * 10.0**k for m in (1, 2, 5) if self.lo * (1 - 1e-9) <= m * 10.0**k <= self.hi * (1 + 1e-9)]
            k += 1
        return out

    def share(self, v: float) -> float:
        """Where ``v`` lies along the axis, 0 at ``lo`` and 1 at ``hi``."""
        return (math.log10(v) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))

    def labelled(self, length: float, size: Callable[[float], float]) -> list[float]:
        """The ticks that carry their number on an axis ``length`` px long, a tick's label ``size(t)`` px
        along it (with its margin): every tick where they all fit apart; else both ends, so the axis
        says its range (with decades only, 20 to 5,000 read as 100 to 1,000, its ends bare), and each
        decade between that clears the labels placed before it."""
        marks = self.ticks()
        at = {t: self.share(t) * length for t in marks}

        def clear(t: float, placed: Sequence[float]) -> bool:
            return all(abs(at[t] - at[p]) >= (size(t) + size(p)) / 2 for p in placed)

        if all(clear(b, [a]) for a, b in zip(marks, marks[1:], strict=False)):
            return marks
        placed = [marks[0], marks[-1]]
        for t in marks[1:-1]:
            if abs(math.log10(t) - round(math.log10(t))) < 1e-9 and clear(t, placed):
                placed.append(t)
        return sorted(placed)
