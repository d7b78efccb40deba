"""When each request is sent: open-loop schedules give absolute offsets, closed-loop ones limits.

Open loop (original timing, fixed or Poisson rate) sends at absolute deadlines from one start, so
an early delay never accumulates. Closed loop (fixed concurrency, or the capture's own in-flight
count at each request) sends as soon as a slot is free.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from dataclasses import dataclass

from infertap.errors import InfertapError

from .workload import Item

_SPIN_NS = 1_500_000  # the loop's timers are millisecond-grained: spin through the last stretch
SLOWEST, FASTEST = 1e-6, 1e6  # --speed: a millionth to a million times the recorded pace
MOST_IN_FLIGHT = 1 << 20  # requests in flight at once: more than any target takes, less than msgpack's ints


class ScheduleError(InfertapError):
    pass


@dataclass(frozen=True)
class Schedule:
    kind: str = "original"  # original | rate | poisson | concurrency | concurrency-original
    speed: float = 1.0
    rate: float | None = None
    concurrency: int | None = None
    max_concurrency: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ("original", "rate", "poisson", "concurrency", "concurrency-original"):
            raise ScheduleError(f"unknown schedule {self.kind!r}")
        # Finite and within reach: a speed of 1e-300 or NaN made offsets no number can hold.
        for name, value in (("--speed", self.speed), ("--rate", self.rate)):
            if value is not None and not math.isfinite(value):
                raise ScheduleError(f"{name} {value}: not a finite number")
        if not (math.isfinite(self.speed) and SLOWEST <= self.speed <= FASTEST):
            raise ScheduleError(f"--speed {self.speed}: must be > 0 (from {SLOWEST:g} to {FASTEST:g})")
        if self.kind in ("rate", "poisson") and not (self.rate and math.isfinite(self.rate) and 1e-6 <= self.rate <= 1e9):
            raise ScheduleError(f"--rate {self.rate}: must be > 0 (from 1e-06 to 1e+09 requests/s)")
        if self.kind == "concurrency" and not (self.concurrency and 0 < self.concurrency <= MOST_IN_FLIGHT):
            raise ScheduleError(f"--concurrency must be a positive number or 'original' (at most {MOST_IN_FLIGHT})")
        if self.max_concurrency is not None and not 0 < self.max_concurrency <= MOST_IN_FLIGHT:
            raise ScheduleError(f"--max-concurrency must be > 0 (at most {MOST_IN_FLIGHT})")

    @property
    def open_loop(self) -> bool:
        return self.kind in ("original", "rate", "poisson")

    def offsets(self, items: list[Item]) -> list[int]:
        """Send offsets in ns from the replay's start, one per item (open-loop schedules)."""
        if self.kind == "original":
            return [int(item.offset_ns / self.speed) for item in items]
        assert self.rate is not None
        if self.kind == "rate":
            return [int(i * 1e9 / self.rate) for i in range(len(items))]
        rng = random.Random(self.seed)
        t = 0.0
        out = []
        for _ in items:
            out.append(int(t))
            t += rng.expovariate(self.rate) * 1e9
        return out

    def limit(self, item: Item) -> int:
        """How many requests may be in flight when ``item`` is sent (closed-loop schedules)."""
        return self.concurrency if self.kind == "concurrency" else item.concurrency  # type: ignore[return-value]

    def describe(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


async def sleep_until(deadline_ns: int) -> None:
    """Sleep to an absolute monotonic deadline, sub-millisecond: timer for the bulk, yield-spin for the rest."""
    while True:
        remaining = deadline_ns - time.monotonic_ns()
        if remaining <= 0:
            return
        if remaining > _SPIN_NS:
            await asyncio.sleep((remaining - _SPIN_NS) / 1e9)
        else:
            await asyncio.sleep(0)


def sessions_timed_by(schedule: Schedule) -> str:
    """What set a turn's time in open sessions, for the summary: "original" only where the recorded
    times were kept (speed 1, no cap), so that a turn's wait for its parent is the target's doing;
    else the schedule, which shaped the waits too."""
    if schedule.kind != "original":
        return schedule.kind
    shaped = [f"x{schedule.speed:g}"] if schedule.speed != 1 else []
    shaped += [f"capped at {schedule.max_concurrency}"] if schedule.max_concurrency else []
    return " ".join(["original", *shaped])
