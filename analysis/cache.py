"""Decoded captures kept on disk as Parquet, so that a capture is decoded once, not on every query.

Layout: ``<root>/captures/<hash of the capture's absolute path>/<signature>/<table>.parquet`` plus
``meta.json``. The signature hashes the segment names, sizes and mtimes and the decoder's version:
appending a run, a recorder still writing, or a newer infertap gives a new signature, hence a fresh
decode; the older version is then removed, or when the last analysis still reading it ends (``hold``).
A decode is written to a temporary folder and renamed
into place, so a crash or a concurrent reader never sees half a cache entry. Folders are created
owner-only: the tables hold prompts and outputs, as the capture does.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infertap.capture.segments import cache_refusal, capture_segments
from infertap.errors import InfertapError
from infertap.spawning import workers_can_start

from .decode_version import DECODE_VERSION
from .decoding import (
    carried,
    cut_requests_warning,
    decode_capture,
    decode_pool,
    mislabelled_warning,
    repeats_warning,
    table_files,
    unattached_warning,
    unwrap,
)
from .errors import AnalysisError

ENV = "INFERTAP_CACHE"


def cache_root(explicit: str | os.PathLike[str] | None = None) -> Path:
    """``explicit``, else ``$INFERTAP_CACHE``, else ``~/.cache/infertap``: an AnalysisError when it
    is a capture's folder or lies in one, before anything is written there."""
    if explicit is not None:
        root, given = Path(explicit), "--cache-dir"
    elif os.environ.get(ENV):
        root, given = Path(os.environ[ENV]), f"${ENV}"
    else:
        root, given = Path.home() / ".cache" / "infertap", "the default cache"
    _outside_captures(root.resolve(), given)  # one entry a folder, whatever the working directory
    return root


@functools.lru_cache(maxsize=64)  # a refusal raises, so only a root found outside is remembered
def _outside_captures(root: Path, given: str) -> None:
    """Refuses a cache inside a capture: its Parquet files would sit among the capture's segments,
    to be exported or copied with it (and its entries removed by a later decode)."""
    refused = cache_refusal(root, given, f"--cache-dir (or ${ENV})")
    if refused is not None:
        raise AnalysisError(refused)


def _alive(pid: str) -> bool:
    """Whether the process that named a ``.tmp-<pid>-*`` folder still runs (it is decoding into it)."""
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:  # someone else's: running
        return True
    return True


def signature(capture: Path) -> str:
    """What the cache entry of a capture is keyed on: its segments' names, sizes, mtimes, inodes
    and ctimes (a segment rewritten at the same size with its mtime put back still has a new ctime)."""
    parts: list[Any] = [DECODE_VERSION]
    for segment in capture_segments(capture):
        st = segment.stat()
        parts.append([segment.name, st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns])
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:20]


@dataclass(frozen=True)
class CachedCapture:
    """A capture's decoded tables on disk, and whether this call had to decode them."""

    capture: Path  # absolute
    folder: Path
    meta: dict[str, Any]
    decoded: bool

    def tables(self, name: str) -> list[Path]:
        """The Parquet files of table ``name``: one, or one per part of a decode in parts (decoding.py)."""
        return table_files(self.folder, name)

    @property
    def torn(self) -> list[str]:
        return list(self.meta.get("torn") or ())

    @property
    def repeated(self) -> str | None:
        """Said when exchanges of this capture share an id (the tables name the later ones apart), or
        enrichments of it are attached to none."""
        r = self.meta.get("repeated_ids")
        if r:
            return repeats_warning(self.capture, r)
        n = self.meta.get("unattached_enrichments")
        return unattached_warning(self.capture, n) if n else None

    @property
    def mislabelled(self) -> str | None:
        """Said where request bodies are plain JSON under a content-encoding they aren't in."""
        n = self.meta.get("mislabelled_requests")
        return mislabelled_warning(self.capture, n) if n else None

    @property
    def cut_requests(self) -> str | None:
        """Said where compressed request bodies were recorded cut short inside their stream."""
        n = self.meta.get("cut_requests")
        return cut_requests_warning(self.capture, n) if n else None

    def private(self) -> bool:
        """Whether the entry and the folders above it, up to the cache root, are this user's and
        writable by no one else: only then may it keep what is read back as Python objects
        (compare's summaries)."""
        uid = getattr(os, "getuid", None)
        if uid is None:  # no POSIX owners to check
            return False
        try:
            for folder in (self.folder, *list(self.folder.parents)[:3]):  # entry, capture, captures/, root
                st = folder.stat()
                if st.st_uid != uid() or st.st_mode & 0o022:
                    return False
        except OSError:
            return False
        return True


def _mkdir(path: Path) -> None:
    """Create ``path`` and any missing parents owner-only (``mkdir(parents=True)`` would not)."""
    for folder in reversed([p for p in (path, *path.parents) if not p.exists()]):
        folder.mkdir(mode=0o700, exist_ok=True)


def _place(capture: str | os.PathLike[str], root: str | os.PathLike[str] | None) -> tuple[Path, Path, str]:
    path = Path(capture).resolve()
    home = cache_root(root) / "captures" / hashlib.sha256(str(path).encode()).hexdigest()[:20]
    return path, home, signature(path)


def lookup(capture: str | os.PathLike[str], root: str | os.PathLike[str] | None = None) -> CachedCapture | None:
    """The current cache entry of ``capture``, or None when it must be decoded."""
    path, home, sig = _place(capture, root)
    meta_file = home / sig / "meta.json"
    if meta_file.exists():
        return CachedCapture(path, home / sig, json.loads(meta_file.read_text()), decoded=False)
    return None


def cached_capture(
    capture: str | os.PathLike[str], root: str | os.PathLike[str] | None = None, *, workers: int = 1
) -> CachedCapture:
    """The decoded tables of ``capture``, decoding it first when the cache has no current entry (a
    large capture in up to ``workers`` processes, decoding.py)."""
    found = lookup(capture, root)
    if found is not None:
        return found
    path, home, sig = _place(capture, root)
    target = home / sig
    meta_file = target / "meta.json"
    _mkdir(home)
    tmp = home / f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        _mkdir(tmp)
        meta = decode_capture(path, tmp, capture=str(path), workers=workers)
        meta["signature"] = sig
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        try:
            os.rename(tmp, target)
        except OSError:  # another process put the same entry in place first
            if not meta_file.exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for stale in home.iterdir():  # older versions of this capture (unless read), and decodes whose process is gone
        if stale.name == sig:
            continue
        if stale.name.startswith(".tmp-") and _alive(stale.name.split("-")[1]) or _read(stale):
            continue
        shutil.rmtree(stale, ignore_errors=True)
    return CachedCapture(path, target, meta, decoded=True)


_READER = ".reader-"


class Gone(Exception):
    """A cache entry removed (by a newer decode of its capture) before it could be held."""


def hold(entry: CachedCapture) -> Path | None:
    """Marks ``entry`` as read by this process (an open ``sql`` session, a report being made) so that
    a newer decode of its capture, after an append, leaves it in place until ``release``. None
    where the entry can't be marked (a cache this user may read, not write): it is read as is."""
    marker = entry.folder / f"{_READER}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        marker.touch(mode=0o600, exist_ok=False)
    except FileNotFoundError:
        raise Gone(entry.folder) from None
    except OSError:
        return None
    if not (entry.folder / "meta.json").exists():  # removed between the lookup and the touch
        shutil.rmtree(entry.folder, ignore_errors=True)
        raise Gone(entry.folder)
    return marker


def release(entry: CachedCapture, marker: Path | None) -> None:
    """Ends ``hold``; an entry a newer decode left in place for this reader alone goes now."""
    if marker is None:
        return
    marker.unlink(missing_ok=True)
    try:
        current = signature(entry.capture)
    except (InfertapError, OSError):
        return  # the capture is gone or unreadable: the entry stays, as the cache keeps any other
    if entry.folder.name != current and not _read(entry.folder):
        shutil.rmtree(entry.folder, ignore_errors=True)


def _read(entry: Path) -> bool:
    """Whether a live process holds the entry (``hold``); a dead one's marker is forgotten."""
    try:
        markers = [p for p in entry.iterdir() if p.name.startswith(_READER)]
    except OSError:
        return False
    return any(_alive(m.name[len(_READER) :].split("-")[0]) for m in markers)


def cached_captures(
    captures: Iterable[str | os.PathLike[str]],
    root: str | os.PathLike[str] | None = None,
    *,
    workers: int | None = None,
    progress: Callable[[CachedCapture], None] | None = None,
) -> list[CachedCapture]:
    """Each capture's entry, in order; those not cached are decoded, several at once in worker
    processes (decoding is CPU-bound Python, and shards are independent)."""
    paths = list(captures)
    entries: list[CachedCapture | None] = [lookup(p, root) for p in paths]
    for entry in entries:
        if entry is not None and progress is not None:
            progress(entry)
    missing = [i for i, e in enumerate(entries) if e is None]
    allowed = workers or os.cpu_count() or 1
    if missing and allowed > 1 and not workers_can_start():  # read the script only when there is a decode to start
        allowed = 1
    workers = min(allowed, len(missing))
    if workers <= 1:  # one capture to decode (a large one in parts, with every worker allowed), or one worker
        for i in missing:
            entries[i] = cached_capture(paths[i], root, workers=allowed)
            if progress is not None:
                progress(entries[i])  # type: ignore[arg-type]
        return entries  # type: ignore[return-value]
    # not fork: the calling process may have threads (DuckDB's, a writer's); see worker_context
    with decode_pool(workers, __name__) as pool:
        futures = {pool.submit(_decode_in_worker, str(paths[i]), str(cache_root(root))): i for i in missing}
        try:
            for future in as_completed(futures):
                entry = unwrap(future.result())
                entries[futures[future]] = entry
                if progress is not None:
                    progress(entry)
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise
    return entries  # type: ignore[return-value]


def _decode_in_worker(path: str, root: str) -> CachedCapture | tuple[Any, ...]:
    try:
        return cached_capture(path, root)
    except InfertapError as exc:
        return carried(exc)
