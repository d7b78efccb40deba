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
from .framing import SEGMENT_START, Block, iter_blocks
from .records import DICTIONARY_KIND, FORMAT_MAJOR, FORMAT_MINOR
from .segments import SEGMENT_SUFFIX, segment_paths

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


def starts_as_segment(path: Path) -> bool:
    """Whether the file's first bytes can begin a segment: empty (just created), or the start of a
    block head's zstd magic (a head cut short is a torn tail; anything else is some other file,
    unless it is named as a segment: then it is a damaged one, CaptureCorruptError at byte 0)."""
    with open(path, "rb") as f:
        first = f.read(len(SEGMENT_START))
    return SEGMENT_START.startswith(first)


class CaptureReader:
    """Streams the records of a capture in write order.

    After iterating, ``torn`` lists torn tails found and ``closed_cleanly`` says whether every run
    ended with its final footer.
    """

    def __init__(self, path: str | os.PathLike[str], sizes: Mapping[str, int] | None = None) -> None:
        """``sizes``: read each segment only up to this many bytes, and no segment it doesn't name (a
        snapshot of a capture a recorder is still writing, ``snapshot(path)``): readers that must
        agree on the records, in several processes, read the same ones."""
        self.path = Path(path)
        if self.path.is_dir():
            self.segments = segment_paths(self.path)
            if not self.segments:
                raise CaptureError(f"{self.path}: not a capture (no *.itap.zst segments in it)")
        elif self.path.is_file():
            if not self.path.name.endswith(SEGMENT_SUFFIX) and not starts_as_segment(self.path):
                raise CaptureError(
                    f"{self.path}: not a capture (a segment starts with an infertap block head; this file doesn't)"
                )
            self.segments = [self.path]
        else:
            raise CaptureError(f"{self.path}: no such capture")
        self.sizes = dict(sizes) if sizes is not None else None
        if self.sizes is not None:
            self.segments = [s for s in self.segments if str(s) in self.sizes]
        self.torn: list[TornTail] = []
        self.closed_cleanly = False
        self._decompressors: dict[BlockRef | None, zstandard.ZstdDecompressor] = {}  # read_block's, by dictionary

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self.records()

    def records(self) -> Iterator[dict[str, Any]]:
        self.torn = []
        closing = _Closing(self)
        for index, segment in enumerate(self.segments):
            for record in self._segment_records(index, segment, False):
                closing.see(record)
                yield record

    def exchanges(self) -> Iterator[dict[str, Any]]:
        return (r for r in self.records() if r.get("type") == "exchange")

    def located(self) -> Iterator[tuple[dict[str, Any], BlockRef, bytes, int]]:
        """``records()``, each with where it lies: its block (``read_block`` reads it again), the
        block's decompressed bytes and the offset in them at which the record's own bytes start.
        For readers that keep a record's place rather than the record (replay's request bodies)."""
        self.torn = []
        closing = _Closing(self)
        for index, segment in enumerate(self.segments):
            for located in self._segment_records(index, segment, True):
                closing.see(located[0])
                yield located

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
            for item in iter_blocks(f, size):
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


def snapshot(path: str | os.PathLike[str]) -> dict[str, int]:
    """Each segment of the capture at ``path`` and its size now: ``CaptureReader``'s ``sizes``."""
    return {str(s): os.path.getsize(s) for s in CaptureReader(path).segments}


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

    def see(self, record: dict[str, Any]) -> None:
        rtype = record.get("type")
        if rtype == "header":
            self.run = record.get("run_id")
            self.open.add(self.run)
            self.reader.closed_cleanly = False
        elif rtype == "footer" and record.get("final"):
            self.open.discard(self.run)
            self.reader.closed_cleanly = not self.open
