"""How two runs' embeddings answers differ: per pair, each input's vectors by cosine similarity.

An embeddings answer has no text to diff: an engine that quantizes otherwise, pools otherwise (mean,
CLS, last token) or normalizes otherwise changes its vectors, and only the vectors show it. Each pair
(paired as every other) is compared input by input: the same number of vectors, each of the same
dimension, then equal (at float32, the precision the answers carry) or not, their cosine similarity
and their lengths. Pairs stream through ``add`` one at a time: only counts, exact sums and the few
least similar pairs are kept, never a run's vectors.

The vectors are not in the summaries DuckDB pairs (a few thousand answers of 4,096 floats took it
past its buffer): each side's are in its own Parquet file by exchange ``ord`` (summaries.VECTORS_SCHEMA),
read here a row group at a time, the last one read kept: pairs come in A's order, so A's file is
read once through, and B's as often as its order departs from A's.
"""

from __future__ import annotations

import bisect
import heapq
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from .summaries import Summary

#: A pair is counted "below" where a vector's cosine similarity with the other side's is under this.
#: Float rounding stays far above it and another pooling far below (llama-server on SmolLM2: the
#: same inputs batched or one at a time 1 - cosine about 2e-15, mean against last-token pooling 0.2
#: to 0.5); it leaves room for half-precision kernels' rounding, and under it the nearest neighbours
#: of a query, which is what embeddings are for, can change order.
COSINE_FLOOR = 0.999
#: Two vectors of one direction (cosine at least ``COSINE_FLOOR``) "differ in length" where their L2
#: norms differ by more than this share: one engine normalizes its vectors and the other doesn't
#: (cosine can't tell those apart).
LENGTH_TOLERANCE = 1e-3

#: What ``result`` counts, in its order (each a number of pairs, ``vectors`` a number of vectors).
KEYS = (
    "pairs",
    "compared",
    "identical",
    "differ",
    "below_floor",
    "dimensions_differ",
    "count_differs",
    "not_finite",
    "length_differs",
    "failed",
    "not_read_a",
    "not_read_b",
    "vectors",
)


class EmbeddingPairs:
    """The embeddings pairs of a comparison, added one at a time; ``result`` is compare's ``embeddings``."""

    def __init__(self, top: int, files: tuple[Path | None, Path | None] = (None, None)) -> None:
        self.files = tuple(VectorFile(f) if f is not None else None for f in files)
        self.counts: Counter[str] = Counter()
        self.cosine_sum = 0.0  # in float64 over vectors: a mean of numbers near 1, no cancellation to fear
        self.cosine_min: float | None = None
        self.why_not_read: dict[str, str] = {}  # the first reason seen, per side
        self.dimensions: Counter[tuple[int, int]] = Counter()  # (A's, B's) of the vectors whose dimensions differ
        self.top = top
        self.worst: list[tuple[float, int, dict[str, Any]]] = []  # (-cosine, -ord, item): the least similar on top

    def add(self, ord_: int, sa: Summary, sb: Summary) -> bool | None:
        """Counts the pair of ``sa``, ``sb`` (both embeddings answers); whether its vectors are
        identical, None where a side failed or was not read (nothing compared)."""
        self.counts["pairs"] += 1
        if _failed(sa) or _failed(sb):
            self.counts["failed"] += 1
            return None
        assert sa.embeddings is not None and sb.embeddings is not None
        (why_a, va), (why_b, vb) = sa.embeddings, sb.embeddings
        for side, why in (("a", why_a), ("b", why_b)):
            if why is not None:
                self.counts[f"not_read_{side}"] += 1
                self.why_not_read.setdefault(side, why)
        if why_a is not None or why_b is not None:
            return None
        self.counts["compared"] += 1
        item = self._compare(self._vectors(0, va), self._vectors(1, vb))
        identical = bool(item.pop("identical"))
        self.counts["identical" if identical else "differ"] += 1
        if not identical:
            self._offer(ord_, {"a_id": sa.id, "b_id": sb.id, "path": sa.path, **item})
        return identical

    def _vectors(self, side: int, at: int) -> list[bytes]:
        """The vectors filed at ``at`` in the side's file (none where it filed none: -1)."""
        file = self.files[side]
        if at < 0:
            return []
        if file is None:
            raise AssertionError("an embeddings answer filed, and no vectors file given")
        return file.get(at)

    def _compare(self, va: list[bytes], vb: list[bytes]) -> dict[str, Any]:
        """One pair's inputs, vector by vector: what it adds to the counts, and what its listing says."""
        item: dict[str, Any] = {"identical": va == vb, "vectors": [len(va), len(vb)]}
        if len(va) != len(vb):
            self.counts["count_differs"] += 1
        low: float | None = None
        dims = finite = length = False
        for x, y in zip(va, vb, strict=False):
            a, b = np.frombuffer(x, "<f4"), np.frombuffer(y, "<f4")
            if a.size != b.size:
                dims = True
                self.dimensions[(a.size, b.size)] += 1
                item.setdefault("dimensions", [a.size, b.size])
                continue
            if not (np.isfinite(a).all() and np.isfinite(b).all()):
                finite = True  # a NaN or an infinity: no direction to compare, and never equal
                item["identical"] = False
                continue
            if np.array_equal(a, b):  # -0.0 and 0.0 alike: one float32 vector
                cosine = 1.0
            else:
                item["identical"] = False
                cosine, na, nb = _cosine(a.astype(np.float64), b.astype(np.float64))
                # of one direction and another length: cosine says "the same", the vectors are not
                length = length or (cosine >= COSINE_FLOOR and abs(na - nb) > LENGTH_TOLERANCE * max(na, nb))
            self.counts["vectors"] += 1
            self.cosine_sum += cosine
            self.cosine_min = cosine if self.cosine_min is None else min(self.cosine_min, cosine)
            low = cosine if low is None else min(low, cosine)
        self.counts["dimensions_differ"] += dims
        self.counts["not_finite"] += finite
        self.counts["length_differs"] += length
        self.counts["below_floor"] += low is not None and low < COSINE_FLOOR
        item["identical"] = item["identical"] and not (dims or finite)
        item["cosine_min"] = low
        # where a vector has no cosine (another dimension, a value not finite, one missing): no
        # figure says how far apart, so it is listed before any that has one
        item["uncompared"] = dims or finite or len(va) != len(vb)
        return item

    def _offer(self, ord_: int, item: dict[str, Any]) -> None:
        """Keeps the ``top`` least similar pairs that differ (a vector of another dimension or count,
        or not finite, before any cosine; ties: the earlier pair first)."""
        if self.top <= 0:
            return
        key = (2.0 if item["uncompared"] or item["cosine_min"] is None else -item["cosine_min"], -ord_, item)
        if len(self.worst) < self.top:
            heapq.heappush(self.worst, key)
        elif (key[0], key[1]) > (self.worst[0][0], self.worst[0][1]):
            heapq.heapreplace(self.worst, key)

    def result(self) -> dict[str, Any] | None:
        """compare's ``embeddings`` (docs/analysis.md), None where no pair was of embeddings; the
        vectors files closed (compare's workspace, which may hold them, goes next)."""
        for file in self.files:
            if file is not None:
                file.file.close()
        if not self.counts["pairs"]:
            return None
        n = self.counts["vectors"]
        return {
            **{k: self.counts[k] for k in KEYS},
            "cosine_floor": COSINE_FLOOR,
            "cosine_mean": self.cosine_sum / n if n else None,
            "cosine_min": self.cosine_min,
            "dimensions": [[a, b, k] for (a, b), k in self.dimensions.items()],  # A's, B's, how many vectors
            "why_not_read": self.why_not_read,
            "least_similar": [item for _, _, item in sorted(self.worst, key=lambda k: (-k[0], -k[1]))],
        }


def _cosine(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """Cosine similarity and both L2 norms; a zero vector shares no direction with another (0),
    and two zero vectors are the same (1)."""
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 or nb == 0.0:
        return (1.0 if na == nb else 0.0), na, nb
    return min(1.0, max(-1.0, float(np.dot(a, b)) / (na * nb))), na, nb


def _failed(s: Summary) -> bool:
    """No answer on the side: an error status, no response, or one cut short."""
    return not (isinstance(s.status, int) and 200 <= s.status < 300) or s.end not in (None, "complete")


class VectorFile:
    """A side's vectors file, read by exchange ``ord`` one row group at a time (ords ascend in it)."""

    def __init__(self, path: Path) -> None:
        self.file = pq.ParquetFile(path)
        meta = self.file.metadata
        self.firsts = [self._first(meta.row_group(i)) for i in range(meta.num_row_groups)]
        self.group = -1
        self.rows: dict[int, list[bytes]] = {}

    @staticmethod
    def _first(group: Any) -> int:
        stats = group.column(0).statistics
        if stats is None or not stats.has_min_max:
            raise AssertionError("a vectors file written without ord statistics")
        return int(stats.min)

    def get(self, ord_: int) -> list[bytes]:
        group = bisect.bisect_right(self.firsts, ord_) - 1
        if group != self.group:
            table = self.file.read_row_group(group)
            self.rows = dict(zip(table.column("ord").to_pylist(), table.column("vectors").to_pylist(), strict=True))
            self.group = group
        return self.rows[ord_]
