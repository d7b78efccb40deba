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
            text += (
                f"; {len(self.unpaired_a)} exchanges of A and {len(self.unpaired_b)} of B have no counterpart "
                "(neither a replay link nor an identical request)"
            )
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

    def take(x: dict[str, Any] | None, y: dict[str, Any] | None, rule: str) -> None:
        if x is None or y is None or x["id"] in used_a or y["id"] in used_b:
            return
        out.pairs.append((x, y))
        used_a.add(x["id"])
        used_b.add(y["id"])
        out.by[rule] += 1

    a_by_id = {x["id"]: x for x in a}
    b_by_id = {x["id"]: x for x in b}
    for y in b:
        take(a_by_id.get(y.get("source_id")), y, "replay link")
    for x in a:
        take(x, b_by_id.get(x.get("source_id")), "replay link")
    shared: dict[tuple[str, int], deque[dict[str, Any]]] = defaultdict(deque)
    for y in b:
        if y["id"] not in used_b and y.get("source_id"):
            shared[(y["source_id"], y.get("repeat", 0))].append(y)
    for x in a:
        queue = shared.get((x.get("source_id"), x.get("repeat", 0))) if x["id"] not in used_a and x.get("source_id") else None  # type: ignore[arg-type]
        if queue:
            take(x, queue.popleft(), "shared source")
    same: dict[tuple[str, str, bytes], deque[dict[str, Any]]] = defaultdict(deque)
    for y in b:
        if y["id"] not in used_b:
            same[_request_key(y)].append(y)
    for x in a:
        queue = same.get(_request_key(x)) if x["id"] not in used_a else None
        if queue:
            take(x, queue.popleft(), "identical request")
    out.unpaired_a = [x for x in a if x["id"] not in used_a]
    out.unpaired_b = [y for y in b if y["id"] not in used_b]
    order = {x["id"]: i for i, x in enumerate(a)}
    out.pairs.sort(key=lambda p: order[p[0]["id"]])
    return out
