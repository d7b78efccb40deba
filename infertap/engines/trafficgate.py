"""Out-of-band calls and traffic kept apart, for engines that end a stream when another request arrives.

llama-cpp-python (``interrupt_requests``, on by default) ends the stream in flight when any request
takes its model lock, its own /v1/models and /extras/tokenize included. Checking "nothing in
flight" and then calling leaves a gap in which a client's next request can start and be cut. So
the check holds the door: while an out-of-band call runs, the proxy lets new requests wait (a few
milliseconds), and the call waits for the streams already in flight to end.

The proxy's side runs on its event loop and is the only writer of ``forwarding``; the other side
runs on the enricher's thread and only sets ``held``. Each side writes its own flag, then reads
the other's, so at most one of them goes ahead.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator


class TrafficGate:
    def __init__(self) -> None:
        self.forwarding = 0  # requests sent upstream and not yet ended
        self.held = False  # an out-of-band call is waiting or running

    async def wait(self) -> None:
        """Called by a request already counted in ``forwarding`` that found the door held."""
        while self.held:
            self.forwarding -= 1
            try:
                while self.held:
                    await asyncio.sleep(0.002)
            finally:
                self.forwarding += 1

    @contextlib.contextmanager
    def exclusive(self, wait_s: float) -> Iterator[bool]:
        """Hold new requests, wait up to ``wait_s`` for those in flight to end; yields whether the call may run."""
        self.held = True
        try:
            deadline = time.monotonic() + wait_s
            while self.forwarding > 0:
                if time.monotonic() > deadline:
                    yield False
                    return
                time.sleep(0.005)
            yield True
        finally:
            self.held = False
