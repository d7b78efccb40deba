"""How a capture's segment files are named and found: ``000000.itap.zst``, ``000001.itap.zst``...

The six-digit index orders a capture's runs; writers (one per recorder) append after the last.
"""

from __future__ import annotations

from pathlib import Path

SEGMENT_SUFFIX = ".itap.zst"


def segment_name(index: int) -> str:
    return f"{index:06d}{SEGMENT_SUFFIX}"


def segment_paths(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob(f"*{SEGMENT_SUFFIX}") if p.name[:6].isdigit())


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
