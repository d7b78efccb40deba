"""Pairing the exchanges of two captures: replay links first, else identical requests."""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Pairs:
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=list)
    by: dict[str, int] = field(default_factory=dict)  # how many paired by each rule
    unpaired_a: list[dict[str, Any]] = field(default_factory=list)
    unpaired_b: list[dict[str, Any]] = field(default_factory=list)

    def explain(self) -> str:
        rules = ", ".join(f"{n} by {rule}" for rule, n in self.by.items() if n) or "none"
        text = f"{len(self.pairs)} pairs ({rules})"
        if self.unpaired_a or self.unpaired_b:
            text += (f"; {len(self.unpaired_a)} exchanges of A and {len(self.unpaired_b)} of B have no counterpart "
                     "(neither a replay link nor an identical request)")  # fmt: skip
        return text


def _request_key(x: dict[str, Any]) -> tuple[str, str, bytes]:
    return (x["method"], x["path"], x["request_body"])


def pair(a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]]) -> Pairs:
    """Pair each exchange of ``a`` with at most one of ``b``.

    Rules, in order: B replays A (``b.source_id == a.id``), A replays B, both replay the same
    source (same ``source_id`` and ``repeat``); then identical method, path and request bytes,
    matched in order of occurrence.
    """
    out = Pairs(by={"replay link": 0, "shared source": 0, "identical request": 0})
    used_a: set[str] = set()
    used_b: set[str] = set()
    a_by_id = {x["id"]: x for x in a}
    b_by_id = {x["id"]: x for x in b}
    for y in b:
        x = a_by_id.get(y.get("source_id"))  # type: ignore[arg-type]
        if x is not None and x["id"] not in used_a:
            out.pairs.append((x, y))
            used_a.add(x["id"])
            used_b.add(y["id"])
            out.by["replay link"] += 1
    for x in a:
        if x["id"] in used_a:
            continue
        y = b_by_id.get(x.get("source_id"))  # type: ignore[arg-type]
        if y is not None and y["id"] not in used_b:
            out.pairs.append((x, y))
            used_a.add(x["id"])
            used_b.add(y["id"])
            out.by["replay link"] += 1
    shared: dict[tuple[str, int], deque[dict[str, Any]]] = defaultdict(deque)
    for y in b:
        if y["id"] not in used_b and y.get("source_id"):
            shared[(y["source_id"], y.get("repeat", 0))].append(y)
    for x in a:
        if x["id"] in used_a or not x.get("source_id"):
            continue
        queue = shared.get((x["source_id"], x.get("repeat", 0)))
        if queue:
            y = queue.popleft()
            out.pairs.append((x, y))
            used_a.add(x["id"])
            used_b.add(y["id"])
            out.by["shared source"] += 1
    same: dict[tuple[str, str, bytes], deque[dict[str, Any]]] = defaultdict(deque)
    for y in b:
        if y["id"] not in used_b:
            same[_request_key(y)].append(y)
    for x in a:
        if x["id"] in used_a:
            continue
        queue = same.get(_request_key(x))
        if queue:
            y = queue.popleft()
            out.pairs.append((x, y))
            used_a.add(x["id"])
            used_b.add(y["id"])
            out.by["identical request"] += 1
    out.unpaired_a = [x for x in a if x["id"] not in used_a]
    out.unpaired_b = [y for y in b if y["id"] not in used_b]
    order = {x["id"]: i for i, x in enumerate(a)}
    out.pairs.sort(key=lambda p: order[p[0]["id"]])
    return out
