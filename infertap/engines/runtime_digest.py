"""The digest of the runtime serving an engine: the sha256 of its files (its program and the shared
libraries of its own it maps, ``runtime_files.py``), found through the process listening on the
engine's port, when that process is the engine's and not a forwarder in front of it.

Only for an engine on this machine (a loopback URL), and not inside a container (its image digest
is not visible from here). ``snapshot()`` records it among the engine's facts, so it travels with
the capture; ``claim`` falls back to looking it up later, when the capture has none.

A runtime of one file has that file's sha256 (``sha256sum`` of a static binary); of several, the
sha256 of their ``sha256sum`` lines (file names without folders) sorted by file name, so the same
files installed in another folder have the same digest and a changed library changes it.

Hashing reads the whole files (hundreds of MB for vLLM's library), so it runs only where probes
do, off any event loop, and once per file: digests are cached by path, size and mtime.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from infertap.capture.hostfacts import engine_is_local, url_parts
from infertap.capture.redact import Redactor

from .runtime_files import runtime_files

__all__ = ["RuntimeDigest", "file_sha256", "files_sha256", "runtime_digest", "snapshot_facts"]

_REDACTOR = Redactor()


@dataclass(frozen=True, slots=True)
class RuntimeDigest:
    sha256: str | None
    path: str | None  # the file hashed
    what: str  # "binary", "python package ...: its native library"; or why unknown
    pid: int | None = None
    container: str | None = None  # a container runtime's name, when the process runs in one
    port: int | None = None
    files: tuple[str, ...] = ()  # every file hashed, ``path`` first

    def as_dict(self) -> dict[str, object]:
        return {
            "sha256": self.sha256,
            "path": self.path,
            "files": list(self.files),
            "what": self.what,
            "pid": self.pid,
            "container": self.container,
        }

    @property
    def how(self) -> str:
        """How the files were found, for a fact's source."""
        where = f"process {self.pid}, listening on the engine's port {self.port}"
        others = [os.path.basename(f) for f in self.files[1:]]
        if not others:
            return f"sha256 of the {self.what} {self.path} of {where}"
        return (
            f"sha256 of the {self.what} {self.path} and the {len(others)} other engine libraries mapped into"
            f" {where} ({', '.join(others)}): of their sha256sum lines, sorted by file name"
        )


_cache: dict[tuple[str, int, int], str] = {}
_cache_lock = threading.Lock()


def file_sha256(path: str) -> str:
    """The sha256 of a file, computed once per (path, size, mtime) in this process."""
    st = os.stat(path)
    key = (path, st.st_size, st.st_mtime_ns)
    with _cache_lock:
        if key in _cache:
            return _cache[key]
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    with _cache_lock:
        _cache[key] = h.hexdigest()
    return _cache[key]


def files_sha256(files: Sequence[str]) -> str:
    """One file's sha256; of several, the sha256 of their ``sha256sum`` lines (names without
    folders) sorted by name: ``sha256sum FILES | sort -k2 | sha256sum`` in their folder."""
    if len(files) == 1:
        return file_sha256(files[0])
    lines = sorted((os.path.basename(f), file_sha256(f)) for f in files)
    return hashlib.sha256("".join(f"{sha}  {name}\n" for name, sha in lines).encode()).hexdigest()


def _listener(port: int) -> int | None:
    """The process listening on ``port``: its pid, 0 for a listener whose process this user can't see."""
    import psutil

    found = None
    for conn in psutil.net_connections(kind="tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
            if conn.pid:
                return int(conn.pid)
            found = 0
    return found


def _container(pid: int) -> str | None:
    try:
        text = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return None
    for marker in ("docker", "containerd", "kubepods", "libpod"):
        if marker in text:
            return marker
    return None


def _shown(url: str) -> str:
    """``url`` fit for a fact's source: its password or token user redacted."""
    try:
        return _REDACTOR.url(url)
    except ValueError:  # an older capture's "user:[REDACTED]@": redacted already, and unreadable to urlsplit
        return url


def runtime_digest(
    url: str, kind: str | None, engine_host: str | None = None, snapshot_wall: float | None = None
) -> RuntimeDigest:
    """The digest of the engine at ``url`` (of ``kind``). For a capture read later: ``engine_host``
    (the snapshot's hostname) must be this machine, and the process must have started before
    ``snapshot_wall`` (else it is not the process that served the capture)."""
    import psutil

    parts = url_parts(url)  # a capture's URL too, in any form it was recorded in
    if not engine_is_local(url):
        return RuntimeDigest(
            None, None, f"the engine at {_shown(url)} is not on this machine: its binary can't be read from here"
        )
    if engine_host and engine_host != socket.gethostname():
        return RuntimeDigest(None, None, f"the engine ran on {engine_host}, not on this machine ({socket.gethostname()})")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        pid = _listener(port)
    except (psutil.AccessDenied, OSError) as exc:
        return RuntimeDigest(None, None, f"cannot list the processes listening here ({exc})")
    if pid is None:
        return RuntimeDigest(None, None, f"no process listens on port {port} now", port=port)
    if pid == 0:
        why = f"the process listening on port {port} belongs to another user: its binary can't be read as this one"
        return RuntimeDigest(None, None, why, port=port)
    try:
        proc = psutil.Process(pid)
        started, exe, argv = proc.create_time(), proc.exe(), proc.cmdline()
    except (psutil.Error, OSError) as exc:
        return RuntimeDigest(None, None, f"cannot inspect process {pid} on port {port} ({exc})", pid, port=port)
    if snapshot_wall is not None and started > snapshot_wall:
        why = f"process {pid} on port {port} started after the capture's engine snapshot: not the engine that served it"
        return RuntimeDigest(None, None, why, pid, port=port)
    container = _container(pid)
    if container:
        why = f"process {pid} runs in a container ({container}); its image digest is not visible from here"
        return RuntimeDigest(None, None, why, pid, container, port)
    try:
        found = runtime_files(kind, exe, argv, (m.path for m in proc.memory_maps(grouped=True)))
        if isinstance(found, str):
            return RuntimeDigest(None, None, f"process {pid} listening on port {port}: {found}", pid, port=port)
        return RuntimeDigest(files_sha256(found.files), found.files[0], found.what, pid, port=port, files=found.files)
    except (psutil.Error, OSError) as exc:
        return RuntimeDigest(None, None, f"cannot read the runtime of process {pid} ({exc})", pid, port=port)


def snapshot_facts(digest: RuntimeDigest) -> dict[str, dict[str, object]]:
    """The digest as an engine snapshot's facts, each with its source (or why it is unknown)."""
    if digest.sha256 is None:
        return {"runtime_sha256": {"value": None, "source": digest.what}, "runtime_path": {"value": None, "source": digest.what}}
    return {
        "runtime_sha256": {"value": digest.sha256, "source": digest.how},
        "runtime_path": {"value": digest.path, "source": f"the {digest.what} of process {digest.pid}"},
    }
