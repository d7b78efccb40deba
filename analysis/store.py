"""``Analysis``: the one object that owns a DuckDB connection over loaded captures.

Each decoded table is a view over the Parquet files of every loaded capture (cache.py), so
nothing is copied into memory until a query asks for it, and many shards read as one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from .cache import CachedCapture, cached_captures
from .errors import AnalysisError, QueryError
from .schema import TABLES
from .sources import find_captures
from .views import DERIVED

#: What ``export`` writes: every table, and the per-exchange views derived from them.
EXPORTED = (*TABLES, "metrics", "itl")


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@dataclass(frozen=True)
class QueryResult:
    """A query's answer as plain data."""

    columns: list[str]
    types: list[str]
    rows: list[tuple[Any, ...]]

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


class Analysis:
    """Loaded captures and the DuckDB connection over them.

    >>> with Analysis(["captures/run1", "captures/shards/"]) as a:
    ...     a.query("SELECT model, median(ttft_ns) FROM metrics GROUP BY model").rows
    """

    def __init__(
        self,
        captures: Iterable[str | os.PathLike[str]],
        *,
        cache_dir: str | os.PathLike[str] | None = None,
        workers: int | None = None,
        progress: Callable[[CachedCapture], None] | None = None,
    ) -> None:
        """Load ``captures`` (paths, globs, folders of captures), decoding what the cache lacks with
        up to ``workers`` processes (default: one per CPU)."""
        self.captures = cached_captures(find_captures(captures), cache_dir, workers=workers, progress=progress)
        self.con = duckdb.connect()
        try:
            for name in TABLES:
                files = ", ".join(_literal(str(c.table(name))) for c in self.captures)
                self.con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet([{files}])")
            for statement in DERIVED:
                self.con.execute(statement)
        except duckdb.Error as exc:  # a cache entry damaged or edited by hand
            self.con.close()
            folders = ", ".join(str(c.folder) for c in self.captures)
            raise AnalysisError(f"the decoded tables can't be read ({exc}); delete the cache entries and load again: {folders}") from exc

    # -- what was loaded ------------------------------------------------------------------------

    @property
    def decoded(self) -> list[Path]:
        """The captures decoded by this load (the others came from the cache)."""
        return [c.capture for c in self.captures if c.decoded]

    @property
    def warnings(self) -> list[str]:
        """Torn tails: their data is used, and this says where each capture was cut short."""
        return [t for c in self.captures for t in c.torn]

    # -- queries ---------------------------------------------------------------------------------

    def sql(self, query: str, params: list[Any] | None = None) -> duckdb.DuckDBPyRelation:
        """A relation over the loaded views (``exchanges``, ``chunks``, ``events``, ``metrics``...)."""
        try:
            return self.con.sql(query, params=params)
        except duckdb.Error as exc:
            raise QueryError(str(exc)) from exc

    def query(self, query: str, params: list[Any] | None = None) -> QueryResult:
        """Run one query and fetch its answer (empty for a statement that returns nothing)."""
        try:
            relation = self.con.sql(query, params=params)
            if relation is None:
                return QueryResult([], [], [])
            return QueryResult(list(relation.columns), [str(t) for t in relation.types], relation.fetchall())
        except duckdb.Error as exc:
            raise QueryError(str(exc)) from exc

    def table(self, name: str) -> duckdb.DuckDBPyRelation:
        """A loaded table or view by name."""
        return self.sql(f'SELECT * FROM "{name}"')

    def count(self, name: str) -> int:
        return int(self.con.execute(f'SELECT count(*) FROM "{name}"').fetchall()[0][0])

    def export_parquet(self, folder: str | os.PathLike[str]) -> dict[str, int]:
        """Write every table and per-exchange view as ``folder/<name>.parquet``, for any SQL engine to read."""
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        counts = {}
        for name in EXPORTED:
            target = out / f"{name}.parquet"
            self.con.execute(f"COPY (SELECT * FROM {name}) TO {_literal(str(target))} (FORMAT parquet, COMPRESSION zstd)")
            counts[name] = self.count(name)
        return counts

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Analysis:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
