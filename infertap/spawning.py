"""Worker processes: whether they may be started from here (before the decode or a replay's
preparation starts any), and how each ends with the process that started it.

Workers are started by ``spawn`` (the caller may have threads: DuckDB's, a writer's), and a spawned
process imports the caller's main script again to find what it runs: every statement of the
script's top level runs a second time in each worker, unless it sits under
``if __name__ == "__main__":``. A script that calls infertap from its unguarded top level would
have its earlier statements (a replay, a file written) run again by each worker, and the workers
then fail. Such a caller gets the work done in its own process instead.

Where the platform has it, the workers are forked from a ``forkserver`` that imported the workers'
modules once (``worker_context``): a spawned worker imports infertap, NumPy, Arrow and msgspec
anew, about 0.4 s of CPU each, a tenth of a cold decode of 10,000 agent exchanges in two parts.
The server is a fresh process too (none of the caller's threads), so forking from it is as safe as
spawning.
"""

from __future__ import annotations

import ast
import multiprocessing
import os
import sys
import threading
from pathlib import Path
from types import FrameType


def workers_can_start() -> bool:
    """False when this call comes from the unguarded top level of the main script (see above);
    True otherwise: from a function called under the guard, a package's ``__main__`` (spawn doesn't
    run those again), an interactive session or a notebook, or a script whose text can't be read."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or path is None or Path(path).name == "__main__.py":
        return True
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and not (frame.f_globals is vars(main) and frame.f_code.co_name == "<module>"):
        frame = frame.f_back
    if frame is None:  # the script's top level is not running: called later (a thread, atexit)
        return True
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return True
    line = frame.f_lineno
    statement = next((s for s in tree.body if _spans(s, line)), None)
    # Under the guard's body, not its else (which is what runs in a worker).
    return isinstance(statement, ast.If) and _main_guard(statement) and any(_spans(s, line) for s in statement.body)


def _spans(statement: ast.stmt, line: int | None) -> bool:
    return line is not None and statement.lineno <= line <= (statement.end_lineno or statement.lineno)


def _main_guard(statement: ast.stmt) -> bool:
    """``if __name__ == "__main__":`` (either way round)."""
    if not isinstance(statement, ast.If) or not isinstance(test := statement.test, ast.Compare):
        return False
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, *test.comparators]
    names = [s.id for s in sides if isinstance(s, ast.Name)]
    values = [s.value for s in sides if isinstance(s, ast.Constant)]
    return names == ["__name__"] and values == ["__main__"]


def worker_context(*preload: str) -> multiprocessing.context.BaseContext:
    """How to start workers: forked from a ``forkserver`` that imported ``preload`` (the modules the
    workers' functions live in) once, or ``spawn`` where there is none. The server, and what it
    imported, stays for the process's later pools; asked again, it keeps its first ``preload``."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(preload))  # no effect once the server runs
    return context


def exit_with_parent() -> None:
    """A worker process's initializer: end when the process that started it ends. A worker doesn't
    otherwise notice (a killed ``infertap stats`` left its workers decoding for minutes into a folder
    gone)."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        parent.join()  # returns when the parent has ended, however it ended
        os._exit(1)

    threading.Thread(target=watch, name="infertap-parent-watch", daemon=True).start()


__all__ = ["exit_with_parent", "worker_context", "workers_can_start"]
