"""A replay workload: the exchanges of a capture, filtered, ordered, with their conversations.

Each item keeps its original offset from the first request and, for ``--concurrency original``,
how many requests were in flight when it started. Conversation order comes from an explicit
session header, from a Responses API ``previous_response_id``, or is detected when a request's
conversation (its messages, or Responses input items, or Anthropic messages with their system
prompt, as ``infertap.apis`` reads them) extends an earlier request's conversation plus that
request's reply.

One pass over the capture reads everything a replay needs (``load_workload``): each request is
parsed once, for its model, its conversation's digests, the source's workload identity and a check
that the body transforms apply; its response is read only for the reply a later turn may carry
(by a second process on a large capture, ``replies.Replies``, while this one reads the requests).
Request bodies are not kept: an item keeps where its body lies in the capture (``bodies.BodyStore``)
and the body is read again when it is sent.

Several captures of recorded traffic (one per recorder: two gateways in front of one fleet) are one
workload, as the analysis reads them together (analysis/joined_sessions.py): each exchange on the
wall clock the analysis puts it on (its run's header wall time plus its monotonic offset, else its
own wall time less that offset), all of them in one order of sending (ties in the order the captures
were given), linked as one, so that a session whose turns went to two recorders is one session with
the think times one recorder would have seen.
"""

from __future__ import annotations

import bisect
import fnmatch
import hashlib
import math
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeGuard

import msgspec
from msgspec import UNSET

from infertap.apis import Api, Links, api_for, body_apis, json_body, link, sessions_of, think_times_from, turns_of
from infertap.apis.body import Decoded, body_encoding
from infertap.apis.conversation import ChatPrefixes, Prefixes, read_links
from infertap.apis.fastjson import NOT_JSON, utf8
from infertap.apis.linking import Reach
from infertap.apis.read import CHAT, asks_for_tokens
from infertap.capture.identity import IdentityTally, WorkloadIdentity
from infertap.capture.reader import BlockRef, CaptureReader
from infertap.capture.records import (
    SESSION_HEADERS,
    apart,
    named_session,
    recorded_session,
    request_body_unknown,
    settings_rank,
)
from infertap.capture.segments import snapshot
from infertap.collector import no_cyclic_gc
from infertap.errors import ConfigError, InfertapError

from .bodies import BodyStore
from .replies import Replies
from .transforms import TransformError, Transforms, read_encoded


class WorkloadError(InfertapError):
    pass


@dataclass(slots=True)
class Item:
    index: int
    source_id: str
    method: str
    path: str
    query: str
    headers: list[list[str]]
    offset_ns: int  # original start, relative to the workload's first request
    duration_ns: int  # how long it took originally (start to end)
    handoff_ns: int = 0  # from its start to its send (a replay's capture: the wait for its parent and a slot)
    generation: bool = True  # a request for tokens (messages, prompt or input), as the analysis counts them
    session: str | None = None
    model: str | None = None
    status: int | None = None
    parent: int | None = None  # index of the item this one continues
    concurrency: int = 1  # requests in flight when it started originally, itself included
    turn: int = 0  # its place in its conversation (0: the first request)
    think_ns: int | None = None  # with a parent: the agent's own time between the last end in its session and this send
    think_from: int | None = None  # with a parent: the item whose end that is (its parent, or a later-ending turn)
    repeat: int = 0
    recorder_refused: bool = False  # the source's recorder refused it (never sent): linked as a leaf, never replayed
    settings: dict[str, Any] | None = None  # the source's effective settings (enrichment)
    previous_response_id: str | None = None  # a Responses request that continues a stored response
    parent_response_id: str | None = None  # with both: the response id its parent's answer was recorded with
    raw: bytes | None = None  # the request body, when held here...
    store: BodyStore | None = None  # ...else read again from the capture: ``spot`` in this store
    spot: int = -1

    @property
    def body(self) -> bytes:
        """The request body as recorded (read again from the capture when not held)."""
        if self.store is None:
            return self.raw  # type: ignore[return-value]
        return self.store.raw(self.spot)


@dataclass(frozen=True, slots=True)
class SessionSample:
    """Whole sessions only: a deterministic ``fraction`` of them (by a hash of the seed and the session,
    so a session's fate doesn't depend on which others the capture holds), then the first ``limit``."""

    fraction: float | None = None
    seed: int = 0
    limit: int | None = None

    def __post_init__(self) -> None:
        if self.fraction is not None and not math.isfinite(self.fraction):  # "nan" parses as a float: not "a fraction..."
            raise ConfigError(f"--sample-sessions {self.fraction}: not a finite number")
        if self.fraction is not None and not 0 < self.fraction <= 1:
            raise ConfigError(f"--sample-sessions {self.fraction}: a fraction of the sessions, above 0 and at most 1")
        if self.limit is not None and not 1 <= self.limit <= 1 << 40:
            raise ConfigError(f"--limit-sessions {self.limit}: one session or more (at most 2**40)")

    def keeps(self, session: str) -> bool:
        if self.fraction is None:
            return True
        digest = hashlib.blake2b(f"{self.seed}\x00{session}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") < self.fraction * 2**64

    def apply(self, items: list[Item]) -> list[Item]:
        """The items of the sessions kept, renumbered, each turn still after the turn it continues.
        A session is one the analysis counts: one with a generation request this replay sends (a
        ``GET /v1/models`` is no turn of any, and goes only with a session its header names);
        the turns of a kept session that the recorder refused stay, to be counted and left out."""
        sessions = dict.fromkeys(i.session for i in items if i.generation and not i.recorder_refused and i.session is not None)
        chosen = [s for s in sessions if self.keeps(s)]
        kept_sessions = set(chosen[: self.limit] if self.limit is not None else chosen)
        kept = [item for item in items if item.session in kept_sessions]
        if not kept:
            raise WorkloadError(
                f"--sample-sessions {self.fraction} --seed {self.seed} keeps none of the "
                f"{len(sessions)} sessions: raise the fraction or change the seed"
            )
        return _renumbered(kept)


def _renumbered(kept: list[Item]) -> list[Item]:
    """``kept`` numbered anew, each one's parent and think time's turn with it (in its session: kept)."""
    renumbered = {item.index: i for i, item in enumerate(kept)}
    for i, item in enumerate(kept):
        item.index = i
        item.parent = None if item.parent is None else renumbered[item.parent]
        item.think_from = None if item.think_from is None else renumbered[item.think_from]
    return kept


@dataclass
class Filters:
    paths: list[str] = field(default_factory=list)  # fnmatch patterns
    models: list[str] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    after_s: float | None = None  # offsets from the first request
    before_s: float | None = None

    @classmethod
    def parse(cls, specs: Iterable[str]) -> Filters:
        f = cls()
        for spec in specs:
            key, sep, value = spec.partition("=")
            if not sep:
                raise WorkloadError(f"--filter takes KEY=VALUE (path, model, status, after, before), got {spec!r}")
            if key == "path":
                f.paths.append(value)
            elif key == "model":
                f.models.append(value)
            elif key == "status":
                if not (value.isascii() and value.isdigit()):  # '²' is a digit to isdigit, not to int
                    raise WorkloadError(f"--filter status= takes an HTTP status code, got {value!r}")
                f.statuses.append(int(value))
            elif key in ("after", "before"):
                try:
                    seconds = float(value)
                except ValueError:
                    seconds = math.nan
                if not math.isfinite(seconds):
                    raise WorkloadError(f"--filter {key}= takes seconds from the first request, got {value!r}")
                setattr(f, f"{key}_s", seconds)
            else:
                raise WorkloadError(f"unknown --filter key {key!r} (path, model, status, after, before)")
        return f

    def keep(self, item: Item) -> bool:
        if self.paths and not any(fnmatch.fnmatchcase(item.path, p) for p in self.paths):
            return False
        if self.models and item.model not in self.models:
            return False
        if self.statuses and item.status not in self.statuses:
            return False
        if self.after_s is not None and item.offset_ns < self.after_s * 1e9:
            return False
        return not (self.before_s is not None and item.offset_ns > self.before_s * 1e9)


def _link(items: list[Item], links: list[Links]) -> None:
    """Parents, turns, sessions and the think time before each turn, as the analysis's ``turns``
    table has them (``infertap.apis.linking``), on the recorded sends and ends."""
    sent = [item.offset_ns + item.handoff_ns for item in items]
    ended = [item.offset_ns + item.duration_ns for item in items]
    parents = [None if found is None else found[0] for found in link(links, sent, ended)]
    seen: dict[str, int] = {}  # a repeated id's later exchanges start sessions of their own, as the analysis names them apart
    names = []
    for item in items:
        k = seen[item.source_id] = seen.get(item.source_id, 0) + 1
        names.append(apart(item.source_id, k))
    refused = [item.recorder_refused for item in items]
    sessions = sessions_of(parents, [item.session for item in items], names, refused)
    for item, parent, turn, session in zip(items, parents, turns_of(parents), sessions, strict=True):
        item.parent, item.turn, item.session = parent, turn, session
        if parent is not None and item.previous_response_id is not None:
            # Whether the parent is the response it names: a session header may link it to another turn.
            item.parent_response_id = links[parent].response_id
    # Think times among generation requests only, as the analysis has them: a GET is no turn.
    turns = [i for i, item in enumerate(items) if item.generation]
    place = {i: k for k, i in enumerate(turns)}
    thinks = think_times_from(
        [None if (parent := parents[i]) is None else place[parent] for i in turns],
        [sessions[i] for i in turns],
        [sent[i] for i in turns],
        [ended[i] for i in turns],
        [refused[i] for i in turns],
    )
    for i, found in zip(turns, thinks, strict=True):
        if found is not None:
            items[i].think_ns, items[i].think_from = found[0], turns[found[1]]


Paths = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


def load(
    path: Paths,
    *,
    filters: Filters | None = None,
    limit: int | None = None,
    repeat: int = 1,
    sample: SessionSample | None = None,
) -> tuple[list[Item], dict[str, Any]]:
    """Items to replay, in original order, and the source capture's identity."""
    workload = load_workload(path, filters=filters, limit=limit, repeat=repeat, sample=sample)
    return workload.items, workload.source


@dataclass
class Workload:
    """What a replay sends (``items``), where it comes from (``source``: the capture's path, id and
    torn tails), the source's workload identity, the first item whose body the transforms
    given to ``load_workload`` can't apply to (None: all can), and how many bodies they pass as
    recorded for not being JSON objects."""

    items: list[Item]
    source: dict[str, Any]
    identity: WorkloadIdentity
    refused: tuple[Item, str] | None = None
    as_recorded: int = 0  # bodies that are no JSON object (multipart uploads), which a --model-map leaves as recorded
    not_kept: int = 0  # exchanges the filters chose but left out: their request body was not kept, never sent empty
    source_refused: int = 0  # exchanges chosen (filters, limit, sessions) the source's recorder refused: not replayed
    unpinned: int = 0  # exchanges chosen whose id others of their capture carry: an enrichment of it gives them no settings
    apis: tuple[Api, ...] = ()  # the APIs the chosen requests speak, each once


def _apis(items: list[Item], chosen: dict[int, Api]) -> tuple[Api, ...]:
    """The APIs ``items`` speak, each once: each path's, or the one its body chose (``chosen``, by
    id(item): ``/generate``'s SGLang or TGI)."""
    by_path: dict[str, Api] = {}
    out: dict[str, Api] = {}
    for item in items:
        api = chosen.get(id(item))
        if api is None:
            api = by_path.get(item.path) or by_path.setdefault(item.path, api_for(item.path))
        out.setdefault(api.name, api)
    return tuple(out.values())


def load_workload(
    path: Paths,
    *,
    filters: Filters | None = None,
    limit: int | None = None,
    repeat: int = 1,
    sample: SessionSample | None = None,
    transforms: Transforms | None = None,
    session_tag: str | None = None,
) -> Workload:
    """The workload of the capture at ``path`` (or of the captures, a sequence of paths, as one), in
    one pass over it (see the module's docstring); ``session_tag`` (a sweep's point) names its sessions apart, ``_tagged``."""
    with no_cyclic_gc():
        return _load(path, filters, limit, repeat, sample, transforms, session_tag)


def _load(
    path: Paths,
    filters: Filters | None,
    limit: int | None,
    repeat: int,
    sample: SessionSample | None,
    transforms: Transforms | None,
    session_tag: str | None = None,
) -> Workload:
    paths = [path] if isinstance(path, (str, os.PathLike)) else list(path)
    if not paths:
        raise WorkloadError("no capture to replay")
    # Without filters or a limit every exchange is replayed, and a request's conversation links
    # can be narrowed as they are read (_Scan.prune).
    every = limit is None and (filters is None or filters == Filters())
    scan: _Scan | None = None
    readers = []
    for one in paths:
        sizes = snapshot(one)  # the records read here and by the replies' worker: the same ones
        reader = CaptureReader(one, sizes)
        readers.append(reader)
        replies = Replies(str(reader.path), sizes)
        try:
            if scan is None:
                scan = _Scan(BodyStore(reader), transforms, replies, prune=every, several=len(paths) > 1)
            else:
                scan.next_capture(BodyStore(reader), replies)
            for record, ref, payload, start in reader.located():
                scan.add(record, ref, payload, start)
        finally:
            replies.close()
    assert scan is not None
    path = paths[0] if len(paths) == 1 else ", ".join(map(str, (r.path for r in readers)))
    if not scan.exchanges:
        raise WorkloadError(f"{path}: the capture holds no exchanges to replay")
    items, links = scan.select(filters, limit)
    if not any(not item.recorder_refused for item in items):
        if items:
            raise WorkloadError(f"{path}: no exchange to replay: the recorder refused the {len(items)} chosen (never sent)")
        if scan.not_kept:
            raise WorkloadError(f"{path}: no exchange to replay: the {scan.not_kept} chosen had request bodies not kept")
        raise WorkloadError(f"{path}: no exchange is left to replay after the filters")
    _link(items, links)  # the refused among them too, as leaves: their sessions as the analysis finds them
    del links
    if sample is not None:
        items = sample.apply(items)
    source_refused = sum(item.recorder_refused for item in items)  # of those chosen: what the replay leaves out
    items = _renumbered([item for item in items if not item.recorder_refused]) if source_refused else items
    base = items[0].offset_ns
    for item in items:
        item.offset_ns -= base
    _count_in_flight(items)
    refused = next(((item, scan.refusals[id(item)]) for item in items if id(item) in scan.refusals), None)
    as_recorded = sum(1 for item in items if id(item) in scan.as_recorded)  # per pass, as not_kept and source_refused
    unpinned = sum(1 for item in items if id(item) in scan.unpinned)  # per pass too
    apis = _apis(items, scan.chosen)
    if session_tag is not None:
        _tagged(items, session_tag)
    if repeat > 1:
        items = _repeated(items, repeat)
    first = readers[0]
    source: dict[str, Any] = {"path": str(first.path), "capture_id": scan.header.get("capture_id")}
    source["torn"] = [str(t) for r in readers for t in r.torn]
    if len(readers) > 1:  # one workload of several captures: each named, the first also as the source's path
        source["captures"] = [{"path": str(r.path), "capture_id": c} for r, c in zip(readers, scan.ids, strict=True)]
    return Workload(items, source, scan.tally.identity(), refused, as_recorded, scan.not_kept, source_refused, unpinned, apis)


_UNLINKED = Links()  # a request that linking passes over: it continues nothing and nothing continues it


class _ChatHead(msgspec.Struct):
    """What replay reads of a chat request's body: its messages left as JSON, the rest skipped. A
    body that isn't an object of this shape fails to decode and is read whole (``json_body``)."""

    model: Any = None
    messages: list[msgspec.Raw] | None | msgspec.UnsetType = msgspec.UNSET
    prompt: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    input: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    previous_response_id: Any = None


_decode_head = msgspec.json.Decoder(_ChatHead).decode


def _chat_head(raw: Any) -> _ChatHead | None:
    if not isinstance(raw, bytes) or not utf8(raw):  # not UTF-8: not JSON to json_body either
        return None
    try:
        return _decode_head(raw)
    except NOT_JSON:
        return None


def _counted(k: Any) -> TypeGuard[int]:
    """Whether an enrichment's ``occurrence`` names an exchange of its id: a count from 1."""
    return isinstance(k, int) and not isinstance(k, bool) and k >= 1


class _Scan:
    """What a replay needs of a capture, gathered record by record: an item for each exchange the
    engine was sent (its body left in the capture), its links, when it started (ns, one clock over
    every run), the source's effective settings of each enriched exchange, and the workload identity.

    With ``prune`` (every exchange is replayed) a request keeps only the conversation digests that
    linking can still reach (``linking.Reach``): its candidate prefixes, longest first, up to the
    first that an exchange started before it made and had ended by its send (linking stops there
    whatever comes later; one still running is passed for the shorter ones, as linking passes it)."""

    def __init__(
        self, store: BodyStore, transforms: Transforms | None, replies: Replies, *, prune: bool, several: bool = False
    ) -> None:
        self.store = store
        self.replies = replies
        self.check = transforms if transforms is not None and transforms.touches_body else None
        self.fill = transforms or Transforms()  # a credential the capture redacted in a body: given a value, or refused
        self.prune = prune
        self.header: dict[str, Any] = {}
        self.tally = IdentityTally()
        self.exchanges = 0  # every exchange record, refused ones too
        self.first: int | None = None  # the first start, over every exchange
        self.items: list[Item] = []  # offset_ns: the absolute start until select()
        self.seqs: list[int] = []
        self.links: list[Links] = []
        # By (capture, exchange id, occurrence): its enrichments' (settings_rank); of each capture, its own.
        # Under occurrence None every enrichment that attaches to an id one exchange carries (none past
        # its first); one that says which exchange of its id (``occurrence``, infertap enrich's) under
        # that too, which pins that one of a repeated id.
        self.settings: dict[tuple[int, str, int | None], dict[str, Any]] = {}
        self._settings_rank: dict[tuple[int, str, int | None], tuple[bool, float]] = {}
        self._ids: dict[str, int] = {}  # this capture's exchange ids so far, each one's exchanges
        self.occurrences: list[int] = []  # each item's place among its capture's exchanges of its id, from 1
        self.repeated: dict[tuple[int, str], int] = {}  # (capture, id) more than one of its exchanges carries: how many
        # (capture, id) of an enrichment that names no exchange of it for sure: no occurrence, or the
        # furthest one named (past the id's exchanges where it is a repeated id's: attached to none)
        self.loose: set[tuple[int, str]] = set()
        self.furthest: dict[tuple[int, str], int] = {}
        self.unpinned: set[int] = set()  # id(item) of those, with no enrichment its own, one naming their id attached to none
        self.where: list[int] = []  # each item's capture
        self.refusals: dict[int, str] = {}  # id(item) -> why the transforms can't apply to its body
        self.as_recorded: set[int] = set()  # id(item) of bodies no JSON object, that a --model-map passes
        self.unknown: set[int] = set()  # id(item) of requests sent with a body not kept (request_body_unknown)
        self.chosen: dict[int, Api] = {}  # id(item) -> the API its body chose, where its path names none (/generate)
        self.not_kept = 0  # of those, how many select() chose: left out
        self.chat = ChatPrefixes()
        self._anchor: int | None = None if several else 0  # None: this capture's run start not read yet
        self.several = several  # one of several captures read as one workload (next_capture)
        self.capture = 0  # which of them is being read
        self.ids: list[str | None] = [None]  # each capture's capture_id
        self._reach = Reach()  # which candidates linking can still reach (prune)
        self._headers: dict[tuple[tuple[str, ...], ...], list[list[str]]] = {}  # one list per distinct set

    def next_capture(self, store: BodyStore, replies: Replies) -> None:
        """Go on with the next of several captures: its bodies and replies, and no run's clock yet."""
        self.store, self.replies = store, replies
        self.capture += 1
        self.ids.append(None)
        self._ids = {}
        self._anchor = None

    def add(self, r: dict[str, Any], ref: BlockRef, payload: bytes, start: int) -> None:
        rtype = r["type"]
        if rtype == "exchange":
            self._exchange(r, ref, payload, start)
        elif rtype == "header":
            if self.several:
                self._joinable(r)
            self.header = self.header or r
            self._anchor = round(r["wall"] * 1e9)  # the run's start; exact monotonic offsets within it
            self.tally.add(r)
        elif rtype == "enrichment":  # a later one whose probe failed leaves the engine's defaults read before
            k = r.get("occurrence")
            rank = settings_rank(r)
            named = (self.capture, r["exchange_id"])
            if _counted(k):
                self.furthest[named] = max(k, self.furthest.get(named, 0))
            else:
                self.loose.add(named)
            keys: list[tuple[int, str, int | None]] = [(self.capture, r["exchange_id"], k)] if _counted(k) else []
            if not _counted(k) or k == 1:
                keys.append((self.capture, r["exchange_id"], None))
            for key in keys:
                if rank >= self._settings_rank.get(key, rank):
                    self.settings[key], self._settings_rank[key] = r["settings"], rank

    def _joinable(self, header: dict[str, Any]) -> None:
        """Refuses a capture that is no part of one workload with the others: a replay's (its sessions
        are its source's, linked within it, as the analysis leaves them), or a copy of another (the
        same ``capture_id``: its requests sent twice). Its run's start must be known, or its exchanges
        can't be put on the others' clock."""
        capture_id = header.get("capture_id")
        if (header.get("recorder") or {}).get("kind") == "replay":
            raise WorkloadError(
                f"capture {self.capture + 1} of those given is a replay's: its sessions are its source's, linked "
                "within it, not with recorded traffic; replay it alone"
            )
        if capture_id is not None and capture_id in self.ids[: self.capture]:
            raise WorkloadError(
                f"capture {self.capture + 1} of those given is a copy of capture {self.ids.index(capture_id) + 1} "
                f"(capture_id {capture_id}): its requests would be sent twice; give one of them"
            )
        self.ids[self.capture] = self.ids[self.capture] or capture_id
        wall = header.get("wall")
        if not isinstance(wall, (int, float)) or isinstance(wall, bool) or not math.isfinite(wall) or wall <= 0:
            raise WorkloadError(
                f"capture {self.capture + 1} of those given has a run with no start time (its header's wall "
                f"{wall!r}): its exchanges can't be put on one clock with the others'; replay it alone"
            )

    def _own_anchor(self, r: dict[str, Any]) -> int:
        """Where no run header of this capture came before its exchange (a torn head), its run's start
        as the analysis takes it: the exchange's own wall time less its monotonic offset."""
        wall, offset = r.get("wall"), r.get("start_ns")
        if not isinstance(wall, (int, float)) or not math.isfinite(wall) or wall <= 0 or not isinstance(offset, int):
            raise WorkloadError(
                f"capture {self.capture + 1} of those given: exchange {r.get('id')} has no run header before it and no "
                "wall time of its own: it can't be put on one clock with the others'; replay that capture alone"
            )
        return round(wall * 1e9) - offset

    def _exchange(self, r: dict[str, Any], ref: BlockRef, payload: bytes, start: int) -> None:
        self.exchanges += 1
        occurrence = self._ids[r["id"]] = self._ids.get(r["id"], 0) + 1
        if occurrence > 1:  # the analysis names it apart (<id>~2): an enrichment attaches by its occurrence
            self.repeated[(self.capture, r["id"])] = occurrence
        anchor = self._anchor if self._anchor is not None else self._own_anchor(r)
        answer, digest = self.replies.of(r.get("id"))  # asked for every exchange, in record order, as the worker sends them
        r["session"] = recorded_session(r)  # blank, or read from its headers (older recorders)
        # When it was due: a replay's capture records its schedule, free of the dispatcher's jitter
        # (its start), so that a replay of a replay keeps the original's offsets.
        scheduled = r.get("scheduled_ns")
        due = scheduled if isinstance(scheduled, int) else r["start_ns"]
        started = anchor + due
        self.first = started if self.first is None or started < self.first else self.first
        raw = r.get("request_body")
        path = r.get("path")
        # The request, parsed once: for the identity, the model, the conversation, the transforms.
        head = _chat_head(raw) if api_for(path) is CHAT else None
        body: dict[str, Any] | None = None
        chosen: Api | None = None  # the API its body chose, where its path names none (/generate)
        # Plain JSON under a content-encoding's label: read as JSON, but no body the transforms edit
        # (a --model-map passes it as recorded, a --set refuses it: encoded_body).
        encoding = body_encoding(r["request_headers"])
        labelled = encoding is not None
        # Its content-encoding undone once, here, for what it asks, its identity and the transforms' check
        # (as the analysis's ``plain_body``): a zstd body decompressed for each was most of a Codex load's time.
        decoded = read_encoded(raw, encoding) if encoding is not None and isinstance(raw, bytes) and raw else None
        plain = decoded.data if isinstance(decoded, Decoded) else raw or b""
        if head is not None:  # a chat request: its messages as JSON, each read once over the whole capture
            is_object, is_object_decoded = True, not labelled
            generation = head.messages is not UNSET or head.prompt is not UNSET or head.input is not UNSET
            model = head.model if isinstance(head.model, str) else None
            previous = head.previous_response_id if isinstance(head.previous_response_id, str) else None
            prefixes = self.chat.of(head.messages) if isinstance(head.messages, list) else None
        else:
            body = json_body(raw)
            is_object = body is not None
            # What it asks, read as the analysis reads it: a compressed body (the Codex CLI's zstd) as its
            # JSON. Sent as recorded, bytes and Content-Encoding alike.
            asked = body if body is not None or not raw else json_body(plain)
            is_object_decoded = asked is not None and (body is None or not labelled)  # compressed JSON: edited (encoded_body)
            api = api_for(path, asked)
            chosen = api if body_apis(path) else None
            generation = asked is not None and asks_for_tokens(api, asked)
            model = previous = None
            prefixes = None
            if asked is not None:
                model = api.model(asked, path)  # Bedrock's is in the path
                previous = asked.get("previous_response_id") if isinstance(asked.get("previous_response_id"), str) else None
                prefixes = Prefixes.of(api.name, api.turns(asked)[0])
        self.tally.add(r, generation, digest, plain)
        refused = r.get("end") == "refused"  # infertap refused it; the engine never saw it: linked, never sent
        # From when it was due: its send and end as recorded (linking's clock, see _link).
        handoff, duration = max(0, r["sent_ns"] - due), r["sent_ns"] - due + r.get("end_ns", 0)
        if not generation:
            links = _UNLINKED  # as the analysis links: generation requests only (a GET in a session is no turn)
        elif self.prune:
            sent = started + handoff
            links = read_links(
                r, prefixes, previous, generation, lambda digest: self._reach.enough(digest, started, sent), answer
            )
            if links.continuation is not None and not refused:
                self._reach.made(links.continuation, started, started + duration)
        else:
            links = read_links(r, prefixes, previous, generation, answer=answer)  # its response read only as far as a reply
        unknown = not refused and request_body_unknown(r)
        refusal = None
        if not (refused or unknown):  # what is sent must take the transforms, and no credential left unfilled
            refusal = self._refusal(raw, body, is_object, path, r["request_headers"], decoded) if self.check is not None else None
            refusal = refusal or self.fill.unfilled_credential(raw, body)
        item = Item(
            index=len(self.items),
            source_id=r["id"],
            method=sys.intern(r["method"]),
            path=sys.intern(r["path"]),
            query=sys.intern(r["query"]),
            headers=self._shared(r["request_headers"]),
            offset_ns=started,
            duration_ns=duration,
            handoff_ns=handoff,
            generation=generation,
            session=r.get("session"),
            model=None if model is None else sys.intern(model),
            previous_response_id=previous,
            status=r.get("status"),
            recorder_refused=refused,
        )
        spot = self.store.add(ref, payload, start, raw) if isinstance(raw, bytes) and raw else -1
        if spot < 0:
            item.raw = raw
        else:
            item.store, item.spot = self.store, spot
        if chosen is not None:
            self.chosen[id(item)] = chosen
        if unknown:  # not sent: an empty body would be another request
            self.unknown.add(id(item))
        elif refusal is not None:
            self.refusals[id(item)] = refusal
        elif self.check is not None and not refused and not is_object_decoded and raw and not self.check.edits_every_body:
            self.as_recorded.add(id(item))
        self.items.append(item)
        self.seqs.append(r["seq"] | self.capture << 48)  # ties in the order the captures were given
        self.where.append(self.capture)
        self.occurrences.append(occurrence)
        self.links.append(links)

    def _refusal(
        self,
        raw: Any,
        body: dict[str, Any] | None,
        is_object: bool,
        path: str | None,
        headers: list[list[str]],
        decoded: Decoded | ValueError | None,
    ) -> str | None:
        """Why the body transforms can't apply to this body (None: they can). On a JSON object
        only a ``--set`` through a key that holds no object can fail, so only then is it parsed;
        ``decoded``: its content-encoding undone already (``read_encoded``), handed on."""
        assert self.check is not None
        try:
            if not is_object or body_encoding(headers) is not None:  # (``labelled``)
                # not a JSON object as read here, or one sent with a content-encoding (plain JSON under its
                # label, which a --set refuses as it is sent): the transform says why, exactly
                self.check.body(raw, path=path, headers=headers, decoded=decoded)
            elif self.check.can_refuse(path):
                # A parse of its own where none was made, done with now.
                self.check.apply(body if body is not None else json_body(raw) or {}, path=path)
        except TransformError as exc:
            return str(exc)
        return None

    def _shared(self, headers: list[list[str]]) -> list[list[str]]:
        """The same header set as one list for every exchange that sent it."""
        key = tuple(map(tuple, headers))
        return self._headers.setdefault(key, headers)

    def _settings_of(self, item: Item, capture: int, occurrence: int) -> dict[str, Any] | None:
        """The source's effective settings of ``item``, as the analysis attaches its enrichments
        (``decode.enrichment_attached``): of an id several of its capture's exchanges carry, those of an
        enrichment that names which of them (its ``occurrence``). One that names the id alone, or an
        occurrence past the id's exchanges, is attached to none: an item of that id left with no
        enrichment of its own is counted (``unpinned``), as the analysis counts that enrichment; one
        whose id's enrichments each name another of its exchanges simply has none, as in the analysis.
        Of an id it alone carries, an enrichment naming a later exchange of it (a copy this capture
        lacks) is attached to none likewise."""
        key = (capture, item.source_id)
        settings = self.settings.get((capture, item.source_id, None if key not in self.repeated else occurrence))
        if settings is None and (
            self.furthest.get(key, 0) > self.repeated.get(key, 1) or (key in self.repeated and key in self.loose)
        ):
            self.unpinned.add(id(item))
        return settings

    def select(self, filters: Filters | None, limit: int | None) -> tuple[list[Item], list[Links]]:
        """The exchanges to replay (the first ``limit`` that pass ``filters``), in original order
        (numbered, offsets from the first exchange's start), with their links."""
        items, seqs, first = self.items, self.seqs, self.first or 0
        order = sorted(range(len(items)), key=lambda i: (items[i].offset_ns, seqs[i]))
        chosen: list[Item] = []
        links: list[Links] = []
        sendable = 0  # --limit counts what is sent: not the exchanges the recorder refused
        for i in order:
            if limit is not None and sendable >= limit:
                break
            item = items[i]
            item.offset_ns -= first
            if filters and not filters.keep(item):
                continue
            if id(item) in self.unknown:
                self.not_kept += 1
                continue
            sendable += not item.recorder_refused
            item.index = len(chosen)
            item.settings = self._settings_of(item, self.where[i], self.occurrences[i])
            chosen.append(item)
            links.append(self.links[i])
        self.items, self.seqs, self.links, self.where, self.occurrences = [], [], [], [], []
        return chosen, links


def _count_in_flight(items: list[Item]) -> None:
    """Set each item's ``concurrency``: in flight at its send, those sent by then less those ended by
    then (an interval ends after it is sent), counted by bisection, not a scan per item. From the
    send, not the start: a replay's capture starts its requests before they wait for a slot of its
    --max-concurrency or for their parent, and those waiting were not in flight."""
    sends = sorted(item.offset_ns + item.handoff_ns for item in items)
    ends = sorted(item.offset_ns + item.duration_ns for item in items)
    for item in items:
        sent = item.offset_ns + item.handoff_ns
        item.concurrency = bisect.bisect_right(sends, sent) - bisect.bisect_right(ends, sent) or 1


def failed_when_recorded(items: Sequence[Item]) -> dict[str, int]:
    """The generation requests the source capture holds as failed (no 2xx answer), by status ("none":
    no answer at all). Replayed as recorded (a prompt past the context, a bad parameter), they are
    likely to fail at every load, in its error rate and over every latency bound: not the target's
    capacity, so the sweep says how many there were, and a replay beside its own failures."""
    failed: dict[str, int] = {}
    for item in items:
        if item.generation and not item.recorder_refused and not (item.status is not None and 200 <= item.status < 300):
            key = "none" if item.status is None else str(item.status)
            failed[key] = failed.get(key, 0) + 1
    return dict(sorted(failed.items()))


def _repeated(items: list[Item], repeat: int) -> list[Item]:
    """``items`` then ``repeat - 1`` copies, each after the one before, conversations within a copy.
    A copy starts one mean inter-arrival gap after the last request of the one before, so a regular
    workload stays regular across the seam (1 ms for a single request). Copy ``k`` sends its session
    headers as ``<id>#k`` (``_pass_headers``), as its sessions are named."""
    offsets = [i.offset_ns for i in items]
    gap = (max(offsets) - min(offsets)) // (len(items) - 1) if len(items) > 1 else 0
    span = max(offsets) + (gap or 1_000_000)
    copies: list[Item] = []
    for k in range(1, repeat):
        headers: dict[int, list[list[str]]] = {}  # one list per distinct set, as loaded
        for it in items:
            if id(it.headers) not in headers:
                headers[id(it.headers)] = _pass_headers(it.headers, k)
            copies.append(
                replace(
                    it,
                    index=len(items) + len(copies),
                    offset_ns=it.offset_ns + k * span,
                    repeat=k,
                    headers=headers[id(it.headers)],
                    session=None if it.session is None else f"{it.session}#{k}",  # each copy its own sessions
                    parent=None if it.parent is None else it.parent + k * len(items),
                    think_from=None if it.think_from is None else it.think_from + k * len(items),
                )
            )
    return items + copies


def _tagged(items: list[Item], tag: str) -> None:
    """Each item's session, and the session headers it sends, as ``<id>@<tag>``: a sweep's points
    replay the same sessions, and sent as recorded, a gateway keyed by them (sticky routing, a
    per-session prefix cache) gave a later point the sessions an earlier one had warmed."""
    headers: dict[int, list[list[str]]] = {}  # one list per distinct set, as loaded
    for item in items:
        if id(item.headers) not in headers:
            headers[id(item.headers)] = _session_headers(item.headers, f"@{tag}")
        item.headers = headers[id(item.headers)]
        if item.session is not None:
            item.session = f"{item.session}@{tag}"


def _pass_headers(headers: list[list[str]], k: int) -> list[list[str]]:
    """``headers`` as pass ``k`` sends them: each session header's id as ``<id>#k``. Sent as
    recorded, a recorder (or gateway) in front of the target put pass k's turns in pass 0's
    sessions; the replay's capture already named them apart."""
    return _session_headers(headers, f"#{k}")


#: Headers no session is read from that clients send their session's id in too, beside a session
#: header: Codex CLI's ``conversation_id`` (before codex-api, the value of its ``session_id``),
#: opencode's ``x-session-affinity`` (with its ``x-session-id``). A gateway may key on them as well.
SESSION_KEYED_HEADERS = (b"conversation_id", b"x-session-affinity")


def _session_headers(headers: list[list[str]], suffix: str) -> list[list[str]]:
    """``headers`` with ``suffix`` added to each session header's id, and to a header of
    ``SESSION_KEYED_HEADERS`` that holds one of those ids: sent as recorded, it kept the copies (and
    points) in one conversation for whatever keys on it. One naming none stays as it was, and so
    does such a header holding something else (what the client shared across sessions, they share)."""
    named = [name.lower().encode("latin-1") in SESSION_HEADERS and named_session(value) is not None for name, value in headers]
    ids = {value for (_, value), session in zip(headers, named, strict=True) if session}
    return [
        [name, f"{value}{suffix}"]
        if session or (value in ids and name.lower().encode("latin-1") in SESSION_KEYED_HEADERS)
        else [name, value]
        for (name, value), session in zip(headers, named, strict=True)
    ]
