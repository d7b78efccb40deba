"""Workload identities from the loaded tables, equal to those the capture package computes
(``infertap.capture.identity``) for the same requests: proof that two runs saw identical traffic.

The request digests are computed in DuckDB from the ``requests`` table's body text (a generation
request's body is a JSON object, so its text is its exact UTF-8 bytes); only the digests and send
times come back to Python, where they are ordered and hashed as the capture package does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from infertap.capture.identity import Sent, WorkloadIdentity, identity_of, rechained_requests, workload_summary
from infertap.capture.reader import CaptureReader
from infertap.capture.segments import segment_paths

from .store import Analysis

#: A generation request's digest (capture/identity.py's ``request_digest``) and its send time's parts.
SENT_COLUMNS = (
    "sha256(x.method || ' ' || x.path || CASE WHEN coalesce(x.query, '') <> '' THEN '?' || x.query ELSE '' END "
    "|| chr(10) || coalesce(r.body, '')) AS digest, x.request_bytes, u.wall AS run_wall, x.start_ns, x.scheduled_ns"
)
SENT_FROM = (
    "JOIN exchanges x USING (capture, exchange_id) JOIN requests r USING (capture, exchange_id) "
    "LEFT JOIN (SELECT DISTINCT ON (capture, run_id) capture, run_id, wall FROM runs) u "
    "ON u.capture = x.capture AND u.run_id = x.run_id "
    "WHERE x.generation AND x.\"end\" IS DISTINCT FROM 'refused'"
)


def sent_of(row: Sequence[Any]) -> Sent:
    digest, size, run_wall, start_ns, scheduled_ns = row
    anchor = round(float(run_wall or 0.0) * 1e9)
    t = scheduled_ns if scheduled_ns is not None else (start_ns or 0)
    return Sent(bytes.fromhex(digest), anchor + int(t), int(size or 0))


def group_identities(analysis: Analysis, table: str, keys: Sequence[str]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The workload identity of each group of ``table`` (rows keyed on ``capture, exchange_id`` and
    ``keys``), as ``WorkloadIdentity.as_dict()``."""
    cols = ", ".join(f"m.{k}" for k in keys)
    rows = analysis.query(f"SELECT {cols}, {SENT_COLUMNS} FROM {table} m {SENT_FROM}").rows
    sent: dict[tuple[Any, ...], list[Sent]] = {}
    for row in rows:
        sent.setdefault(tuple(row[: len(keys)]), []).append(sent_of(row[len(keys) :]))
    return {key: identity_of(requests).as_dict() for key, requests in sent.items()}


def capture_identity(analysis: Analysis, capture: str) -> WorkloadIdentity:
    """The workload identity of one loaded capture (its ``capture`` column value), every run of it."""
    rows = analysis.query(
        f"SELECT {SENT_COLUMNS} FROM (SELECT capture, exchange_id FROM exchanges WHERE capture = ?) m {SENT_FROM}", [capture]
    ).rows
    exchanges = analysis.query("SELECT count(*) FROM exchanges WHERE capture = ?", [capture]).rows[0][0]
    return identity_of([sent_of(row) for row in rows], int(exchanges))


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
