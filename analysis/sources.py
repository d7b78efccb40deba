"""Which captures a command line names: capture directories, segment files, globs, and folders
holding several captures (one per proxy process: captures shard naturally)."""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from infertap.capture.errors import CaptureError
from infertap.capture.segments import SEGMENT_SUFFIX, capture_holding, capture_segments, segment_paths

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
    if not _is_glob(text):
        return [Path(text)]
    matches = [Path(m) for m in sorted(glob.glob(text))]
    if not matches:
        raise NoCapturesError(f"{text}: no file or directory matches")
    return matches


def _is_glob(text: str) -> bool:
    """Whether ``text`` is a pattern to expand: a literal ``run-[1]`` that exists is taken as it is."""
    return glob.has_magic(text) and not Path(text).exists()


def one_path(spec: str | os.PathLike[str], keep: Callable[[Path], bool] | None = None) -> One:
    """The one path ``spec`` names, for an argument that takes one capture (or sweep): a glob takes
    the one match holding a capture (or that ``keep`` accepts: ``report``'s sweeps) and leaves out the
    rest, as ``locate_captures`` does for ``stats`` (a ``run-notes.txt`` beside ``run-a/``).

    Raises NoCapturesError when it names no existing path, or a glob matches no capture or several.
    """
    text = os.fspath(spec)
    matches = expand(spec)
    for match in matches:
        if not match.exists():
            raise NoCapturesError(f"{match}: no such capture")
    if not _is_glob(text):
        return One(matches[0])
    kept: list[Path] = []
    left: list[LeftOut] = []
    for match in matches:
        captures, why = _captures_at(match, globbed=True)
        if why is None or (keep is not None and keep(match)):
            kept.append(match)
        else:
            left.append(LeftOut(text, match, why.removeprefix(f"{match}: ")))
    if not kept:
        said = "; ".join(f"{x.path}: {x.why}" for x in left[:3]) + ("; ..." if len(left) > 3 else "")
        raise NoCapturesError(f"{text}: matches no capture ({said})")
    if len(kept) > 1:
        shown = ", ".join(os.fspath(m) for m in kept[:3]) + (", ..." if len(kept) > 3 else "")
        if not left:
            raise NoCapturesError(f"{text}: matches {len(kept)} paths ({shown}); name one")
        raise NoCapturesError(f"{text}: matches {len(kept)} captures ({shown}) besides {len(left)} holding none; name one")
    return One(kept[0], left)


@dataclass(frozen=True)
class LeftOut:
    """A path a glob matched that holds no capture (notes beside the runs, an empty folder): left
    out of the captures the glob names, and said, rather than the whole command refused for it."""

    pattern: str
    path: Path
    why: str

    def __str__(self) -> str:
        return f"{self.pattern}: left out {self.path}: {self.why}"

    def as_json(self) -> dict[str, str]:
        """As every ``--json`` lists it (``stats``, ``claim``, ``info``): ``pattern``, ``path``, ``why``."""
        return {"pattern": self.pattern, "path": str(self.path), "why": self.why}


@dataclass
class One:
    """The path an argument that takes one capture names, and the matches of its glob left out."""

    path: Path
    left_out: list[LeftOut] = field(default_factory=list)


@dataclass
class Found:
    """The captures some arguments name, and the matches of their globs that were left out."""

    captures: list[Path] = field(default_factory=list)
    left_out: list[LeftOut] = field(default_factory=list)


def find_captures(specs: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Resolve paths, globs and folders of captures into capture paths, each once, in the order
    given; a glob's matches that hold no capture are left out (``locate_captures`` says which).

    Raises NoCapturesError naming the argument that named no capture.
    """
    return locate_captures(specs).captures


def locate_captures(specs: Iterable[str | os.PathLike[str]]) -> Found:
    """The captures ``specs`` name (as ``find_captures``), and each match of a glob left out with why.

    A path named as it is must be a capture, or a folder holding some; a glob takes the captures it
    matches and leaves out the rest (a ``run-notes.txt`` beside ``run-*``), but not all of them.
    Raises NoCapturesError naming the argument that named no capture.
    """
    found = Found()
    seen: set[Path] = set()
    for spec in specs:
        matches, globbed = expand(spec), _is_glob(os.fspath(spec))
        left: list[LeftOut] = []
        for match in matches:
            if not match.exists():
                raise NoCapturesError(f"{match}: no such capture")
            captures, why = _captures_at(match, globbed)
            if why is not None:
                if not globbed:
                    raise NoCapturesError(why)
                left.append(LeftOut(os.fspath(spec), match, why.removeprefix(f"{match}: ")))
                continue
            for capture in captures:
                _text_path(capture)
                key = capture.resolve()
                if key not in seen:
                    seen.add(key)
                    found.captures.append(capture)
        if left and len(left) == len(matches):
            said = "; ".join(f"{x.path}: {x.why}" for x in left[:3]) + ("; ..." if len(left) > 3 else "")
            raise NoCapturesError(f"{os.fspath(spec)}: matches no capture ({said})")
        found.left_out.extend(left)
    if not found.captures:
        raise NoCapturesError("no capture given")
    return found


def _captures_at(path: Path, globbed: bool) -> tuple[list[Path], str | None]:
    """The captures at ``path`` (itself, or those in a folder of them), or why it holds none. A file
    is one where the reader reads it as one; a glob's match also not where it is empty and not named
    as a segment (an empty ``run-notes.txt`` is no capture, though a segment just created is empty)."""
    if path.is_dir():
        if segment_paths(path):
            return [path], None
        inner = _captures_under(path)
        return inner, None if inner else f"{path}: not a capture, and no capture in it (no *{SEGMENT_SUFFIX} segments)"
    try:
        capture_segments(path)
        if globbed and not path.name.endswith(SEGMENT_SUFFIX) and path.stat().st_size == 0:
            return [], f"{path}: not a capture (an empty file not named *{SEGMENT_SUFFIX})"
    except CaptureError as exc:
        return [], str(exc)
    except OSError as exc:  # it can't be read: one named as a segment is kept, for the reader to say so
        return [], f"{path}: not a capture (can't be read: {exc.strerror or exc})"
    return [path], None


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
