"""``Analysis``: the one object that owns a DuckDB connection over loaded captures.

Each decoded table is a view over the Parquet files of every loaded capture (cache.py), so
nothing is copied into memory until a query asks for it, and many shards read as one.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from infertap.capture.segments import SEGMENT_SUFFIX
from infertap.version import installed_version

from .cache import CachedCapture, Gone, cached_capture, cached_captures, hold, release
from .errors import AnalysisError, QueryError
from .joined_sessions import JOINED, joined_captures, joined_turns
from .schema import TABLES
from .sources import locate_captures, refuse_inside_capture
from .views import DERIVED

#: DuckDB's buffer for an analysis (e.g. ``4GB``); unset: DuckDB's default, 80% of the machine's memory.
MEMORY_ENV = "INFERTAP_DUCKDB_MEMORY"

#: What ``export`` writes: every table, and the per-exchange views derived from them (not ``links``,
#: linking's digests, nor ``token_chunks``, whose gaps are ``itl``).
EXPORTED = (*(t for t in TABLES if t not in ("links", "token_chunks")), "metrics", "itl")
#: The manifest `export --ray` writes next to the tables (a leading "_": Spark and Hive skip it).
MANIFEST = "_infertap_export.json"
#: What every export writes next to the tables: which of the folder's entries exports wrote, so that
#: a later export replaces those, and nothing else of a folder it shares (a user's own ``metrics/``).
LEDGER = "_infertap_tables.json"
#: The partition value of a row whose key is unknown (as DuckDB and Spark write and read null), and
#: where a table with no rows keeps its one empty file.
EMPTY_PARTITION = "__HIVE_DEFAULT_PARTITION__"
_STAGING = ".infertap-export-"  # where a table is written before it is renamed into place


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


def split_statements(text: str) -> list[str]:
    """``text`` split into its SQL statements, as DuckDB parses them (a ';' inside a string or a
    comment ends none), on a connection of its own: parsed before any capture is loaded, what a
    command refuses (several statements to one CSV, a query that doesn't parse) costs no decode."""
    con = duckdb.connect()
    try:
        return [st.query for st in con.extract_statements(text)]
    except duckdb.Error as exc:
        raise QueryError(str(exc)) from exc
    finally:
        con.close()


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
        found = locate_captures(captures)
        self.left_out = found.left_out  # a glob's matches that hold no capture: said in ``warnings``
        self.captures = cached_captures(found.captures, cache_dir, workers=workers, progress=progress)
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
            self._turns()
            for statement in DERIVED:
                self.con.execute(statement)
        except duckdb.Error as exc:  # a cache entry damaged or edited by hand
            self.close()
            folders = ", ".join(str(c.folder) for c in self.captures)
            raise AnalysisError(
                f"the decoded tables can't be read ({exc}); delete the cache entries and load again: {folders}"
            ) from exc

    def _turns(self) -> None:
        """The ``turns`` view, with each session's ``session_capture``: the recordings read together
        linked as one (joined_sessions.py), every other capture as it was decoded."""
        joined = joined_captures(self.con, [str(c.capture) for c in self.captures])
        alone = [c for c in self.captures if str(c.capture) not in joined]
        parts = []
        if alone:
            files = ", ".join(_literal(str(f)) for c in alone for f in c.tables("turns"))
            parts.append(f"SELECT *, capture AS session_capture FROM read_parquet([{files}], hive_partitioning = false)")
        if joined:
            entries = {str(c.capture): c.folder for c in self.captures}
            path = joined_turns(self.con, joined, [entries[name] for name in joined])
            parts.append(
                f"SELECT * FROM read_parquet({_literal(str(path))}, hive_partitioning = false)"
                if path
                else f"SELECT * FROM {JOINED}"
            )
        if parts:
            self.con.execute(f"CREATE OR REPLACE VIEW turns AS {' UNION ALL BY NAME '.join(parts)}")

    # -- what was loaded ------------------------------------------------------------------------

    @property
    def decoded(self) -> list[Path]:
        """The captures decoded by this load (the others came from the cache)."""
        return [c.capture for c in self.captures if c.decoded]

    @property
    def warnings(self) -> list[str]:
        """A glob's matches left out (no capture in them), torn tails (their data is used: this says
        where each capture was cut short), exchanges that repeat another's id (renamed in the tables),
        request bodies of plain JSON under a content-encoding they aren't in, and compressed ones cut short."""
        return [
            *map(str, self.left_out),
            *(t for c in self.captures for t in (*c.torn, *filter(None, [c.repeated, c.mislabelled, c.cut_requests]))),
        ]

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
        """``text`` split into its SQL statements (``split_statements``): each is run and answers on
        its own, where ``query`` would answer only the last."""
        return split_statements(text)

    def table(self, name: str) -> duckdb.DuckDBPyRelation:
        """A loaded table or view by name."""
        return self.sql(f'SELECT * FROM "{name}"')

    def count(self, name: str) -> int:
        return int(self.con.execute(f'SELECT count(*) FROM "{name}"').fetchall()[0][0])

    def export_parquet(self, folder: str | os.PathLike[str], *, partition_by: str | None = "recorder_id") -> dict[str, int]:
        """Write every table and per-exchange view as Parquet, for any SQL engine to read.

        Partitioned (``recorder_id`` or ``run_id``): ``folder/<name>/<key>=<value>/data_0.parquet``,
        hive-style, as Spark, Trino and DuckDB discover partitions; each row sits with its
        exchange's (or run's) recorder, and a table with no rows is one empty file (its schema) in
        ``<key>=__HIVE_DEFAULT_PARTITION__``, so ``folder/<name>/*/*.parquet`` reads every table but
        the unpartitioned ``captures``. ``None``: one ``folder/<name>.parquet`` per table.

        Every table is written beside its place first, then all are renamed into place, replacing
        what an earlier export wrote there: an export that fails partway (a full disk) leaves the
        earlier export whole, never two exports mixed. An entry of that name that no export wrote (a user's own ``metrics/``,
        the ``captures/`` a recorder writes into) is an AnalysisError before anything is written.
        """
        if partition_by not in (None, "recorder_id", "run_id"):
            raise AnalysisError(f"partition by recorder_id or run_id, not {partition_by!r}")
        out = Path(folder)
        refuse_inside_capture(out, "the export")
        claim_export_folder(out, partition_by)
        # An earlier `export --ray`'s manifest would describe captures this export doesn't hold.
        (out / MANIFEST).unlink(missing_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=_STAGING, dir=out))
        try:
            counts = {}
            for name in EXPORTED:
                try:
                    self._export_table(name, staging / f"new-{name}", partition_by)
                except (OSError, duckdb.Error) as exc:
                    raise AnalysisError(
                        f"export to {out} failed writing the {name} table, nothing of this export kept "
                        f"(what an earlier export wrote there is unchanged): {exc}"
                    ) from exc
                counts[name] = self.count(name)
            for name in EXPORTED:  # renames only, once every table is written
                _replace_table(out, staging, name)
            _write_json(out / LEDGER, {"infertap": installed_version(), "written": sorted(_written(partition_by))})
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return counts

    def _export_table(self, name: str, into: Path, partition_by: str | None) -> None:
        """Table ``name`` written under the empty folder ``into``, as the export lays it out."""
        into.mkdir(exist_ok=True)
        if partition_by is None:
            target, options, select = into / f"{name}.parquet", "", f"SELECT * FROM {name}"
        else:
            target, options = into / name, f", PARTITION_BY ({partition_by})"
            keyed = self._with_partition_key(name, partition_by)
            select = keyed or f"SELECT * FROM {name}"
            if keyed is None:  # the captures table spans recorders: one file, not partitioned
                target.mkdir()
                target, options = target / "data_0.parquet", ""
            elif not self.count(name):
                # PARTITION_BY writes no file for no rows: one empty file keeps the schema, in the
                # partition of an unknown key (Hive's name for null), so `<table>/*/*.parquet` finds it.
                target = target / f"{partition_by}={EMPTY_PARTITION}"
                target.mkdir(parents=True)
                target, options = target / "data_0.parquet", ""
                select = f"SELECT * EXCLUDE ({partition_by}) FROM ({keyed})"
        self.con.execute(f"COPY ({select}) TO {_literal(str(target))} (FORMAT parquet, COMPRESSION zstd{options})")

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


# -- the export's folder ---------------------------------------------------------------------------


def _written(partition_by: str | None) -> set[str]:
    """The entries an export of this form writes: a folder per table, or a file."""
    return {name if partition_by else f"{name}.parquet" for name in EXPORTED}


def _claimed(out: Path) -> set[str]:
    """The entries of ``out`` that earlier exports wrote: its ledger's, and an `export --ray`'s tables."""
    claimed: set[str] = set()
    for path, key in ((out / LEDGER, "written"), (out / MANIFEST, "tables")):
        try:
            listed = json.loads(path.read_text()).get(key) or []
        except (OSError, ValueError, AttributeError):  # none, or not one of ours
            continue
        claimed.update(str(entry) for entry in listed)
    return claimed


def _unledgered_export(out: Path) -> set[str]:
    """The entries of an export made before exports kept a ledger (infertap before 2026-12-05): with
    no ledger, a folder whose every entry named for a table is Parquet and nothing else, and which
    holds the ``captures`` and ``exchanges`` tables, is taken for one. A user's own ``metrics/``
    beside no such tables is not."""
    if (out / LEDGER).exists() or (out / MANIFEST).exists():
        return set()
    found = {entry for name in EXPORTED for entry in (name, f"{name}.parquet") if os.path.lexists(out / entry)}
    if not all(_parquet_only(out / entry) for entry in found):
        return set()
    tables = {entry.removesuffix(".parquet") for entry in found}
    return found if {"captures", "exchanges"} <= tables else set()


def _parquet_only(path: Path) -> bool:
    """A Parquet file, or a folder of them (hive partitions included) and nothing else."""
    if path.is_symlink():
        return False
    files = [path] if path.is_file() else [f for f in path.rglob("*") if not f.is_dir()]
    for file in files:
        try:
            with open(file, "rb") as f:
                if f.read(4) != b"PAR1":
                    return False
        except OSError:
            return False
    return bool(files)


def _holds_segments(path: Path) -> bool:
    if path.is_file():
        return path.name.endswith(SEGMENT_SUFFIX)
    return any(True for _ in path.rglob(f"*{SEGMENT_SUFFIX}"))


def check_export_folder(out: Path) -> set[str]:
    """The entries of ``out`` that an export may replace (those earlier exports wrote); an
    AnalysisError naming each ``out/<table>`` (or ``<table>.parquet``) that no export wrote, or
    that holds a capture's segments: exported into the folder that holds ``captures/``, the
    tables would have replaced the recordings, and a user's own ``metrics/``."""
    claimed = _claimed(out) | _unledgered_export(out)
    theirs = []
    for name in EXPORTED:
        for entry in (name, f"{name}.parquet"):
            path = out / entry
            if not os.path.lexists(path):
                continue
            if not path.is_symlink() and _holds_segments(path):
                theirs.append(f"{path} (it holds captures)")
            elif entry not in claimed:
                theirs.append(f"{path} (not written by an infertap export)")
    if theirs:
        raise AnalysisError(
            f"the export into {out} would replace {', '.join(theirs)}; nothing was changed: export into a "
            f"folder of its own (e.g. {out / 'warehouse'}), or move {'them' if len(theirs) > 1 else 'it'} away"
        )
    return claimed


def claim_export_folder(out: Path, partition_by: str | None) -> None:
    """Check ``out`` (``check_export_folder``), then record in it what this export will write, before
    writing it: an export cut short is still known as one, and replaced by the next."""
    claimed = check_export_folder(out)
    out.mkdir(parents=True, exist_ok=True)
    _write_json(out / LEDGER, {"infertap": installed_version(), "written": sorted(claimed | _written(partition_by))})


def _replace_table(out: Path, staging: Path, name: str) -> None:
    """Table ``name``, written into ``staging/new-<name>``, in place of the earlier export's (in either
    form, so none of it is left beside the new one); the old moved into ``staging``, removed with it."""
    for entry in (name, f"{name}.parquet"):
        if os.path.lexists(out / entry):
            (out / entry).rename(staging / f"old-{entry}")
    for new in (staging / f"new-{name}").iterdir():
        new.rename(out / new.name)


def _write_json(path: Path, value: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(value, indent=1, default=str) + "\n")
    tmp.replace(path)
