"""How late the recorder's event loop ran: every capture states how far its own timestamps may lag.

A task sleeps a fixed interval and counts how much later than asked it woke, into fixed buckets
(no per-sample storage, so a run of days costs the same as a minute). The summary goes into each
footer; ``infertap info`` prints it. A timestamp taken on a loop that lagged by X may be late by
up to X, so a capture with a large lag says its own times are that coarse.
"""

from __future__ import annotations

import asyncio
from typing import Any

BOUNDS_MS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 1000.0)


class LoopLag:
    def __init__(self, interval_s: float = 0.05) -> None:
        self.interval_s = interval_s
        self.counts = [0] * (len(BOUNDS_MS) + 1)
        self.samples = 0
        self.max_ms = 0.0

    def add(self, lag_ms: float) -> None:
        i = next((k for k, bound in enumerate(BOUNDS_MS) if lag_ms <= bound), len(BOUNDS_MS))
        self.counts[i] += 1
        self.samples += 1
        self.max_ms = max(self.max_ms, lag_ms)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            t = loop.time()
            await asyncio.sleep(self.interval_s)
            self.add(max(0.0, (loop.time() - t - self.interval_s) * 1e3))

    def at_most(self, q: float) -> float | None:
        """The bucket bound under which a fraction ``q`` of the samples fell (None: above the last)."""
        if not self.samples:
            return None
        seen = 0
        for k, count in enumerate(self.counts):
            seen += count
            if seen >= q * self.samples:
                return BOUNDS_MS[k] if k < len(BOUNDS_MS) else None
        return None

    def summary(self) -> dict[str, Any]:
        """Read from the writer's thread at each footer: plain numbers, copied."""
        return {
            "interval_ms": self.interval_s * 1e3,
            "samples": self.samples,
            "max_ms": round(self.max_ms, 3),
            "p50_at_most_ms": self.at_most(0.5),
            "p99_at_most_ms": self.at_most(0.99),
            "bounds_ms": list(BOUNDS_MS),
            "counts": list(self.counts),
        }
