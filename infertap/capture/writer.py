"""The capture writer: one thread fed by a queue, so no event loop ever waits on disk or compression.

``write()`` only appends to a ``queue.SimpleQueue`` (no lock contention, never blocks). The thread
packs records with msgpack, gathers what arrives within ``flush_interval`` (5 ms) into one zstd
frame, and writes it with a single ``os.write``: once a record is in the page cache a killed
process can't lose it, so the flush window is those few milliseconds plus the time to compress.
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgpack
import zstandard

from infertap.version import installed_version

from .errors import CaptureWriteError
from .framing import block_head
from .hostfacts import GpuList, host_facts, list_gpus
from .reader import capture_id_of
from .records import DICTIONARY_KIND, FORMAT_MAJOR, FORMAT_MINOR, new_footer, new_header
from .segments import next_segment_index, segment_name

log = logging.getLogger("infertap.capture")

DEFAULT_MAX_SEGMENT_BYTES = 256 * 1024 * 1024
_BATCH_BYTES = 4 * 1024 * 1024  # bound a frame, hence what one torn write can cost
_DICTIONARY_BYTES = 128 * 1024  # a run's first records, as a raw-content dictionary for the rest
_DICTIONARY_AFTER = 1024 * 1024  # ...made once the run has recorded this much (below, it wouldn't pay)
_STOP = object()


def default_recorder_id() -> str:
    """Which recorder wrote a run: host and process, so shards of one capture stay apart."""
    return f"{socket.gethostname()}-{os.getpid()}"


class CaptureWriter:
    """Writes one run of records into a capture directory (appending new segments if it exists).

    Thread-safe: ``write`` may be called from any thread or event loop.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        recorder: Mapping[str, Any],
        labels: Mapping[str, str] | None = None,
        max_segment_bytes: int = DEFAULT_MAX_SEGMENT_BYTES,
        level: int = 3,
        flush_interval: float = 0.005,
        capture_id: str | None = None,
        dictionary: bool = True,
        wall: float | None = None,
        list_gpus: bool = False,
        gpus: GpuList | None = None,
        host: Mapping[str, Any] | None = None,
    ) -> None:
        """``wall``: when the run began, where that is not now (an import of traffic recorded
        elsewhere: its exchanges' ``start_ns`` count from it). ``list_gpus``: the headers' host facts
        list the machine's GPUs (nvidia-smi, asked once at ``open`` and waited for 2 s at most, else
        said unknown), so that a run's GPUs are known with no engine snapshot and no GPU sample
        (--no-probe, GPU telemetry that failed): its energy is then never the CPU packages' alone
        (analysis/energy.py). ``gpus``: that list as given, asked before (a --ray shard, ahead of its
        start) or unknown. ``host``: the recording machine's facts as given, where they are not this
        machine's (an import of traffic recorded elsewhere: unknown); its GPUs are then its own."""
        self.path = Path(path)
        self.max_segment_bytes = max_segment_bytes
        self.flush_interval = flush_interval  # the longest a record waits for company before it is written
        self.capture_id = capture_id or ""  # given: a shard of a capture written elsewhere (replay --ray)
        self.run_id = uuid.uuid4().hex
        self.started_wall = time.time() if wall is None else wall
        self.started_ns = time.monotonic_ns()
        self._recorder = {"id": default_recorder_id(), **recorder}
        self._labels = dict(labels or {})
        self._list_gpus = list_gpus and gpus is None and host is None
        self._gpus = gpus
        self._host = dict(host) if host is not None else None
        self._level = level
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._fd = -1
        self._segment = -1
        self._segment_bytes = 0
        self.records = 0
        self.exchanges = 0
        self.dropped = 0
        self.bytes_written = 0
        self.error: BaseException | None = None
        self._closed = False
        self._plain = zstandard.ZstdCompressor(level=level, write_checksum=True)
        self._compressor = self._plain  # with the run's dictionary once it has one (see _learn)
        self._dictionary: bytes | None = None  # the packed dictionary record
        self._samples: list[bytes] = []
        self._seen = 0
        self._learning = dictionary  # False: every frame on its own, decodable by a bare `zstd -dc`
        # Fields a recorder adds to each footer, read on the writer's thread (e.g. its loop lag).
        self.footer_extra: dict[str, Callable[[], Any]] = {}

    # -- lifecycle -------------------------------------------------------------------------

    def open(self) -> CaptureWriter:
        """Create the directory and first segment now, so a bad path fails before any traffic."""
        try:
            new = not self.path.exists()
            self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
            if new:
                os.chmod(self.path, 0o700)
            self.capture_id = self.capture_id or capture_id_of(self.path) or uuid.uuid4().hex
            if self._list_gpus:  # once: no nvidia-smi costs nothing, one answers in tens of ms, a hung one 2 s at most
                self._gpus = list_gpus()
            self._open_next(next_segment_index(self.path))
        except OSError as exc:
            raise CaptureWriteError(f"cannot write capture at {self.path}: {exc}") from exc
        self._thread = threading.Thread(target=self._run, name="infertap-capture-writer", daemon=True)
        self._thread.start()
        return self

    def close(self, timeout: float | None = 30.0) -> None:
        """Flush everything queued, write the final footer and close the file."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(_STOP)
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> CaptureWriter:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the one call the hot path makes -----------------------------------------------------

    def write(self, record: Mapping[str, object]) -> None:
        """Queue a record. The caller must not mutate it afterwards."""
        if self._closed:
            self.dropped += 1
            log.error("capture %s: record written after close, dropped", self.path)
            return
        self._queue.put(record)

    @property
    def closed(self) -> bool:
        return self._closed

    def elapsed_ns(self) -> int:
        """Monotonic ns since this run started: the clock of ``start_ns`` fields."""
        return time.monotonic_ns() - self.started_ns

    def wall_now(self) -> float:
        """The wall time now as this run's exchanges tell it (its start's wall time plus monotonic
        time since): what sampled telemetry is stamped with, so that a step of the wall clock
        (NTP) mid-run does not move the samples against the exchanges."""
        return self.started_wall + (time.monotonic_ns() - self.started_ns) / 1e9

    # -- writer thread -----------------------------------------------------------------------

    def _run(self) -> None:
        packer = msgpack.Packer(use_bin_type=True)
        stopping = False
        while not stopping:
            item = self._queue.get()
            if item is not _STOP and self.flush_interval > 0:
                # Gather for a few ms: records compressed together share context (a frame of one
                # streamed exchange compresses ~4x, of sixteen ~25x); this bounds the flush window.
                # Sleeping rather than waiting on the queue means the puts meanwhile wake nobody.
                time.sleep(self.flush_interval)
            parts: list[bytes] = []
            size = 0
            count = 0
            exchanges = 0
            while True:
                if item is _STOP:
                    stopping = True
                else:
                    try:
                        data = packer.pack(item)
                    except (TypeError, ValueError, OverflowError) as exc:  # a bug upstream must not stop the writer
                        packer.reset()
                        self.dropped += 1
                        log.error("capture %s: a record could not be packed and was dropped: %s", self.path, exc)
                        data = b""
                    parts.append(data)
                    size += len(data)
                    count += bool(data)
                    exchanges += bool(data) and item.get("type") == "exchange"
                if stopping or size >= _BATCH_BYTES:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            if parts:
                payload = b"".join(parts)
                self._write_frame(self._compressor, payload, count, exchanges)
                if self._learning and self._dictionary is None and exchanges and self.error is None:
                    self._learn(payload, packer)
            if not stopping and self.error is None and self._segment_bytes >= self.max_segment_bytes:
                self._rotate(packer)
        self._finish(packer)

    def _learn(self, payload: bytes, packer: msgpack.Packer) -> None:
        """Once the run's first records add up to a dictionary's worth, use them as one.

        A frame holds what arrived within the flush window: at an engine's pace that is often a
        single exchange, which zstd compresses about 4x alone, 10x beside its likes. A raw-content
        dictionary made of the run's first records gives every later frame that context (JSON
        keys, SSE framing, headers) while each frame stays independently decodable. It is stored
        as a ``dictionary`` record, once per segment, before the first frame that uses it; it is
        made only once a run has recorded 1 MiB, so a small capture doesn't carry its cost.
        """
        self._seen += len(payload)
        if sum(map(len, self._samples)) < _DICTIONARY_BYTES:
            self._samples.append(payload)
        if self._seen < _DICTIONARY_AFTER:
            return
        data = b"".join(self._samples)[:_DICTIONARY_BYTES]
        self._samples = []
        self._dictionary = packer.pack({"type": "dictionary", "kind": DICTIONARY_KIND, "size": len(data), "data": data})
        self._write_frame(self._plain, self._dictionary, 0, 0)
        compiled = zstandard.ZstdCompressionDict(data, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
        compiled.precompute_compress(level=self._level)
        self._compressor = zstandard.ZstdCompressor(level=self._level, dict_data=compiled, write_checksum=True)

    def _write_frame(self, compressor: zstandard.ZstdCompressor, payload: bytes, count: int, exchanges: int) -> None:
        if self.error is not None:
            self.dropped += count
            return
        zframe = compressor.compress(payload)
        block = block_head(FORMAT_MAJOR, FORMAT_MINOR, zframe) + zframe
        try:
            view = memoryview(block)
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
        except OSError as exc:
            self.error = exc
            self.dropped += count
            log.error("capture %s: write failed, recording stopped: %s", self.path, exc)
            return
        self._segment_bytes += len(block)
        self.bytes_written += len(block)
        self.records += count
        self.exchanges += exchanges

    def _rotate(self, packer: msgpack.Packer) -> None:
        self._write_frame(self._compressor, packer.pack(self._footer(final=False)), 1, 0)
        # On this thread, never the proxy's loop: a segment the run has left is on disk before the
        # next one is, so a power loss can only tear the segment being written, not leave a hole.
        try:
            os.fsync(self._fd)
        except OSError as exc:
            log.warning("capture %s: segment %s not synced to disk: %s", self.path, segment_name(self._segment), exc)
        os.close(self._fd)
        self._fd = -1
        try:
            self._open_next(self._segment + 1)
        except OSError as exc:
            self.error = exc
            log.error("capture %s: cannot open a new segment, recording stopped: %s", self.path, exc)

    def _finish(self, packer: msgpack.Packer) -> None:
        if self._fd < 0:
            return
        self._write_frame(self._compressor, packer.pack(self._footer(final=True)), 1, 0)
        try:
            os.fsync(self._fd)
        except OSError:
            pass
        os.close(self._fd)
        self._fd = -1

    def _open_next(self, index: int) -> None:
        """Open segment ``index``, or the next free one: another writer appending to this capture
        (a second recorder, an enrich, an import) may have taken it since."""
        while True:
            try:
                return self._open_segment(index)
            except FileExistsError:
                index = max(index + 1, next_segment_index(self.path))

    def _open_segment(self, index: int) -> None:
        target = self.path / segment_name(index)
        self._fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        self._segment = index
        self._segment_bytes = 0
        header = new_header(
            capture_id=self.capture_id,
            run_id=self.run_id,
            segment=index,
            wall=self.started_wall,
            tool_version=installed_version(),
            recorder=self._recorder,
            host=self._host_facts(),
            labels=self._labels,
        )
        # The header goes straight to disk, in its own frame, before any exchange can; then the
        # run's dictionary, if it has one yet, so that each segment can be read on its own.
        self._write_frame(self._plain, msgpack.packb(header, use_bin_type=True), 1, 0)
        if self._dictionary is not None:
            self._write_frame(self._plain, self._dictionary, 0, 0)

    def _host_facts(self) -> dict[str, Any]:
        if self._host is not None:
            return dict(self._host)
        return {**host_facts(), **self._gpus.facts()} if self._gpus is not None else host_facts()

    def _footer(self, *, final: bool) -> dict[str, Any]:
        footer: dict[str, Any] = dict(
            new_footer(final=final, wall=time.time(), records=self.records, exchanges=self.exchanges, dropped=self.dropped)
        )
        for key, read in self.footer_extra.items():
            try:
                footer[key] = read()
            except Exception as exc:  # a reader's bug must not cost the footer
                log.warning("capture %s: footer field %s not written: %r", self.path, key, exc)
        return footer
