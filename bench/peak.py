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
