"""Joining a Ray cluster, for the commands that spread their work over one (``replay --ray``,
``export --ray``). Ray is the ``scale`` extra: it is imported here, on use, never for ``--help``."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from typing import Any

from .errors import InfertapError


@contextlib.contextmanager
def ray_cluster(address: str, *, command: str, untouched: str, error: type[InfertapError]) -> Iterator[Any]:
    """The ``ray`` module, joined to the cluster at ``address`` ("": ``RAY_ADDRESS``, else a new local
    cluster), and left afterwards if joined here; a process already joined keeps its cluster.

    Failures raise ``error``, naming ``command`` (what needs Ray) and ending with ``untouched`` (what
    was not done yet: "nothing was sent")."""
    try:
        import ray
    except ImportError:
        raise error(f"{command} needs Ray: pip install 'infertap[scale]'") from None
    started_here = not ray.is_initialized()
    if started_here:
        _check_reachable(address, untouched, error)
        try:
            ray.init(address=address or None, log_to_driver=False, configure_logging=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            shown = address or "RAY_ADDRESS or a new local one"
            raise error(f"cannot join the Ray cluster at {shown}: {exc}; {untouched}") from exc
    try:
        yield ray
    finally:
        if started_here:
            ray.shutdown()


def _check_reachable(address: str, untouched: str, error: type[InfertapError]) -> None:
    """Fail in seconds on a cluster address nobody answers at: Ray itself retries for minutes."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return  # "", "auto", "local": Ray's own discovery
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as exc:
        raise error(f"no Ray cluster answers at {address} ({exc}); {untouched}") from exc
