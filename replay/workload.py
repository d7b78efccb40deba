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
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from infertap.apis import Links, Request, link, links_of, read_request, read_response, sessions_of, turns_of
from infertap.capture.reader import CaptureReader
from infertap.errors import ConfigError, InfertapError


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
    previous_response_id: str | None = None  # a Responses request that continues a stored response


@dataclass(frozen=True, slots=True)
class SessionSample:
    """Whole sessions only: a deterministic ``fraction`` of them (by a hash of the seed and the session,
    so a session's fate doesn't depend on which others the capture holds), then the first ``limit``."""

    fraction: float | None = None
    seed: int = 0
    limit: int | None = None

    def __post_init__(self) -> None:
        if self.fraction is not None and not 0 < self.fraction <= 1:
            raise ConfigError(f"--sample-sessions {self.fraction}: a fraction of the sessions, above 0 and at most 1")
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"--limit-sessions {self.limit}: one session or more")

    def keeps(self, session: str) -> bool:
        if self.fraction is None:
            return True
        digest = hashlib.blake2b(f"{self.seed}\x00{session}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") < self.fraction * 2**64

    def apply(self, items: list[Item]) -> list[Item]:
        """The items of the sessions kept, renumbered, each turn still after the turn it continues."""
        chosen = [s for s in dict.fromkeys(item.session for item in items) if s is not None and self.keeps(s)]
        kept_sessions = set(chosen[: self.limit] if self.limit is not None else chosen)
        kept = [item for item in items if item.session in kept_sessions]
        if not kept:
            raise WorkloadError(
                f"--sample-sessions {self.fraction} --seed {self.seed} keeps none of the "
                f"{len(dict.fromkeys(i.session for i in items))} sessions: raise the fraction or change the seed"
            )
        renumbered = {item.index: i for i, item in enumerate(kept)}
        for i, item in enumerate(kept):
            item.index = i
            item.parent = None if item.parent is None else renumbered[item.parent]
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


def _turns_and_think(items: list[Item], parents: list[int | None]) -> None:
    """Parents, turns, sessions and the think time before each turn: from the recorded end of the
    turn it continues to its own recorded start (never below zero)."""
    for item, parent in zip(items, parents, strict=True):
        item.parent = parent
    ids = [item.source_id for item in items]
    explicit = [item.session for item in items]
    for item, turn, session in zip(items, turns_of(parents), sessions_of(parents, explicit, ids), strict=True):
        item.turn, item.session = turn, session
        if item.parent is not None:
            parent_item = items[item.parent]
            item.think_ns = max(0, item.offset_ns - (parent_item.offset_ns + parent_item.duration_ns))


def _links(record: dict[str, Any], request: Request) -> Links:
    """The request's links; its response is read only when it can be continued (answered, 2xx)."""
    answered = request.generation and bool(request.turns) and 200 <= (record.get("status") or 0) < 300
    return links_of(record, request, read_response(record) if answered else None)


def load(
    path: str | os.PathLike[str],
    *,
    filters: Filters | None = None,
    limit: int | None = None,
    repeat: int = 1,
    sample: SessionSample | None = None,
) -> tuple[list[Item], dict[str, Any]]:
    """Items to replay, in original order, and the source capture's identity."""
    reader = CaptureReader(path)
    # Without filters or a limit every exchange is replayed: each is read as it streams by, and only
    # what replay needs of it is kept (not its response). Otherwise the selection comes first, and
    # only the exchanges it keeps are read.
    ahead = limit is None and (filters is None or filters == Filters())
    source = _Source.read_from(reader, ahead=ahead)
    if not source.records:
        raise WorkloadError(f"{path}: the capture holds no exchanges to replay")
    items, links = _select(source, filters, limit)
    if not items:
        raise WorkloadError(f"{path}: no exchange is left to replay after the filters")
    _turns_and_think(items, [None if found is None else found[0] for found in link(links)])
    if sample is not None:
        items = sample.apply(items)
    base = items[0].offset_ns
    for item in items:
        item.offset_ns -= base
    _count_in_flight(items)
    if repeat > 1:
        items = _repeated(items, repeat)
    identity = {"path": str(reader.path), "capture_id": source.header.get("capture_id"), "torn": [str(t) for t in reader.torn]}
    return items, identity


@dataclass
class _Source:
    """What a replay needs of a capture: its exchanges, when each started (ns, one clock over every
    run), its first header, and the source's effective settings of each enriched exchange."""

    records: list[dict[str, Any]] = field(default_factory=list)  # without their responses when read ahead
    starts: list[int] = field(default_factory=list)
    header: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)  # by exchange id
    read: list[_Read | None] = field(default_factory=list)  # each record's, when read ahead (None: refused)

    @classmethod
    def read_from(cls, reader: CaptureReader, *, ahead: bool) -> _Source:
        source = cls()
        anchor = 0
        for r in reader.records():
            if r["type"] == "header":
                source.header = source.header or r
                anchor = round(r["wall"] * 1e9)  # the run's start; exact monotonic offsets within it
            elif r["type"] == "exchange":
                source.starts.append(anchor + r["start_ns"])
                if ahead:
                    source.read.append(None if r.get("end") == "refused" else _Read.of(r))
                    r = {k: v for k, v in r.items() if k not in _RESPONSE}
                source.records.append(r)
            elif r["type"] == "enrichment":
                source.settings[r["exchange_id"]] = r["settings"]
        return source


_RESPONSE = ("chunks", "chunk_ns", "response_headers")  # what replay doesn't keep once a record is read


@dataclass(frozen=True, slots=True)
class _Read:
    """What replay needs of an exchange's request and response, read once."""

    model: str | None
    previous_response_id: str | None
    links: Links

    @classmethod
    def of(cls, record: dict[str, Any]) -> _Read:
        request = read_request(record)  # the body parsed once, for the model and the conversation
        return cls(request.model, request.previous_response_id, _links(record, request))


def _select(source: _Source, filters: Filters | None, limit: int | None) -> tuple[list[Item], list[Links]]:
    """The exchanges to replay (the first ``limit`` that pass ``filters``), in original order, with
    their links (a response is read only for an exchange kept)."""
    starts, records = source.starts, source.records
    first = min(starts)
    order = sorted(range(len(records)), key=lambda i: (starts[i], records[i]["seq"]))
    items: list[Item] = []
    chosen: list[tuple[int, _Read | Request]] = []
    for i in order:
        if limit is not None and len(items) >= limit:
            break
        r = records[i]
        if r.get("end") == "refused":
            continue  # infertap refused it; the engine never saw it
        read = source.read[i] if source.read else None
        head = read if read is not None else read_request(r)
        item = _item(len(items), r, head, starts[i] - first, source.settings.get(r["id"]))
        if filters and not filters.keep(item):
            continue
        items.append(item)
        chosen.append((i, head))
    links = [head.links if isinstance(head, _Read) else _links(records[i], head) for i, head in chosen]
    return items, links


def _item(index: int, r: dict[str, Any], head: _Read | Request, offset: int, settings: dict[str, Any] | None) -> Item:
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
        model=head.model,
        previous_response_id=head.previous_response_id,
        status=r.get("status"),
        settings=settings,
    )


def _count_in_flight(items: list[Item]) -> None:
    """Set each item's ``concurrency``: in flight at its start, those started by then less those
    ended by then (an interval ends after it starts), counted by bisection, not a scan per item."""
    starts = sorted(item.offset_ns for item in items)
    ends = sorted(item.offset_ns + item.duration_ns for item in items)
    for item in items:
        item.concurrency = bisect.bisect_right(starts, item.offset_ns) - bisect.bisect_right(ends, item.offset_ns) or 1


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
                        "session": None if it.session is None else f"{it.session}#{k}",  # each copy its own sessions
                        "parent": None if it.parent is None else it.parent + k * len(items),
                    }
                )
            )
    return items + copies
