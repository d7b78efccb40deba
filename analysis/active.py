"""The time a group's runs were active (docs/metrics.md, active time), defined once for every
figure read over time: rates and mean concurrency (stats.py), energy and engine state (energy.py),
in ``stats``, ``compare`` and the report alike.

Each run's part of a group runs from its first send to its last end there; parts that overlap
(shards, two recorders, sent side by side) are joined. Runs read together a while apart (a replay
appended an hour after the recording, two replays read together) are each timed over their own
part, never over the idle time between them, as each benchmark run of vLLM's, GuideLLM's or
AIPerf's is timed on its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from infertap.telemetry.series import Span, merged

#: The exchanges a group's figures count: generation requests sent to the engine (one infertap
#: refused, never sent, is in none).
COUNTED = "generation AND \"end\" IS DISTINCT FROM 'refused'"
#: A run's part of a group, as SQL over its counted exchanges of one run: its first send, its last end.
PART = "min(sent_wall_ns), max(end_wall_ns)"


@dataclass(frozen=True)
class RunPart:
    """One run's part of a group: its capture, its run, its first send and last end there (wall ns)."""

    capture: str
    run_id: str | None
    first: int
    last: int

    @property
    def span(self) -> Span:
        return (self.first, self.last)


def run_parts(rows: Iterable[Sequence[Any]]) -> list[RunPart]:
    """Parts from rows of (capture, run_id, first send, last end): a run none of whose exchanges
    ended (still in flight when read) has no part."""
    return [RunPart(str(c), r, int(lo), int(hi)) for c, r, lo, hi in rows if lo is not None and hi is not None]


def active(parts: Iterable[RunPart]) -> list[Span]:
    """The stretches the runs were active: their parts, those that overlap joined, in time order."""
    return merged(p.span for p in parts)


def seconds(spans: Iterable[Span]) -> float:
    return sum(hi - lo for lo, hi in spans) / 1e9


__all__ = ["COUNTED", "PART", "RunPart", "active", "run_parts", "seconds"]
