"""Which captures a command line names: capture directories, segment files, globs, and folders
holding several captures (one per proxy process: captures shard naturally)."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable
from pathlib import Path

from infertap.capture.segments import SEGMENT_SUFFIX, capture_holding, segment_paths

from .errors import AnalysisError, NoCapturesError


def _is_capture_dir(path: Path) -> bool:
    return bool(segment_paths(path))


def _captures_under(folder: Path) -> list[Path]:
    """Capture directories below ``folder``, in name order (a capture's own subfolders aren't searched)."""
    found: list[Path] = []
    for root, dirs, _files in os.walk(folder):
        dirs.sort()
        here = Path(root)
        if _is_capture_dir(here):
            found.append(here)
            dirs.clear()
    return found


def expand(spec: str | os.PathLike[str]) -> list[Path]:
    """The paths ``spec`` names: itself when it exists or holds no glob characters, else what it
    matches, in name order. Expanded here because a quoted glob reaches us as the shell left it.

    Raises NoCapturesError when a glob matches nothing.
    """
    text = os.fspath(spec)
    if Path(text).exists() or not glob.has_magic(text):  # a literal ``run-[1]`` that exists is taken as it is
        return [Path(text)]
    matches = [Path(m) for m in sorted(glob.glob(text))]
    if not matches:
        raise NoCapturesError(f"{text}: no file or directory matches")
    return matches


def one_path(spec: str | os.PathLike[str]) -> Path:
    """The one path ``spec`` names (a glob matching one), for an argument that takes one capture or sweep.

    Raises NoCapturesError when it names no existing path or several.
    """
    matches = expand(spec)
    if len(matches) > 1:
        shown = ", ".join(os.fspath(m) for m in matches[:3]) + (", ..." if len(matches) > 3 else "")
        raise NoCapturesError(f"{os.fspath(spec)}: matches {len(matches)} paths ({shown}); name one")
    if not matches[0].exists():
        raise NoCapturesError(f"{matches[0]}: no such capture")
    return matches[0]


def find_captures(specs: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Resolve paths, globs and folders of captures into capture paths, each once, in the order given.

    Raises NoCapturesError naming the argument that matched nothing.
    """
    out: list[Path] = []
    seen: set[Path] = set()
    for spec in specs:
        for match in expand(spec):
            if not match.exists():
                raise NoCapturesError(f"{match}: no such capture")
            if match.is_file():
                captures = [match]
            elif _is_capture_dir(match):
                captures = [match]
            else:
                captures = _captures_under(match)
                if not captures:
                    raise NoCapturesError(f"{match}: not a capture, and no capture in it (no *{SEGMENT_SUFFIX} segments)")
            for capture in captures:
                _text_path(capture)
                key = capture.resolve()
                if key not in seen:
                    seen.add(key)
                    out.append(capture)
    if not out:
        raise NoCapturesError("no capture given")
    return out


def _text_path(capture: Path) -> None:
    """Refuses a capture whose path is not UTF-8: the analysis keeps each capture's path as text
    (its cache key, the ``capture`` column), which such a name can't be written as."""
    try:
        os.fspath(capture).encode()
    except UnicodeEncodeError:
        shown = os.fspath(capture).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise NoCapturesError(f"{shown}: the capture's path is not UTF-8, which the analysis needs: rename it") from None


def refuse_inside_capture(folder: Path, what: str) -> None:
    """An AnalysisError when ``folder`` is a capture or lies inside one: ``what`` (a report, an
    export) written there would mix its files with the capture's segments."""
    capture = capture_holding(folder)
    if capture is not None:
        raise AnalysisError(
            f"{folder}: inside the capture {capture} (its segments would be overwritten or mixed): write {what} elsewhere"
        )
