"""Workload identities from the loaded tables, equal to those the capture package computes
(``infertap.capture.identity``) for the same requests: proof that two runs saw identical traffic.

Each generation request's digest is taken once, when the capture is decoded (the ``requests``
table's ``digest``, ``request_digest`` of its exact bytes); the digests and send times stream back
in send order (DuckDB sorts them, spilling to disk beyond its buffer), a batch at a time, into the
capture package's ``OrderedHashes``: the same hashes ``IdentityTally`` computes, with nothing kept per request.
"""

from __future__ import annotations

import itertools
import json
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from infertap.capture.identity import (
    APART,
    Apart,
    OrderedHashes,
    RequestSet,
    WorkloadIdentity,
    rechained_requests,
    source_words,
    workload_summary,
)
from infertap.capture.segments import segment_paths

from .media import apart_sql
from .store import Analysis

_ROWS = 65_536  # requests read from DuckDB at a time

# When a request was sent (ns), as capture/identity.py's sent_time has it: the run's start (its wall
# clock, rounded half to even as Python's round() does) plus the scheduled or arrival offset. Exact
# in a HUGEINT; handed over as a BIGINT, or as text in the rare case it doesn't fit one.
_T = "(CAST(round_even(coalesce(u.wall, 0.0) * 1e9, 0) AS HUGEINT) + coalesce(x.scheduled_ns, x.start_ns, 0))"
#: A generation request's digest (capture/identity.py's ``request_digest``), body size, whether it sent
#: an asked header and whether an older infertap left it out (both the identity's version,
#: ``identity.version_of``), and send time.
SENT_COLUMNS = (
    "r.digest AS digest, coalesce(x.request_bytes, 0) AS size, r.asked_headers IS NOT NULL AS asked, "
    f"coalesce(r.newer, false) AS newer, {_T} AS t"
)
_RUNS = (
    "LEFT JOIN (SELECT DISTINCT ON (capture, run_id) capture, run_id, wall FROM runs) u "
    "ON u.capture = x.capture AND u.run_id = x.run_id"
)
_GENERATION = "x.generation AND x.\"end\" IS DISTINCT FROM 'refused'"
SENT_FROM = (
    f"JOIN exchanges x USING (capture, exchange_id) JOIN requests r USING (capture, exchange_id) {_RUNS} WHERE {_GENERATION}"
)


def identities(analysis: Analysis, sql: str, keys: int = 0) -> dict[tuple[Any, ...], WorkloadIdentity]:
    """The workload identity of each group of ``sql``'s rows (``keys`` group columns, then
    ``SENT_COLUMNS``), its ``exchanges`` the group's requests. DuckDB puts the requests in send
    order (spilling to disk what doesn't fit its buffer) and they are hashed as they stream back a
    batch at a time: nothing is kept per request, whatever their number."""
    groups = "".join(f"{i + 1}, " for i in range(keys))
    ordered = (
        "SELECT * EXCLUDE (t), TRY_CAST(t AS BIGINT) AS t, "
        "CASE WHEN TRY_CAST(t AS BIGINT) IS NULL THEN CAST(t AS VARCHAR) END AS wide "
        f"FROM ({sql}) q ORDER BY {groups}q.t, q.digest"
    )
    found: dict[tuple[Any, ...], tuple[OrderedHashes, list[int]]] = {}  # per group: its hashes, its bodies' bytes
    for group, digests, sizes, asked, newer, times in _columns(analysis, ordered, keys):
        start = 0
        for key, run in itertools.groupby(group):  # each group's rows in this batch, hashed as one
            end = start + sum(1 for _ in run)
            hashes, size = found.setdefault(key, (OrderedHashes(), [0]))
            hashes.add(times[start:end], digests[start:end], any(asked[start:end]), any(newer[start:end]))
            size[0] += sum(sizes[start:end])
            start = end
    return {key: hashes.identity(hashes.requests, size) for key, (hashes, [size]) in found.items()}


def _columns(
    analysis: Analysis, sql: str, keys: int
) -> Iterator[tuple[list[Any], list[Any], list[Any], list[Any], list[Any], list[Any]]]:
    """``sql``'s rows a batch at a time, as their group keys, digests, sizes, asked and newer flags and send times. The first
    batch comes as rows (a capture of fewer requests then reads no Arrow: a warm ``stats`` imports no
    pyarrow); the rest as Arrow batches, which turn into Python lists in half the CPU of rows (1M
    requests here: 0.9-1.0 s against 1.6-2.1 s)."""
    result = analysis.con.execute(sql)
    rows = result.fetchmany(_ROWS)
    yield (
        [row[:keys] for row in rows],
        [row[keys] for row in rows],
        [row[keys + 1] for row in rows],
        [row[keys + 2] for row in rows],
        [row[keys + 3] for row in rows],
        [t if w is None else int(w) for *_, t, w in rows],
    )
    if len(rows) < _ROWS:
        return
    with warnings.catch_warnings():  # "an extra copy of the rows": of the rest only, and still the faster
        warnings.simplefilter("ignore", UserWarning)
        reader = result.to_arrow_reader(_ROWS)
    assert reader is not None  # duckdb's stubs say it may be None
    for batch in reader:
        group = list(zip(*(batch.column(i).to_pylist() for i in range(keys)), strict=True)) if keys else [()] * batch.num_rows
        digests, sizes, asked, newer, times, wide = (batch.column(keys + i).to_pylist() for i in range(6))
        yield group, digests, sizes, asked, newer, [t if w is None else int(w) for t, w in zip(times, wide, strict=True)]


def group_identities(analysis: Analysis, table: str, keys: Sequence[str]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The workload identity of each group of ``table`` (rows keyed on ``capture, exchange_id`` and
    ``keys``), as ``WorkloadIdentity.as_dict()``."""
    cols = "".join(f"m.{k}, " for k in keys)
    found = identities(analysis, f"SELECT {cols}{SENT_COLUMNS} FROM {table} m {SENT_FROM}", len(keys))
    return {key: identity.as_dict() for key, identity in found.items()}


def sent_sql(capture: str) -> str:
    """The generation requests of one loaded capture (its ``capture`` column value), as ``SENT_COLUMNS``."""
    return (
        f"SELECT {SENT_COLUMNS} FROM exchanges x JOIN requests r USING (capture, exchange_id) {_RUNS} "
        f"WHERE x.capture = {quoted(capture)} AND {_GENERATION}"
    )


def media_sql(capture: str, name: str = "media") -> str:
    """The requests of one loaded capture that ``APART``'s ``name`` hashes (``media``: image, video and
    speech generation; ``embeddings``) sent (not refused) with a body kept (one not kept has no digest:
    counted in ``bodies_unknown``), as ``kind, digest, t``."""
    kind = apart_sql(name, "x.path", "x.method")
    return (
        f"SELECT {kind} AS kind, r.digest AS digest, {_T} AS t FROM exchanges x JOIN requests r USING (capture, exchange_id) "
        f"{_RUNS} WHERE x.capture = {quoted(capture)} AND x.generation IS NOT TRUE AND x.\"end\" IS DISTINCT FROM 'refused' "
        f"AND r.digest IS NOT NULL AND {kind} IS NOT NULL"
    )


def media_identity(analysis: Analysis, media: str, sent: str, name: str = "media") -> dict[str, Any]:
    """``NAME``, ``NAME_requests``, ``NAME_schedule`` and ``NAME_set`` of ``media``'s rows (``media_sql``
    of ``APART``'s ``name``), hashed in send order as the capture package's tally does, a batch at a
    time, their send times from the first request of the text or theirs (``sent``'s rows, ``SENT_COLUMNS``, or theirs)."""
    hashes = Apart(name)
    first = f"(SELECT min(t) FROM (SELECT t FROM ({sent}) s UNION ALL SELECT t FROM ({media}) m) f)"
    result = analysis.con.execute(f"SELECT digest, CAST(q.t - {first} AS BIGINT) FROM ({media}) q ORDER BY q.t, q.digest")
    while rows := result.fetchmany(_ROWS):
        hashes.add([bytes(digest) for digest, _ in rows], [int(offset) for _, offset in rows])
    ordered = analysis.con.execute(f"SELECT digest FROM ({media}) q ORDER BY q.digest")
    return hashes.identity() | hashes.set_of(bytes(d) for batch in iter(lambda: ordered.fetchmany(_ROWS), []) for (d,) in batch)


def quoted(text: str) -> str:
    """``text`` as an SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def capture_identity(analysis: Analysis, capture: str, sent: str | None = None) -> WorkloadIdentity:
    """The workload identity of one loaded capture (its ``capture`` column value), every run of it;
    ``sent``: its ``sent_sql`` rows where they are kept already (a table)."""
    sent = sent or sent_sql(capture)
    identity = identities(analysis, sent).get(())
    exchanges, unknown = analysis.query(
        "SELECT count(*), count(*) FILTER (request_body_unknown AND \"end\" IS DISTINCT FROM 'refused') "
        "FROM exchanges WHERE capture = ?",
        [capture],
    ).rows[0]
    identity = identity or OrderedHashes().identity(0, 0)
    apart = {k: v for name in APART for k, v in media_identity(analysis, media_sql(capture, name), sent, name).items()}
    identity = replace(identity, exchanges=int(exchanges), bodies_unknown=int(unknown), **apart)
    return with_capped(analysis, capture, replace(identity, request_set=request_set(analysis, sent)))


def request_set(analysis: Analysis, sent: str) -> str:
    """``request_set`` of ``sent``'s rows (``SENT_COLUMNS``): their digests sorted by DuckDB (spilling
    what doesn't fit its buffer) and hashed as they stream back, as the capture package's tally does."""
    hashed = RequestSet()
    for batch in analysis.sql(f"SELECT digest FROM ({sent}) q ORDER BY digest").to_arrow_reader(_ROWS):
        hashed.add(batch.column(0).to_pylist())
    return hashed.hexdigest()


def with_capped(analysis: Analysis, capture: str, identity: WorkloadIdentity) -> WorkloadIdentity:
    """``identity`` with what the capture package's tally counts too: the replayed generation requests
    that waited for a --max-concurrency slot, and the furthest behind its schedule one was sent."""
    capped, behind = analysis.query(
        "SELECT count(*), coalesce(max(sent_ns - scheduled_ns - coalesce(dep_wait_ns, 0)), 0) FROM exchanges "
        "WHERE capture = ? AND generation AND \"end\" IS DISTINCT FROM 'refused' AND queue_ns > 0 AND scheduled_ns IS NOT NULL",
        [capture],
    ).rows[0]
    return replace(identity, capped=int(capped), behind_max_ms=int(behind) / 1e6)


def asked_header_sets(analysis: Analysis, capture: str, name: str | None = None) -> list[str]:
    """The headers that change what a request asks (``identity.ASKED_HEADERS``) that the capture's
    generation requests sent (``name`` of ``APART``: its media or embeddings requests), each distinct
    set in words (``anthropic-beta: a,b; anthropic-version: 2023-06-01``, ``none`` for requests that
    sent none), sorted: what tells apart two workloads whose requests differ in them alone, which their
    identities can't say."""
    which = (
        _GENERATION
        if name is None
        else f"x.generation IS NOT TRUE AND x.\"end\" IS DISTINCT FROM 'refused' AND {apart_sql(name, 'x.path', 'x.method')} IS NOT NULL"
    )
    rows = analysis.query(
        "SELECT DISTINCT r.asked_headers FROM exchanges x JOIN requests r USING (capture, exchange_id) "
        f"WHERE x.capture = ? AND {which}",
        [capture],
    ).rows
    sets = {"; ".join(f"{n}: {v}" for n, v in json.loads(text)) if text else "none" for (text,) in rows}
    return sorted(sets)


def asked_words(sets: Sequence[str]) -> str:
    """``asked_header_sets`` in one phrase: ``anthropic-beta: a`` or ``none or anthropic-beta: a``."""
    return " or ".join(sets) or "none"


def recorders(capture: str | Path) -> list[dict[str, Any]]:
    """The ``recorder`` of each run of a capture, from its segments' headers (each segment starts
    with one): what a replay recorded of its source and transforms, which the tables don't keep."""
    return list(recorders_by_run(capture).values())


def recorders_by_run(capture: str | Path) -> dict[str, dict[str, Any]]:
    """``recorders``, by run id, in the order of the runs' first segments."""
    from infertap.capture.reader import CaptureReader  # here: a warm `stats` reads no segment

    path = Path(capture)
    out: dict[str, dict[str, Any]] = {}
    for segment in segment_paths(path) if path.is_dir() else [path]:
        for record in CaptureReader(segment).records():
            if record.get("type") == "header":
                out.setdefault(str(record.get("run_id")), record.get("recorder") or {})
            break
    return out


def workload(analysis: Analysis, capture: str) -> dict[str, Any]:
    """The capture's identity and, for a replay, the source identity it derives from and how."""
    identity, runs = capture_identity(analysis, capture), recorders(capture)
    if any(r.get("kind") == "replay" for r in runs) and continues_responses(analysis, capture):
        # Which turns the replay rewrote is kept in the exchange records only: read them (Responses chains only).
        identity = replace(identity, rechained=rechained_requests(capture))
    return workload_summary(identity, runs)


def derivation(analysis: Analysis, capture: str) -> dict[str, Any] | None:
    """What a replay capture changed of its source's workload, for `stats` (None: no replay): its
    source's identity, ``derived_by`` (the options, as `info`, compare and the claim card list them) and
    ``words``, the line `infertap info` says of it."""
    # The tables say which runs are replays: a recording's stats reads no capture header (a warm one no segment).
    if not analysis.query("SELECT count(*) FROM runs WHERE capture = ? AND recorder = 'replay'", [capture]).rows[0][0]:
        return None
    w = workload(analysis, capture)
    return {"source": (w.get("source") or {}).get("short"), "derived_by": w.get("derived_by") or [], "words": source_words(w)}


def continues_responses(analysis: Analysis, capture: str) -> bool:
    """Whether any generation request continues a stored response (``previous_response_id``)."""
    return bool(
        analysis.query(
            "SELECT count(*) FROM requests r JOIN exchanges x USING (capture, exchange_id) "
            "WHERE x.capture = ? AND x.generation AND r.previous_response_id IS NOT NULL",
            [capture],
        ).rows[0][0]
    )
