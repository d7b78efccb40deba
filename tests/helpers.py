from __future__ import annotations

import struct
import zlib
from pathlib import Path

import zstandard

from proxy import CaptureReader


def decompressed_bytes(capture: Path) -> bytes:
    """Every byte a capture holds, decompressed: what a secret must never appear in."""
    out = []
    for segment in CaptureReader(capture).segments:
        with open(segment, "rb") as f:
            out.append(zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True).read())
    return b"".join(out)


def reseal_head(data: bytearray, start: int) -> None:
    """Recompute a block head's own checksum after editing its fields (as a writer of that version would)."""
    from proxy.framing import HEAD_SIZE

    struct.pack_into("<I", data, start + HEAD_SIZE - 4, zlib.crc32(bytes(data[start + 8 : start + HEAD_SIZE - 4])))
