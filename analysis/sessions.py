"""Sessions compared: how long each of A's agent sessions took on B, and at which turn B's answers
first differed.

A session's makespan runs from its first request's send to its last request's end, think time
included (docs/metrics.md, Sessions). Only sessions whose every request is paired are compared: a
session with a turn missing on B would look faster than it was. The turn at which a session's
answers first differ is where the target's own trajectory would have left the recorded one: later
turns replay the recorded history, not what the target would have said next.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .ratios import bootstrap_ratio, distribution

#: Sessions listed one by one (the slowest on B relative to A).
SHOWN = 10


@dataclass
class _Session:
    a_first: int | None = None
    a_last: int | None = None
    b_first: int | None = None
    b_last: int | None = None
    turns: int = 0
    paired: int = 0
    first_difference: int | None = None  # the lowest turn whose answers differ
    b_session: str | None = None  # the session B recorded them in

    def add_a(self, row: Mapping[str, Any]) -> None:
        self.turns += 1
        self.a_first = _min(self.a_first, row["sent_wall_ns"])
        self.a_last = _max(self.a_last, row["end_wall_ns"])

    def add_b(self, row: Mapping[str, Any], turn: int, exact: bool) -> None:
        self.paired += 1
        self.b_first = _min(self.b_first, row["sent_wall_ns"])
        self.b_last = _max(self.b_last, row["end_wall_ns"])
        self.b_session = self.b_session or row["session"]
        if not exact:
            self.first_difference = turn if self.first_difference is None else min(self.first_difference, turn)

    def makespans(self) -> tuple[float, float] | None:
        if None in (self.a_first, self.a_last, self.b_first, self.b_last) or self.paired < self.turns:
            return None
        return (self.a_last - self.a_first) / 1e9, (self.b_last - self.b_first) / 1e9  # type: ignore[operator]


def _min(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def session_comparison(
    a_metrics: Mapping[str, Mapping[str, Any]],
    b_metrics: Mapping[str, Mapping[str, Any]],
    pairs: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
    exact: Sequence[bool],
) -> dict[str, Any] | None:
    """B's sessions against A's: makespans, their B/A ratio with an interval, the first differing turn.
    ``a_metrics``/``b_metrics``: metrics rows by exchange id; ``exact``: each pair's answers equal."""
    sessions: dict[str, _Session] = {}
    for row in a_metrics.values():
        if row["generation"] and row["session"] is not None:
            sessions.setdefault(row["session"], _Session()).add_a(row)
    for (x, y), same in zip(pairs, exact, strict=True):
        ma, mb = a_metrics.get(x["id"]), b_metrics.get(y["id"])
        if ma is None or mb is None or not ma["generation"] or ma["session"] not in sessions:
            continue
        sessions[ma["session"]].add_b(mb, ma["turn"] or 0, same)
    if not sessions:
        return None
    compared = {s: m for s, v in sessions.items() if (m := v.makespans()) is not None}
    if not any(v.turns > 1 for v in sessions.values()):
        note = "every request is its own session here (no turn continues another)"
    else:
        note = "a later turn replays the recorded history, not what the target would have answered before it"
    va, vb = [m[0] for m in compared.values()], [m[1] for m in compared.values()]
    da, db = distribution(va), distribution(vb)
    slowest = sorted(compared, key=lambda s: compared[s][1] / compared[s][0] if compared[s][0] else 0.0, reverse=True)
    firsts = Counter(v.first_difference for v in sessions.values() if v.paired and v.first_difference is not None)
    return {
        "sessions": len(sessions),
        "compared": len(compared),
        "partial": len(sessions) - len(compared),  # a request unpaired or unfinished: left out of the ratio
        "multi_turn": sum(1 for v in sessions.values() if v.turns > 1),
        "makespan_s": {"a": da, "b": db},
        "ratio_p50": db["p50"] / da["p50"] if da["p50"] and db["p50"] is not None else None,
        "ratio_ci95": bootstrap_ratio(va, vb),
        "first_differing_turn": {
            "identical": sum(1 for v in sessions.values() if v.paired and v.first_difference is None),
            "differing": sum(firsts.values()),
            "by_turn": {str(t): n for t, n in sorted(firsts.items())},
        },
        "slowest": [
            {
                "session": s,
                "turns": sessions[s].turns,
                "a_s": compared[s][0],
                "b_s": compared[s][1],
                "first_differing_turn": sessions[s].first_difference,
                "b_session": sessions[s].b_session,
            }
            for s in slowest[:SHOWN]
        ],
        "note": note,
    }
