"""Sessions linked across the recordings read together: an agent whose turns went through two
gateways' recorders is one session, as if one recorder had taken all its traffic.

Each capture is decoded alone (cache.py), its ``turns`` linked within it; its ``links`` table keeps
what linking read of each generation request (``Links``, digests only). Where two captures or more
of recorded traffic are loaded together, their links are put in one order of sending and linked
again by the same functions (``infertap.apis.linking``), without reading a body again. A replay is
left linked within its capture: it keeps its source's session ids and conversations, and linked with
its source (or another replay of it) its every session would continue the source's. A copy of a
capture (the same ``capture_id``) is left alone too: its requests are its original's.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where a join is written: a load that reads a kept join needs no pyarrow
    import pyarrow as pa

#: The temporary table of the joined captures' turns (``turns``'s columns and ``session_capture``).
JOINED = "_joined_turns"


def joined_captures(con: Any, loaded: list[str]) -> list[str]:
    """The captures of ``loaded`` (in load order) whose sessions are linked together: recorded
    traffic (no replay run), one of each ``capture_id``, that holds generation requests. Fewer than
    two: none (each is linked within itself already)."""
    replays = {r[0] for r in con.execute("SELECT DISTINCT capture FROM runs WHERE recorder = 'replay'").fetchall()}
    with_links = {r[0] for r in con.execute("SELECT DISTINCT capture FROM links").fetchall()}
    ids = dict(con.execute("SELECT capture, capture_id FROM captures").fetchall())
    seen: set[Any] = set()
    out = []
    for capture in loaded:
        if capture in replays or capture not in with_links or (ids.get(capture) is not None and ids[capture] in seen):
            continue
        seen.add(ids.get(capture))
        out.append(capture)
    return out if len(out) > 1 else []


def joined_turns(con: Any, captures: list[str], entries: list[Path]) -> Path | None:
    """The Parquet file of the joined turns of ``captures`` (their cache ``entries``, in the same
    order), None where they are only in the temporary table ``JOINED`` (a cache not writable): read
    from the cache where these entries were joined before, else linked (``join_sessions``) and kept
    there, so that only the first load of a set of captures pays for the join (linear, in
    Python: about 7 µs a request), not every ``stats`` after it. The key is the entries' folders,
    which name each capture's path and signature: a changed capture is a new entry, hence a new join."""
    root = entries[0].parents[2]  # <root>/captures/<capture>/<signature>
    key = hashlib.sha256(json.dumps([str(e) for e in entries]).encode()).hexdigest()[:24]
    home = root / "joined"
    path = home / key / "turns.parquet"
    if path.is_file():
        return path
    table = join_sessions(con, captures)
    try:
        _keep(home, key, table, entries)
        return path
    except OSError:  # a cache that can't be written: the join serves this load only
        pass
    con.register("_joined_arrow", table)
    try:
        con.execute(f"CREATE TEMP TABLE {JOINED} AS SELECT * FROM _joined_arrow")
    finally:
        con.unregister("_joined_arrow")
    return None


def _keep(home: Path, key: str, table: pa.Table, entries: list[Path]) -> None:
    """Write the join under ``home/key`` (through a temporary folder renamed into place, owner-only
    as the entries are), and remove the joins of entries that are gone (a capture decoded anew)."""
    import pyarrow.parquet as pq

    home.mkdir(mode=0o700, exist_ok=True)
    for old in home.iterdir():
        try:
            folders = json.loads((old / "entries.json").read_text())
        except (OSError, ValueError):
            continue  # another load's join being written, or not ours
        if not all(Path(f).is_dir() for f in folders):
            shutil.rmtree(old, ignore_errors=True)
    tmp = home / f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir(mode=0o700)
    try:
        pq.write_table(table, tmp / "turns.parquet", compression="zstd")
        (tmp / "entries.json").write_text(json.dumps([str(e) for e in entries]))
        tmp.rename(home / key)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (home / key / "turns.parquet").is_file():  # not placed by a concurrent load either
            raise


def join_sessions(con: Any, captures: list[str]) -> pa.Table:
    """The turns of ``captures`` linked as one, in order of sending (ties in the order
    the captures were loaded, then each capture's own order). ``session_capture``: the capture of
    the first request of each session's name, so that a session is one group however many captures
    hold its turns."""
    import pyarrow as pa

    from infertap.apis.conversation import Links
    from infertap.apis.linking import link, sessions_of, think_times, turns_of

    rows = con.execute(
        "SELECT capture, exchange_id, sent_wall_ns, end_wall_ns, link_id, parent_id, session, candidates, continuation, "
        "response_id, previous_response_id, refused FROM links WHERE capture IN (SELECT unnest(?::VARCHAR[])) "
        "ORDER BY sent_wall_ns, list_position(?::VARCHAR[], capture), ord",
        [captures, captures],
    ).fetchall()
    links = [Links(r[4], r[5], r[6], tuple(r[7] or ()), r[8], r[9], r[10], bool(r[11])) for r in rows]
    sent, ended = [r[2] for r in rows], [r[3] for r in rows]
    found = link(links, sent, ended)
    parents = [None if f is None else f[0] for f in found]
    ids = [r[1] for r in rows]
    refused = [x.refused for x in links]
    sessions = sessions_of(parents, [x.session for x in links], ids, refused)
    thinks = think_times(parents, sessions, sent, ended, refused)
    first: dict[str, str] = {}
    for session, r in zip(sessions, rows, strict=True):
        first.setdefault(session, r[0])
    table = pa.table(
        {
            "capture": [r[0] for r in rows],
            "exchange_id": ids,
            "session": sessions,
            "turn": turns_of(parents),
            "parent_id": [None if f is None else ids[f[0]] for f in found],
            "link": [None if f is None else f[1] for f in found],
            "think_ns": thinks,
            "session_capture": [first[s] for s in sessions],
        },
        schema=pa.schema(
            [
                ("capture", pa.string()),
                ("exchange_id", pa.string()),
                ("session", pa.string()),
                ("turn", pa.int32()),
                ("parent_id", pa.string()),
                ("link", pa.string()),
                ("think_ns", pa.int64()),
                ("session_capture", pa.string()),
            ]
        ),
    )
    return table
