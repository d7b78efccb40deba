"""``Analysis``: the one object that owns a DuckDB connection over loaded captures.

Each decoded table is a view over the Parquet files of every loaded capture (cache.py), so
nothing is copied into memory until a query asks for it, and many shards read as one.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from .cache import CachedCapture, Gone, cached_capture, cached_captures, hold, release
from .errors import AnalysisError, QueryError
from .schema import TABLES
from .sources import find_captures, refuse_inside_capture
from .views import DERIVED

#: DuckDB's buffer for an analysis (e.g. ``4GB``); unset: DuckDB's default, 80% of the machine's memory.
MEMORY_ENV = "INFERTAP_DUCKDB_MEMORY"

#: What ``export`` writes: every table, and the per-exchange views derived from them.
EXPORTED = (*TABLES, "metrics", "itl")
#: The manifest `export --ray` writes next to the tables (a leading "_": Spark and Hive skip it).
MANIFEST = "_infertap_export.json"


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


_SPILL_PREFIX = "infertap-duckdb-"


def spill_folder() -> str:
    """A private folder (0700) for DuckDB to spill to, named for this process; the folders of
    processes that ended without removing theirs (killed inside an analysis: a Ray worker stopped,
    an OOM kill) are removed first, so they don't pile up in the temporary folder."""
    root = Path(tempfile.gettempdir())
    for stale in root.glob(f"{_SPILL_PREFIX}*-*"):
        pid = stale.name[len(_SPILL_PREFIX) :].split("-", 1)[0]
        try:
            if not pid.isdigit() or stale.stat().st_uid != os.getuid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:  # no such process: nobody spills there any more
            shutil.rmtree(stale, ignore_errors=True)
        except OSError:  # gone meanwhile, or a process of another user's (alive)
            continue
    return tempfile.mkdtemp(prefix=f"{_SPILL_PREFIX}{os.getpid()}-")


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
        memory_limit: str | None = None,
    ) -> None:
        """Load ``captures`` (paths, globs, folders of captures), decoding what the cache lacks with
        up to ``workers`` processes (default: one per CPU). DuckDB keeps ``memory_limit`` (default
        ``$INFERTAP_DUCKDB_MEMORY``, else its own default) and spills the rest to a private
        temporary folder, never to the working directory (DuckDB's ``.tmp``)."""
        self.captures = cached_captures(find_captures(captures), cache_dir, workers=workers, progress=progress)
        self._held: list[tuple[CachedCapture, Path | None]] = []
        for i in range(len(self.captures)):
            marker = self._hold(i, cache_dir)  # may fetch the entry again
            self._held.append((self.captures[i], marker))
        self._spill = spill_folder()
        config: dict[str, str | bool | int | float | list[str]] = {"temp_directory": self._spill}
        limit = memory_limit or os.environ.get(MEMORY_ENV)
        if limit:
            config["memory_limit"] = limit
        try:
            self.con = duckdb.connect(config=config)
        except duckdb.Error as exc:  # a memory limit DuckDB doesn't read
            shutil.rmtree(self._spill, ignore_errors=True)
            self._release()
            raise AnalysisError(f"can't open DuckDB with memory limit {limit!r} ({exc})") from exc
        try:
            # hive_partitioning off: a `key=value` folder anywhere above the cache (DuckDB looks at the
            # whole path) would otherwise become a column, or replace one of the same name.
            for name in TABLES:
                files = ", ".join(_literal(str(f)) for c in self.captures for f in c.tables(name))
                self.con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet([{files}], hive_partitioning = false)")
            for statement in DERIVED:
                self.con.execute(statement)
        except duckdb.Error as exc:  # a cache entry damaged or edited by hand
            self.close()
            folders = ", ".join(str(c.folder) for c in self.captures)
            raise AnalysisError(
                f"the decoded tables can't be read ({exc}); delete the cache entries and load again: {folders}"
            ) from exc

    # -- what was loaded ------------------------------------------------------------------------

    @property
    def decoded(self) -> list[Path]:
        """The captures decoded by this load (the others came from the cache)."""
        return [c.capture for c in self.captures if c.decoded]

    @property
    def warnings(self) -> list[str]:
        """Torn tails (their data is used: this says where each capture was cut short), and exchanges
        that repeat another's id (renamed in the tables)."""
        return [t for c in self.captures for t in (*c.torn, *filter(None, [c.repeated]))]

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

    def statements(self, text: str) -> list[str]:
        """``text`` split into its SQL statements, as DuckDB parses them (a ';' inside a string or a
        comment ends none): each is run and answers on its own, where ``query`` would answer only the last."""
        try:
            return [st.query for st in self.con.extract_statements(text)]
        except duckdb.Error as exc:
            raise QueryError(str(exc)) from exc

    def table(self, name: str) -> duckdb.DuckDBPyRelation:
        """A loaded table or view by name."""
        return self.sql(f'SELECT * FROM "{name}"')

    def count(self, name: str) -> int:
        return int(self.con.execute(f'SELECT count(*) FROM "{name}"').fetchall()[0][0])

    def export_parquet(self, folder: str | os.PathLike[str], *, partition_by: str | None = "recorder_id") -> dict[str, int]:
        """Write every table and per-exchange view as Parquet, for any SQL engine to read.

        Partitioned (``recorder_id`` or ``run_id``): ``folder/<name>/<key>=<value>/data_0.parquet``,
        hive-style, as Spark, Trino and DuckDB discover partitions; each row sits with its
        exchange's (or run's) recorder. ``None``: one ``folder/<name>.parquet`` per table.
        """
        if partition_by not in (None, "recorder_id", "run_id"):
            raise AnalysisError(f"partition by recorder_id or run_id, not {partition_by!r}")
        out = Path(folder)
        refuse_inside_capture(out, "the export")
        out.mkdir(parents=True, exist_ok=True)
        # An earlier `export --ray`'s manifest would describe captures this export doesn't hold.
        (out / MANIFEST).unlink(missing_ok=True)
        counts = {}
        for name in EXPORTED:
            # An earlier export of the other form into the same folder would stay beside this one.
            if partition_by is None:
                shutil.rmtree(out / name, ignore_errors=True)
                target, options = out / f"{name}.parquet", ""
                select = f"SELECT * FROM {name}"
            else:
                (out / f"{name}.parquet").unlink(missing_ok=True)
                target, options = out / name, f", PARTITION_BY ({partition_by}), OVERWRITE true"
                keyed = self._with_partition_key(name, partition_by)
                select = keyed or f"SELECT * FROM {name}"
                # The captures table spans recorders; an empty table would leave no file, hence no schema.
                if keyed is None or not self.count(name):
                    shutil.rmtree(target, ignore_errors=True)
                    target.mkdir()
                    target, options = target / "data_0.parquet", ""
            self.con.execute(f"COPY ({select}) TO {_literal(str(target))} (FORMAT parquet, COMPRESSION zstd{options})")
            counts[name] = self.count(name)
        return counts

    def _with_partition_key(self, name: str, key: str) -> str | None:
        columns = {c for c, *_ in self.con.execute(f"DESCRIBE {name}").fetchall()}
        if key in columns:
            return f"SELECT * FROM {name}"
        if "exchange_id" in columns:  # rows of an exchange go with it
            return (
                f"SELECT t.*, x.{key} FROM {name} t LEFT JOIN (SELECT capture, exchange_id, any_value({key}) AS {key} "
                f"FROM exchanges GROUP BY ALL) x USING (capture, exchange_id)"
            )
        if "run_id" in columns:
            return (
                f"SELECT t.*, r.{key} FROM {name} t LEFT JOIN (SELECT capture, run_id, any_value({key}) AS {key} "
                f"FROM runs GROUP BY ALL) r USING (capture, run_id)"
            )
        return None

    def _hold(self, i: int, cache_dir: str | os.PathLike[str] | None) -> Path | None:
        """Keeps capture ``i``'s entry while this analysis is open (a decode after an append would
        remove it under a long ``sql`` session); an entry removed before it was held is fetched again."""
        while True:
            try:
                return hold(self.captures[i])
            except Gone:
                self.captures[i] = cached_capture(self.captures[i].capture, cache_dir)

    def close(self) -> None:
        self.con.close()
        shutil.rmtree(self._spill, ignore_errors=True)
        self._release()

    def _release(self) -> None:
        for entry, marker in self._held:
            release(entry, marker)
        self._held = []

    def __enter__(self) -> Analysis:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
