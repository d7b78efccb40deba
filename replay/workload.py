"""A replay workload: the exchanges of a capture, filtered, ordered, with their conversations.

Each item keeps its original offset from the first request and, for ``--concurrency original``,
how many requests were in flight when it started. Conversation order comes from an explicit
session header, from a Responses API ``previous_response_id``, or is detected when a request's
conversation (its messages, or Responses input items, or Anthropic messages with their system
prompt, as ``infertap.apis`` reads them) extends an earlier request's conversation plus that
request's reply.
"""

from __future__ import annotations

import bisect
import fnmatch
import hashlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from infertap.apis import Request, Turn, read_request, read_response
from infertap.capture.reader import CaptureReader
from infertap.errors import InfertapError


class WorkloadError(InfertapError):
    pass


@dataclass
class Item:
    index: int
    source_id: str
    method: str
    path: str
    query: str
    headers: list[list[str]]
    body: bytes
    offset_ns: int  # original start, relative to the workload's first request
    duration_ns: int  # how long it took originally (start to end)
    session: str | None = None
    model: str | None = None
    status: int | None = None
    parent: int | None = None  # index of the item this one continues
    concurrency: int = 1  # requests in flight when it started originally, itself included
    turn: int = 0  # its place in its conversation (0: the first request)
    think_ns: int | None = None  # with a parent: the agent's own time between the parent's end and this send
    repeat: int = 0
    settings: dict[str, Any] | None = None  # the source's effective settings (enrichment)


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
                if not value.isdigit():
                    raise WorkloadError(f"--filter status= takes an HTTP status code, got {value!r}")
                f.statuses.append(int(value))
            elif key in ("after", "before"):
                try:
                    setattr(f, f"{key}_s", float(value))
                except ValueError:
                    raise WorkloadError(f"--filter {key}= takes seconds from the first request, got {value!r}") from None
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


@dataclass
class Conversation:
    """What linking needs of one source exchange: the turns it carries, and what it added."""

    api: str
    turns: tuple[Turn, ...] = ()
    reply: Turn | None = None  # None when the exchange has no answer to continue from
    response_id: str | None = None
    previous_response_id: str | None = None


def _prefix_digests(api: str, turns: Sequence[Turn]) -> list[bytes]:
    """The digest of each prefix of ``turns`` (``[k]`` covers turns 0..k), in one pass: a
    conversation of n turns costs n hash updates, not n prefixes hashed each from the start."""
    h = hashlib.blake2b(api.encode(), digest_size=16)
    out = []
    for turn in turns:
        h.update(turn.key())
        h.update(b"\x00")
        out.append(h.copy().digest())
    return out


def _turns_and_think(items: list[Item]) -> None:
    """Each turn's place in its conversation, and the think time before it: from the recorded end of
    the turn it continues to its own recorded start (never below zero)."""
    for item in items:
        if item.parent is not None:
            parent = items[item.parent]
            item.turn = parent.turn + 1
            item.think_ns = max(0, item.offset_ns - (parent.offset_ns + parent.duration_ns))


def link_conversations(items: list[Item], conversations: list[Conversation]) -> None:
    """Set ``parent`` on each item that continues an earlier one (items in original order).

    A turn continues the exchange named by its session header, else the one whose response it names
    (``previous_response_id``), else the latest one whose turns plus reply its own turns start with."""
    last_in_session: dict[str, int] = {}
    by_response: dict[str, int] = {}
    continuations: dict[bytes, int] = {}  # digest of (turns + reply) -> index of the item that made it
    for i, (item, conv) in enumerate(zip(items, conversations, strict=True)):
        if item.session:
            if item.session in last_in_session:
                item.parent = last_in_session[item.session]
            last_in_session[item.session] = i
        if item.parent is None and conv.previous_response_id is not None:
            item.parent = by_response.get(conv.previous_response_id)
        # One pass over the turns and the reply: prefixes to look up, and the continuation it makes.
        digests = _prefix_digests(conv.api, conv.turns if conv.reply is None else (*conv.turns, conv.reply))
        if item.parent is None:
            # The longest earlier exchange whose turns + reply this request starts with.
            for cut in range(len(conv.turns) - 1, 0, -1):
                if conv.turns[cut - 1].role == "assistant" and (parent := continuations.get(digests[cut - 1])) is not None:
                    item.parent = parent
                    break
        if conv.response_id is not None:
            by_response[conv.response_id] = i
        if conv.reply is not None:
            continuations[digests[-1]] = i


def _conversation(record: dict[str, Any], request: Request) -> Conversation:
    if not request.generation or not request.turns:
        return Conversation(request.api)
    if not 200 <= (record.get("status") or 0) < 300:
        return Conversation(request.api, request.turns, previous_response_id=request.previous_response_id)
    out = read_response(record)
    answered = out.readable and out.error_message is None
    return Conversation(
        request.api, request.turns, out.reply() if answered else None, out.response_id, request.previous_response_id
    )


def load(
    path: str | os.PathLike[str], *, filters: Filters | None = None, limit: int | None = None, repeat: int = 1
) -> tuple[list[Item], dict[str, Any]]:
    """Items to replay, in original order, and the source capture's identity."""
    reader = CaptureReader(path)
    source = _Source.read(reader)
    if not source.records:
        raise WorkloadError(f"{path}: the capture holds no exchanges to replay")
    items, conversations, intervals = _select(source, filters)
    if limit is not None:
        items, conversations, intervals = items[:limit], conversations[:limit], intervals[:limit]
    if not items:
        raise WorkloadError(f"{path}: no exchange is left to replay after the filters")
    base = items[0].offset_ns
    for item in items:
        item.offset_ns -= base
    _count_in_flight(items, intervals)
    link_conversations(items, conversations)
    _turns_and_think(items)
    if repeat > 1:
        items = _repeated(items, repeat)
    identity = {"path": str(reader.path), "capture_id": source.header.get("capture_id"), "torn": [str(t) for t in reader.torn]}
    return items, identity


@dataclass
class _Source:
    """What a replay needs of a capture: its exchanges, when each started (ns, one clock over every
    run), its first header, and the source's effective settings of each enriched exchange."""

    records: list[dict[str, Any]] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    header: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)  # by exchange id

    @classmethod
    def read(cls, reader: CaptureReader) -> _Source:
        source = cls()
        anchor = 0
        for r in reader.records():
            if r["type"] == "header":
                source.header = source.header or r
                anchor = round(r["wall"] * 1e9)  # the run's start; exact monotonic offsets within it
            elif r["type"] == "exchange":
                source.records.append(r)
                source.starts.append(anchor + r["start_ns"])
            elif r["type"] == "enrichment":
                source.settings[r["exchange_id"]] = r["settings"]
        return source


def _select(source: _Source, filters: Filters | None) -> tuple[list[Item], list[Conversation], list[tuple[int, int]]]:
    """The exchanges to replay, in original order, with their conversations and (start, end) offsets."""
    starts, records = source.starts, source.records
    first = min(starts)
    order = sorted(range(len(records)), key=lambda i: (starts[i], records[i]["seq"]))
    items: list[Item] = []
    conversations: list[Conversation] = []
    intervals: list[tuple[int, int]] = []
    for i in order:
        r = records[i]
        if r.get("end") == "refused":
            continue  # infertap refused it; the engine never saw it
        request = read_request(r)  # the body parsed once, for the model and the conversation
        item = _item(len(items), r, request, starts[i] - first, source.settings.get(r["id"]))
        if filters and not filters.keep(item):
            continue
        items.append(item)
        conversations.append(_conversation(r, request))
        intervals.append((item.offset_ns, item.offset_ns + item.duration_ns))
    return items, conversations, intervals


def _item(index: int, r: dict[str, Any], request: Request, offset: int, settings: dict[str, Any] | None) -> Item:
    return Item(
        index=index,
        source_id=r["id"],
        method=r["method"],
        path=r["path"],
        query=r["query"],
        headers=r["request_headers"],
        body=r["request_body"],
        offset_ns=offset,
        duration_ns=r["sent_ns"] - r["start_ns"] + r.get("end_ns", 0),
        session=r.get("session"),
        model=request.model,
        status=r.get("status"),
        settings=settings,
    )


def _count_in_flight(items: list[Item], intervals: list[tuple[int, int]]) -> None:
    """Set each item's ``concurrency``: in flight at its start, those started by then less those
    ended by then (an interval ends after it starts), counted by bisection, not a scan per item."""
    starts, ends = sorted(s for s, _ in intervals), sorted(e for _, e in intervals)
    for i, (start, _) in enumerate(intervals):
        items[i].concurrency = bisect.bisect_right(starts, start) - bisect.bisect_right(ends, start) or 1


def _repeated(items: list[Item], repeat: int) -> list[Item]:
    """``items`` then ``repeat - 1`` copies, each after the one before, conversations within a copy.
    A copy starts one mean inter-arrival gap after the last request of the one before, so a regular
    workload stays regular across the seam (1 ms for a single request)."""
    offsets = [i.offset_ns for i in items]
    gap = (max(offsets) - min(offsets)) // (len(items) - 1) if len(items) > 1 else 0
    span = max(offsets) + (gap or 1_000_000)
    copies: list[Item] = []
    for k in range(1, repeat):
        for it in items:
            copies.append(
                Item(
                    **{
                        **it.__dict__,
                        "index": len(items) + len(copies),
                        "offset_ns": it.offset_ns + k * span,
                        "repeat": k,
                        "parent": None if it.parent is None else it.parent + k * len(items),
                    }
                )
            )
    return items + copies
