"""Finished exchanges handed to the capture once their responses hold none of the request's
credentials: what every recorder (proxy, mitm, replay) does last with an exchange."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from .records import Exchange
from .redact import Redactor

log = logging.getLogger("infertap.capture")

#: A request body at least this big is redacted on a worker thread, not on the recorder's loop.
OFFLOAD_BYTES = 256 * 1024


class Scrubbed:
    """Hands finished exchanges to ``write`` with their credentials out: the request body's, when
    the caller leaves it to this (``request``), then the request's credentials (``found``) where
    the response repeats them (``Redactor.echoes``). Work that grows with a body (a request body
    of ``offload_bytes`` or more searched, an encoded response decompressed to be searched) runs
    on a worker thread, no work for an event loop that is streaming other exchanges; the rest at
    once. The recorder, the mitm addon and the replayer all record this way; ``drained`` before
    the capture closes. Nothing is recorded unscrubbed: a body whose search fails is left out."""

    def __init__(self, redactor: Redactor, write: Callable[[Exchange], None], offload_bytes: int = OFFLOAD_BYTES) -> None:
        self.redactor = redactor
        self.write = write
        self.offload_bytes = offload_bytes
        self._pending: set[asyncio.Future[None]] = set()

    def record(self, record: Exchange, found: set[str], *, request: bool = False) -> None:
        """``request``: the request body is still to be redacted (``Redactor.request``, which adds
        the credentials it takes out to ``found``)."""
        if request and len(record.get("request_body") or b"") < self.offload_bytes:
            self.redactor.request(record, found)
            request = False
        if not request and not (found and self.redactor.decodes(record)):
            if found:
                self.redactor.echoes(record, found)
            self.write(record)
            return
        scrub = asyncio.get_running_loop().run_in_executor(None, self._scrub, record, found, request)
        self._pending.add(scrub)

        def written(done: asyncio.Future[None]) -> None:
            self._pending.discard(done)
            if done.cancelled() or done.exception() is not None:  # never recorded unscrubbed: the bodies go
                what = "its request or response" if request else "its response"
                log.error(
                    "exchange %s: %s could not be searched for credentials, recorded without the bodies", record["id"], what
                )
                record.update({"chunks": [], "chunk_ns": []})
                if request:
                    record["request_body_size"] = len(record.get("request_body") or b"")
                    record["request_body"] = b""
            self.write(record)

        scrub.add_done_callback(written)

    def _scrub(self, record: Exchange, found: set[str], request: bool) -> None:
        """On a worker thread: the request body redacted, then its credentials out of the response."""
        if request:
            self.redactor.request(record, found)
        if found:
            self.redactor.echoes(record, found)

    async def drained(self) -> None:
        """Every exchange handed over is written (the searches still running finished)."""
        while self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
            await asyncio.sleep(0)  # the done callbacks, which write, run after the futures end
