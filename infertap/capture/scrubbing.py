"""Finished exchanges handed to the capture once their responses hold none of the request's
credentials: what every recorder (proxy, mitm, replay) does last with an exchange."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from .records import Exchange
from .redact import Redactor

log = logging.getLogger("infertap.capture")


class Scrubbed:
    """Hands finished exchanges to ``write`` once the request's credentials (``found``) are out of
    the response too (``Redactor.echoes``): an encoded response is decompressed to be searched, on a
    worker thread, no work for an event loop that is streaming other exchanges; the rest at once.
    The recorder, the mitm addon and the replayer all record this way; ``drained`` before the
    capture closes."""

    def __init__(self, redactor: Redactor, write: Callable[[Exchange], None]) -> None:
        self.redactor = redactor
        self.write = write
        self._pending: set[asyncio.Future[None]] = set()

    def record(self, record: Exchange, found: set[str]) -> None:
        if not (found and self.redactor.decodes(record)):
            if found:
                self.redactor.echoes(record, found)
            self.write(record)
            return
        scrub = asyncio.get_running_loop().run_in_executor(None, self.redactor.echoes, record, found)
        self._pending.add(scrub)

        def written(done: asyncio.Future[None]) -> None:
            self._pending.discard(done)
            if done.cancelled() or done.exception() is not None:  # never recorded unscrubbed: the body goes
                log.error("exchange %s: its response could not be searched for credentials, recorded without it", record["id"])
                record.update({"chunks": [], "chunk_ns": []})
            self.write(record)

        scrub.add_done_callback(written)

    async def drained(self) -> None:
        """Every exchange handed over is written (the searches still running finished)."""
        while self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
            await asyncio.sleep(0)  # the done callbacks, which write, run after the futures end
