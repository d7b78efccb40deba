"""The first match of a pattern at or after a position that moves forward, found without searching
the text again from each position: the ``number`` extractor asked each of its patterns anew after
every expression it read, each search running to the text's end, so that a long answer with many
expressions took time quadratic in its length ("\\\\( a " 12,000 times: over 5 s).

``first(at)`` is exactly what ``next(m for m in pattern.finditer(text, at) if read(m))`` gives (read
instead), for any ``at``. The matches form chains: which match begins at a position does not depend on
where the search began, and the one after it only on where it ends. So the matches found from an earlier
position are those from ``at`` too, unless one of them spans ``at`` (a match from ``at`` may begin inside
it); there the search starts again, until it meets a match already found, whose chain it then follows,
each match read once and each chain's first accepted match remembered."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator


class Scan[T]:
    """``pattern``'s matches in ``text`` from a position, each ``read`` (None: it is passed over)."""

    def __init__(self, pattern: re.Pattern[str], text: str, read: Callable[[re.Match[str]], T | None]) -> None:
        self.pattern, self.text, self.read = pattern, text, read
        self.restarts = 0  # searches begun anew: few, however long the text
        self._match: dict[int, re.Match[str]] = {}  # each match found, by where it begins
        self._after: dict[int, int | None] = {}  # the match after it (None: none)
        self._pending: dict[int, Iterator[re.Match[str]]] = {}  # the search that finds the match after it
        self._reads: dict[int, T | None] = {}
        self._accepted: dict[int, int | None] = {}  # the first match at or after it whose read is not None
        self._restart(0)

    def _restart(self, at: int) -> None:
        self.restarts += 1
        self._at = at
        search = self.pattern.finditer(self.text, at)
        self._cursor = self._found(next(search, None), search)

    def _found(self, m: re.Match[str] | None, search: Iterator[re.Match[str]]) -> int | None:
        """Where a match the search gave begins; the search is kept to find the one after it, unless
        the match was found before (the chain after it is that one's)."""
        if m is None:
            return None
        if m.start() not in self._match:
            self._match[m.start()], self._pending[m.start()] = m, search
        return m.start()

    def _next(self, start: int) -> int | None:
        if start not in self._after:
            search = self._pending.pop(start)
            self._after[start] = self._found(next(search, None), search)
        return self._after[start]

    def _first_accepted(self, start: int) -> int | None:
        passed: list[int] = []
        node: int | None = start
        while node is not None and node not in self._accepted:
            if node not in self._reads:
                self._reads[node] = self.read(self._match[node])
            if self._reads[node] is not None:
                self._accepted[node] = node
                break
            passed.append(node)
            node = self._next(node)
        found = self._accepted[node] if node is not None else None
        for p in passed:
            self._accepted[p] = found
        return found

    def first(self, at: int) -> tuple[re.Match[str], T] | None:
        """The first match from ``at`` whose read is not None, with that read."""
        if at < self._at:  # matches before the last position asked were passed over
            self._restart(at)
        self._at = at
        while self._cursor is not None and self._cursor < at:
            if at < self._match[self._cursor].end():  # a match from ``at`` may begin inside it
                self._restart(at)
            else:
                self._cursor = self._next(self._cursor)
        found = self._first_accepted(self._cursor) if self._cursor is not None else None
        if found is None:
            return None
        read = self._reads[found]
        assert read is not None
        return self._match[found], read
