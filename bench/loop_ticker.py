"""How late the event loop runs while a benchmark's work shares it: a 1 ms sleeper's lateness."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator


@contextlib.asynccontextmanager
async def ticking(lags: list[float], *, settle_s: float = 0.0) -> AsyncIterator[list[float]]:
    """While inside, a sleeper of 1 ms on the running loop appends how late (ms) each wake-up came
    to ``lags``. ``settle_s``: it runs that long first, its start-up ticks dropped."""
    done = False

    async def tick() -> None:
        while not done:
            t = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append((time.perf_counter() - t - 0.001) * 1000)

    task = asyncio.create_task(tick())
    if settle_s:
        await asyncio.sleep(settle_s)
        lags.clear()
    try:
        yield lags
    finally:
        done = True
        await task
