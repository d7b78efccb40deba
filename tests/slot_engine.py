"""A simulated engine whose capacity is known by construction: ``slots`` requests served at once,
each taking ``service_s`` (its tokens spread evenly over it), the rest waiting for a slot in
arrival order. It carries ``slots / service_s`` requests per second and no more: what a capacity
sweep must find. ``slow=(every, seconds)`` makes every ``every``-th request take ``seconds`` instead,
as long answers among short ones do. Speaks OpenAI chat SSE with usage; runs under
tests.fake_upstream.ServerThread.

The slots keep a schedule, not a semaphore: a request starts at its arrival or when the slot free
soonest frees, whichever is later, and ends ``service_s`` after its start, on the event loop's clock.
A host too loaded to wake the loop on time delays what is sent, never the next request's start, so
the capacity stays ``slots / service_s`` however slow the machine (with a semaphore freed after the
last write, every overrun sleep lengthened the service: a sweep of 2 slots of 0.1 s, 20 requests per
second, once found its capacity at 13.75 on a loaded 2-core host). A request whose client goes away
keeps its booking, as an engine that notices a disconnect only after its step would.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests import sdk_shapes
from tests.fake_upstream import lifespan, read_body, sse_chunk


class SlotEngine:
    def __init__(self, slots: int, service_s: float, tokens: int = 5, slow: tuple[int, float] | None = None) -> None:
        self.slots = slots
        self.service_s = service_s
        self.slow = slow
        self.arrived = 0  # chat completions received, in arrival order
        self.tokens = tokens
        self.capacity = slots / service_s  # requests per second
        self.served = 0  # chat completions answered
        self.other = 0  # other requests, answered 404 at once
        self.starts: list[float] = []  # when each request took its slot, on the loop's clock
        self._free_at = [0.0] * slots  # when each slot ends its last request, on the loop's clock

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        await read_body(receive)
        if scope["method"] != "POST" or not scope["path"].endswith("/chat/completions"):
            # Anything else (a replay's telemetry asking for /metrics, a probe) is answered at once,
            # as an engine without that endpoint would: it takes no slot and is not served.
            self.other += 1
            await send({"type": "http.response.start", "status": 404, "headers": [(b"content-type", b"application/json")]})
            body = sdk_shapes.llamacpp_error({"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}})
            await send({"type": "http.response.body", "body": json.dumps(body).encode(), "more_body": False})
            return
        self.arrived += 1
        service_s = self.slow[1] if self.slow and self.arrived % self.slow[0] == 0 else self.service_s
        clock = asyncio.get_running_loop().time
        slot = min(range(self.slots), key=self._free_at.__getitem__)
        start = max(clock(), self._free_at[slot])
        self._free_at[slot] = start + service_s  # booked at arrival: arrival order, whatever the loop's lateness
        self.starts.append(start)
        await asyncio.sleep(start - clock())
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for i in range(self.tokens):
            await asyncio.sleep(start + (i + 1) * service_s / self.tokens - clock())
            await send({"type": "http.response.body", "body": sse_chunk("slot", i, f"t{i} "), "more_body": True})
        usage = {"prompt_tokens": 8, "completion_tokens": self.tokens, "total_tokens": 8 + self.tokens}
        end = sdk_shapes.chat_chunk(
            {
                "id": "chatcmpl-slot",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "fake",
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                "usage": usage,
            }
        )
        await send(
            {
                "type": "http.response.body",
                "body": b"data: " + json.dumps(end).encode() + b"\n\ndata: [DONE]\n\n",
                "more_body": False,
            }
        )
        self.served += 1
