"""Finished exchanges handed to the capture once their responses hold none of the request's
credentials: what every recorder (proxy, mitm, replay) does last with an exchange."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from .records import Exchange
from .redact import Redactor

log = logging.getLogger("infertap.capture")

#: A body at least this big is searched on a worker thread, not on the recorder's loop.
OFFLOAD_BYTES = 256 * 1024
#: So is a request body of at least this many strings (``Redactor.request_strings``), however
#: small: one with a credential's key is walked string by string (~1 us each on a 2-core machine),
#: so no body searched on the loop takes much more than 1 ms. A thread hop costs the loop about
#: 50 us: a small ordinary request (tens of strings) stays on it.
OFFLOAD_STRINGS = 1024


class Scrubbed:
    """Hands finished exchanges to ``write`` with their credentials out: the request body's, when
    the caller leaves it to this (``request``), then the request's credentials (``found``) where
    the response repeats them (``Redactor.echoes``). Work that grows with a body runs on a worker
    thread, no work for an event loop that is streaming other exchanges: a body of
    ``offload_bytes`` or more searched, a request body of ``offload_strings`` strings or more (a
    walk of them costs by the string, not the byte), and any body decompressed to be searched, however small it
    came (a gzip body of 100 KiB may decode to 64 MiB: its size says nothing of the cost); the
    rest at once. The recorder, the mitm addon and the replayer all record this way; ``drained`` before
    the capture closes. Nothing is recorded unscrubbed: a body whose search fails is left out."""

    def __init__(
        self,
        redactor: Redactor,
        write: Callable[[Exchange], None],
        offload_bytes: int = OFFLOAD_BYTES,
        offload_strings: int = OFFLOAD_STRINGS,
    ) -> None:
        self.redactor = redactor
        self.write = write
        self.offload_bytes = offload_bytes
        self.offload_strings = offload_strings
        self._pending: set[asyncio.Future[None]] = set()

    def record(self, record: Exchange, found: set[str], *, request: bool = False) -> None:
        """``request``: the request body is still to be redacted (``Redactor.request``, which adds
        the credentials it takes out to ``found``)."""
        if request and not self._heavy_request(record):
            self.redactor.request(record, found)
            request = False
        if not request and not (found and self._heavy_response(record)):
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

    def _heavy_request(self, record: Exchange) -> bool:
        """A large body, one of many strings (walked one by one where it names a credential's key),
        or a decompression."""
        redactor = self.redactor
        if len(record.get("request_body") or b"") >= self.offload_bytes or redactor.request_decodes(record):
            return True
        return redactor.request_strings(record) >= self.offload_strings

    def _heavy_response(self, record: Exchange) -> bool:
        """Searching the response for the request's credentials is a decompression, or a large body's scan."""
        return self.redactor.decodes(record) or sum(map(len, record.get("chunks") or ())) >= self.offload_bytes

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
