"""Prefix reuse: for each request, the longest prefix it shares with any earlier request.

It is what a prefix cache (vLLM's automatic prefix caching, llama.cpp's slot cache) could reuse at
best, so it tells how cache-friendly a workload is, whatever the engine reported. Computed in
O(n log n) comparisons: in sorted order, the earlier item sharing the longest prefix with an item
is its nearest earlier neighbour on one side, and visiting items from the last to the first while
unlinking them from a sorted linked list leaves exactly the earlier items as neighbours.
"""

from __future__ import annotations

from array import array
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


class PrefixIndex:
    """Byte strings kept for ``longest_earlier`` in far less memory than themselves, when they share
    prefixes as agent requests do (each one the whole conversation so far).

    Each string is cut into blocks of ``block`` bytes and a tail shorter than that; a block is a node
    of a trie keyed by (its parent node, its bytes), so each distinct prefix's blocks are held once,
    and a string keeps only its nodes' numbers and its tail. The answers are exact (no hashing): the
    longest shared prefix of a string with the earlier ones is the blocks of the deepest node an
    earlier string went through, plus the longest prefix its next piece shares with the pieces
    earlier strings had after that node, which ``longest_earlier_prefixes`` finds per node.
    """

    def __init__(self, block: int = 512) -> None:
        if block < 1:
            raise ValueError(f"block size must be at least 1, not {block}")
        self.block = block
        self._nodes: dict[tuple[int, bytes], int] = {}  # (parent node, block bytes) -> node; 0 is the root
        self._blocks: list[bytes] = [b""]  # node -> its block's bytes
        self._parents = array("I", [0])  # node -> its parent
        self._paths: list[bytes] = []  # string -> its nodes, packed as array("I")
        self._tails: list[bytes] = []
        # node -> the child a string last went on to (0: none yet). An agent's next request goes on
        # as its previous one did, so the next block is compared with that child's bytes (memcmp)
        # before the trie is asked (a hash of the block): the same node either way, as a node's
        # children have different bytes.
        self._last = array("I", [0])

    def add(self, data: bytes) -> int:
        """Keep ``data``; returns its number."""
        size, nodes, blocks, last, parent = self.block, self._nodes, self._blocks, self._last, 0
        full = len(data) - len(data) % size
        path = array("I")
        for start in range(0, full, size):
            node = last[parent]
            if not (node and data.startswith(blocks[node], start)):  # a block is ``size`` bytes: startswith compares all of them
                piece = data[start : start + size]
                key = (parent, piece)
                found = nodes.get(key)
                if found is None:
                    found = nodes[key] = len(blocks)
                    blocks.append(piece)
                    self._parents.append(parent)
                    last.append(0)
                node = last[parent] = found
            path.append(node)
            parent = node
        self._paths.append(path.tobytes())
        self._tails.append(data[full:])
        return len(self._paths) - 1

    def length(self, item: int) -> int:
        return len(self._paths[item]) // 4 * self.block + len(self._tails[item])

    def longest_earlier(self, order: Sequence[int]) -> list[int]:
        """For each string of ``order`` (numbers ``add`` returned, a number may come again), the
        longest prefix it shares with any string before it in ``order``: what
        ``longest_earlier_prefixes`` gives for the strings themselves."""
        seen = bytearray(len(self._blocks))  # nodes some earlier string went through
        seen[0] = 1
        # Per node, the pieces strings had after it, in order; and where each string's own one is.
        pieces: dict[int, list[bytes]] = {}
        # Per string: the node it is asked at, its piece's place among that node's, its depth in blocks.
        asked_node, asked_at, asked_depth = array("q"), array("q"), array("q")
        for item in order:
            path = array("I")
            path.frombytes(self._paths[item])
            m, k = len(path), 0
            while k < m and seen[path[k]]:
                k += 1
            node = path[k - 1] if k else 0
            mine = pieces.setdefault(node, [])
            asked_node.append(node)
            asked_at.append(len(mine))
            asked_depth.append(k)
            mine.append(self._blocks[path[k]] if k < m else self._tails[item])
            for j in range(k, m):  # the nodes this string is the first to go through, and its tail
                seen[path[j]] = 1
                if j + 1 < m:
                    pieces.setdefault(path[j], []).append(self._blocks[path[j + 1]])
            if k < m:
                pieces.setdefault(path[m - 1], []).append(self._tails[item])
        within = {node: longest_earlier_prefixes(pieces[node]) for node in set(asked_node)}
        return [depth * self.block + within[node][at] for node, at, depth in zip(asked_node, asked_at, asked_depth, strict=True)]
