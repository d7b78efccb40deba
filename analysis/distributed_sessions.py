"""``export --ray``'s sessions: recordings exported together are linked as one, as a local export
and ``stats`` of them link them (joined_sessions.py).

Each task exports its capture alone, its ``turns`` (and ``metrics``' session columns) linked within
it; beside its part it leaves what the join reads (``_join/``: its links, its runs' recorder kinds,
its ``capture_id``). Once every part is done, the driver joins them by the same functions as a local
load, and writes the joined captures' ``turns`` and ``metrics`` partitions again with the joined
sessions, before the parts are assembled. A capture left alone (a replay, a single recording) keeps
its part as the task wrote it.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import duckdb

from .joined_sessions import join_sessions, joined_captures
from .workload_identity import quoted

JOIN_FOLDER = "_join"
#: What the join reads of each capture, as joined_captures and join_sessions query it.
_KEPT = {
    "links": "SELECT * FROM links",
    "runs": "SELECT capture, recorder FROM runs",
    "captures": "SELECT capture, capture_id FROM captures",
}
#: The columns the join decides, in ``turns`` and ``metrics`` alike.
_SESSION_COLUMNS = ("session", "session_capture", "turn", "parent_id", "link", "think_ns")


def keep_links(con: Any, part: Path) -> None:
    """What the join needs of the capture loaded on ``con``, under ``part/_join`` (a task's part)."""
    folder = part / JOIN_FOLDER
    folder.mkdir()
    for name, select in _KEPT.items():
        target = quoted(str(folder / f"{name}.parquet"))
        con.execute(f"COPY ({select}) TO {target} (FORMAT parquet)")


def join_parts(parts: list[Path], partition_by: str) -> list[str]:
    """Link the sessions of the captures of ``parts`` (the tasks' folders, in the order the captures
    were given) as a local export of them does, rewriting the joined ones' ``turns`` and ``metrics``;
    returns the captures joined (none: every part is already what a local export writes)."""
    con = duckdb.connect()
    try:
        for name in _KEPT:
            files = ", ".join(quoted(str(p / JOIN_FOLDER / f"{name}.parquet")) for p in parts)
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet([{files}], hive_partitioning = false)")
        names = [_capture_of(con, p) for p in parts]
        joined = joined_captures(con, names)
        if not joined:
            return []
        con.register("_joined", join_sessions(con, joined))
        for part, name in zip(parts, names, strict=True):
            if name in joined:
                for table in ("turns", "metrics"):
                    _rewrite(con, part / table, partition_by)
        return joined
    finally:
        con.close()


def _capture_of(con: Any, part: Path) -> str:
    path = quoted(str(part / JOIN_FOLDER / "captures.parquet"))
    return str(con.execute(f"SELECT capture FROM read_parquet({path})").fetchone()[0])


def _rewrite(con: Any, table: Path, partition_by: str) -> None:
    """``table``'s partitions written again with the joined sessions in place of the capture's own
    (rows that are no generation request, in ``metrics``, keep theirs), then put in its place."""
    replace = ", ".join(f"CASE WHEN j.exchange_id IS NULL THEN p.{c} ELSE j.{c} END AS {c}" for c in _SESSION_COLUMNS)
    files = quoted(f"{table}/*/*.parquet")
    fresh = table.with_name(f"{table.name}.joined")
    con.execute(
        f"COPY (SELECT p.* REPLACE ({replace}) FROM read_parquet({files}, hive_partitioning = true, "
        "hive_types_autocast = false) p LEFT JOIN _joined j ON j.capture = p.capture AND j.exchange_id = p.exchange_id) "
        f"TO {quoted(str(fresh))} (FORMAT parquet, COMPRESSION zstd, PARTITION_BY ({partition_by}))"
    )
    shutil.rmtree(table)
    fresh.rename(table)
