"""TrafficGate: an out-of-band call to an engine that ends streams in flight never overlaps traffic."""

from __future__ import annotations

import asyncio
import threading

from infertap.engines.trafficgate import TrafficGate


def test_a_call_waits_for_the_stream_in_flight_and_new_requests_wait_for_the_call() -> None:
    gate = TrafficGate()
    events: list[str] = []

    def out_of_band() -> None:
        with gate.exclusive(5.0) as allowed:
            events.append(f"call starts ({allowed}, {gate.forwarding} forwarding)")
            threading.Event().wait(0.2)  # the engine answering
            events.append("call ends")

    async def request(name: str, seconds: float) -> None:
        gate.forwarding += 1  # as the proxy does: count itself, then look at the door
        try:
            if gate.held:
                await gate.wait()
            events.append(f"{name} sent")
            await asyncio.sleep(seconds)
            events.append(f"{name} ends")
        finally:
            gate.forwarding -= 1

    async def main() -> None:
        first = asyncio.create_task(request("stream 1", 0.3))
        while "stream 1 sent" not in events:
            await asyncio.sleep(0.001)
        caller = threading.Thread(target=out_of_band)
        caller.start()  # the door is held from now; the call waits for stream 1 to end
        while not gate.held:
            await asyncio.sleep(0.001)
        second = asyncio.create_task(request("stream 2", 0.01))  # arrives while the door is held
        await asyncio.gather(first, second)
        await asyncio.to_thread(caller.join)

    asyncio.run(main())
    assert events == [
        "stream 1 sent",
        "stream 1 ends",
        "call starts (True, 0 forwarding)",
        "call ends",
        "stream 2 sent",
        "stream 2 ends",
    ]
    assert gate.forwarding == 0 and gate.held is False


def test_a_call_that_cannot_get_a_lull_is_skipped_and_releases_the_door() -> None:
    gate = TrafficGate()
    gate.forwarding = 1  # a stream that won't end within the wait
    with gate.exclusive(0.05) as allowed:
        assert allowed is False
    assert gate.held is False


def test_a_request_cancelled_while_waiting_leaves_the_count_balanced() -> None:
    gate = TrafficGate()

    async def main() -> None:
        gate.held = True
        gate.forwarding += 1
        waiter = asyncio.create_task(gate.wait())
        await asyncio.sleep(0.02)
        assert gate.forwarding == 0  # a waiting request doesn't count as in flight
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        gate.forwarding -= 1  # the proxy's finally

    asyncio.run(main())
    assert gate.forwarding == 0
