"""Whether a capture's recorder still writes it, and what its unsearched bodies mean to whoever
shares it: said by ``infertap info`` and ``stats`` alike, apart from the capture reader, which
``stats`` on a cached capture does not need."""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any

__all__ = ["recorder_running", "unsearched_warning", "writer_of"]


def writer_of(recorder: Mapping[str, Any], host: Mapping[str, Any], wall: Any) -> tuple[Any, Any, Any]:
    """The pid, machine and start of the process that wrote a run, for ``recorder_running``: its
    recorder's, on its header's machine since the run's start; an import's importer's (the header's
    machine is its traffic's, unknown, and its start the traffic's first request, before the import)."""
    importer = recorder.get("importer")
    if isinstance(importer, Mapping):
        return recorder.get("pid"), importer.get("hostname"), importer.get("wall")
    return recorder.get("pid"), host.get("hostname"), wall


def recorder_running(pid: Any, hostname: Any, wall: Any) -> int | None:
    """``pid`` when the recorder a run's header names (its pid, machine and start) still runs on
    this machine; None when it ended, or runs elsewhere, or can't be told. Pid 1 can't be: it is the
    entrypoint of a container (``docker run --network host`` shares this machine's name), and this
    machine's init, running since boot, would read as that recorder still writing."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1 or hostname != socket.gethostname():
        return None
    import psutil

    try:
        started = psutil.Process(pid).create_time()
    except psutil.AccessDenied:
        return pid  # another user's process: it runs
    except psutil.Error:
        return None
    # A process that started after the run did is another one that got the pid since.
    return pid if not isinstance(wall, (int, float)) or started <= wall + 1.0 else None


def unsearched_warning(unsearched: dict[str, int]) -> str | None:
    """What a capture's unsearched bodies mean to whoever shares it (None: it has none)."""
    if not unsearched["exchanges"]:
        return None
    return (
        f"{unsearched['exchanges']} exchanges keep a body compressed as sent that could not be decoded to be searched "
        f"for credentials ({unsearched['request']} requests, {unsearched['response']} responses: request_body_unsearched, "
        "response_body_unsearched): a credential may be inside those bytes, unredacted; check them before sharing this capture"
    )
