"""Which earlier exchange a request continues: the links that make requests into sessions of turns.

Replay keeps the order and the agent's pacing these links give; analysis puts sessions and turns in
its tables. A request continues, in this order of evidence, the exchange recorded as its parent (a
replay knows which of its own exchanges a turn continued), the previous request of its explicit
session (an ``x-session-id`` header), the exchange whose response it names (the Responses API's
``previous_response_id``), else the latest exchange whose conversation plus reply its own
conversation starts with (chat messages, Responses input items, Anthropic messages with their
system prompt, as the adapters read them). Each exchange is reduced to a few digests as it is read,
so linking a million exchanges is a hash lookup each, never a comparison with every earlier one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .shapes import Output, Request, Turn

#: How a request's parent was found.
Link = Literal["recorded", "session", "previous_response_id", "conversation"]


@dataclass(frozen=True, slots=True)
class Links:
    """What linking needs of one exchange, as digests (16 bytes each, whatever the conversation's size)."""

    id: str | None = None  # the exchange's own id, for a recorded parent_id to name
    parent_id: str | None = None  # recorded by a replay: the exchange this one continued
    session: str | None = None  # the explicit session it was sent in
    candidates: tuple[bytes, ...] = ()  # its conversation's prefixes that end on an assistant turn, longest first
    continuation: bytes | None = None  # its conversation plus its reply: what a next turn starts with
    response_id: str | None = None
    previous_response_id: str | None = None


def _digests(api: str, turns: Sequence[Turn]) -> list[bytes]:
    """The digest of each prefix of ``turns`` (``[k]`` covers turns 0..k), in one pass."""
    h = hashlib.blake2b(api.encode(), digest_size=16)
    out = []
    for turn in turns:
        h.update(turn.key())
        h.update(b"\x00")
        out.append(h.copy().digest())
    return out


def links_of(record: Mapping[str, Any], request: Request, output: Output | None) -> Links:
    """The links of an exchange ``record`` whose request reads as ``request`` and response as
    ``output`` (None when not read). Only an answered generation request (2xx, a readable answer)
    has a reply that a next turn can continue."""
    xid, parent_id, session = record.get("id"), record.get("parent_id"), record.get("session")
    status = record.get("status")
    if not request.generation or not request.turns:
        return Links(xid, parent_id, session)
    answered = output is not None and 200 <= (status or 0) < 300 and output.readable and output.error_message is None
    turns = (*request.turns, output.reply()) if answered and output is not None else request.turns
    digests = _digests(request.api, turns)
    cuts = range(len(request.turns) - 1, 0, -1)  # a parent's turns + reply: a strict prefix ending on its reply
    return Links(
        xid,
        parent_id,
        session,
        tuple(digests[cut - 1] for cut in cuts if request.turns[cut - 1].role == "assistant"),
        digests[-1] if answered else None,
        output.response_id if answered and output is not None else None,
        request.previous_response_id,
    )


def link(links: Sequence[Links]) -> list[tuple[int, Link] | None]:
    """Each exchange's parent (an index into ``links``, in original order) and how it was found."""
    by_id: dict[str, int] = {}
    last_in_session: dict[str, int] = {}
    by_response: dict[str, int] = {}
    continuations: dict[bytes, int] = {}  # digest of (turns + reply) -> the exchange that made it
    out: list[tuple[int, Link] | None] = []
    for i, x in enumerate(links):
        found: tuple[int, Link] | None = None
        if x.parent_id is not None and x.parent_id in by_id:
            found = (by_id[x.parent_id], "recorded")
        if x.session is not None:
            if found is None and x.session in last_in_session:
                found = (last_in_session[x.session], "session")
            last_in_session[x.session] = i
        if found is None and x.previous_response_id is not None and x.previous_response_id in by_response:
            found = (by_response[x.previous_response_id], "previous_response_id")
        if found is None:
            for digest in x.candidates:
                if (parent := continuations.get(digest)) is not None:
                    found = (parent, "conversation")
                    break
        if x.id is not None:
            by_id[x.id] = i
        if x.response_id is not None:
            by_response[x.response_id] = i
        if x.continuation is not None:
            continuations[x.continuation] = i
        out.append(found)
    return out


def turns_of(parents: Sequence[int | None]) -> list[int]:
    """Each exchange's place in its session (0: the first), parents always before their turns."""
    turns: list[int] = []
    for parent in parents:
        turns.append(0 if parent is None else turns[parent] + 1)
    return turns


def sessions_of(parents: Sequence[int | None], explicit: Sequence[str | None], ids: Sequence[str]) -> list[str]:
    """Each exchange's session: its explicit one, else its parent's, else its own id (a session's first turn)."""
    sessions: list[str] = []
    for parent, given, own in zip(parents, explicit, ids, strict=True):
        sessions.append(given if given is not None else sessions[parent] if parent is not None else own)
    return sessions


__all__ = ["Link", "Links", "link", "links_of", "sessions_of", "turns_of"]
