"""Block framing of a segment file.

A segment is a plain concatenation of zstd frames, so ``zstd -dc`` decodes it. Each data frame is
preceded by a zstd *skippable* frame (which standard zstd tools ignore) carrying infertap's magic,
the format version, the compressed length of the data frame and its CRC32. That makes a segment
self-describing and lets a reader tell a torn tail (a write cut short by a crash) from corruption
in the middle, and name the byte offset of either.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

SKIPPABLE_MAGIC = 0x184D2A5E  # one of zstd's 16 skippable-frame magics
TAG = b"ITAP"
# magic, frame size, tag, major, minor, zlen, crc32 of the zstd frame, crc32 of the head's bytes 8..24
_HEAD = struct.Struct("<II4sHHIII")
HEAD_SIZE = _HEAD.size
_FRAME_SIZE = HEAD_SIZE - 8
#: What every segment's first bytes are: its first block head's magic, frame size and tag.
SEGMENT_START = struct.pack("<II", SKIPPABLE_MAGIC, _FRAME_SIZE) + TAG


def block_head(major: int, minor: int, zframe: bytes) -> bytes:
    fields = struct.pack("<4sHHII", TAG, major, minor, len(zframe), zlib.crc32(zframe))
    return struct.pack("<II", SKIPPABLE_MAGIC, _FRAME_SIZE) + fields + struct.pack("<I", zlib.crc32(fields))


@dataclass(slots=True)
class Block:
    offset: int  # of the block head in the file
    major: int
    minor: int
    zframe: bytes


@dataclass(slots=True)
class Fault:
    """Why reading stopped early. ``torn`` faults are the expected end of a killed writer."""

    offset: int
    reason: str
    torn: bool


def iter_blocks(f: BinaryIO, size: int) -> Iterator[Block | Fault]:
    """Yield each block, then at most one Fault (after which nothing more is read)."""
    offset = 0
    while offset < size:
        head = f.read(HEAD_SIZE)
        if len(head) < HEAD_SIZE:
            yield Fault(offset, f"{size - offset} trailing bytes, shorter than a block head", True)
            return
        magic, frame_size, tag, major, minor, zlen, crc, head_crc = _HEAD.unpack(head)
        if magic != SKIPPABLE_MAGIC or frame_size != _FRAME_SIZE or tag != TAG or zlib.crc32(head[8:-4]) != head_crc:
            yield _bad_head(f, offset, size, head)
            return
        end = offset + HEAD_SIZE + zlen
        if end > size:
            yield Fault(offset, f"block of {zlen} bytes cut short at {size - offset - HEAD_SIZE}", True)
            return
        zframe = f.read(zlen)
        if zlib.crc32(zframe) != crc:
            # A crash can leave the last block with unwritten pages; anywhere else it's damage.
            if end == size:
                yield Fault(offset, "block checksum mismatch", True)
            elif zframe.endswith(b"\0") and _zeros_to(f, size - end):
                yield Fault(
                    offset, f"block checksum mismatch, zero bytes from inside it to the end ({size - end} after it)", True
                )
            else:
                yield Fault(offset, "block checksum mismatch", False)
            return
        yield Block(offset, major, minor, zframe)
        offset = end


def _bad_head(f: BinaryIO, offset: int, size: int, head: bytes) -> Fault:
    """The fault of a block head that is not one. After a power loss a file's size can be saved but
    its last pages not: zeros from a page boundary (inside this head, or before it) to the end.
    That, or a head at the very end (a write cut short), is a torn tail; anything else, damage."""
    after = size - offset - HEAD_SIZE
    if not _zeros_to(f, after):
        return Fault(offset, "no valid infertap block head here", False)
    kept = head.rstrip(b"\0")
    if not kept:
        return Fault(offset, f"{size - offset} zero bytes at the end", True)
    if after == 0:
        return Fault(offset, "no valid infertap block head here", True)
    if kept[: len(SEGMENT_START)] == SEGMENT_START[: len(kept)]:
        return Fault(offset, f"a block head zeroed from its byte {len(kept)}, zero bytes to the end", True)
    return Fault(offset, "no valid infertap block head here", False)


def _zeros_to(f: BinaryIO, count: int) -> bool:
    """Whether the next ``count`` bytes of ``f`` are all zero (read a MiB at a time)."""
    while count > 0:
        piece = f.read(min(count, 1 << 20))
        if not piece or piece.strip(b"\0"):
            return False
        count -= len(piece)
    return True
