"""Why two runs paired nothing, where their requests differ only by what the identical-request rule
adds to the bytes: the query or the headers that change what a request asks (``summaries.request_key``).
A run replayed with another ``anthropic-beta`` or ``?api-version=`` was refused as "no exchange of B
matches one of A", leaving the user to diff the captures; compare now says which part kept them apart.

Read on the error path only, from the captures again, into compare's DuckDB workspace: a run of any
size is counted there, never held in Python, and a run that paired pays nothing."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from infertap.capture.identity import asked_headers, asked_query
from infertap.capture.reader import CaptureReader
from infertap.capture.records import request_body_unknown
from infertap.wording import counted

_BATCH = 50_000
_SCHEMA = pa.schema(
    [("side", pa.string()), ("ord", pa.int64()), ("bare", pa.binary()), ("query", pa.string()), ("asked", pa.string())]
)
_HEADERS = "the headers that change what a request asks"


def near_pairs(
    con: Any, a_path: str | os.PathLike[str], b_path: str | os.PathLike[str], table: str, other: str = "B"
) -> str | None:
    """How many pairs the identical-request rule would have made of ``a_path`` and ``b_path`` but for
    their queries or their asked headers, each with the first such pair's difference (A's, then that
    of ``other``, B's name in the words), or
    None where no request of one is the other's in method, path and body. For runs that paired
    nothing: every request that matches the other's so differs in one of them."""
    con.execute(f"CREATE OR REPLACE TABLE {table} (side VARCHAR, ord BIGINT, bare BLOB, query VARCHAR, asked VARCHAR)")
    for side, path in (("a", a_path), ("b", b_path)):
        for batch in _batches(side, path):
            con.register(f"{table}_batch", batch)
            con.execute(f"INSERT INTO {table} SELECT * FROM {table}_batch")
            con.unregister(f"{table}_batch")
    said = []
    for kept, apart, words in (("query", "asked", _HEADERS), ("asked", "query", "the query")):
        if n := _would_pair(con, table, ("bare", kept)):
            said.append(f"{counted(n, 'pair')} would match but for {words} ({_example(con, table, kept, apart, other)})")
    if not said and (n := _would_pair(con, table, ("bare",))):
        seen = _example(con, table, None, "query", other) + "; " + _example(con, table, None, "asked", other)
        said.append(f"{counted(n, 'pair')} would match but for the query and {_HEADERS} ({seen})")
    con.execute(f"DROP TABLE {table}")
    return "; ".join(said) or None


def _batches(side: str, path: str | os.PathLike[str]) -> Iterator[pa.Table]:
    """One side's exchanges, a batch at a time: each one's method, path and body digest (``bare``), its
    query and asked headers as the key reads them (a body not kept is identical to none: left out)."""
    rows: list[tuple[Any, ...]] = []
    ord_ = 0
    for record in CaptureReader(path).records():
        if record["type"] != "exchange":
            continue
        ord_ += 1
        if request_body_unknown(record):
            continue
        body = record["request_body"]
        head = repr((record["method"], record["path"], body is None)).encode("utf-8", "surrogatepass")
        bare = hashlib.blake2b(head + b"\0" + (body or b""), digest_size=16).digest()
        asked = json.dumps(asked_headers(record.get("request_headers")))  # exact, shown by _shown
        rows.append((side, ord_, bare, asked_query(record.get("query")), asked))
        if len(rows) >= _BATCH:
            yield pa.Table.from_pylist([dict(zip(_SCHEMA.names, row, strict=True)) for row in rows], schema=_SCHEMA)
            rows = []
    if rows:
        yield pa.Table.from_pylist([dict(zip(_SCHEMA.names, row, strict=True)) for row in rows], schema=_SCHEMA)


def _would_pair(con: Any, table: str, key: tuple[str, ...]) -> int:
    """The pairs matching on ``key`` alone makes: of each key, as many as the side with fewer holds."""
    cols = ", ".join(key)
    [(n,)] = con.execute(
        f"SELECT coalesce(sum(least(na, nb)), 0) FROM (SELECT {cols}, count(*) FILTER (WHERE side = 'a') AS na, "
        f"count(*) FILTER (WHERE side = 'b') AS nb FROM {table} GROUP BY {cols})"
    ).fetchall()
    return int(n)


def _example(con: Any, table: str, kept: str | None, apart: str, other: str) -> str:
    """What A's and B's first requests of one body (and ``kept``) sent of ``apart``: "A sent x, B none"."""
    same = f"AND x.{kept} = y.{kept}" if kept else ""
    [(a, b)] = con.execute(
        f"SELECT x.{apart}, y.{apart} FROM {table} x JOIN {table} y ON x.bare = y.bare {same} AND x.{apart} <> y.{apart} "
        "WHERE x.side = 'a' AND y.side = 'b' ORDER BY x.ord, y.ord LIMIT 1"
    ).fetchall()
    if apart == "query":
        return f"A sent {f'?{a}' if a else 'no query'}, {other} {f'?{b}' if b else 'no query'}"
    # Of the asked headers, those that differ (a header both sent alike kept nothing apart).
    x, y = dict(json.loads(a)), dict(json.loads(b))
    names = sorted(n for n in x.keys() | y.keys() if x.get(n) != y.get(n))
    return f"A sent {_headers(x, names)}, {other} {_headers(y, names)}"


def _headers(sent: dict[str, str], names: list[str]) -> str:
    return "; ".join(f"{name}: {sent[name]}" for name in names if name in sent) or "none"


__all__ = ["near_pairs"]
