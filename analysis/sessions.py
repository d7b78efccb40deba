"""Sessions compared: how long each of A's agent sessions took on B, and at which turn B's answers
first differed.

A session's makespan runs from its first request's send to its last request's end, think time
included (docs/metrics.md, Sessions). Only sessions whose every request is paired and answered on
B are compared, for their makespans and their answers alike: a session with a turn missing or failed
on B would look faster than it was, and a failed turn is no answer. The turn at which a session's
answers first differ is where the target's own trajectory would have left the recorded one: later
turns replay the recorded history, not what the target would have said next. Except where a turn
names its previous response (``previous_response_id``): the target continues its own stored answer
there (a replay sends the id the target gave it), with the recorded turn's new input after it (a
tool's output for A's call, which B may not have made); such sessions are counted apart.

Computed in DuckDB (compare.py's workspace), one row per session, so that a million single-request
sessions are summed there; only the makespans come back, as arrays, and the slowest ten.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from infertap.apis.media import EMBEDDINGS_ROUTES as ROUTES

from .fetch import columns
from .ratios import bootstrap_ratio, distribution

#: Sessions listed one by one (the slowest on B relative to A).
SHOWN = 10

# An embeddings request by its path, as ``apis.media.is_embeddings`` tells one.
_EMBEDDINGS_PATH = (
    "regexp_matches(rtrim(split_part(coalesce(ma.path, ''), '?', 1), '/'), '(?:" + "|".join(re.escape(r) for r in ROUTES) + ")$')"
)


def session_comparison(con: Any, a: str, b: str, pairs: str, exact: str) -> dict[str, Any] | None:
    """B's sessions against A's: makespans, their B/A ratio with an interval, the first differing turn.

    ``a``/``b``: each run's metrics (``exchange_id, ord, generation, path, session, turn, sent_wall_ns,
    end_wall_ns, ok, unfinished``, ``ord`` the exchange's place in its capture); ``pairs``: the pairs (pairing.py's
    ``pair_in``); ``exact``: ``(ord, exact, embeddings)`` per pair, whether its answers are equal
    (an embeddings pair's: its vectors), and whether it is of embeddings answers."""
    table = f"{pairs}_sessions"
    # One step a table: DuckDB runs each aggregate and join within its buffer (spilling beyond it),
    # where the same steps as one query hold all their hash tables at once (a million sessions
    # then failed in 64 MB, and pass like this).
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE {table}_a AS
        SELECT session, min(ord) AS first_ord, count(*) AS turns, min(sent_wall_ns) AS a_first, max(end_wall_ns) AS a_last,
               coalesce(bool_or(link = 'previous_response_id'), false) AS chained
        FROM {a} WHERE generation AND session IS NOT NULL GROUP BY session"""
    )
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE {table}_p AS
        SELECT ma.session, p.ord, ma.turn, e.exact, mb.session AS b_session, mb.sent_wall_ns, mb.end_wall_ns, mb.ok,
               mb.unfinished
        FROM {pairs} p JOIN {a} ma ON ma.exchange_id = p.a_id JOIN {b} mb ON mb.exchange_id = p.b_id
        JOIN {exact} e ON e.ord = p.ord
        WHERE ma.generation AND ma.session IS NOT NULL"""
    )
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE {table}_b AS
        SELECT session, count(*) AS paired, count(*) FILTER (WHERE ok) AS answered,
               count(*) FILTER (WHERE unfinished) AS unfinished,
               min(sent_wall_ns) AS b_first, max(end_wall_ns) AS b_last,
               min(coalesce(turn, 0)) FILTER (WHERE NOT exact) AS first_difference,
               arg_min(b_session, ord) FILTER (WHERE b_session <> '') AS b_session
        FROM {table}_p GROUP BY session"""
    )
    # A's embeddings requests in a session (named by a header: they link to no turn) whose vectors
    # differ on B, each at the turn it feeds: the session's first generation request sent after it
    # (a harness embeds, then asks with what it found), else its last turn.
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE {table}_v AS
        SELECT session, min(turn) AS first_difference FROM (
            SELECT v.ord, v.session,
                   coalesce(min(coalesce(g.turn, 0)) FILTER (WHERE g.sent_wall_ns >= v.sent_wall_ns), max(coalesce(g.turn, 0))) AS turn
            FROM (SELECT p.ord, ma.session, ma.sent_wall_ns
                  FROM {pairs} p JOIN {a} ma ON ma.exchange_id = p.a_id JOIN {exact} e ON e.ord = p.ord
                  WHERE e.embeddings AND NOT e.exact AND ma.session IS NOT NULL) v
            JOIN {a} g ON g.generation AND g.session = v.session
            GROUP BY v.ord, v.session)
        GROUP BY session"""
    )
    # A's sessions with an embeddings request whose vectors weren't compared (a side failed it, or its
    # vectors unread): no answer to compare, as a turn B failed, so the session is not compared.
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE {table}_u AS
        SELECT DISTINCT ma.session
        FROM {pairs} p JOIN {a} ma ON ma.exchange_id = p.a_id JOIN {exact} e ON e.ord = p.ord
        WHERE e.embeddings AND e.exact IS NULL AND ma.session IS NOT NULL"""
    )
    # A's sessions with an embeddings request that has no pair on B at all: B's retrieval is missing, as
    # a turn with no pair on B is, so the session is not compared (counted unpaired).
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE {table}_n AS
        SELECT DISTINCT ma.session FROM {a} ma
        WHERE NOT ma.generation AND ma.session IS NOT NULL AND {_EMBEDDINGS_PATH}
          AND NOT EXISTS (SELECT 1 FROM {pairs} p WHERE p.a_id = ma.exchange_id)"""
    )
    # ``i``: the session's first exchange's place in A, so that ordering by it is A's order.
    con.execute(
        f"""CREATE OR REPLACE TABLE {table} AS
        SELECT sa.first_ord AS i, sa.session, sa.turns, coalesce(sb.paired, 0) AS paired,
               least(sb.first_difference, sv.first_difference) AS first_difference, sb.b_session, sa.a_first, sa.a_last, sb.b_first, sb.b_last,
               coalesce(sb.unfinished, 0) AS unfinished, sa.chained, sn.session IS NOT NULL AS retrieval_unpaired,
               (sa.a_first IS NOT NULL AND sa.a_last IS NOT NULL AND sb.b_first IS NOT NULL AND sb.b_last IS NOT NULL
                AND coalesce(sb.answered, 0) >= sa.turns AND su.session IS NULL AND sn.session IS NULL) AS compared
        FROM {table}_a sa LEFT JOIN {table}_b sb USING (session) LEFT JOIN {table}_v sv USING (session)
        LEFT JOIN {table}_u su USING (session) LEFT JOIN {table}_n sn USING (session)"""
    )
    for step in "apbvun":
        con.execute(f"DROP TABLE {table}_{step}")
    sessions, multi, multi_compared, identical, chained = con.execute(
        # Every figure but the counts of A's sessions is over the compared sessions alone (every turn
        # paired and answered on B), as the makespans are: a turn B failed is no answer to compare,
        # and counted as the first difference it put every session of a target that refused an API
        # at turn 0, beside "3 of 10 compared".
        f"SELECT count(*), count(*) FILTER (WHERE turns > 1), count(*) FILTER (WHERE compared AND turns > 1), "
        f"count(*) FILTER (WHERE compared AND first_difference IS NULL), "
        f"count(*) FILTER (WHERE compared AND turns > 1 AND chained) FROM {table}"
    ).fetchall()[0]
    if not sessions:
        return None
    # Why each session left out was: a request of A's (a turn, an embeddings request) with no pair on B, else
    # one B cut (unfinished: ended with no finish reason), else one it failed; a session of several such named
    # once, first one.
    unpaired, unfinished, failed = con.execute(
        "SELECT count(*) FILTER (WHERE missing), count(*) FILTER (WHERE NOT missing AND unfinished > 0), "
        "count(*) FILTER (WHERE NOT missing AND unfinished = 0) "
        f"FROM (SELECT *, paired < turns OR retrieval_unpaired AS missing FROM {table} WHERE NOT compared)"
    ).fetchall()[0]
    cols = columns(con, f"SELECT i, turns, a_last - a_first AS a, b_last - b_first AS b FROM {table} WHERE compared ORDER BY i")
    index = np.asarray(cols["i"], dtype=np.int64)
    va = np.asarray(cols["a"], dtype=np.int64).astype(np.float64) / 1e9
    vb = np.asarray(cols["b"], dtype=np.int64).astype(np.float64) / 1e9
    if not multi:
        note = "every request is its own session here (no turn continues another)"
    elif not chained or chained < multi_compared:
        note = "a later turn replays the recorded history, not what the target would have answered before it"
        if chained:
            note += (
                f"; in {chained} of them, chained by previous_response_id, a turn continues the target's own stored "
                "answer, with the recorded new input after it"
            )
    else:  # every compared session of several turns is chained: no turn replays A's answers to B
        note = (
            "a later turn continues the target's own stored answer (chained by previous_response_id), "
            "with the recorded new input after it (a tool's output for A's call, which B may not have made)"
        )
    da, db = distribution(va), distribution(vb)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(va != 0, vb / np.where(va != 0, va, 1.0), 0.0)
    order = np.argsort(-ratios, kind="stable")[:SHOWN]  # the slowest first; ties in A's order
    # The slowest of the sessions of several turns, apart: a timeline draws only those, and where
    # single requests filled the slowest ten, a session worth drawing was in neither list.
    multi_k = np.flatnonzero(np.asarray(cols["turns"], dtype=np.int64) > 1)
    order_multi = multi_k[np.argsort(-ratios[multi_k], kind="stable")[:SHOWN]]
    shown = sorted({int(index[k]) for k in (*order, *order_multi)})
    rows = {
        r[0]: r[1:]
        for r in con.execute(
            f"SELECT i, session, turns, first_difference, b_session FROM {table} WHERE i IN (SELECT unnest(?::BIGINT[]))",
            [shown],
        ).fetchall()
    }

    def listed(k: int) -> dict[str, Any]:
        session, turns, first_difference, b_session = rows[int(index[k])]
        return {
            "session": session,
            "turns": turns,
            "a_s": float(va[k]),
            "b_s": float(vb[k]),
            "first_differing_turn": first_difference,
            "b_session": b_session,
        }

    firsts = con.execute(
        f"SELECT first_difference, count(*) FROM {table} WHERE compared AND first_difference IS NOT NULL "
        "GROUP BY first_difference ORDER BY first_difference"
    ).fetchall()
    return {
        "sessions": sessions,
        "compared": len(va),
        "partial": sessions - len(va),  # a request unpaired, unfinished or failed on B: left out of the ratio
        "partial_by_reason": {"unpaired": unpaired, "failed": failed, "unfinished": unfinished},
        "multi_turn": multi,  # of A's sessions
        "compared_multi_turn": multi_compared,
        # of those, sessions a turn of which names its previous response: B continued its own answer there
        "compared_chained": chained,
        "makespan_s": {"a": da, "b": db},
        "ratio_p50": db["p50"] / da["p50"] if da["p50"] and db["p50"] is not None else None,
        "ratio_ci95": bootstrap_ratio(va, vb),
        "first_differing_turn": {
            "identical": identical,
            "differing": sum(n for _, n in firsts),
            "by_turn": {str(t): n for t, n in firsts},
        },
        "slowest": [listed(int(k)) for k in order],
        "slowest_multi_turn": [listed(int(k)) for k in order_multi],
        "note": note,
    }
