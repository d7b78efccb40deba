"""The report's session timelines: the slowest agent sessions, turns as bars and think time between.

With two runs, the sessions of several turns whose makespan grew most on B (compare's
``sessions.slowest_multi_turn``: its ``slowest`` are over every session, and where single requests
filled them the one session worth drawing was left out, and nothing said), each
drawn on A and on B one above the other from its first send, so a slower turn and a kept or lost
think time are seen side by side. With one run, its longest sessions.
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from typing import Any

from .store import Analysis
from .svg import COLORS, Lane, timeline_svg

#: Sessions drawn.
SHOWN = 4


def _turns(path: str | os.PathLike[str]) -> dict[str, list[tuple[int, int]]]:
    """Each session's turns as (sent, end) wall ns, sessions of more than one request only."""
    with Analysis([path]) as analysis:
        rows = analysis.query(
            "SELECT session, list([sent_wall_ns, end_wall_ns] ORDER BY sent_wall_ns) FROM metrics "
            "WHERE generation AND session IS NOT NULL GROUP BY session HAVING count(*) > 1"
        ).rows
    return {session: [(a, b) for a, b in turns] for session, turns in rows}


def _lane(label: str, color: str, turns: Sequence[tuple[int, int]]) -> Lane:
    t0 = min(start for start, _ in turns)
    return Lane(label, color, [((s - t0) / 1e9, (e - t0) / 1e9) for s, e in turns])


def session_timelines(a: str | os.PathLike[str], b: str | os.PathLike[str] | None, sessions: dict[str, Any] | None) -> list[str]:
    """The section, or nothing when no session has more than one request; with two runs, a sentence
    saying why none is drawn where A has such sessions but none was compared on B."""
    turns_a = _turns(a)
    if not turns_a:
        return []
    lanes: list[Lane] = []
    if b is not None and sessions:
        turns_b = _turns(b)
        for s in sessions["slowest_multi_turn"][:SHOWN]:
            if s["session"] in turns_a and s["b_session"] in turns_b:
                lanes.append(_lane(f"A {s['session'][:10]}", COLORS[0], turns_a[s["session"]]))
                lanes.append(_lane(f"B {s['b_session'][:10]}", COLORS[1], turns_b[s["b_session"]]))
        title = "Sessions that grew most on B (B/A makespan), A above B"
        if not lanes:
            return [
                f"<h3>{html.escape(title)}</h3>",
                f"<p>None drawn: of A's {len(turns_a)} sessions of more than one request, none was compared on B "
                "(every one had a turn unpaired, failed or unfinished there, or B ran it as another session).</p>",
            ]
    else:
        longest = sorted(turns_a, key=lambda k: max(e for _, e in turns_a[k]) - min(s for s, _ in turns_a[k]), reverse=True)
        lanes = [_lane(f"A {k[:10]}", COLORS[0], turns_a[k]) for k in longest[:SHOWN]]
        title = "Longest sessions"
    if not lanes:
        return []
    return [
        f"<h3>{html.escape(title)}</h3>",
        timeline_svg(lanes, "s since the session's first request"),
        "<p>Bars: turns, from send to last byte. Dashed: the agent's own time between a turn's end and the next send "
        "(docs/metrics.md, Sessions). In brackets: each session's makespan, its first send to its last byte; the time "
        "axis is linear, so a session far faster than the others is a few pixels wide, its makespan still said.</p>",
    ]
