"""The cyclic garbage collector held off while a capture is read whole.

Reading a capture (the analysis's decode, a replay's preparation) allocates millions of
short-lived objects and keeps one or more per exchange until it ends, in no reference cycle worth
finding; the collector would rescan every object alive at each of its passes (a tenth of a
replay's preparation at 100,000 exchanges).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """The collector waits until the block ends (as it was before, if it was already off)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


__all__ = ["no_cyclic_gc"]
