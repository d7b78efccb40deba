"""Request bodies where they lie in the source capture: read again when sent, never all held.

A million agent turns, each the whole conversation so far, are tens of gigabytes of request
bodies. A workload keeps each body's place instead (``BodyStore``: its block, and where it starts
and ends in the block's decompressed bytes) and reads it again when it is about to be sent: the
bytes sent are the capture's own, byte for byte. A block holds many exchanges and blocks are asked
for in about the order they were written, so the last few read are kept.

``Bodies`` is each item's body as it will be sent (read again, then transformed), by item index.
``ReadAhead`` produces them in a thread, a bounded window ahead of the dispatcher, so that sending
never waits on disk, decompression or JSON. A capture that changed or vanished since it was loaded
is a ``BodyError``: the replay stops there, with what it sent recorded.
"""

from __future__ import annotations

import asyncio
import threading
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol, overload

from infertap.capture.errors import CaptureError
from infertap.capture.reader import BlockRef, CaptureReader
from infertap.errors import InfertapError

from .transforms import TransformError, Transforms, pinned_settings

_CACHE_BYTES = 64 * 1024 * 1024  # decompressed blocks kept (a block is up to ~4 MiB: a few dozen)


class BodyError(InfertapError):
    """A request body could not be read again from its capture (changed, truncated or gone)."""


class BodyStore:
    """Where request bodies lie in a capture, a few machine words each (``add``), and the bodies
    read back from there (``raw``). Safe to read from several threads."""

    def __init__(self, reader: CaptureReader) -> None:
        self.reader = reader
        self._refs: list[BlockRef] = []
        self._block = array("I")  # per body: its block (an index into _refs)...
        self._start = array("Q")  # ...and its bytes' place in the block's decompressed bytes
        self._end = array("Q")
        self._fresh()

    def _fresh(self) -> None:
        self._cache: OrderedDict[int, bytes] = OrderedDict()  # block index -> its bytes, least recent first
        self._cached = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._block)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (to a worker process) as the capture's path and the places: no cache, no lock."""
        return {"path": self.reader.path, "refs": self._refs, "block": self._block, "start": self._start, "end": self._end}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.reader = CaptureReader(state["path"])
        self._refs, self._block, self._start, self._end = state["refs"], state["block"], state["start"], state["end"]
        self._fresh()

    def add(self, ref: BlockRef, payload: bytes, start: int, body: bytes) -> int:
        """Where ``body`` lies: in block ``ref`` (decompressed: ``payload``) within the record whose
        bytes start at ``start``. Returns its spot for ``raw``, or -1 when the bytes aren't there as
        such (the caller keeps the body)."""
        at = _packed_at(payload, start, body)
        if at < 0:
            at = payload.find(body, start)  # packed as raw bytes, somewhere in the record
            if at < 0:
                return -1
        if not self._refs or self._refs[-1] is not ref:
            self._refs.append(ref)
        self._block.append(len(self._refs) - 1)
        self._start.append(at)
        self._end.append(at + len(body))
        return len(self._block) - 1

    def raw(self, spot: int) -> bytes:
        """The body at ``spot``, read again from the capture (a ``BodyError`` if it can't be)."""
        block = self._block[spot]
        with self._lock:
            payload = self._cache.get(block)
            if payload is None:
                try:
                    payload = self.reader.read_block(self._refs[block])
                except CaptureError as exc:
                    raise BodyError(
                        f"a request body can't be read again: the source capture changed since it was loaded ({exc})"
                    ) from exc
                self._cache[block] = payload
                self._cached += len(payload)
                while self._cached > _CACHE_BYTES and len(self._cache) > 1:
                    self._cached -= len(self._cache.popitem(last=False)[1])
            else:
                self._cache.move_to_end(block)
        return payload[self._start[spot] : self._end[spot]]


_BODY_KEY = b"\xacrequest_body"  # the key as msgpack packs it (a 12-byte str), before the body's bin header
_BIN = {0xC4: 1, 0xC5: 2, 0xC6: 4}  # msgpack bin 8/16/32: how many bytes of length follow the tag


def _packed_at(payload: bytes, start: int, body: bytes) -> int:
    """Where ``body`` starts in ``payload``, read from the msgpack framing of the record's
    ``request_body`` (checked byte for byte); -1 when it isn't found that way."""
    key = payload.find(_BODY_KEY, start)
    if key < 0 or key + len(_BODY_KEY) >= len(payload):
        return -1
    tag = key + len(_BODY_KEY)
    width = _BIN.get(payload[tag])
    if width is None:
        return -1
    at = tag + 1 + width
    if int.from_bytes(payload[tag + 1 : at], "big") != len(body) or not payload.startswith(body, at):
        return -1
    return at


class Sendable(Protocol):
    """What a body needs of a workload item (replay.workload.Item), named here so that this module
    doesn't import the one that imports it."""

    @property
    def body(self) -> bytes: ...
    @property
    def settings(self) -> dict[str, Any] | None: ...
    @property
    def source_id(self) -> str: ...
    @property
    def method(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def headers(self) -> list[list[str]]: ...


class Bodies(Sequence[bytes]):
    """Each item's request body as it will be sent, by item index: read again, then transformed
    (``transforms`` with the item's pinned settings, named for ``target_kind``)."""

    def __init__(self, items: Sequence[Sendable], transforms: Transforms, target_kind: str | None) -> None:
        self.items = items
        self.transforms = transforms
        self.target_kind = target_kind

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, index: int) -> bytes: ...
    @overload
    def __getitem__(self, index: slice) -> list[bytes]: ...
    def __getitem__(self, index: int | slice) -> bytes | list[bytes]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        item = self.items[index]
        t = self.transforms
        pinned = pinned_settings(item.settings) if t.pin_defaults and item.settings else None
        try:
            return t.body(item.body, pinned=pinned, target_kind=self.target_kind, path=item.path, headers=item.headers)
        except TransformError as exc:  # checked when loaded: the bytes read now are not those
            raise BodyError(f"exchange {item.source_id} ({item.method} {item.path}): {exc}") from exc


class ReadAhead:
    """``bodies`` produced by a thread in index order, up to ``window`` items past the highest
    index asked for and at most ``max_bytes`` held, so that ``get`` rarely waits. A body asked for
    out of that order (a turn sent late, after its parent) is read on its own, off the loop."""

    def __init__(self, bodies: Sequence[bytes], *, window: int = 256, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.bodies = bodies
        self.window = window
        self.max_bytes = max_bytes
        self._loop: asyncio.AbstractEventLoop | None = None
        self._cond = threading.Condition()
        self._next = 0  # the index the thread produces next
        self._asked = -1  # the highest index asked for
        self._ready: dict[int, bytes | BaseException] = {}
        self._held = 0  # bytes in _ready
        self._waiting: dict[int, asyncio.Future[bytes]] = {}
        self._elsewhere: set[int] = set()  # at or past _next, read on their own: the thread skips them
        self._closed = False
        self._thread: threading.Thread | None = None

    def start(self) -> ReadAhead:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name="infertap-replay-bodies", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()

    async def get(self, index: int) -> bytes:
        """Body ``index``; raises ``BodyError`` when it can't be read."""
        assert self._loop is not None
        with self._cond:
            if index > self._asked:
                self._asked = index
                self._cond.notify_all()
            found = self._ready.pop(index, None)
            if found is not None:
                self._held -= len(found) if isinstance(found, bytes) else 0
                self._cond.notify_all()
            elif self._next <= index <= self._next + self.window and index not in self._elsewhere:
                future = self._waiting[index] = self._loop.create_future()  # the thread gets there soon
            else:
                future = None
                if index >= self._next:
                    self._elsewhere.add(index)
        if found is None:
            if future is not None:
                return await future
            return await self._loop.run_in_executor(None, self.bodies.__getitem__, index)
        if isinstance(found, BaseException):
            raise found
        return found

    def _run(self) -> None:
        n = len(self.bodies)
        while True:
            with self._cond:
                # Past the window, or holding enough: wait, unless a body further on is awaited.
                while (
                    not self._closed
                    and self._next < n
                    and (self._next > self._asked + self.window or (self._held > self.max_bytes and not self._waiting))
                ):
                    self._cond.wait()
                while self._next in self._elsewhere:
                    self._elsewhere.discard(self._next)
                    self._next += 1
                if self._closed or self._next >= n:
                    return
                index = self._next
            result: bytes | BaseException
            try:
                result = self.bodies[index]
            except Exception as exc:  # the consumer raises it; a bug here must not hang a replay
                result = exc if isinstance(exc, BodyError) else BodyError(f"request body {index}: {exc!r}")
            with self._cond:
                self._next = index + 1
                future = self._waiting.pop(index, None)
                if future is None:
                    self._ready[index] = result
                    self._held += len(result) if isinstance(result, bytes) else 0
            if future is not None:
                assert self._loop is not None
                self._loop.call_soon_threadsafe(_settle, future, result)


def _settle(future: asyncio.Future[bytes], result: bytes | BaseException) -> None:
    if future.done():
        return
    if isinstance(result, BaseException):
        future.set_exception(result)
    else:
        future.set_result(result)
