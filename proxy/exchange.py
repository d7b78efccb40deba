"""One exchange's trip to the upstream, recorded as it streams: the part the recording proxy and the
replayer share (uvicorn's ``RequestResponseCycle`` holds one request's state the same way).

The upstream client raises infertap's own errors (``UpstreamUnreachable``, ``UpstreamTimeout``,
``UpstreamBroken``: see infertap/errors.py); this module maps them to what an exchange records,
once: ``end`` is ``timeout`` or ``upstream_error`` and ``error`` says which side failed and when.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from infertap.capture.records import End, Exchange, InterimResponse, ResponseKept
from infertap.capture.redact import Redactor
from infertap.errors import UpstreamError, UpstreamTimeout, UpstreamUnreachable

from .upstream import Interim, UpstreamClient, UpstreamResponse


class UpstreamCall:
    """Sends one exchange's request and records its response into the exchange record.

    Every ``*_ns`` of the response counts from ``sent()``: the latency a client of the engine sees,
    none of infertap's own waits (a replay's schedule, a proxy's traffic gate) inside it.
    """

    __slots__ = ("record", "redactor", "clock", "who", "t0", "kept")

    def __init__(
        self, record: Exchange, redactor: Redactor, clock: Callable[[], int], who: str, max_response_bytes: int | None = None
    ) -> None:
        self.record = record
        # The response's chunks as kept, up to max_response_bytes (None: all), and its last ones past it.
        self.kept = ResponseKept(record["chunk_ns"], record["chunks"], max_response_bytes)
        self.redactor = redactor
        self.clock = clock  # the run's clock, for sent_ns (CaptureWriter.elapsed_ns)
        self.who = who  # "upstream" (proxy) or "target" (replay): how errors name the engine
        self.t0 = time.monotonic_ns()

    def sent(self) -> None:
        """The request leaves now."""
        self.t0 = time.monotonic_ns()
        self.record["sent_ns"] = self.clock()

    async def open(
        self,
        client: UpstreamClient,
        method: str,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        forward: Interim | None = None,
    ) -> UpstreamResponse:
        """Send the request and record the response's head, and each interim response before it
        (passed on by ``forward``, the proxy's client's, where there is one); raises
        ``UpstreamError`` when no response came."""
        record = self.record

        def interim(status: int, fields: list[tuple[bytes, bytes]]) -> bool:
            # 101 would switch the client's connection to a protocol nobody asked the upstream for
            forwarded = forward is not None and status != 101 and forward(status, fields)
            seen: InterimResponse = {
                "status": status,
                "headers": self.redactor.headers_from_asgi(fields),
                "ns": time.monotonic_ns() - self.t0,
                "forwarded": forwarded,
            }
            record.setdefault("interim", []).append(seen)
            return forwarded

        response = await client.send(method, target, headers, body, interim)
        if response.retried is not None:  # the first attempt's connection broke: times from the second
            record["retried"] = response.retried
            record["sent_ns"] += response.resent_ns - self.t0
            self.t0 = response.resent_ns
        record["headers_ns"] = time.monotonic_ns() - self.t0
        record["status"] = response.status_code
        record["response_headers"] = self.redactor.headers_from_asgi(response.headers)
        return response

    async def relay(
        self,
        response: UpstreamResponse,
        deliver: Callable[[bytes, int], Awaitable[int]] | None = None,
        seen: Callable[[bytes], None] | None = None,
    ) -> bool:
        """Record the body chunk by chunk as it arrives, handing each to ``deliver`` (the proxy's
        client) with its arrival (monotonic ns), which says how long it waited for the client to
        take it (ns, 0 for no wait); False when the upstream failed mid-response (recorded as the
        exchange's end). Past ``max_response_bytes`` every chunk is still handed on, but no longer
        kept (``ResponseKept``). With no ``deliver`` (replay: no client), ``seen`` is shown each chunk
        as it arrives (its search for error marks: a little per chunk, not the whole body at its end)."""
        t0 = self.t0
        kept = self.kept
        held = 0
        try:
            if deliver is None:
                async for chunk in response.aiter_raw():
                    kept.add(time.monotonic_ns() - t0, chunk)
                    if seen is not None:
                        seen(chunk)
            else:
                async for chunk in response.aiter_raw():
                    arrived = time.monotonic_ns()
                    kept.add(arrived - t0, chunk)
                    # The next chunk is read only once this one is handed on: a client that doesn't
                    # take it makes every later chunk's time late by as much, so the wait is kept.
                    held += await deliver(chunk, arrived)
        except UpstreamError as exc:
            self.failed(exc, " mid-response")
            return False
        finally:
            kept.mark(self.record)
            if held:
                self.record["client_wait_ns"] = held
            if response.trailers:
                self.record["response_trailers"] = self.redactor.headers_from_asgi(response.trailers)
        return True

    def failed(self, exc: UpstreamError, when: str = "") -> None:
        """Record how the upstream failed: the exchange's ``end`` and ``error``."""
        end = self.record["end"] = end_of(exc)
        self.record["error"] = f"{self.who} {'timed out' if end == 'timeout' else 'failed'}{when}: {exc}"

    def ended(self, at_ns: int | None = None) -> None:
        """The exchange's end: now, or ``at_ns`` (monotonic) where it ended before its task did."""
        self.record["end_ns"] = (time.monotonic_ns() if at_ns is None else at_ns) - self.t0


def end_of(exc: UpstreamError) -> End:
    """The ``end`` an exchange records for an upstream failure."""
    return "timeout" if isinstance(exc, UpstreamTimeout) else "upstream_error"


def before_response(exc: UpstreamError, upstream: str) -> UpstreamError:
    """What a proxy's client is told when the upstream gave no response at all: 504 for a timeout,
    502 for anything else (refused, reset, not HTTP)."""
    if isinstance(exc, UpstreamTimeout):
        return UpstreamTimeout(f"infertap: upstream {upstream} timed out before responding: {exc}")
    return UpstreamUnreachable(f"infertap: upstream {upstream} failed before responding: {exc}")
