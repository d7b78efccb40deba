"""Arithmetic on sampled series, (wall ns, value) in time order: a counter's increase over a span,
power integrated over one, whether a series' samples reach a span's ends, and a device's mean over
the stretches when nothing ran. The analysis's energy (analysis/energy.py) and the report's power
plot read samples through these, so that each is defined once.

One device sampled by several recorders (two captures on one machine) is several series, never one
merged: each recorder stamps a round on its own clock just before it reads, so two recorders'
rounds interleave out of order, and a reading followed by another recorder's slightly older one
would look like a counter reset. ``joined`` cuts a span into pieces each read from one series.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence

Series = list[tuple[int, float]]  # (wall ns, value), in time order
Span = tuple[int, int]  # [first, last] wall ns


def merged(spans: Iterable[Span]) -> list[Span]:
    """Spans as disjoint ones: overlapping spans joined."""
    out: list[Span] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def idle_mean(power: Series, idle: list[Span]) -> float | None:
    """The time-weighted mean of the samples taken inside ``idle`` (stretches when nothing was in
    flight): each sample weighted by the time it stands for, half the way to each neighbour, within
    its stretch. Devices sampled at different instants each get their own mean, summed after."""
    total = weight = 0.0
    times = [t for t, _ in power]
    for lo, hi in idle:
        i, j = bisect.bisect_right(times, lo), bisect.bisect_left(times, hi)
        for k in range(i, j):
            start = (times[k - 1] + times[k]) / 2 if k > 0 else times[k]
            end = (times[k] + times[k + 1]) / 2 if k + 1 < len(times) else times[k]
            w = min(end, hi) - max(start, lo)
            if w > 0:
                total += power[k][1] * w
                weight += w
    return total / weight if weight > 0 else None


def _at(samples: Series, t: int) -> float:
    """A counter's value at ``t``, linear between samples, held flat beyond them."""
    i = bisect.bisect_left(samples, (t, float("-inf")))
    if i == 0:
        return samples[0][1]
    if i == len(samples):
        return samples[-1][1]
    (t0, v0), (t1, v1) = samples[i - 1], samples[i]
    return v0 + (v1 - v0) * (t - t0) / (t1 - t0) if t1 > t0 else v1


def increase(samples: Series, first: int, last: int) -> float:
    """A counter's increase over [first, last]: each step between samples, linear within it, its
    share of the span taken; a step down is a reset, after which the counter counted from zero."""
    total = 0.0
    # The steps that overlap the span: from the last sample at or before ``first`` to the first at or after ``last``.
    i = max(0, bisect.bisect_right(samples, (first, float("inf"))) - 1)
    j = bisect.bisect_left(samples, (last, float("-inf"))) + 1
    span = samples[i:j]
    for (t0, v0), (t1, v1) in zip(span, span[1:], strict=False):
        if t1 <= first or t0 >= last or t1 <= t0:
            continue
        step = v1 - v0 if v1 >= v0 else v1
        total += step * (min(t1, last) - max(t0, first)) / (t1 - t0)
    return total


def joined(series: Sequence[Series], first: int, last: int) -> list[tuple[int, Span]]:
    """[first, last] cut into pieces, each to be read from one of ``series`` (several recorders'
    samples of one device), as (index into ``series``, piece): where some series has samples on both
    sides, the one reaching furthest; elsewhere the nearest one, held flat as a lone series is."""
    extents = [(s[0][0], s[-1][0], k) for k, s in enumerate(series) if s]
    out: list[tuple[int, Span]] = []
    t = first
    while extents and t < last:
        inside = [(b, k) for a, b, k in extents if a <= t < b]
        if inside:
            b, k = max(inside)
            end = min(b, last)
        else:  # every series ended by ``t`` or starts after it: the nearer one, up to halfway
            ended = sorted((b, k) for a, b, k in extents if b <= t)
            coming = sorted((a, k) for a, b, k in extents if a > t)
            halfway = (ended[-1][0] + coming[0][0]) // 2 if ended and coming else last if ended else t
            k, end = (ended[-1][1], min(halfway, last)) if t < halfway else (coming[0][1], min(coming[0][0], last))
        if out and out[-1][0] == k:
            out[-1] = (k, (out[-1][1][0], end))
        else:
            out.append((k, (t, end)))
        t = end
    return out


def reaches(samples: Series, first: int, last: int, reach: int) -> bool:
    """Whether ``samples`` has one within ``reach`` of both ends of [first, last]: a short span
    between two samples counts, a span after the samples stopped doesn't."""
    i = bisect.bisect_left(samples, (first - reach, float("-inf")))
    j = bisect.bisect_right(samples, (last + reach, float("inf")))
    return i < j and samples[i][0] <= first + reach and samples[j - 1][0] >= last - reach


def reach(samples: Series, interval: int = 0, failed: Sequence[int] = ()) -> int:
    """How far from a span's end a series' sample may be and still tell its value there (ns): two of
    its sampling intervals, ``interval`` (the one its recorder asked for, ns; 0 where unrecorded)
    or the median step between its samples where that is longer (a source slower than asked, its
    rounds spaced by how long each took); a lone sample reaches nothing beyond itself. A step with a
    failure of the source recorded in it (``failed``: wall ns, in order) lost rounds: it is no
    spacing of the source's, and a series that is mostly such steps is judged by ``interval``, not
    held to its own gaps."""
    every = [(t1 - t0, _holds(failed, t0, t1)) for (t0, _), (t1, _) in zip(samples, samples[1:], strict=False)]
    # Where no clean step says the spacing and none was asked for (a capture older than the field), all of them.
    steps = sorted(d for d, lost in every if not lost) or ([] if interval else sorted(d for d, _ in every))
    return 2 * max(interval, steps[len(steps) // 2] if steps else 0) if every else 0


def _holds(times: Sequence[int], lo: int, hi: int) -> bool:
    """Whether some of ``times`` (in order) is within (lo, hi]."""
    i = bisect.bisect_right(times, lo)
    return i < len(times) and times[i] <= hi


def gaps(samples: Series, first: int, last: int, reach: int) -> list[Span]:
    """The parts of [first, last] between two consecutive samples further apart than ``reach`` (two
    sampling intervals, ``reach``): a source that failed for a while, whose power there an integral
    can only bridge by a straight line between the samples either side."""
    i = max(0, bisect.bisect_right(samples, (first, float("inf"))) - 1)
    j = bisect.bisect_left(samples, (last, float("-inf"))) + 1
    span = samples[i:j]
    return [
        (max(t0, first), min(t1, last))
        for (t0, _), (t1, _) in zip(span, span[1:], strict=False)
        if t1 - t0 > reach and min(t1, last) > max(t0, first)
    ]


def counter_rates(samples: Series, scale: float) -> Series:
    """A counter as power: the rate between consecutive samples, placed at their midpoint (a reset is skipped)."""
    return [
        ((t0 + t1) // 2, (v1 - v0) * scale / ((t1 - t0) / 1e9))
        for (t0, v0), (t1, v1) in zip(samples, samples[1:], strict=False)
        if t1 > t0 and v1 >= v0
    ]


def integral(power: Series, first: int, last: int) -> float:
    """Joules: power (W) over [first, last], trapezoids between samples, each end held flat."""
    if not power or last <= first:
        return 0.0
    points = [(first, _at(power, first)), *((t, v) for t, v in power if first < t < last), (last, _at(power, last))]
    return sum((t1 - t0) / 1e9 * (v0 + v1) / 2 for (t0, v0), (t1, v1) in zip(points, points[1:], strict=False))


def summed(series: list[Series]) -> Series:
    """Several devices' power as one: at each instant any of them was sampled, the sum of each one's
    latest sample, from the first instant every one has one."""
    events = sorted((t, k, v) for k, samples in enumerate(series) for t, v in samples)
    latest: dict[int, float] = {}
    out: Series = []
    for t, k, v in events:
        latest[k] = v
        if len(latest) == len(series):
            if out and out[-1][0] == t:
                out.pop()
            out.append((t, sum(latest.values())))
    return out
