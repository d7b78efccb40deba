"""The simulated engine's capacity (tests/slot_engine.py) is its own schedule's, not the host's: the
capacity sweeps' tests find their knee there."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from tests.fake_upstream import ServerThread
from tests.slot_engine import SlotEngine


def slow_writer(engine: SlotEngine, delay_s: float) -> Any:
    """The engine behind a host that hands each message over ``delay_s`` late, as a loaded one does."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        async def late(message: dict[str, Any]) -> None:
            await asyncio.sleep(delay_s)
            await send(message)

        await engine(scope, receive, late)

    return app


async def ask(url: str, n: int) -> list[int]:
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "q"}]}
    async with httpx.AsyncClient(timeout=30) as client:

        async def one() -> int:
            async with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
                await r.aread()
                return r.status_code

        return list(await asyncio.gather(*(one() for _ in range(n))))


@pytest.mark.parametrize("delay_s", [0.0, 0.03])
def test_a_queued_request_takes_its_slot_when_the_last_one_is_due_to_end_however_late_the_host(delay_s):
    # 6 requests at once on 2 slots of 0.1 s: three rounds. A slot freed after its last write (a
    # semaphore) was held 10 ms over with no delay and longer with each late message, and the sweep
    # found less capacity than the engine has; booked, it is freed at 0.1 s whatever was written.
    engine = SlotEngine(2, 0.1)
    with ServerThread(slow_writer(engine, delay_s)) as server:
        assert asyncio.run(ask(server.url, 6)) == [200] * 6
    assert engine.served == 6
    first, second = engine.starts[:2]  # both slots free on arrival
    # Exactly (to the float): each queued request starts when its slot's last request is due to end.
    expected = [first + 0.1, second + 0.1, first + 0.2, second + 0.2]
    assert engine.starts[2:] == pytest.approx(expected, rel=0, abs=1e-9), engine.starts
