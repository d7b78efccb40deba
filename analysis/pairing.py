"""Pairing the exchanges of two captures: replay links first, else identical requests.

``pair`` states the rules over lists of records; ``pair_in`` applies the same rules in DuckDB, over
the summarized exchanges of two runs of any size (compare.py), and keeps the pairs there.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from infertap.capture.identity import asked_body, asked_headers, asked_query
from infertap.capture.records import request_body_unknown


@dataclass
class Pairs:
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=list)
    by: dict[str, int] = field(default_factory=dict)  # how many paired by each rule
    unpaired_a: list[dict[str, Any]] = field(default_factory=list)
    unpaired_b: list[dict[str, Any]] = field(default_factory=list)

    def explain(self) -> str:
        return explain(len(self.pairs), self.by, len(self.unpaired_a), len(self.unpaired_b))


def explain(pairs: int, by: dict[str, int], unpaired_a: int, unpaired_b: int) -> str:
    """How many pairs each rule found, and how many exchanges were left without a counterpart."""
    rules = ", ".join(f"{n} by {rule}" for rule, n in by.items() if n) or "none"
    text = f"{pairs} {'pair' if pairs == 1 else 'pairs'} ({rules})"
    if unpaired_a or unpaired_b:
        text += (
            f"; {unpaired_a} {'exchange' if unpaired_a == 1 else 'exchanges'} of A and {unpaired_b} of B have no counterpart "
            "(no replay link or identical request to one not paired already: a replay's later --repeat passes pair only with their own kind)"
        )
    return text


def _request_key(x: dict[str, Any]) -> tuple[Any, ...]:
    """``summaries.request_key``'s rule: the query (``asked_query``) and the headers that change what
    it asks (``asked_headers``) count; a body not kept (``request_body_unknown``) is identical to
    none: keyed by the record itself."""
    body = id(x) if request_body_unknown(x) else x["request_body"] and asked_body(x["request_body"], x.get("request_headers"))
    return (x["method"], x["path"], asked_query(x.get("query")), tuple(asked_headers(x.get("request_headers"))), body)


def pair(a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]]) -> Pairs:
    """Pair each exchange of ``a`` with at most one of ``b``.

    Rules, in order: B replays A (``b.source_id == a.id``), A replays B, both replay the same
    source (same ``source_id`` and ``repeat``); then identical method, path, query (less a
    redacted credential parameter: ``asked_query``), headers that change what it asks
    (``asked_headers``) and request bytes (a body not kept is identical to none), matched in
    order of occurrence. Each exchange pairs at most once, as itself: two exchanges
    that share an id (copies, a hand-made capture) are two exchanges, and a replay link names the
    last exchange of its id. Of a ``--repeat`` replay's passes, a replay link takes the first pass
    (then the first recorded): the order a run wrote them in is no rule.
    """
    out = Pairs(by={"replay link": 0, "shared source": 0, "identical request": 0})
    used_a: set[int] = set()
    used_b: set[int] = set()
    taken: list[tuple[int, int]] = []

    def take(i: int | None, j: int | None, rule: str) -> None:
        if i is None or j is None or i in used_a or j in used_b:
            return
        taken.append((i, j))
        used_a.add(i)
        used_b.add(j)
        out.by[rule] += 1

    a_by_id = {x["id"]: i for i, x in enumerate(a)}  # the last exchange of each id
    b_by_id = {y["id"]: j for j, y in enumerate(b)}
    for j, y in sorted(enumerate(b), key=_first_pass):
        take(a_by_id.get(y.get("source_id")), j, "replay link")
    for i, x in sorted(enumerate(a), key=_first_pass):
        take(i, b_by_id.get(x.get("source_id")), "replay link")
    shared: dict[tuple[str, int], deque[int]] = defaultdict(deque)
    for j, y in enumerate(b):
        if j not in used_b and y.get("source_id"):
            shared[(y["source_id"], y.get("repeat", 0))].append(j)
    for i, x in enumerate(a):
        queue = shared.get((x.get("source_id"), x.get("repeat", 0))) if i not in used_a and x.get("source_id") else None  # type: ignore[arg-type]
        if queue:
            take(i, queue.popleft(), "shared source")
    same: dict[tuple[Any, ...], deque[int]] = defaultdict(deque)
    for j, y in enumerate(b):
        if j not in used_b:
            same[_request_key(y)].append(j)
    for i, x in enumerate(a):
        queue = same.get(_request_key(x)) if i not in used_a else None
        if queue:
            take(i, queue.popleft(), "identical request")
    out.pairs = [(a[i], b[j]) for i, j in sorted(taken)]
    out.unpaired_a = [x for i, x in enumerate(a) if i not in used_a]
    out.unpaired_b = [y for j, y in enumerate(b) if j not in used_b]
    return out


def _first_pass(item: tuple[int, dict[str, Any]]) -> tuple[int, int]:
    """An exchange's (pass of its replay, place): a replay link takes the first pass's, then the first recorded."""
    repeat = item[1].get("repeat")
    return (repeat if isinstance(repeat, int) else 0), item[0]


#: ``_first_pass`` in SQL, of a row with ``repeat_key`` (the repr of its ``repeat``) and ``ord``.
_PASS = "(coalesce(TRY_CAST({t}.repeat_key AS BIGINT), 0), {t}.ord)"


@dataclass
class PairTable:
    """Pairs kept in DuckDB: table ``name`` holds one row per pair, ``(ord, a_ord, b_ord, a_id, b_id)``,
    ``ord`` numbering the pairs 0.. in A's order and ``a_ord``/``b_ord`` each exchange's place in its
    capture. The counts are those ``Pairs`` has."""

    name: str
    pairs: int
    by: dict[str, int]
    unpaired_a: int
    unpaired_b: int

    def explain(self) -> str:
        return explain(self.pairs, self.by, self.unpaired_a, self.unpaired_b)


def pair_in(con: Any, a: str, b: str, name: str) -> PairTable:
    """``pair`` in SQL, over relations ``a`` and ``b`` of (ord, id, source_id, repeat_key, request_key)
    (summaries.py): the same rules in the same order, with each rule's matches in order of
    occurrence, so that a million exchanges pair without coming into Python.

    As in ``pair``, an exchange taken by one rule is out of the later ones (as itself, by ``ord``:
    two exchanges sharing an id are two), a replay link goes to the last exchange of that id, and
    the pairs come in A's order."""
    con.execute(f"CREATE OR REPLACE TABLE {name}_raw (a_ord BIGINT, b_ord BIGINT, a_id VARCHAR, b_id VARCHAR, rule INT)")
    for side, rel in (("a", a), ("b", b)):  # the keys only: the summaries stay on disk
        con.execute(f"CREATE OR REPLACE VIEW {name}_{side} AS SELECT ord, id, source_id, repeat_key, request_key FROM {rel}")
    a, b = f"{name}_a", f"{name}_b"
    free_a = f"(SELECT k.* FROM {a} k ANTI JOIN {name}_raw u ON u.a_ord = k.ord)"
    free_b = f"(SELECT k.* FROM {b} k ANTI JOIN {name}_raw u ON u.b_ord = k.ord)"
    rules = [
        # B replays A: each of A's exchanges (the last of its id) goes to the first of B's naming it
        # (of its first --repeat pass).
        f"""SELECT x.ord, arg_min(y.ord, {_PASS.format(t="y")}), any_value(x.id), arg_min(y.id, {_PASS.format(t="y")}), 0
            FROM {b} y JOIN (SELECT id, max(ord) AS ord FROM {a} GROUP BY id) x ON y.source_id = x.id GROUP BY x.ord""",
        # A replays B: the first of A's free exchanges naming one of B's free ones takes it.
        f"""SELECT arg_min(x.ord, {_PASS.format(t="x")}), y.ord, arg_min(x.id, {_PASS.format(t="x")}), any_value(y.id), 0
            FROM {free_a} x JOIN (SELECT id, max(ord) AS ord FROM {b} GROUP BY id) y ON x.source_id = y.id
            ANTI JOIN {name}_raw u ON u.b_ord = y.ord GROUP BY y.ord""",
        # Both replay the same source: the k-th of A's free replays of (source, repeat) takes B's k-th.
        f"""SELECT x.ord, y.ord, x.id, y.id, 1 FROM
            (SELECT *, row_number() OVER (PARTITION BY source_id, repeat_key ORDER BY ord) AS k
             FROM {free_a} WHERE source_id IS NOT NULL) x
            JOIN (SELECT *, row_number() OVER (PARTITION BY source_id, repeat_key ORDER BY ord) AS k
                  FROM {free_b} WHERE source_id IS NOT NULL) y USING (source_id, repeat_key, k)""",
        # Identical method, path and request bytes: the k-th of A's free ones takes B's k-th.
        f"""SELECT x.ord, y.ord, x.id, y.id, 2 FROM
            (SELECT *, row_number() OVER (PARTITION BY request_key ORDER BY ord) AS k FROM {free_a}) x
            JOIN (SELECT *, row_number() OVER (PARTITION BY request_key ORDER BY ord) AS k FROM {free_b}) y
            USING (request_key, k)""",
    ]
    for rule in rules:
        con.execute(f"INSERT INTO {name}_raw {rule}")
    con.execute(
        f"CREATE OR REPLACE TABLE {name} AS SELECT (row_number() OVER (ORDER BY a_ord) - 1) AS ord, a_ord, b_ord, a_id, b_id "
        f"FROM {name}_raw ORDER BY a_ord"
    )
    counts = dict(con.execute(f"SELECT rule, count(*) FROM {name}_raw GROUP BY rule").fetchall())
    total = sum(counts.values())
    unpaired_a = con.execute(f"SELECT count(*) FROM {free_a}").fetchall()[0][0]
    unpaired_b = con.execute(f"SELECT count(*) FROM {free_b}").fetchall()[0][0]
    con.execute(f"DROP TABLE {name}_raw")
    con.execute(f"DROP VIEW {name}_a")
    con.execute(f"DROP VIEW {name}_b")
    rules_named = ("replay link", "shared source", "identical request")
    return PairTable(name, total, {r: counts.get(i, 0) for i, r in enumerate(rules_named)}, unpaired_a, unpaired_b)
