"""Workload identities from the loaded tables, equal to those the capture package computes
(``infertap.capture.identity``) for the same requests: proof that two runs saw identical traffic.

Each generation request's digest is taken once, when the capture is decoded (the ``requests``
table's ``digest``, ``request_digest`` of its exact bytes); the digests and send times stream back
a batch at a time into the capture package's ``IdentityTally``, which orders and hashes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from infertap.capture.identity import IdentityTally, Sent, WorkloadIdentity, rechained_requests, workload_summary
from infertap.capture.reader import CaptureReader
from infertap.capture.segments import segment_paths

from .store import Analysis

_ROWS = 50_000  # requests read from DuckDB at a time

#: A generation request's digest (capture/identity.py's ``request_digest``) and its send time's parts.
SENT_COLUMNS = "r.digest AS digest, x.request_bytes, u.wall AS run_wall, x.start_ns, x.scheduled_ns"
_RUNS = (
    "LEFT JOIN (SELECT DISTINCT ON (capture, run_id) capture, run_id, wall FROM runs) u "
    "ON u.capture = x.capture AND u.run_id = x.run_id"
)
_GENERATION = "x.generation AND x.\"end\" IS DISTINCT FROM 'refused'"
SENT_FROM = (
    f"JOIN exchanges x USING (capture, exchange_id) JOIN requests r USING (capture, exchange_id) {_RUNS} WHERE {_GENERATION}"
)


def sent_of(row: Sequence[Any]) -> Sent:
    digest, size, run_wall, start_ns, scheduled_ns = row
    anchor = round(float(run_wall or 0.0) * 1e9)
    t = scheduled_ns if scheduled_ns is not None else (start_ns or 0)
    return Sent(bytes(digest), anchor + int(t), int(size or 0))


def tallies(analysis: Analysis, sql: str, keys: int = 0, rows: int = _ROWS) -> dict[tuple[Any, ...], IdentityTally]:
    """``sql``'s rows (``keys`` group columns, then ``SENT_COLUMNS``) tallied per group, a batch
    of ``rows`` at a time: one packed key per request is kept, never the rows themselves."""
    out: dict[tuple[Any, ...], IdentityTally] = {}
    for batch in analysis.sql(sql).to_arrow_reader(rows):
        for row in zip(*(batch.column(i).to_pylist() for i in range(batch.num_columns)), strict=True):
            key = tuple(row[:keys])
            tally = out.get(key)
            if tally is None:
                tally = out[key] = IdentityTally()
            s = sent_of(row[keys:])
            tally.add_sent(s.digest, s.t_ns, s.size, s.rechained)
    return out


def group_identities(analysis: Analysis, table: str, keys: Sequence[str]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The workload identity of each group of ``table`` (rows keyed on ``capture, exchange_id`` and
    ``keys``), as ``WorkloadIdentity.as_dict()``."""
    cols = ", ".join(f"m.{k}" for k in keys)
    found = tallies(analysis, f"SELECT {cols}, {SENT_COLUMNS} FROM {table} m {SENT_FROM}", len(keys))
    return {key: tally.identity().as_dict() for key, tally in found.items()}


def sent_sql(capture: str) -> str:
    """The generation requests of one loaded capture (its ``capture`` column value), as ``SENT_COLUMNS``."""
    return (
        f"SELECT {SENT_COLUMNS} FROM exchanges x JOIN requests r USING (capture, exchange_id) {_RUNS} "
        f"WHERE x.capture = {quoted(capture)} AND {_GENERATION}"
    )


def quoted(text: str) -> str:
    """``text`` as an SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def capture_identity(analysis: Analysis, capture: str, sent: str | None = None) -> WorkloadIdentity:
    """The workload identity of one loaded capture (its ``capture`` column value), every run of it;
    ``sent``: its ``sent_sql`` rows where they are kept already (a table)."""
    tally = tallies(analysis, sent or sent_sql(capture)).get((), IdentityTally())
    exchanges = analysis.query("SELECT count(*) FROM exchanges WHERE capture = ?", [capture]).rows[0][0]
    return tally.identity(int(exchanges))


def recorders(capture: str | Path) -> list[dict[str, Any]]:
    """The ``recorder`` of each run of a capture, from its segments' headers (each segment starts
    with one): what a replay recorded of its source and transforms, which the tables don't keep."""
    path = Path(capture)
    out: dict[str, dict[str, Any]] = {}
    for segment in segment_paths(path) if path.is_dir() else [path]:
        for record in CaptureReader(segment).records():
            if record.get("type") == "header":
                out.setdefault(str(record.get("run_id")), record.get("recorder") or {})
            break
    return list(out.values())


def workload(analysis: Analysis, capture: str) -> dict[str, Any]:
    """The capture's identity and, for a replay, the source identity it derives from and how."""
    identity, runs = capture_identity(analysis, capture), recorders(capture)
    if any(r.get("kind") == "replay" for r in runs) and continues_responses(analysis, capture):
        # Which turns the replay rewrote is kept in the exchange records only: read them (Responses chains only).
        identity = replace(identity, rechained=rechained_requests(capture))
    return workload_summary(identity, runs)


def continues_responses(analysis: Analysis, capture: str) -> bool:
    """Whether any generation request continues a stored response (``previous_response_id``)."""
    return bool(
        analysis.query(
            "SELECT count(*) FROM requests r JOIN exchanges x USING (capture, exchange_id) "
            "WHERE x.capture = ? AND x.generation AND r.previous_response_id IS NOT NULL",
            [capture],
        ).rows[0][0]
    )
