"""The ``math`` grader: answers parsed and compared by math-verify, the grader of lighteval and
open-r1 (``parse``, then ``verify(gold, answer)``), so that a score here is the score they give.

math-verify is the ``math`` extra. Its timeouts are ``signal.alarm``: they work in the main thread
only (elsewhere its ``parse`` and ``verify`` raise), so off the main thread nothing bounds sympy and
no timeout is asked for. A reading or comparison it gives up on is no answer, and counted.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from itertools import product
from typing import Any

from infertap.errors import ConfigError

#: Seconds math-verify may spend on one parse or one comparison (its own default).
TIMEOUT_S = 5
#: Distinct texts whose parse is kept: the two sides' answers are often the same text.
CACHE = 4096
_DELIMITED = ("$", "\\(", "\\[", "\\boxed")


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
        self._timeout_exc = TimeoutException
        self._timeout_s = TIMEOUT_S if timeout_s is None else timeout_s
        self._cache: OrderedDict[str, MathReading] = OrderedDict()
        self._timed_out = 0

    def _timeout(self) -> int | None:
        """Signals are the main thread's: elsewhere a timeout would make math-verify raise."""
        return self._timeout_s if threading.current_thread() is threading.main_thread() else None

    def read(self, text: str) -> MathReading:
        reading = self._cache.get(text)
        if reading is None:
            try:
                parsed = self._mv.parse(text, parsing_timeout=self._timeout(), raise_on_error=True)
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
                if self._mv.verify(g, t, timeout_seconds=self._timeout(), raise_on_error=True):
                    return True
            except self._timeout_exc:
                self._timed_out += 1
            except Exception:  # what math-verify's verify calls unequal, without raise_on_error
                continue
        return False

    def timed_out(self) -> int:
        return self._timed_out
