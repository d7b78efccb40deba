"""The signals that end a run cleanly (``record``, ``mitm``, ``replay``, ``demo``): one rule for all."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType


def stop_signals() -> tuple[signal.Signals, ...]:
    """Ctrl-C, ``kill``, and the terminal closing (SIGHUP): each ends the run with its capture closed
    and what was in flight recorded; SIGHUP only where it isn't ignored (``nohup`` keeps it running).
    Left to its default, SIGHUP would kill the process before the capture's footer."""
    hangup = () if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN else (signal.SIGHUP,)
    return (signal.SIGINT, signal.SIGTERM, *hangup)


@contextlib.contextmanager
def interrupting() -> Iterator[None]:
    """Within it, SIGTERM and SIGHUP raise KeyboardInterrupt, as Ctrl-C does: for a command whose
    ``finally`` blocks and context managers stop what it started (the demo's engines). Left to their
    defaults, SIGTERM and SIGHUP ended the process at once and its engines lived on, orphaned.
    The handlers before it are restored after; in a thread other than the main one it does nothing
    (only the main thread may set them)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, interrupt) for sig in stop_signals() if sig != signal.SIGINT}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
