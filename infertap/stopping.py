"""The signals that end a recording or a replay cleanly (``record``, ``mitm``, ``replay``): one rule for all."""

from __future__ import annotations

import signal


def stop_signals() -> tuple[signal.Signals, ...]:
    """Ctrl-C, ``kill``, and the terminal closing (SIGHUP): each ends the run with its capture closed
    and what was in flight recorded; SIGHUP only where it isn't ignored (``nohup`` keeps it running).
    Left to its default, SIGHUP would kill the process before the capture's footer."""
    hangup = () if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN else (signal.SIGHUP,)
    return (signal.SIGINT, signal.SIGTERM, *hangup)
