"""Prefix reuse: for each request, the longest prefix it shares with any earlier request.

It is what a prefix cache (vLLM's automatic prefix caching, llama.cpp's slot cache) could reuse at
best, so it tells how cache-friendly a workload is, whatever the engine reported. Computed in
O(n log n) comparisons: in sorted order, the earlier item sharing the longest prefix with an item
is its nearest earlier neighbour on one side, and visiting items from the last to the first while
unlinking them from a sorted linked list leaves exactly the earlier items as neighbours.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """Length of the common prefix of two sequences (bytes or lists), by bisection."""
    if type(a) is bytes and type(b) is bytes:
        return _common_bytes(a, b)
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def _common_bytes(a: bytes, b: bytes) -> int:
    """``common_prefix`` of two byte strings without copying them: each step compares only the
    bytes between what is known equal and the midpoint (memcmp, through a view of ``b``)."""
    n = min(len(a), len(b))
    view = memoryview(b)
    if a.startswith(view[:n]):
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a.startswith(view[lo:mid], lo):
            lo = mid
        else:
            hi = mid
    return lo


def longest_earlier_prefixes(items: Sequence[Sequence[Any]]) -> list[int]:
    """For each item, the longest prefix shared with any item before it in ``items`` (0 for the first)."""
    n = len(items)
    order = sorted(range(n), key=items.__getitem__)  # type: ignore[arg-type]  # the items are comparable sequences
    position = [0] * n
    for p, i in enumerate(order):
        position[i] = p
    prev = list(range(-1, n - 1))
    succ = list(range(1, n + 1))
    out = [0] * n
    for i in reversed(range(n)):
        p = position[i]
        best = 0
        if prev[p] >= 0:
            best = common_prefix(items[i], items[order[prev[p]]])
        if succ[p] < n:
            best = max(best, common_prefix(items[i], items[order[succ[p]]]))
        out[i] = best
        if prev[p] >= 0:
            succ[prev[p]] = succ[p]
        if succ[p] < n:
            prev[succ[p]] = prev[p]
    return out
