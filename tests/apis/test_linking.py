"""``link``'s choice of a parent among the exchanges that could be one, on digests made up by hand:
which copy of an identical conversation a turn continues, and which request of its session."""

from __future__ import annotations

from infertap.apis.conversation import Links
from infertap.apis.linking import Reach, link

S = 1_000_000_000


def parents(exchanges: list[tuple[str, int, int, Links]]) -> dict[str, tuple[str, str] | None]:
    """Each exchange's (parent id, link) from (id, sent, ended, links) in order of sending."""
    ids = [x[0] for x in exchanges]
    found = link([x[3] for x in exchanges], [x[1] for x in exchanges], [x[2] for x in exchanges])
    return {i: None if f is None else (ids[f[0]], f[1]) for i, f in zip(ids, found, strict=True)}


def turn(
    xid: str, sent_s: float, *, starts: tuple[bytes, ...] = (), makes: bytes | None = None, session: str | None = None
) -> tuple[str, int, int, Links]:
    """An exchange sent at ``sent_s`` answered 1 s later, whose conversation continues ``starts``
    (its candidates) and whose reply makes ``makes``."""
    return (xid, int(sent_s * S), int(sent_s * S) + S, Links(xid, None, session, starts, makes))


def test_two_agents_that_began_alike_stay_two_sessions() -> None:
    """A0 and B0 asked the same and got the same answer: A1 and B1 both continued B0 (the latest),
    one agent's session swallowed the other's and A0 stayed a session of one."""
    got = parents(
        [
            turn("A0", 0.0, makes=b"q+a"),
            turn("B0", 0.1, makes=b"q+a"),
            turn("A1", 1.5, starts=(b"q+a",), makes=b"A1"),
            turn("B1", 1.6, starts=(b"q+a",), makes=b"B1"),
            turn("A2", 3.0, starts=(b"A1", b"q+a")),
        ]
    )
    assert got == {
        "A0": None,
        "B0": None,
        "A1": ("A0", "conversation"),  # the copy that ended first
        "B1": ("B0", "conversation"),  # the one no turn continued yet
        "A2": ("A1", "conversation"),
    }


def test_a_retry_and_turns_side_by_side_still_continue_one_parent() -> None:
    """Once every copy that had ended is continued, a turn takes the latest, as before: a retried
    turn and two turns sent together continue the same parent."""
    got = parents(
        [
            turn("t0", 0.0, makes=b"q+a"),
            turn("t1", 2.0, starts=(b"q+a",), makes=b"t1"),
            turn("t1b", 4.0, starts=(b"q+a",), makes=b"t1b"),  # t1 sent again
            turn("p1", 6.0, starts=(b"t1b", b"q+a")),
            turn("p2", 6.0, starts=(b"t1b", b"q+a")),
        ]
    )
    assert got["t1"] == got["t1b"] == ("t0", "conversation")
    assert got["p1"] == got["p2"] == ("t1b", "conversation")


def test_a_copy_still_in_flight_or_already_continued_is_no_choice() -> None:
    """Of two copies, one continued and the other still being answered, a turn takes the one that
    had ended; once every copy has ended and is continued, the latest sent."""
    got = parents(
        [
            turn("A0", 0.0, makes=b"q+a"),  # ends at 1 s
            ("B0", int(0.5 * S), 5 * S, Links("B0", None, None, (), b"q+a")),  # ends at 5 s
            turn("A1", 1.5, starts=(b"q+a",)),
            turn("X1", 2.0, starts=(b"q+a",)),  # B0 in flight: A0's again
            turn("B1", 6.0, starts=(b"q+a",)),
            turn("C1", 8.0, starts=(b"q+a",)),  # both continued: the latest
        ]
    )
    assert [got[x] for x in ("A1", "X1", "B1", "C1")] == [("A0", "conversation")] * 2 + [("B0", "conversation")] * 2


def test_a_turn_of_a_session_continues_the_request_its_conversation_extends() -> None:
    """A title request the client sent between two turns of a header session ended last before the
    second: it became its parent (turn and depth one too many) though the second's conversation
    extends the first's."""
    got = parents(
        [
            turn("t0", 0.0, makes=b"q+a", session="S"),
            ("title", 1 * S, int(1.2 * S), Links("title", None, "S", (), b"title+t")),
            turn("t1", 1.5, starts=(b"q+a",), makes=b"t1", session="S"),
            turn("t2", 3.0, starts=(b"t1", b"q+a"), session="S"),
        ]
    )
    assert got == {
        "t0": None,
        "title": ("t0", "session"),  # nothing in its conversation: the session's latest end
        "t1": ("t0", "session"),
        "t2": ("t1", "session"),
    }


def test_a_session_turn_without_its_past_in_the_session_takes_the_latest_end() -> None:
    """Where the session made none of the conversation, or what it made is still being answered,
    the session's latest end decides, as before; so does a conversation another session made."""
    got = parents(
        [
            turn("o0", 0.0, makes=b"other", session="O"),
            turn("s0", 0.0, makes=b"q+a", session="S"),
            ("s1", int(1.5 * S), 9 * S, Links("s1", None, "S", (b"q+a",), b"s1")),  # answered at 9 s
            turn("s2", 2.0, starts=(b"s1", b"q+a"), session="S"),  # s1 in flight: the latest end, s0
            turn("s3", 2.5, starts=(b"zzz",), session="S"),  # nothing made it
            turn("s4", 4.0, starts=(b"other",), session="S"),
        ]
    )
    assert [got[x] for x in ("s2", "s3")] == [("s0", "session")] * 2
    assert got["s4"] == ("s3", "session")  # o0 made it, in session O: the header decides


def test_a_header_session_continues_no_turn_of_another_header_session() -> None:
    """A request of a header session with no turn of its own ended continued another header
    session's request by its conversation. Now only a request of no other session, in a tree of
    none other: of copies, an allowed one; and where the longest conversation answered was
    another session's alone, none (a shorter one is no closer past, and ``Reach`` drops it)."""
    got = parents(
        [
            turn("A0", 0.0, makes=b"q+a", session="A"),
            turn("N0", 0.2, makes=b"q+a"),  # the same conversation, of no session: ends after A0
            turn("B0", 1.5, starts=(b"q+a",), session="B"),  # A0 ended first: B takes N0
            turn("M0", 2.0, makes=b"m"),
            turn("A1", 2.0, starts=(b"q+a",), makes=b"A1", session="A"),
            turn("C0", 3.5, starts=(b"A1", b"m"), session="C"),  # A1 answered it: C starts its own
            turn("N1", 3.5, starts=(b"A1", b"m")),  # of no session: A's, as before
            turn("A2", 3.6, starts=(b"q+a",), session="A"),  # its own session's, as before
        ]
    )
    assert got == {
        "A0": None,
        "N0": None,
        "B0": ("N0", "conversation"),  # was A0
        "M0": None,
        "A1": ("A0", "session"),
        "C0": None,  # was A1
        "N1": ("A1", "conversation"),
        "A2": ("A0", "session"),
    }


def test_a_candidate_is_enough_only_where_link_stops_at_it() -> None:
    """``Reach`` tells a replay which of a turn's candidates ``link`` can pass (the rest it drops):
    one whose maker started before the turn and had ended by its send stops ``link``; one whose
    makers were all still being answered, or started after the turn, does not. ``link`` agrees."""
    reach = Reach()
    reach.made(b"C", 0, 1 * S)  # C: sent at 0, answered at 1 s
    reach.made(b"A", 2 * S, 10 * S)  # A: sent at 2 s, answered at 10 s
    assert reach.enough(b"C", 5 * S, 5 * S)
    assert not reach.enough(b"A", 5 * S, 5 * S)  # A still answered when the turn was sent: shorter ones count
    assert reach.enough(b"A", 11 * S, 11 * S)
    assert not reach.enough(b"C", 0, 5 * S)  # sent (due) no later than C: C comes after it in link's order
    assert not reach.enough(b"X", 5 * S, 5 * S)  # made by none
    got = parents(
        [
            turn("C", 0.0, makes=b"C"),
            ("A", 2 * S, 10 * S, Links("A", None, None, (b"C",), b"A")),
            turn("B", 5.0, starts=(b"A", b"C")),
            turn("D", 11.0, starts=(b"A", b"C")),
        ]
    )
    assert got["B"] == ("C", "conversation") and got["D"] == ("A", "conversation")


def test_a_refused_turn_names_only_a_session_it_starts():
    """A turn infertap refused (never sent) sent with a session of its own doesn't name its parent's
    tree, as a replay, which leaves it out, names it; alone, it names its own."""
    from infertap.apis import sessions_of

    parents, given, ids = [None, 0, 0], [None, "other", "s1"], ["t0", "t1", "t2"]
    assert sessions_of(parents, given, ids, [False, True, False]) == ["s1"] * 3
    assert sessions_of(parents, given, ids) == ["other"] * 3  # sent: the first named turn names the tree
    assert sessions_of([None], ["alone"], ["t0"], [True]) == ["alone"]
