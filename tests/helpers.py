from __future__ import annotations

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
