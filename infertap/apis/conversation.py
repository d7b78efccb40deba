"""What linking needs of each exchange: the links that make requests into sessions of turns.

A request may continue the exchange recorded as its parent, the request of its explicit session,
the exchange whose response it names (the Responses API's ``previous_response_id``), or the one
whose conversation plus reply its own conversation starts with (chat messages, Responses input
items, Anthropic messages with their system prompt, as the adapters read them). Each exchange is
reduced to a few digests as it is read (``Links``), so that linking a million exchanges
(``linking.link``) is a hash lookup each, never a comparison with every earlier one.

``links_of`` takes a request and response already read (analysis reads both whole anyway);
``read_links`` reads only what linking needs, for replay: of a streamed chat completion, just the
reply text and tool calls, with the same answer ``read_response`` would give (anything it doesn't
recognise as the usual shape is read by ``read_response``).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from .body import encoded, framing, head_of
from .chat_stream import LOOP_ONLY, _Function
from .fastjson import NOT_JSON, loads
from .kept import kept_response_id
from .openai import _OBJECTS, message_turn
from .read import CHAT, api_for, not_in_file, read_response, response_not_kept
from .shapes import Output, Request, Turn, as_int, canonical_arguments

#: How a request's parent was found.
Link = Literal["recorded", "session", "previous_response_id", "conversation"]
#: A response's reply as linking reads it (None: not an answer, an error event) and its response id.
Answer = tuple[Turn | None, str | None]


class Unread:
    """``read_links``'s default ``answer``: not read yet."""

    def __reduce__(self) -> str:
        return "UNREAD"  # one of it, in any process it is sent to


UNREAD = Unread()


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
    # Refused by infertap, never sent: a leaf of its session, invisible to every other request (no
    # turn continues it, its end starts no think time), as a replay, which doesn't send it, links them.
    refused: bool = False


@dataclass(frozen=True, slots=True)
class Prefixes:
    """A request's conversation as linking sees it: each prefix's digest (``digests[k]`` covers
    turns 0..k) and each turn's role."""

    digests: list[bytes]
    roles: list[str]

    @classmethod
    def of(cls, api: str, turns: Sequence[Turn]) -> Prefixes:
        digests = []
        digest = _root(api)
        for turn in turns:
            digest = _chained(digest, turn.key())
            digests.append(digest)
        return cls(digests, [turn.role for turn in turns])


def _root(api: str) -> bytes:
    return hashlib.blake2b(api.encode(), digest_size=16).digest()


def _chained(digest: bytes, key: bytes) -> bytes:
    """The digest of a prefix one turn longer (``key``: that turn's ``Turn.key()``): each prefix's
    digest follows from the one before, so a prefix shared by many requests is hashed once."""
    h = hashlib.blake2b(digest, digest_size=16)
    h.update(key)
    return h.digest()


def links_of(record: Mapping[str, Any], request: Request, output: Output | None, prefixes: Prefixes | None = None) -> Links:
    """The links of an exchange ``record`` whose request reads as ``request`` and response as
    ``output`` (None when not read); ``prefixes``: its turns' prefixes where already known
    (``ChatPrefixes``), else they are taken from its turns. Only an answered generation request
    (2xx, a readable answer) has a reply that a next turn can continue."""
    status = record.get("status")
    answered = output is not None and 200 <= (status or 0) < 300 and output.readable and output.error_message is None
    if not (request.generation and request.turns):
        prefixes = None
    elif prefixes is None:
        prefixes = Prefixes.of(request.api, request.turns)
    if answered and output is not None:
        return _links(record, prefixes, output.reply(), output.response_id, request.previous_response_id)
    # A cut answer is unknown, but its kept head may name its id: a turn naming it continues it.
    return _links(record, prefixes, None, kept_response_id(record), request.previous_response_id)


def read_links(
    record: Mapping[str, Any],
    prefixes: Prefixes | None,
    previous_response_id: str | None,
    generation: bool,
    enough: Callable[[bytes], bool] | None = None,
    answer: Answer | None | Unread = UNREAD,
) -> Links:
    """``links_of`` for a request whose conversation reads as ``prefixes`` (None: it carries none),
    the response read only as far as linking needs, and only when it can be continued (a
    generation request answered 2xx). ``enough(digest)``, when given, says that linking will stop
    at that candidate whatever else it knows: the shorter ones are left out. ``answer``: the
    record's ``chat_answer`` where it was already read (by another process)."""
    if not (generation and prefixes and prefixes.digests and 200 <= (record.get("status") or 0) < 300):
        return _links(record, prefixes if generation else None, None, None, previous_response_id, enough)
    if isinstance(answer, Unread):
        answer = chat_answer(record)
    if answer is None and response_not_kept(record):  # unknown, but its kept head may name its id
        answer = (None, kept_response_id(record))
    elif answer is None:  # not the usual streamed chat completion: read whole
        output = read_response(record)
        answered = output.readable and output.error_message is None
        answer = (output.reply(), output.response_id) if answered else _NOT_ANSWERED
    return _links(record, prefixes, *answer, previous_response_id, enough)


def _links(
    record: Mapping[str, Any],
    prefixes: Prefixes | None,
    reply: Turn | None,
    response_id: str | None,
    previous_response_id: str | None,
    enough: Callable[[bytes], bool] | None = None,
) -> Links:
    """The links of an exchange whose generation request carries the conversation ``prefixes``
    (None: not a generation request, or no conversation) and whose answer added ``reply`` (None:
    not answered) to it."""
    xid, parent_id, session = record.get("id"), record.get("parent_id"), record.get("session")
    refused = record.get("end") == "refused"
    if prefixes is None or not prefixes.digests:
        return Links(xid, parent_id, session, refused=refused)
    digests, roles = prefixes.digests, prefixes.roles
    candidates = []
    for cut in range(len(digests) - 1, 0, -1):  # a parent's turns + reply: a strict prefix ending on its reply
        if roles[cut - 1] == "assistant":
            candidates.append(digests[cut - 1])
            if enough is not None and enough(digests[cut - 1]):
                break
    return Links(
        xid,
        parent_id,
        session,
        tuple(candidates),
        _chained(digests[-1], reply.key()) if reply is not None else None,
        response_id,
        previous_response_id,
        refused,
    )


class ChatPrefixes:
    """``Prefixes`` of chat requests from their messages as raw JSON, remembering the digest and
    turn each message led to from the prefix before it: an agent's every request restates the
    conversation so far, and each message is read and hashed once, not once per later turn (the
    most recent ``size`` are remembered)."""

    def __init__(self, size: int = 1 << 15) -> None:
        self.size = size
        self._root = _root(CHAT.name)
        self._seen: dict[tuple[bytes, bytes], tuple[bytes, Turn | None]] = {}  # (prefix, message) -> (digest, turn)

    def of(self, messages: Sequence[bytes | msgspec.Raw]) -> Prefixes:
        """The prefixes of a chat request's ``messages`` (each one's JSON as sent: bytes or
        ``msgspec.Raw``), read as ``Chat.turns`` reads them: a message that isn't an object is no turn."""
        return self.read(messages)[0]

    def read(self, messages: Sequence[bytes | msgspec.Raw]) -> tuple[Prefixes, tuple[Turn, ...]]:
        """``of``, and the turns themselves (``Chat.turns``'s). Raises ``ValueError`` where a
        message is not JSON (``json.loads`` of the whole body would too)."""
        seen = self._seen
        digest = self._root
        digests: list[bytes] = []
        turns: list[Turn] = []
        for raw in messages:
            message = bytes(raw)
            key = (digest, message)
            found = seen.get(key)
            if found is None:
                found = self._read(digest, message)
                if len(seen) >= self.size:
                    for old in list(itertools.islice(seen, max(1, self.size // 8))):  # the oldest eighth (one at least)
                        del seen[old]
                seen[key] = found
            if found[1] is None:
                continue
            digest = found[0]
            digests.append(digest)
            turns.append(found[1])
        return Prefixes(digests, [t.role for t in turns]), tuple(turns)

    @staticmethod
    def _read(digest: bytes, message: bytes) -> tuple[bytes, Turn | None]:
        m = loads(message)
        if not isinstance(m, dict):
            return digest, None
        turn = message_turn(m)
        return _chained(digest, turn.key()), turn


# -- the reply of a streamed chat completion, read as read_response reads it -----------------------------


class _Call(msgspec.Struct):
    index: int | msgspec.UnsetType = msgspec.UNSET
    function: _Function | None = None


class _Delta(msgspec.Struct):
    content: Any = None
    tool_calls: list[_Call] | None = None


class _Choice(msgspec.Struct):
    index: Any = 0
    delta: _Delta | None = None  # an empty delta and one without content read alike: see chat_answer
    message: Any = None
    text: Any = None
    finish_reason: Any = None


class _Chunk(msgspec.Struct):
    """The fields of a chat completion chunk that its reply and response id come from (others are
    skipped, not built). Where ``Chat.event`` would accept other types than these (an index that is
    a string, arguments sent as an object...), the chunk fails to decode and the response is read
    whole by ``read_response``: this reading never differs from that one, it only declines."""

    id: Any = None
    object: Any = None
    choices: list[_Choice] | None = None
    error: Any = None


_decode_chunk = msgspec.json.Decoder(_Chunk).decode
_NOT_ANSWERED: Answer = (None, None)


def chat_answer(record: Mapping[str, Any]) -> Answer | None:
    """(reply, response id) of a streamed chat completion, ``(None, None)`` when it is not an answer
    (an error event), or None when the response isn't of that usual shape: ``read_response``'s
    reading of it (``Chat.event`` folded by ``fold``) narrowed to what a reply is made of. Run on
    every streamed event of every exchange a replay loads. None for an answer the recorder kept only
    the head of (``response_not_kept``) or that the file it was imported from holds only the head
    of (``not_in_file``): a head of whole events reads as a reply the engine never ended with,
    unknown as ``read_response`` reads it."""
    if api_for(record.get("path")) is not CHAT or response_not_kept(record) or not_in_file(record):
        return None
    if encoded(record):  # an encoded body: read whole
        return None
    pieces: list[bytes] = list(record.get("chunks") or ())
    body = b"".join(pieces)
    if framing(record, head_of(pieces)) != "sse" or b"\r" in body or LOOP_ONLY.search(body):
        return None  # a refusal's words or a functions-API call are in the reply: read whole
    blocks = body.split(b"\n\n")  # as infertap.apis.body splits a body without carriage returns
    rest = blocks.pop()
    if rest.strip():
        return None  # an unterminated last event: rare, read whole
    # The usual stream: each event one "data: " line, the blank lines after them the only newlines.
    if body.count(b"\n") != 2 * len(blocks) + rest.count(b"\n"):
        return None
    if not (body.startswith(b"data: ") and body.count(b"\n\ndata: ") == len(blocks) - 1):
        return None
    if blocks and blocks[-1] == b"data: [DONE]":
        blocks.pop()
    try:
        chunks = [_decode_chunk(block[6:]) for block in blocks]  # another [DONE] fails here: read whole
    except NOT_JSON:
        return None  # not JSON as msgspec reads it, or not a chunk's shape
    text: list[str] = []
    calls: dict[int, list[str]] = {}  # tool call index -> [name, arguments], pieces joined
    readable = False
    response_id: str | None = None
    for chunk in chunks:
        if not response_id:  # from any event, as Chat.event reads it
            response_id = chunk.id if isinstance(chunk.id, str) else None
        choices = chunk.choices
        if choices is None and chunk.object not in _OBJECTS:
            if chunk.object == "error":
                return None  # vLLM's error object: read whole, as read_response reads it
            if isinstance(chunk.error, dict) or (isinstance(chunk.error, str) and chunk.error):
                return _NOT_ANSWERED  # an error event: read_response's error_message
            readable = readable or isinstance(chunk.error, str)  # {"error": ""}: known, but no message
            continue
        readable = True
        for choice in choices or ():
            if choice.finish_reason == "error":
                return _NOT_ANSWERED  # a choice, any, that ended in an error: read_response's error_message
            if choice.index != 0 and as_int(choice.index) is not None:
                continue  # another choice's (an index that is no integer is choice 0's, as Chat.event reads it)
            if choice.message is not None:
                return None  # Chat.event reads it when the delta is empty, which a _Delta can't tell
            part = choice.delta
            if part is not None:
                if isinstance(part.content, str):
                    text.append(part.content)
                elif part.content is not None:
                    return None  # content as parts (Mistral's): read whole
                if part.tool_calls:
                    for i, call in enumerate(part.tool_calls):
                        slot = calls.setdefault(i if call.index is msgspec.UNSET else call.index, ["", ""])
                        if call.function is not None:
                            slot[0] += call.function.name or ""
                            slot[1] += call.function.arguments or ""
            if isinstance(choice.text, str):
                text.append(choice.text)
    if not readable:
        return None  # read_response tries another API's reading
    calls_ = tuple((calls[k][0], canonical_arguments(calls[k][1])) for k in sorted(calls))
    return Turn("assistant", "".join(text), calls_), response_id


__all__ = ["UNREAD", "Answer", "ChatPrefixes", "Link", "Links", "Prefixes", "Unread", "chat_answer", "links_of", "read_links"]
