"""The streamed replies of a capture, read by a second process while a replay's workload loads.

Of a response, preparing a replay reads only the reply (what a next turn starts with, for
linking), and for agent traffic that is about a third of the preparation: every streamed event of
every answered exchange. A spawned worker reads the same records (the same snapshot of the
segments) and sends each exchange's ``chat_answer``, with its request's digest for the workload
identity (``exchange_digest``: a SHA-256 of the body, which evens out the two processes' work), in
batches and in record order; the loading process takes them as it reaches each exchange, so the
two share the work on two cores.

An answer is the worker's only where it was read from that very exchange (the same place in the
capture, the same id). For everything else (a capture too small to pay for a process's start, a
caller that can't start one, a worker that fails or falls out of step) the loading process reads
the reply itself, as it always could: the workload is the same either way, only where its replies
were read differs.
"""

from __future__ import annotations

import gc
import multiprocessing
from multiprocessing.connection import Connection
from typing import Any

from infertap.apis.conversation import UNREAD, Answer, Unread, chat_answer
from infertap.capture.identity import exchange_digest
from infertap.capture.reader import CaptureReader
from infertap.spawning import exit_with_parent, workers_can_start

#: Below this many bytes of segments, the worker's start (a process, its imports: about 0.3 s)
#: costs more than it saves.
WORKER_BYTES = 4 << 20
_BATCH = 512  # exchanges a message: few messages, and the pipe's buffer bounds what waits in it


_NONE: tuple[Unread, None] = (UNREAD, None)


class Replies:
    """Each exchange's ``chat_answer`` from the worker, asked for in record order (``of``)."""

    def __init__(self, path: str, sizes: dict[str, int]) -> None:
        self._process: Any = None
        self._conn: Connection | None = None
        self._batch: list[tuple[Any, Answer | None | Unread, bytes]] = []
        self._at = 0
        if sum(sizes.values()) < WORKER_BYTES or not workers_can_start():
            return
        ctx = multiprocessing.get_context("spawn")  # not fork: the caller may have threads
        receive, send = ctx.Pipe(duplex=False)
        try:
            process = ctx.Process(target=_read, args=(path, sizes, send), name="infertap-replies", daemon=True)
            process.start()
        except Exception:  # noqa: BLE001 - no worker (a daemonic caller, no resources): read here
            receive.close()
            return
        finally:
            send.close()  # the worker's end only: its exit then ends the receiving
        self._process, self._conn = process, receive

    def of(self, xid: Any) -> tuple[Answer | None | Unread, bytes | None]:
        """For the next exchange, ``xid``: its answer (``chat_answer``'s: None when it declined;
        ``UNREAD`` when the worker has none for it, as for exchanges not answered 2xx) and its
        request's digest (None: none from the worker)."""
        if self._conn is None:
            return _NONE
        if self._at == len(self._batch):
            try:
                batch = self._conn.recv()
            except (EOFError, OSError):
                batch = None  # the worker ended or failed: every reply from here on is read here
            if not batch:
                self.close()
                return _NONE
            self._batch, self._at = batch, 0
        wid, answer, digest = self._batch[self._at]
        self._at += 1
        if wid != xid:  # out of step: nothing of it can be trusted for the rest
            self.close()
            return _NONE
        return answer, digest

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._process is not None:
            if self._process.is_alive():
                self._process.terminate()
            self._process.join()
            self._process = None


def _read(path: str, sizes: dict[str, int], conn: Connection) -> None:
    """The worker: each exchange's id, answer and request digest, in record order, then an empty batch."""
    exit_with_parent()
    gc.disable()  # this process only reads: nothing it keeps makes a cycle
    try:
        batch: list[tuple[Any, Any, bytes]] = []
        for record in CaptureReader(path, sizes).exchanges():
            status = record.get("status")
            answered = isinstance(status, int) and 200 <= status < 300  # linking reads no other reply
            batch.append((record.get("id"), chat_answer(record) if answered else UNREAD, exchange_digest(record)))
            if len(batch) == _BATCH:
                conn.send(batch)
                batch = []
        if batch:
            conn.send(batch)
        conn.send([])
    except Exception:  # noqa: BLE001 - the loading process is gone, or reads the capture itself and says why
        pass
    finally:
        conn.close()


__all__ = ["Replies", "WORKER_BYTES"]
