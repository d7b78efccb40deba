"""A warm-up: the workload's first requests sent before the measured run, recorded apart.

A cold engine (weights paging in, CUDA graphs capturing, llama.cpp's first prompt, empty prefix
caches) puts its start-up into whatever it answers first: measured, it is a latency outlier that
belongs to no load. ``infertap replay --warmup N`` and ``infertap sweep --warmup N`` both send the
workload's first N requests at the run's own load first (as AIPerf's ``--warmup-request-count``
and GuideLLM's warm-up run the benchmark's profile), into a capture of their own (``warmup/``
beside a sweep's points, inside a replay's capture folder, which its analysis never reads), so
the measured capture holds only the measured requests and ``infertap stats`` counts no warm-up.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from .api import Progress, run_replay
from .config import ReplayConfig

#: The most requests a warm-up sends (``--warmup``'s bound).
MOST_WARMUP = 1_000_000


def warm_up(config: ReplayConfig, n: int, out: str | os.PathLike[str], *, progress: Progress | None = None) -> dict[str, Any]:
    """Send ``config``'s first ``n`` requests (at most its ``limit``, one pass) on its schedule into
    the capture ``out``, their sessions as ``<id>@warmup`` so no measured turn continues a warm-up's
    state at a gateway keyed by session; run_replay's summary (``stopped_early`` after a Ctrl-C)."""
    warm = replace(config, out=out, limit=min(n, config.limit or n), repeat=1, session_tag="warmup")
    return run_replay(warm, progress=progress)


def warmup_facts(summary: dict[str, Any]) -> dict[str, Any]:
    """What a run's summary says of its warm-up: how many were sent, how they ended, and where recorded."""
    return {"sent": summary.get("sent"), "out": summary.get("out"), "ends": summary.get("ends")}


__all__ = ["MOST_WARMUP", "warm_up", "warmup_facts"]
