"""Child processes that end with the process that started them, however it ends.

An engine or recorder that ``infertap.launch`` starts runs in a process of its own. Stopped by a
signal it handles, infertap stops it on the way out; SIGKILLed (``kill -9``, the OOM killer, a CI
runner tearing the job down), infertap runs nothing more, and the engine lived on, orphaned, holding
its port and memory. On Linux the kernel tells the child instead (``PR_SET_PDEATHSIG``): it gets
SIGTERM when its launcher dies and shuts down as it does on ``end`` (a recorder closes its capture;
vLLM takes its engine-core and worker processes with it).

Two details make that safe:

- The setting is made in the child, between fork and exec. Popen's ``preexec_fn`` runs Python there,
  which can deadlock when the parent has other threads (DuckDB's, a capture writer's); the child
  execs a small Python first (``_TETHER``) that makes the setting, then execs the program (the
  setting survives exec).
- The kernel signals the child when the *thread* that forked it ends, not the process: a child
  started from a pool's thread would be killed with that thread. Every child is forked from one
  thread that lives as long as the process.

Each child also leads a process group of its own, so that ``end`` reaches what it started in turn
(vLLM's engine core) when the child itself has to be killed, and a Ctrl-C on the terminal reaches
infertap alone, which stops its children in order (the recorder before the engine it records).
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import IO, Any

#: Run as ``python -I -S -c _TETHER LAUNCHER_PID PROGRAM ARGS...``: PR_SET_PDEATHSIG (1) to SIGTERM,
#: then the program. A launcher already gone before the setting was made (its pid is no longer the
#: parent's) would never send it: the child ends at once instead.
_TETHER = """\
import ctypes, os, signal, sys
ctypes.CDLL(None).prctl(1, signal.SIGTERM)
if os.getppid() != int(sys.argv[1]):
    sys.exit(1)
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as exc:
    sys.exit(f"{sys.argv[2]}: {exc.strerror}")
"""

Job = tuple[Callable[[], Any], "Future[Any]"]
_jobs: queue.SimpleQueue[Job] | None = None
_jobs_lock = threading.Lock()


def _spawner(jobs: queue.SimpleQueue[Job]) -> None:
    while True:
        run, done = jobs.get()
        try:
            done.set_result(run())
        except BaseException as exc:  # handed to the caller, which raises it
            done.set_exception(exc)


def _forget_spawner() -> None:
    """A forked child has no spawner thread, only its queue: it starts its own."""
    global _jobs
    _jobs = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_spawner)


def _in_spawner(run: Callable[[], Any]) -> Any:
    """``run()`` in the thread that lives as long as the process."""
    global _jobs
    with _jobs_lock:
        if _jobs is None:
            _jobs = queue.SimpleQueue()
            threading.Thread(target=_spawner, args=(_jobs,), name="infertap-spawner", daemon=True).start()
        jobs = _jobs
    done: Future[Any] = Future()
    jobs.put((run, done))
    return done.result()


def start(argv: Sequence[str], *, output: IO[bytes], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """``argv`` in a process that ends with this one (on Linux) and leads its own process group;
    its output to ``output``, no input."""
    argv = [os.fspath(a) for a in argv]
    if sys.platform == "linux":
        argv = [sys.executable, "-I", "-S", "-c", _TETHER, str(os.getpid()), *argv]

    def popen() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            argv, stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True
        )

    return _in_spawner(popen)


def end(popen: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
    """Stop a child of ``start``: ``sig`` to it, SIGKILL to its group past ``timeout``; then what
    else of its group is left (processes it started and didn't end) gets ``timeout`` to go before
    SIGKILL. Returns the child's exit status."""
    if popen.poll() is None:
        popen.send_signal(sig)
        try:
            popen.wait(timeout)
        except subprocess.TimeoutExpired:
            _signal_group(popen.pid, signal.SIGKILL)
            popen.wait()
    deadline = time.monotonic() + (0 if sig == signal.SIGKILL else timeout)
    while _signal_group(popen.pid, 0) and time.monotonic() < deadline:
        time.sleep(0.1)
    _signal_group(popen.pid, signal.SIGKILL)
    return popen.returncode


def _signal_group(pgid: int, sig: int) -> bool:
    """``sig`` to the process group; False where none of it is left (or groups aren't known here)."""
    if not hasattr(os, "killpg"):
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
        return True
    return False


__all__ = ["end", "start"]
