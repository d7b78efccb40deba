"""The ``math`` grader: answers parsed and compared by math-verify, the grader of lighteval and
open-r1 (``parse``, then ``verify(gold, answer)``), so that a score here is the score they give.

math-verify is the ``math`` extra. Its timeouts are ``signal.alarm``: they work in the main thread
only (elsewhere its ``parse`` and ``verify`` raise), so off the main thread (a program that runs
``compare`` in a worker thread) each call runs in a thread of its own that is given up at the same
timeout (``_bounded``). A reading or comparison given up is no answer, and counted. math-verify's
warning that such a call has no timeout is dropped (``_not_ours``): ours has.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from itertools import product
from typing import Any, cast

from infertap.errors import ConfigError

#: Seconds math-verify may spend on one parse or one comparison (its own default).
TIMEOUT_S = 5
#: Distinct texts whose parse is kept: the two sides' answers are often the same text.
CACHE = 4096
_DELIMITED = ("$", "\\(", "\\[", "\\boxed")
_WORKER = "infertap-math-verify"  # the thread ``_within`` runs a call in
_WARNING_LOGGERS = ("math_verify.parser", "math_verify.grader")


def _not_ours(record: logging.LogRecord) -> bool:
    """Drops math-verify's warning that a call asked for no timeout has none, where the call is
    ours in ``_within``'s thread, which bounds it: it reached stderr of every program that compares
    off the main thread, as a fault it does not have. Any other call's warning is kept."""
    return not (record.threadName == _WORKER and record.getMessage().startswith("Timeout is disabled"))


@dataclass(frozen=True)
class MathReading:
    parsed: tuple[Any, ...]  # math-verify's parse: sympy values, then the text it matched
    timed_out: bool = False


class MathVerify:
    """math-verify's ``parse`` of each answer with its defaults (LaTeX, then plain expressions) and
    ``verify(gold, answer)``; each distinct text is parsed once (parsing is most of its cost)."""

    def __init__(self, timeout_s: int | None = None) -> None:
        try:
            import math_verify
        except ImportError as exc:
            raise ConfigError(
                "--extract math grades by math-verify, which is not installed: pip install 'infertap[math]' "
                "(in a checkout: pip install -e '.[math]')"
            ) from exc
        from math_verify.errors import TimeoutException

        self._mv = math_verify
        for name in _WARNING_LOGGERS:
            if _not_ours not in logging.getLogger(name).filters:
                logging.getLogger(name).addFilter(_not_ours)
        self._timeout_exc = TimeoutException
        self._timeout_s = TIMEOUT_S if timeout_s is None else timeout_s
        self._cache: OrderedDict[str, MathReading] = OrderedDict()
        self._timed_out = 0

    def _bounded[T](self, call: Callable[[int | None], T]) -> T:
        """``call(timeout)`` bounded at the timeout: in the main thread by math-verify's own alarm;
        elsewhere, where signals can't reach and a timeout would make math-verify raise, in a thread
        of its own (no timeout asked), given up when the timeout passes, as the alarm would."""
        if threading.current_thread() is threading.main_thread():
            return call(self._timeout_s)
        return _within(self._timeout_s, lambda: call(None), self._timeout_exc)

    def read(self, text: str) -> MathReading:
        reading = self._cache.get(text)
        if reading is None:
            try:
                parsed = self._bounded(lambda t: self._mv.parse(text, parsing_timeout=t, raise_on_error=True))
                reading = MathReading(tuple(parsed))
            except self._timeout_exc:
                reading = MathReading((), timed_out=True)
            except Exception:  # what math-verify's parse reads as nothing, without raise_on_error
                reading = MathReading(())
            self._cache[text] = reading
            if len(self._cache) > CACHE:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(text)
        self._timed_out += reading.timed_out
        return reading

    def known(self, reference: str) -> MathReading:
        """A known answer is LaTeX, written bare ("-3x", "\\frac{1}{2}"): math-verify's defaults
        find none in it, or a part ("-3"), so it is read between ``$``, as lighteval writes MATH's
        gold answers; one already delimited is read as written."""
        return self.read(reference if any(d in reference for d in _DELIMITED) else f"${reference}$")

    def shown(self, reading: MathReading) -> str | None:
        """The text math-verify gives with its value (its match, normalised: "0.5" is \\frac{1}{2})."""
        if not reading.parsed:
            return None
        last = reading.parsed[-1]
        return last if isinstance(last, str) else str(reading.parsed[0])

    def same(self, gold: MathReading, reading: MathReading) -> bool:
        """``verify(gold, reading)``: any of gold's values equal to any of the reading's, each
        pair compared apart as math-verify does, so that one that fails or times out is unequal
        and the others are still tried."""
        for g, t in product(gold.parsed, reading.parsed):
            try:
                if self._bounded(partial(self._verify, g, t)):
                    return True
            except self._timeout_exc:
                self._timed_out += 1
            except Exception:  # what math-verify's verify calls unequal, without raise_on_error
                continue
        return False

    def decides(self, reading: MathReading) -> bool:
        """Always: an answer math-verify parses nothing in is wrong, as lighteval scores it (a timeout is counted apart)."""
        return True

    def _verify(self, gold: Any, answer: Any, timeout_s: int | None) -> bool:
        return bool(self._mv.verify(gold, answer, timeout_seconds=timeout_s, raise_on_error=True))

    def timed_out(self) -> int:
        return self._timed_out


def _within[T](seconds: int, call: Callable[[], T], timeout_exc: type[BaseException]) -> T:
    """``call()`` in a daemon thread, its result or exception handed back; after ``seconds`` it is
    given up (``timeout_exc`` raised here) and the thread is sent ``timeout_exc`` too, which stops it
    at its next Python instruction, as math-verify's alarm stops the main thread (sympy is Python;
    a C call such as a sleep ends first). Without that it would run on, holding a core."""
    done: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            done.append((True, call()))
        except BaseException as exc:  # the caller's to handle, the timeout sent to this thread among them
            done.append((False, exc))

    worker = threading.Thread(target=run, name=_WORKER, daemon=True)
    worker.start()
    worker.join(seconds)
    if not done:
        assert worker.ident is not None
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident), ctypes.py_object(timeout_exc))
        raise timeout_exc(f"gave up after {seconds} s")
    ok, value = done[0]
    if ok:
        return cast(T, value)
    raise value
