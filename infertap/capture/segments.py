"""How a capture's segment files are named and found: ``000000.itap.zst``, ``000001.itap.zst``...

The six-digit index orders a capture's runs; writers (one per recorder) append after the last.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import CaptureError
from .framing import SEGMENT_START

SEGMENT_SUFFIX = ".itap.zst"


def segment_name(index: int) -> str:
    return f"{index:06d}{SEGMENT_SUFFIX}"


def segment_paths(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob(f"*{SEGMENT_SUFFIX}") if p.name[:6].isdigit())


def capture_segments(path: Path) -> list[Path]:
    """The segments of the capture at ``path`` (a folder of them, or one segment file), as the
    reader reads them, or the CaptureError it raises: for what only lists them (the analysis cache's
    key), without importing the reader's zstandard and msgpack."""
    if path.is_dir():
        segments = segment_paths(path)
        if not segments:
            # A folder of shards (captures/ of many recorders) reads as one in stats, sql and export, not here.
            try:
                inner = sorted(str(d) for d in path.iterdir() if d.is_dir() and segment_paths(d))
            except OSError:  # a folder it may not read: said as before
                inner = []
            held = f"; it holds captures, give one of them: {', '.join(inner[:3])}{', ...' if len(inner) > 3 else ''}"
            raise CaptureError(f"{path}: not a capture (no *.itap.zst segments in it{held if inner else ''})")
        return segments
    if path.is_file():
        if not path.name.endswith(SEGMENT_SUFFIX) and not starts_as_segment(path):
            raise CaptureError(f"{path}: not a capture (a segment starts with an infertap block head; this file doesn't)")
        return [path]
    raise CaptureError(f"{path}: no such capture")


def snapshot(path: str | os.PathLike[str]) -> dict[str, int]:
    """Each segment of the capture at ``path`` and its size now: ``CaptureReader``'s ``sizes``."""
    return {str(s): os.path.getsize(s) for s in capture_segments(Path(path))}


def starts_as_segment(path: Path) -> bool:
    """Whether the file's first bytes can begin a segment: empty (just created), or the start of a
    block head's zstd magic (a head cut short is a torn tail; anything else is some other file,
    unless it is named as a segment: then it is a damaged one, CaptureCorruptError at byte 0)."""
    with open(path, "rb") as f:
        first = f.read(len(SEGMENT_START))
    return SEGMENT_START.startswith(first)


def next_segment_index(directory: Path) -> int:
    """The index a new segment of ``directory`` takes: after every existing one."""
    existing = segment_paths(directory)
    return int(existing[-1].name[:6]) + 1 if existing else 0


def cache_refusal(root: Path, given: str, option: str) -> str | None:
    """Why ``root`` can't hold a cache (``given``: where it was named; ``option``: what names another):
    it is a capture's folder or lies in one, so the cache's files would sit among the capture's
    segments, copied, exported or shared with it. None where it can."""
    capture = capture_holding(root)
    if capture is None:
        return None
    return (
        f"{root} ({given}): the cache would lie inside the capture {capture}, its files among the capture's "
        f"segments; nothing was written: give {option} a folder outside any capture"
    )


def capture_holding(path: Path) -> Path | None:
    """The capture folder ``path`` is, or lies inside (the nearest folder of segments): where no
    report, export or replay may write, or the capture's segments would be mixed with its files."""
    for folder in (path, *path.resolve().parents):
        if folder.is_dir() and segment_paths(folder):
            return folder
    return None
