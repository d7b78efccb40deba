"""This process's own peak memory, for benchmarks that run each phase in a fresh process."""

from __future__ import annotations

import resource


def peak_rss_mib() -> float:
    """The peak resident memory of this process since it started (Linux's ``VmHWM``), in MiB.

    Not ``ru_maxrss``: Linux carries that over from the parent through fork and exec, so a phase
    started by a benchmark that once held gigabytes (building ten million exchanges) reported the
    parent's peak instead of its own. Elsewhere, ``ru_maxrss`` is all there is."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class DescendantsPeak:
    """The largest peak resident memory (``VmHWM``) of any process below this one, sampled while it runs.

    ``RUSAGE_CHILDREN`` counts only children waited for: the analysis's decode workers are forked
    from a forkserver (infertap/spawning.py) that this process never waits for, so it read 0 for
    them. A sample reads each descendant's own high-water mark, so only what a worker reaches after
    the last sample before it exits (every ``interval`` seconds) can be missed. Linux only (/proc);
    elsewhere it reads ``RUSAGE_CHILDREN``."""

    def __init__(self, interval: float = 0.1) -> None:
        import threading

        self.interval = interval
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> DescendantsPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def mib(self) -> float:
        if self.peak_kib:
            return self.peak_kib / 1024
        return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def _sample(self) -> None:
        import os

        tree, i = [os.getpid()], 0
        while i < len(tree):
            tree += _children(tree[i])
            i += 1
        for pid in tree[1:]:
            self.peak_kib = max(self.peak_kib, _hwm_kib(pid))


def _children(pid: int) -> list[int]:
    import os

    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as f:
                found += [int(x) for x in f.read().split()]
    except OSError:  # gone, or no /proc
        pass
    return found


def _hwm_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0
