"""The one streaming reader of captures (a directory of segments, or a single segment file)."""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, overload

import msgpack
import zstandard

from .errors import CaptureCorruptError, CaptureError, UnsupportedFormatError
from .framing import Block, iter_blocks
from .records import DICTIONARY_KIND, FORMAT_MAJOR, FORMAT_MINOR
from .segments import capture_segments, segment_name, segment_paths

_MAX_FRAME = 1 << 31


@dataclass(frozen=True, slots=True)
class BlockRef:
    """Where a block lies, enough to read it again (``CaptureReader.read_block``): its segment (an
    index into ``segments``), the offset of its head in that file, the CRC32 of its zstd frame (so
    that a capture changed since is told, not misread) and the block of the segment's compression
    dictionary that it needs, if any."""

    segment: int
    offset: int
    crc: int
    dictionary: BlockRef | None = None


@dataclass(slots=True)
class TornTail:
    """Where a segment ends in an incomplete write: expected after a crash, reported, not fatal."""

    path: str
    offset: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: torn tail at byte {self.offset} ({self.reason}); data before it is intact"


@dataclass(slots=True)
class Gap(TornTail):
    """Records missing between segments of a capture (a segment deleted or cut short at a block
    boundary, a run's later segments gone): reported as a torn tail is, with ``torn``, the records
    that are there read back."""

    def __str__(self) -> str:
        return f"{self.path}: records missing at byte {self.offset} ({self.reason}); the records read are intact"


class CaptureReader:
    """Streams the records of a capture in write order.

    After iterating, ``torn`` lists the damage found, torn tails and gaps (``Gap``: records missing
    between segments of a capture directory), ``closed_cleanly`` says whether every run ended
    with its final footer, and ``open_runs`` names the runs that did not (killed, or still writing).
    """

    def __init__(self, path: str | os.PathLike[str], sizes: Mapping[str, int] | None = None) -> None:
        """``sizes``: read each segment only up to this many bytes, and no segment it doesn't name (a
        snapshot of a capture a recorder is still writing, ``snapshot(path)``): readers that must
        agree on the records, in several processes, read the same ones."""
        self.path = Path(path)
        self.segments = capture_segments(self.path)
        self.sizes = dict(sizes) if sizes is not None else None
        if self.sizes is not None:
            self.segments = [s for s in self.segments if str(s) in self.sizes]
        self.torn: list[TornTail] = []
        self.closed_cleanly = False
        self.open_runs: set[Any] = set()
        self._decompressors: dict[BlockRef | None, zstandard.ZstdDecompressor] = {}  # read_block's, by dictionary
        self._block_offset = 0  # of the block whose records are being read, and its segment's size
        self._segment_size = 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self.records()

    def records(self) -> Iterator[dict[str, Any]]:
        return (located[0] for located in self._walk(False))

    def exchanges(self) -> Iterator[dict[str, Any]]:
        return (r for r in self.records() if r.get("type") == "exchange")

    def located(self) -> Iterator[tuple[dict[str, Any], BlockRef, bytes, int]]:
        """``records()``, each with where it lies: its block (``read_block`` reads it again), the
        block's decompressed bytes and the offset in them at which the record's own bytes start.
        For readers that keep a record's place rather than the record (replay's request bodies)."""
        return self._walk(True)

    def _walk(self, locate: bool) -> Iterator[Any]:
        """Every segment's records in order (located or, as ``(record,)``, not), ``torn`` and
        ``closed_cleanly`` kept as they go by. A directory's segments are checked to follow on
        from each other (``_Continuity``); a segment read alone can't be."""
        self.torn = []
        closing = _Closing(self)
        continuity = _Continuity(self) if self.path.is_dir() else None
        for index, segment in enumerate(self.segments):
            if continuity is not None:
                continuity.start(segment)
            items: Iterator[Any] = (
                self._segment_records(index, segment, True)
                if locate
                else ((r,) for r in self._segment_records(index, segment, False))
            )
            for item in items:
                closing.see(item[0])
                if continuity is not None:
                    continuity.see(item[0])
                yield item
            if continuity is not None:
                continuity.end()
        if continuity is not None:
            continuity.finish()

    def read_block(self, ref: BlockRef) -> bytes:
        """The decompressed bytes of the block at ``ref``, read again from its segment. A segment that
        is gone, or whose block there is not the one read before, is a ``CaptureError`` that says so."""
        name = str(self.segments[ref.segment])
        try:
            f = open(name, "rb")
        except OSError as exc:
            raise CaptureError(f"{name}: cannot read: {exc}") from exc
        with f:
            size = os.fstat(f.fileno()).st_size
            f.seek(ref.offset)
            item = next(iter_blocks(f, size - ref.offset), None) if ref.offset < size else None
        if not isinstance(item, Block) or zlib.crc32(item.zframe) != ref.crc:
            why = item.reason if item is not None and not isinstance(item, Block) else "its bytes differ"
            raise CaptureCorruptError(
                name, ref.offset, f"the block read before is not there any more ({why}): the capture changed"
            )
        decompressor = self._decompressors.get(ref.dictionary)
        if decompressor is None:
            decompressor = zstandard.ZstdDecompressor()
            if ref.dictionary is not None:
                unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
                unpacker.feed(self.read_block(ref.dictionary))
                decompressor = _with_dictionary(name, ref.dictionary.offset, next(unpacker))
            self._decompressors[ref.dictionary] = decompressor
        try:
            return decompressor.decompress(item.zframe, max_output_size=_MAX_FRAME)
        except zstandard.ZstdError as exc:
            raise CaptureCorruptError(name, ref.offset, f"zstd: {exc}") from exc

    @overload
    def _segment_records(self, index: int, path: Path, locate: Literal[False]) -> Iterator[dict[str, Any]]: ...
    @overload
    def _segment_records(
        self, index: int, path: Path, locate: Literal[True]
    ) -> Iterator[tuple[dict[str, Any], BlockRef, bytes, int]]: ...
    def _segment_records(self, index: int, path: Path, locate: bool) -> Iterator[Any]:
        """A segment's records, or with ``locate`` each with where it lies (see ``located``)."""
        name = str(path)
        decompressor = zstandard.ZstdDecompressor()  # until the segment's dictionary record, if any
        dictionary: BlockRef | None = None  # the block that holds it
        try:
            f = open(path, "rb")
        except OSError as exc:
            raise CaptureError(f"{name}: cannot read: {exc}") from exc
        with f:
            size = os.fstat(f.fileno()).st_size
            if self.sizes is not None:
                size = min(size, self.sizes[name])
            self._segment_size = size
            for item in iter_blocks(f, size):
                self._block_offset = item.offset
                if not isinstance(item, Block):
                    if item.torn:
                        self.torn.append(TornTail(name, item.offset, item.reason))
                        return
                    raise CaptureCorruptError(name, item.offset, item.reason)
                if item.major != FORMAT_MAJOR:
                    raise UnsupportedFormatError(
                        f"{name}: capture format {item.major}.{item.minor} is not readable by this infertap, "
                        f"which reads format {FORMAT_MAJOR}.x (up to {FORMAT_MAJOR}.{FORMAT_MINOR}); "
                        "upgrade infertap to read it"
                    )
                try:
                    payload = decompressor.decompress(item.zframe, max_output_size=_MAX_FRAME)
                except zstandard.ZstdError as exc:
                    raise CaptureCorruptError(name, item.offset, f"zstd: {exc}") from exc
                ref = BlockRef(index, item.offset, zlib.crc32(item.zframe), dictionary) if locate else None
                unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=len(payload) + 1)
                unpacker.feed(payload)
                try:
                    start = 0
                    for record in unpacker:
                        if not isinstance(record, dict) or "type" not in record:
                            raise CaptureCorruptError(name, item.offset, "a record that is not a typed map")
                        if record["type"] == "dictionary":
                            decompressor = _with_dictionary(name, item.offset, record)
                            dictionary = ref
                        if locate:
                            yield record, ref, payload, start
                            start = unpacker.tell()
                        else:
                            yield record
                except (msgpack.UnpackException, ValueError) as exc:
                    raise CaptureCorruptError(name, item.offset, f"msgpack: {exc}") from exc
                if unpacker.tell() != len(payload):
                    raise CaptureCorruptError(name, item.offset, "a record cut short inside a block")


def _with_dictionary(name: str, offset: int, record: dict[str, Any]) -> zstandard.ZstdDecompressor:
    """The decompressor for the frames after a ``dictionary`` record."""
    if record.get("kind") != DICTIONARY_KIND or not isinstance(record.get("data"), bytes):
        raise UnsupportedFormatError(
            f"{name}: a compression dictionary of kind {record.get('kind')!r} at offset {offset} "
            f"is not readable by this infertap (it reads {DICTIONARY_KIND!r})"
        )
    return zstandard.ZstdDecompressor(
        dict_data=zstandard.ZstdCompressionDict(record["data"], dict_type=zstandard.DICT_TYPE_RAWCONTENT)
    )


def read_records(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    return CaptureReader(path).records()


def capture_id_of(directory: Path) -> str | None:
    """The identity of an existing capture (its first segment's header), None when there is none."""
    segments = segment_paths(directory) if directory.is_dir() else []
    if not segments:
        return None
    for record in CaptureReader(segments[0]).records():
        return record.get("capture_id") if record.get("type") == "header" else None
    return None


class _Closing:
    """Sets ``reader.closed_cleanly`` as records go by: every run of the capture ended with a final
    footer. A run killed before its end stays unclosed when another run (an enrich, a second
    record) is appended after it and closes."""

    def __init__(self, reader: CaptureReader) -> None:
        self.reader = reader
        self.run: Any = None
        self.open: set[Any] = set()
        reader.closed_cleanly = False
        reader.open_runs = self.open

    def see(self, record: dict[str, Any]) -> None:
        rtype = record.get("type")
        if rtype == "header":
            self.run = record.get("run_id")
            self.open.add(self.run)
            self.reader.closed_cleanly = False
        elif rtype == "footer" and record.get("final"):
            self.open.discard(self.run)
            self.reader.closed_cleanly = not self.open


class _Run:
    """What one run's records so far say: counted as its writer counts them in its footers."""

    __slots__ = ("awaiting", "damaged", "exchanges", "open_end", "records")

    def __init__(self) -> None:
        self.records = 0  # every record but its dictionaries (and the footer that counts them)
        self.exchanges = 0
        self.awaiting: str | None = None  # a segment ended with a non-final footer: more of the run must follow
        self.open_end: str | None = None  # a segment ended with no footer: the run should end there
        self.damaged = False  # damage already reported: its counts can't agree any more


class _Continuity:
    """Finds records missing between the segments of a capture directory, each reported once as a
    ``Gap`` in ``reader.torn``: a segment file missing from the numbering (a writer takes the next
    free number, so a capture's are consecutive from 0: two writers' segments interleave, a merged
    replay's are renumbered, so the header's own ``segment`` can't be relied on), a segment that
    ends without its footer while its run goes on in a later one (cut short at a block boundary),
    a run whose last segment says more follows and none does, and a footer whose ``records`` or
    ``exchanges`` differs from what the run's segments held."""

    def __init__(self, reader: CaptureReader) -> None:
        self.reader = reader
        self.runs: dict[Any, _Run] = {}
        self.run: _Run | None = None
        self.segment = ""
        self.last: dict[str, Any] | None = None
        self.expected = 0  # the next segment number
        self.torn = 0
        self.counted = True  # no segment file missing: a run's records can be counted from its start
        self.headless: str | None = None  # the latest segment with no header: empty, or torn in it

    def start(self, segment: Path) -> None:
        self.segment, self.run, self.last, self.torn = str(segment), None, None, len(self.reader.torn)
        number = int(segment.name[:6])
        if number != self.expected:
            missing = ", ".join(segment_name(i) for i in range(self.expected, min(number, self.expected + 3)))
            more = f" and {number - self.expected - 3} more" if number - self.expected > 3 else ""
            self._gap(0, f"segment {missing}{more} missing before it")
            self.counted = False  # whose it was is not known: no footer's count can agree now
        self.expected = number + 1

    def see(self, record: dict[str, Any]) -> None:
        rtype = record.get("type")
        if rtype == "header" and self.run is None:
            self.run = self.runs.setdefault(record.get("run_id"), _Run())
            if self.run.open_end is not None and not self.run.damaged:
                self.run.damaged = True
                self._gap_in(
                    self.run.open_end, -1, f"the segment ends without its footer while its run goes on in {self.segment}"
                )
            self.run.awaiting = self.run.open_end = None
        self.last = record
        run = self.run
        if run is None or rtype == "dictionary":
            return
        if rtype == "footer" and self.counted and not run.damaged and isinstance(record.get("records"), int):
            if (record.get("records"), record.get("exchanges", run.exchanges)) != (run.records, run.exchanges):
                run.damaged = True
                self._gap(
                    self.reader._block_offset,
                    f"its run's footer counts {record.get('records')} records and {record.get('exchanges')} exchanges, "
                    f"its segments hold {run.records} and {run.exchanges}",
                )
        run.records += 1
        run.exchanges += rtype == "exchange"

    def end(self) -> None:
        run = self.run
        if run is None:
            self.headless = self.segment  # a writer killed as it began it: any awaiting run's, maybe
            return
        if len(self.reader.torn) > self.torn:
            run.damaged = True  # reported as torn
        elif self.last is not None and self.last.get("type") == "footer":
            run.awaiting = None if self.last.get("final") else self.segment
        else:
            run.open_end = self.segment

    def finish(self) -> None:
        """A run whose last segment here says more follows: its later segments are gone, unless
        they were written since the reader listed the capture (or it reads a snapshot of one)."""
        reader = self.reader
        if reader.sizes is not None or len(segment_paths(reader.path)) > len(reader.segments):
            return
        for run in self.runs.values():
            if run.awaiting is not None and not run.damaged and not (self.headless and self.headless > run.awaiting):
                self._gap_in(run.awaiting, -1, "its footer says the run goes on in a later segment, and none is here")

    def _gap(self, offset: int, reason: str) -> None:
        self._gap_in(self.segment, offset, reason)

    def _gap_in(self, segment: str, offset: int, reason: str) -> None:
        """``offset`` -1: the segment's end (as read)."""
        sizes = self.reader.sizes
        end = sizes[segment] if sizes is not None else os.path.getsize(segment)
        self.reader.torn.append(Gap(segment, end if offset < 0 else offset, reason))
