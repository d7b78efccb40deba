"""Requests made into sessions of turns: each one's parent, place, session and think time.

A request continues, in this order of evidence, the exchange recorded as its parent (a replay knows
which of its own exchanges a turn continued), the exchange whose response it names (the Responses
API's ``previous_response_id``: the server continues that one, whatever else the session sent), a
request of its explicit session (a session header, ``SESSION_HEADERS``): the one whose conversation plus reply
its own conversation starts with, else the one that ended last before it was sent (a title or
summary request the client sent beside the conversation is no turn of it); else an exchange that
had answered when it was sent and whose conversation plus reply its own conversation starts with
(``Links`` holds those as digests): of identical ones (two agents that began alike), the first to
end that no turn continues yet, else the latest. A request of a header session continues so only a
request of no other header session, in a tree of turns of none other (``_Trees``): two sessions
that began alike (or one forked or resumed from another's conversation under an id of its own) are
two, as their client said; a request of no session may still be its first turn (a client that
sends its header from the second turn on). It is looked for among the makers of the longest
conversation that had answered, as without a session, so that ``Reach`` holds: where none of
those may be continued, it starts its own. A turn can only continue an answer that existed
when it was sent: a request still in flight is no parent (two turns an agent sends side by side
continue the same earlier one, and an identical conversation of another agent, still being
answered, is not this one's past).

Replay keeps the order and the agent's pacing these links give; analysis puts sessions, turns and
think times in its tables; both call these functions, so that they agree (replay drops the
candidates ``link`` can't reach as it reads a capture, by ``Reach``, this module's rule too).
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Callable, Sequence

from .conversation import Link, Links


class _Ended:
    """The requests of one session in order of sending, told apart by whether they had ended by a time."""

    __slots__ = ("latest", "pending")

    def __init__(self) -> None:
        self.pending: list[tuple[int, int]] = []  # (end, index) of those not known to have ended
        self.latest: tuple[int, int] | None = None  # (end, index) of the one that ended last

    def latest_by(self, t: int) -> tuple[int, int] | None:
        """The one that ended last at or before ``t`` (times asked in order of sending, never earlier)."""
        while self.pending and self.pending[0][0] <= t:
            done = heapq.heappop(self.pending)
            if self.latest is None or done > self.latest:
                self.latest = done
        return self.latest

    def add(self, index: int, end: int) -> None:
        heapq.heappush(self.pending, (end, index))


class _Made:
    """Which exchanges made each conversation (its turns plus their reply), and which of them a later
    turn already continues. Two agents that sent the same conversation and got the same reply made
    the same digest: the first of their next turns continues the copy that ended first, the second the
    other, rather than both the latest (which left the other agent's first turn a session of its own).
    Only when every copy that had ended is continued does a turn take the latest: a retried turn, or
    turns sent side by side, continue one parent."""

    __slots__ = ("by_session", "claimed", "copies", "ended", "makers")

    def __init__(self, ended: Sequence[int]) -> None:
        self.ended = ended
        self.claimed = bytearray(len(ended))  # 1: a later turn continues it
        self.makers: dict[bytes, list[int]] = {}  # digest -> its makers, in order of sending
        # Of a digest made twice or more: (end, index) of its makers no turn continued yet, a heap.
        self.copies: dict[bytes, list[tuple[int, int]]] = {}
        self.by_session: dict[str, dict[bytes, list[int]]] = {}  # explicit session -> digest -> its makers there

    def add(self, index: int, digest: bytes, session: str | None) -> None:
        makers = self.makers.setdefault(digest, [])
        makers.append(index)
        if len(makers) > 1:
            copies = self.copies.get(digest)
            if copies is None:  # the second copy: from now on, which are continued matters
                copies = self.copies[digest] = [(self.ended[j], j) for j in makers[:-1] if not self.claimed[j]]
                heapq.heapify(copies)
            heapq.heappush(copies, (self.ended[index], index))
        if session is not None:
            self.by_session.setdefault(session, {}).setdefault(digest, []).append(index)

    def claim(self, index: int) -> None:
        self.claimed[index] = 1

    def continuing(self, digest: bytes, t: int, allowed: Callable[[int], bool] | None = None) -> int | None:
        """The maker of ``digest`` that a turn sent at ``t`` continues: of those that had ended, the
        first to end that no turn continues yet, else the latest sent; None when none had ended.
        ``allowed``: only among those it allows (a scan of the digest's makers, a few at most)."""
        makers = self.makers.get(digest)
        if not makers:
            return None
        if allowed is not None:
            ended = [j for j in makers if self.ended[j] <= t and allowed(j)]
            free = [j for j in ended if not self.claimed[j]]
            return min(free, key=lambda j: (self.ended[j], j)) if free else (ended[-1] if ended else None)
        copies = self.copies.get(digest)
        if copies is not None:
            while copies and self.claimed[copies[0][1]]:
                heapq.heappop(copies)
            if copies and copies[0][0] <= t:
                return copies[0][1]
        return next((j for j in reversed(makers) if self.ended[j] <= t), None)

    def in_session(self, session: str, candidates: Sequence[bytes], t: int) -> int | None:
        """The request of ``session`` that a turn sent at ``t`` continues by its conversation: the
        longest of its ``candidates`` that the session made and had ended by ``t`` (as ``continuing``
        chooses among copies). None where the longest candidate that any earlier request made was made
        outside the session, or had not ended: the session's latest end decides then."""
        made = self.by_session.get(session, {})
        for digest in candidates:
            makers = made.get(digest)
            if makers:
                ended = [j for j in makers if self.ended[j] <= t]  # a session's own copies: a few at most
                if ended:
                    free = [j for j in ended if not self.claimed[j]]
                    return min(free, key=lambda j: (self.ended[j], j)) if free else ended[-1]
            if digest in self.makers:
                return None  # made, by another or not ended: no later than ``Reach`` prunes
        return None


class _Trees:
    """The explicit session each tree of turns is named by so far (``sessions_of``'s rule, in order
    of sending), so that a request of one header session continues no turn of another's tree."""

    __slots__ = ("named", "own", "roots")

    def __init__(self) -> None:
        self.roots: list[int] = []
        self.own: list[str | None] = []  # each request's own explicit session
        self.named: dict[int, str] = {}  # root -> the tree's explicit session

    def add(self, index: int, parent: int | None, session: str | None, refused: bool) -> None:
        root = index if parent is None else self.roots[parent]
        self.roots.append(root)
        self.own.append(session)
        if session is not None and root not in self.named and (root == index or not refused):
            self.named[root] = session

    def open_to(self, index: int, session: str) -> bool:
        """Whether a request of ``session`` may continue request ``index``: neither it nor its tree
        is of another explicit session."""
        return self.own[index] in (None, session) and self.named.get(self.roots[index], session) == session


class Reach:
    """Which of a request's candidates (longest first) ``link`` can reach, told from the exchanges
    known so far, in any order: a replay keeps only those (replay/workload.py), so that a capture
    of many long conversations doesn't hold every prefix of each, and its links are still the
    analysis'. ``link`` takes the first candidate that a request before it made and had ended by
    its send (``_Made.continuing`` finds a maker there), and passes one whose makers were all still
    running for the shorter ones; the makers known later only add to those. ``start`` orders the
    requests as ``link`` is given them; ``sent`` and ``end`` are on its clock."""

    __slots__ = ("_ends", "_first", "_starts")

    def __init__(self) -> None:
        self._first: dict[bytes, int] = {}  # digest -> the place of its maker known to end first
        self._starts, self._ends = array("q"), array("q")  # by place: not a tuple per digest

    def made(self, digest: bytes, start: int, end: int) -> None:
        place = self._first.get(digest)
        if place is None:
            self._first[digest] = len(self._ends)
            self._starts.append(start)
            self._ends.append(end)
        elif end < self._ends[place]:
            self._starts[place], self._ends[place] = start, end

    def enough(self, digest: bytes, start: int, sent: int) -> bool:
        """Whether ``link`` stops at ``digest`` for a request that started at ``start`` and was sent
        at ``sent``: a maker before it had ended by then. Never True where it would go on."""
        place = self._first.get(digest)
        return place is not None and self._starts[place] < start and self._ends[place] <= sent


def link(links: Sequence[Links], sent: Sequence[int], ended: Sequence[int]) -> list[tuple[int, Link] | None]:
    """Each exchange's parent (an index into ``links``, in order of sending) and how it was found.
    ``sent``, ``ended``: each exchange's send and end, on one clock. One infertap refused
    (``Links.refused``) gets its parent, but is none and claims none: a replay doesn't send it, and
    links the rest as if it weren't there."""
    by_id: dict[str, int] = {}
    sessions: dict[str, _Ended] = {}
    by_response: dict[str, int] = {}
    made = _Made(ended)
    trees = _Trees()
    out: list[tuple[int, Link] | None] = []
    for i, x in enumerate(links):
        t = sent[i]
        found: tuple[int, Link] | None = None
        if x.parent_id is not None and x.parent_id in by_id:
            found = (by_id[x.parent_id], "recorded")
        if found is None and x.previous_response_id is not None and x.previous_response_id in by_response:
            found = (by_response[x.previous_response_id], "previous_response_id")
        if x.session is not None:
            session = sessions.setdefault(x.session, _Ended())
            latest = session.latest_by(t)
            if found is None and latest is not None and latest[0] <= t:
                parent = made.in_session(x.session, x.candidates, t)
                found = (latest[1] if parent is None else parent, "session")
            if not x.refused:
                session.add(i, ended[i])
        if found is None:
            for digest in x.candidates:
                parent = made.continuing(digest, t)
                if parent is not None:
                    if (own := x.session) is not None and not trees.open_to(parent, own):
                        # The client named its session: another header session's turns are not its past.
                        parent = made.continuing(digest, t, lambda j: trees.open_to(j, own))
                    if parent is not None:
                        found = (parent, "conversation")
                    break
        out.append(found)
        trees.add(i, None if found is None else found[0], x.session, x.refused)
        if x.refused:
            continue  # never sent: it continues a turn, but nothing it did is any other request's past
        if x.id is not None:
            by_id.setdefault(x.id, i)  # a repeated id names the first (the analysis names the later ones apart)
        if x.response_id is not None:
            by_response[x.response_id] = i
        if found is not None:
            made.claim(found[0])
        if x.continuation is not None:
            made.add(i, x.continuation, x.session)
    return out


def turns_of(parents: Sequence[int | None]) -> list[int]:
    """Each exchange's place in its session (0: the first), parents always before their turns."""
    turns: list[int] = []
    for parent in parents:
        turns.append(0 if parent is None else turns[parent] + 1)
    return turns


def sessions_of(
    parents: Sequence[int | None], explicit: Sequence[str | None], ids: Sequence[str], refused: Sequence[bool] = ()
) -> list[str]:
    """Each exchange's session: that of the first turn, its own or after it in the tree of turns it
    belongs to, that was sent with an explicit one; else the first turn's id. A session is then a
    whole tree of turns, so every turn's parent is in its session, however a client sent the header
    (only from the second turn on; ``link`` joins no two header sessions by their conversations). A
    ``refused`` turn (never sent) names only a session it starts."""
    roots: list[int] = []
    for i, parent in enumerate(parents):
        roots.append(i if parent is None else roots[parent])
    named: dict[int, str] = {}
    for i, (root, given) in enumerate(zip(roots, explicit, strict=True)):
        if given is not None and root not in named and (root == i or not (refused and refused[i])):
            named[root] = given
    return [named.get(root, ids[root]) for root in roots]


def think_times(
    parents: Sequence[int | None],
    sessions: Sequence[str],
    sent: Sequence[int],
    ended: Sequence[int],
    refused: Sequence[bool] = (),
) -> list[int | None]:
    """Each turn's think time: from the last end in its session before it was sent (its parent's, or a
    later turn's, such as the answer a retried turn replaced) to its send, never below zero; None for
    a session's first turn. Summed over a session whose turns never overlap, it is the time the
    session waited on its client. A ``refused`` turn's end (never sent) starts none."""
    return [None if found is None else found[0] for found in think_times_from(parents, sessions, sent, ended, refused)]


def think_times_from(
    parents: Sequence[int | None],
    sessions: Sequence[str],
    sent: Sequence[int],
    ended: Sequence[int],
    refused: Sequence[bool] = (),
) -> list[tuple[int, int] | None]:
    """``think_times`` with the turn each is measured from: (think time, index of the turn whose end
    starts it: its parent, or a turn of its session that ended later). A replay that keeps the
    agent's pacing waits from that end, not its parent's, which may have ended well before."""
    by_session: dict[str, _Ended] = {}
    out: list[tuple[int, int] | None] = []
    for i, (parent, session) in enumerate(zip(parents, sessions, strict=True)):
        state = by_session.setdefault(session, _Ended())
        latest = state.latest_by(sent[i])  # ended at or before this send
        if not (refused and refused[i]):
            state.add(i, ended[i])
        if parent is None:
            out.append(None)
            continue
        end, since = ended[parent], parent
        if latest is not None and (end > sent[i] or latest[0] > end):
            end, since = latest
        out.append((sent[i] - end if end <= sent[i] else 0, since))
    return out
