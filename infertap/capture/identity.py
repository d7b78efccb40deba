"""Workload identity: proof that two runs saw identical traffic (docs/analysis.md, "Workload identity").

A capture's *workload* is its generation requests (those its API's adapter reads as asking for
tokens: ``messages``, ``prompt`` or ``input``, or llama.cpp's ``/infill`` text around a gap, SGLang's
``/generate`` ``text`` or ``input_ids``, TGI's ``inputs``, Bedrock Converse's ``messages``; not ``/v1/models``, ``/tokenize`` or an image's
``/images/generations``: ``infertap.apis.media.MEDIA_ROUTES``), less those
infertap refused itself (the engine never saw them). Two hashes identify it:

- ``workload``: sha256 over each request's digest in send order, a request's digest being the
  sha256 of ``METHOD SP PATH[?QUERY] LF`` followed by its exact body bytes (its content-encoding
  undone, a multipart body's boundary written as one, ``asked_body``). Headers don't count,
  but for those that change what a request asks (``ASKED_HEADERS``: ``anthropic-beta``,
  ``anthropic-version``, ``OpenAI-Beta``, Bedrock's guardrail and trace headers), which go on the
  first line where sent.
- ``schedule``: sha256 over the requests' send times relative to the first one, in whole
  milliseconds (``SCHEDULE_RESOLUTION_NS``), rounded half up.
- ``request_set``: sha256 over the request digests sorted, whatever order they were sent in: the
  same requests sent in another order (a closed-loop replay, ``--concurrency``, sends them as
  slots free up) have a new ``workload`` and the same ``request_set``.
- ``media``: sha256 over the digests of the image, video and speech generation requests
  (``MEDIA_ROUTES``) in send order, the same digests as a generation request's: in no figure,
  they are traffic all the same, so two runs whose text workloads are equal but whose media
  requests differ did not see identical traffic (``""``: none sent).
- ``media_set``: sha256 over the media requests' digests sorted, as ``request_set`` is over the
  text requests': the same images asked in another order are the same media requests.
- ``media_schedule``: sha256 over the media requests' send times relative to the first request of
  either kind, as ``schedule``'s: the same schedule is the same text and media send times.
- ``embeddings``, ``embeddings_set``, ``embeddings_schedule``: the same three over the embeddings
  requests (a POST to an embeddings route, ``infertap.apis.media.EMBEDDINGS_ROUTES``: the texts embedded,
  the model, ``dimensions``, ``encoding_format``), their times from the first text or embeddings
  request: in no speed figure either, traffic all the same (``""``: none sent). Media and embeddings
  are each hashed as ``Apart`` does (``APART``).

Each is shown after its version tag (``wl1:`` and 16 hex digits), which says the rule that hashed
it: ``wl3`` where any generation request hashed is one an older infertap left out of the workload (a
body sent compressed, llama.cpp's ``/infill`` with no ``prompt``, SGLang's and TGI's ``/generate``,
``/v1/responses/compact``: ``apis.read.generation_since_wl3``), else ``wl2`` where any sent an asked
header (an older infertap hashed the same requests without them), else ``wl1`` (the hash every rule
gives). An older infertap's hash of a ``wl2`` or ``wl3`` capture is another hash under an older tag, and
the tag says why; a replay whose source identity was hashed under another tag says so
(``relation_to_source``), not that its text differs. The hashes themselves are seeded ``wl1`` either way.

A request sent with a body not kept (``request_body_unknown``) can't be hashed: it is counted apart
(``bodies_unknown``), and an identity with any is no proof of the same traffic.

Send order and time: when the request reached the recorder (``start_ns``), or for a replayed
exchange when it was scheduled (``scheduled_ns``), so a replay's jitter doesn't change its schedule
identity; ties are broken by the request digest. The schedule hash is the schedule a replay was
given; whether it kept it is stated beside it (``capped``, ``schedule_kept``): requests that waited
for a ``--max-concurrency`` slot left behind their schedule by that wait, and their schedule is
then not the source's, whatever the hash. An unchanged replay with the original timing has
its source's two identities; ``--set``, ``--model-map``, ``--pin-defaults``, filters, a limit,
sampled sessions (``--sample-sessions``, ``--limit-sessions``) or Responses turns rewritten to the
target's response ids give it a new workload identity, ``--speed`` or another schedule a new
schedule identity. ``workload_summary`` names each of these in a replay's derivation (the
schedule's option apart, ``schedule_by``), as it does the target URL's own query parameters.

Computed here in one streaming pass, with the capture package alone (``workload_identity``), and in
analysis from the same digests (``identity_of``), so both agree.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any
from urllib.parse import unquote_plus, urlsplit

from infertap.apis.body import unencoded

from .records import request_body_unknown
from .redact import REDACTED, without_redacted

#: The schedule identity's resolution: send times are rounded to whole milliseconds.
SCHEDULE_RESOLUTION_NS = 1_000_000
#: Changes if what is hashed ever changes, so identities of different versions never compare equal.
#: ``wl1``: requests none of which sent an ``ASKED_HEADERS`` header (the hash both rules give).
VERSION = "wl1"
#: An identity over requests any of which sent one: hashed with them in its digest, which an older
#: infertap (``wl1`` alone) left out, so its hash of the same capture was another ``wl1:``.
ASKED_VERSION = "wl2"
#: An identity over generation requests any of which an older infertap (``wl1``, ``wl2``) left out
#: (``apis.read.generation_since_wl3``): its hash of the same capture was another, under its tag.
READ_VERSION = "wl3"
_TAGS = (VERSION, ASKED_VERSION, READ_VERSION)  # oldest rule first


def version_of(asked: bool, newer: bool = False) -> str:
    """The version tag of an identity, ``asked``: whether any request it hashes sent an asked header;
    ``newer``: whether any is a generation request only since ``READ_VERSION``.

    Only the generation requests decide it. A media or embeddings request's asked header is in its
    digest too, with no tag of its own, and that makes no two workloads look equal: under one rule
    the ``media`` and ``embeddings`` hashes of runs differing in it differ, and compare's traffic line
    and the claim card compare those hashes whole. Across rules the only gap is an older infertap's
    hash of an image request with a Bedrock guardrail header (asked only since), which reads as other
    media requests than this rule's hash of the same capture, never as the same."""
    return READ_VERSION if newer else ASKED_VERSION if asked else VERSION


def generation_since_wl3(record: dict[str, Any], plain: bytes | None = None) -> bool:
    """``infertap.apis.read.generation_since_wl3``, its readers imported on first use (as ``is_generation``)."""
    from infertap.apis.read import generation_since_wl3 as since

    return since(record, plain)


#: Request headers that change what a request asks, not where it goes or who asks: the features
#: it turns on (Anthropic's ``anthropic-beta``: context management, longer output, tools; OpenAI's
#: ``OpenAI-Beta``) and the API version that reads its body (``anthropic-version``); on Bedrock the
#: guardrail that screens the input and the answer (``X-Amzn-Bedrock-GuardrailIdentifier``, its
#: ``-GuardrailVersion``: a blocked answer is the guardrail's message) and whether the answer carries
#: the guardrail's trace (``X-Amzn-Bedrock-Trace``). Part of its digest where sent; no other header is
#: (credentials, redacted at capture, never).
ASKED_HEADERS = (
    "anthropic-beta",
    "anthropic-version",
    "openai-beta",
    "x-amzn-bedrock-guardrailidentifier",
    "x-amzn-bedrock-guardrailversion",
    "x-amzn-bedrock-trace",
)


def asked_headers(headers: Iterable[Iterable[str]] | None) -> list[tuple[str, str]]:
    """The ``ASKED_HEADERS`` of a request's ``[name, value]`` pairs, by name (lower case), each one's
    comma-separated values sorted and joined (``beta-a,beta-b``): the same features asked for in
    another order or over several header lines ask the same. A value the capture redacted (a user's
    ``--redact-header``) is not known, so not part of it."""
    found: dict[str, set[str]] = {}
    for pair in headers or ():
        name, value = (list(pair) + ["", ""])[:2]
        if not isinstance(name, str) or not isinstance(value, str) or REDACTED in value:
            continue
        if (key := name.lower()) in ASKED_HEADERS:
            found.setdefault(key, set()).update(v.strip() for v in value.split(",") if v.strip())
    return [(name, ",".join(sorted(values))) for name, values in sorted(found.items()) if values]


def asked_query(query: str | None) -> str:
    """The part of a request's query that is part of what it asks: all of it but the parameters the
    capture redacted (``without_redacted``: a credential of where it was sent); "" for none."""
    return without_redacted(query) if query else ""


def request_digest(method: str, path: str, query: str | None, body: bytes, headers: Sequence[tuple[str, str]] = ()) -> bytes:
    """One request's digest: method, path (with its query), the headers that change what it asks
    (``asked_headers``: after a tab, as JSON, on the first line; none sent, the line as before,
    so the identities of requests without them stay what they were) and the exact body bytes. A
    query parameter the capture redacted (``key=[REDACTED]``) is a credential of the place it was
    sent to, no part of the workload: left out, so a replay that sends the target's own key, or
    none, asks the same."""
    query = asked_query(query)
    target = path + ("?" + query if query else "")
    asked = "\t" + json.dumps([list(h) for h in headers], separators=(",", ":")) if headers else ""
    h = hashlib.sha256(f"{method} {target}{asked}\n".encode())
    h.update(body)  # not concatenated: a body can be megabytes
    return h.digest()


#: What a multipart body's boundary is written as where it is hashed: ``asked_body``.
BOUNDARY = b"infertap-boundary"


def asked_body(body: bytes, headers: Iterable[Iterable[str]] | None, plain: bytes | None = None) -> bytes:
    """A request's body as its identity takes it: with its content-encoding undone (``unencoded``: a
    compressed body asks what its JSON asks, whatever the compressor wrote around it, as a gzip
    header's time), and a ``multipart/form-data`` body (an image to edit,
    audio to transcribe) with the boundary its Content-Type names written as ``BOUNDARY``. A client
    draws a new boundary for every request (httpx, which the OpenAI SDK sends with, a random one), so
    the same upload sent twice was two different requests; any other body as it is. ``plain``: what
    ``unencoded`` gave for it already (a reader of the exchange undoes its encoding once)."""
    body = unencoded(body, headers) if plain is None else plain
    if not body or b"--" not in body:
        return body
    for pair in headers or ():
        name, value = (list(pair) + ["", ""])[:2]
        if isinstance(name, str) and name.lower() == "content-type" and isinstance(value, str):
            kind, _, params = value.partition(";")
            if kind.strip().lower() != "multipart/form-data":
                return body
            for param in params.split(";"):
                key, _, boundary = param.strip().partition("=")
                if key.strip().lower() == "boundary" and (boundary := boundary.strip().strip('"')):
                    return body.replace(b"--" + boundary.encode("latin-1", "replace"), b"--" + BOUNDARY)
            return body
    return body


def plain_body(record: dict[str, Any]) -> bytes:
    """An exchange record's request body with its content-encoding undone (``unencoded``): what a
    reader of its request, digest and newer check each take (their ``plain``), undone once for all."""
    return unencoded(record.get("request_body") or b"", record.get("request_headers"))


def exchange_digest(record: dict[str, Any], asked: Sequence[tuple[str, str]] | None = None, plain: bytes | None = None) -> bytes:
    """``request_digest`` of an exchange record's request (``asked``: its ``asked_headers``, where read
    already; ``plain``: its body as ``unencoded`` gave it), a multipart body's boundary written as one
    (``asked_body``)."""
    body = asked_body(record.get("request_body") or b"", record.get("request_headers"), plain)
    asked = asked_headers(record.get("request_headers")) if asked is None else asked
    return request_digest(record.get("method") or "", record.get("path") or "", record.get("query"), body, asked)


@dataclass(frozen=True, slots=True)
class WorkloadIdentity:
    """The identities of a workload and its counts. ``workload`` and ``schedule`` are hex sha256."""

    workload: str
    schedule: str
    requests: int  # generation requests hashed
    request_bytes: int  # their bodies' bytes
    exchanges: int  # every exchange seen, generation or not
    rechained: int = 0  # replayed requests whose previous_response_id was rewritten to the target's ids
    resolution_ms: float = SCHEDULE_RESOLUTION_NS / 1e6
    version: str = VERSION
    capped: int = 0  # replayed requests that waited for a --max-concurrency slot: not sent on their schedule
    behind_max_ms: float = 0.0  # the furthest behind its schedule one of those was sent
    request_set: str = ""  # hex sha256 of the sorted request digests ("": not computed, as for a group's)
    # Requests sent with a body not kept (records.request_body_unknown): in the workload or not is
    # unknown, so none is hashed, and two identities equal but for them are not known to be the same.
    bodies_unknown: int = 0
    media: str = ""  # hex sha256 of the media requests' digests in send order ("": none sent, or not computed)
    media_requests: int = 0  # image, video and speech generation requests hashed in ``media``
    media_set: str = ""  # hex sha256 of the media requests' digests sorted ("": none sent, or not computed)
    media_schedule: str = ""  # hex sha256 of their send times from the first request of either kind ("": as media_set)
    embeddings: str = ""  # hex sha256 of the embeddings requests' digests in send order ("": none sent, or not computed)
    embeddings_requests: int = 0  # embeddings requests hashed in ``embeddings``
    embeddings_set: str = ""  # hex sha256 of their digests sorted ("": as embeddings)
    embeddings_schedule: str = ""  # hex sha256 of their send times from the first text or embeddings request

    @property
    def schedule_kept(self) -> bool:
        """Whether every request left on the schedule hashed (none waited for a concurrency cap)."""
        return not self.capped

    @property
    def short(self) -> str:
        """The version tag (``wl1:``, ``wl2:``) and the workload hash's first 16 hex digits: enough to tell runs apart by eye."""
        return f"{self.version}:{self.workload[:16]}"

    @property
    def schedule_short(self) -> str:
        return f"{self.version}:{self.schedule[:16]}"

    @property
    def media_short(self) -> str | None:
        """The version tag and the media hash's first 16 hex digits; None where no media request was sent."""
        return f"{self.version}:{self.media[:16]}" if self.media else None

    @property
    def embeddings_short(self) -> str | None:
        """The version tag and the embeddings hash's first 16 hex digits; None where no embeddings request was sent."""
        return f"{self.version}:{self.embeddings[:16]}" if self.embeddings else None

    def as_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "short": self.short,
            "schedule_short": self.schedule_short,
            "schedule_kept": self.schedule_kept,
            "media_short": self.media_short,
            "embeddings_short": self.embeddings_short,
        }


@dataclass(frozen=True, slots=True)
class Sent:
    """A generation request as the identity sees it: its digest, when it was sent (ns, one clock
    over the capture's runs) and its body's size."""

    digest: bytes
    t_ns: int
    size: int
    rechained: bool = False  # a replayed Responses turn sent with the target's id for the response it continues
    asked: bool = False  # it sent a header of ASKED_HEADERS, in its digest: the identity is ASKED_VERSION's
    newer: bool = False  # a generation request only since READ_VERSION (generation_since_wl3): the identity is its


def identity_of(requests: Iterable[Sent], exchanges: int | None = None) -> WorkloadIdentity:
    """The identity of these requests, whatever order they come in (they are put in send order)."""
    tally = IdentityTally()
    for r in requests:
        tally.add_sent(r.digest, r.t_ns, r.size, r.rechained, r.asked, r.newer)
    return tally.identity(exchanges)


def sent_time(anchor_ns: int, record: dict[str, Any]) -> int:
    """When a request was sent, for the identity: scheduled (a replay) or arrived (a recording)."""
    scheduled = record.get("scheduled_ns")
    return anchor_ns + (scheduled if isinstance(scheduled, int) else int(record.get("start_ns") or 0))


def in_workload(record: dict[str, Any], plain: bytes | None = None) -> bool:
    """Whether an exchange is part of the workload: a generation request the engine was sent
    (``plain``: its body as ``plain_body`` gave it, where undone already)."""
    return record.get("end") != "refused" and is_generation(record, plain)


def is_generation(record: dict[str, Any], plain: bytes | None = None) -> bool:
    """``infertap.apis.is_generation``, its readers imported on the first request read: a warm
    ``infertap stats`` takes the identity from the cache's columns and never reads one."""
    from infertap.apis.read import is_generation as read

    return read(record, plain)


def is_media(record: dict[str, Any]) -> bool:
    """Whether an exchange asks for an image, a video or speech (``infertap.apis.media.MEDIA_ROUTES``)."""
    from infertap.apis.media import media_kind  # a module of routes alone: it imports no reader

    return media_kind(record.get("path"), record.get("method")) is not None


def is_embeddings_request(record: dict[str, Any]) -> bool:
    """Whether an exchange asks for embeddings: a POST to an embeddings route (``infertap.apis.media.EMBEDDINGS_ROUTES``)."""
    from infertap.apis.media import is_embeddings

    return (record.get("method") or "").upper() == "POST" and is_embeddings(record.get("path"))


#: The requests apart from the text workload that have an identity of their own, by the name of
#: its fields (``media``, ``media_requests``, ``media_set``, ``media_schedule``; ``embeddings``...).
APART = ("media", "embeddings")


def apart_kind(record: dict[str, Any]) -> str | None:
    """Which identity of ``APART`` hashes an exchange that is no generation request, else None."""
    if is_media(record):
        return "media"
    return "embeddings" if is_embeddings_request(record) else None


class Apart:
    """One identity of requests beside the text workload (``APART``: ``media``, ``embeddings``): their
    digests and send times given in send order, a batch at a time, each time (ns) from the first
    request sent of the text workload or of theirs. Each hash is seeded with the identity's name."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._hash = hashlib.sha256(VERSION.encode() + f" {name}\n".encode())
        self._schedule = hashlib.sha256(VERSION.encode() + f" {name} schedule\n".encode())
        self.requests = 0

    def add(self, digests: list[bytes], offsets: list[int]) -> None:
        self._hash.update(b"".join(digests))
        half = SCHEDULE_RESOLUTION_NS // 2  # rounded as ``schedule``'s times are
        self._schedule.update(b"".join([b"%d\n" % ((t + half) // SCHEDULE_RESOLUTION_NS) for t in offsets]))
        self.requests += len(digests)

    def hexdigest(self) -> str:
        """The hash, ``""`` where no request was added."""
        return self._hash.hexdigest() if self.requests else ""

    def identity(self) -> dict[str, Any]:
        """``NAME``, ``NAME_requests`` and ``NAME_schedule`` (``""`` where none was added)."""
        schedule = self._schedule.hexdigest() if self.requests else ""
        return {self.name: self.hexdigest(), f"{self.name}_requests": self.requests, f"{self.name}_schedule": schedule}

    def set_of(self, digests: Iterable[bytes]) -> dict[str, str]:
        """``NAME_set`` of the request digests given sorted (``""``: none)."""
        hashed = hashlib.sha256(VERSION.encode() + f" {self.name} set\n".encode())
        n = 0
        for digest in digests:
            hashed.update(digest)
            n += 1
        return {f"{self.name}_set": hashed.hexdigest() if n else ""}


# A request's place in send order as bytes that sort as (time, digest) do: the time offset into a
# fixed-width unsigned integer, then the digest. One small object per request, not four.
_TIME_BIAS = 1 << 95
_TIME_BYTES = 12


class IdentityTally:
    """Feed it a capture's records in order (``add``); ``identity()`` at the end. For one-pass readers
    (``infertap info``, replay's workload) that do more with each record."""

    def __init__(self) -> None:
        self.exchanges = 0
        self._anchor = 0
        self._keys: list[bytes] = []  # (send time, digest) of each request, packed
        self._odd: list[tuple[int, bytes]] = []  # the rare time outside the packed range
        self._bytes = 0
        self._rechained = 0
        self._capped = 0
        self._behind_ns = 0
        self._bodies_unknown = 0
        self._apart: dict[str, list[bytes]] = {name: [] for name in APART}  # (send time, digest) of each, packed as ``_keys``
        self._asked = False  # whether a generation request sent an asked header (the identity's version)
        self._newer = False  # whether one is a generation request only since READ_VERSION (the identity's version)

    def add(
        self, record: dict[str, Any], generation: bool | None = None, digest: bytes | None = None, plain: bytes | None = None
    ) -> None:
        """Count ``record``; ``generation``, when the caller has read the request already, saves
        reading it again (``is_generation``), ``digest`` hashing it (``exchange_digest``'s), and
        ``plain`` undoing its body's encoding (``plain_body``'s)."""
        rtype = record.get("type")
        if rtype == "header":
            self._anchor = round(float(record.get("wall") or 0.0) * 1e9)  # the run's start: start_ns counts from it
        elif rtype == "exchange":
            self.exchanges += 1
            if record.get("end") == "refused":
                return
            if request_body_unknown(record):  # sent, its body not kept: hashed as no request, counted as unknown
                self._bodies_unknown += 1
                return
            raw = record.get("request_body") or b""
            # Its content-encoding undone once, where a reading below needs it, for all of them.
            if plain is None and (generation is None or generation):
                plain = plain_body(record)
            if is_generation(record, plain) if generation is None else generation:
                asked = asked_headers(record.get("request_headers"))
                digest = exchange_digest(record, asked, plain) if digest is None else digest
                rechained, newer = "rechained_from" in record, generation_since_wl3(record, plain)
                self.add_sent(digest, sent_time(self._anchor, record), len(raw), rechained, bool(asked), newer)
                self._count_capped(record)
            elif kind := apart_kind(record):  # no text to time, but traffic: in the media or embeddings identity
                self._apart[kind].append(_packed(sent_time(self._anchor, record), exchange_digest(record, None, plain)))

    def _count_capped(self, record: dict[str, Any]) -> None:
        """A replayed request that waited for a --max-concurrency slot: how far behind its schedule it left."""
        if (record.get("queue_ns") or 0) > 0 and isinstance(record.get("scheduled_ns"), int):
            self._capped += 1
            behind = int(record.get("sent_ns") or 0) - record["scheduled_ns"] - int(record.get("dep_wait_ns") or 0)
            self._behind_ns = max(self._behind_ns, behind)

    def add_sent(
        self, digest: bytes, t_ns: int, size: int, rechained: bool = False, asked: bool = False, newer: bool = False
    ) -> None:
        """One generation request: its digest, when it was sent, its body's size, whether it sent an asked
        header and whether it is one only since ``READ_VERSION``."""
        self._asked = self._asked or asked
        self._newer = self._newer or newer
        if 0 <= t_ns + _TIME_BIAS < 1 << (8 * _TIME_BYTES):
            self._keys.append((t_ns + _TIME_BIAS).to_bytes(_TIME_BYTES, "big") + digest)
        else:
            self._odd.append((t_ns, digest))
        self._bytes += size
        self._rechained += rechained

    def identity(self, exchanges: int | None = None) -> WorkloadIdentity:
        """The identity of what was added; ``exchanges``: the count to report (default: those added
        through ``add``, or the requests when there were none)."""
        keys = self._keys
        keys.sort()
        hashes = OrderedHashes()
        hashes.asked, hashes.newer = self._asked, self._newer
        if self._odd:  # merged with the packed ones, in the same (time, digest) order
            ordered = sorted([(int.from_bytes(k[:_TIME_BYTES], "big") - _TIME_BIAS, k[_TIME_BYTES:]) for k in keys] + self._odd)
            for i in range(0, len(ordered), _HASHED):
                pairs = ordered[i : i + _HASHED]
                hashes.add([t for t, _ in pairs], [d for _, d in pairs])
        else:
            for i in range(0, len(keys), _HASHED):
                batch = keys[i : i + _HASHED]
                hashes.add([int.from_bytes(k[:_TIME_BYTES], "big") - _TIME_BIAS for k in batch], [k[_TIME_BYTES:] for k in batch])
        requests = len(keys) + len(self._odd)
        identity = hashes.identity(self.exchanges or requests if exchanges is None else exchanges, self._bytes, self._rechained)
        unordered = RequestSet()
        digests = sorted([k[_TIME_BYTES:] for k in keys] + [d for _, d in self._odd])
        for i in range(0, len(digests), _HASHED):
            unordered.add(digests[i : i + _HASHED])
        return replace(
            identity,
            capped=self._capped,
            behind_max_ms=self._behind_ns / 1e6,
            request_set=unordered.hexdigest(),
            bodies_unknown=self._bodies_unknown,
            **{k: v for name in APART for k, v in self._apart_identity(name).items()},
        )

    def _apart_identity(self, name: str) -> dict[str, Any]:
        """``NAME``, ``NAME_requests``, ``NAME_set`` and ``NAME_schedule`` of the requests of ``APART``'s
        ``name`` added, in (time, digest) order, their times from the first request sent of the text or theirs."""
        ordered = sorted(self._apart[name])
        times = [int.from_bytes(k[:_TIME_BYTES], "big") - _TIME_BIAS for k in ordered]
        text = [int.from_bytes(self._keys[0][:_TIME_BYTES], "big") - _TIME_BIAS] if self._keys else []
        first = min(times[:1] + text + [t for t, _ in self._odd]) if times else 0
        hashes = Apart(name)
        hashes.add([k[-_DIGEST_BYTES:] for k in ordered], [t - first for t in times])
        return hashes.identity() | hashes.set_of(sorted(k[-_DIGEST_BYTES:] for k in ordered))


def _packed(t_ns: int, digest: bytes) -> bytes:
    """A media or embeddings request's place in send order, sorting as (time, digest); a time outside the packed
    range (none a clock gives) clamped to its end."""
    return max(0, min(t_ns + _TIME_BIAS, (1 << (8 * _TIME_BYTES)) - 1)).to_bytes(_TIME_BYTES, "big") + digest


_DIGEST_BYTES = 32  # a request digest: sha256
_HASHED = 65_536  # requests hashed a batch at a time: ten million schedule lines would be half a GiB at once


class RequestSet:
    """``request_set``: the request digests given sorted, a batch at a time."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256(VERSION.encode() + b" set\n")

    def add(self, digests: list[bytes]) -> None:
        self._hash.update(b"".join(digests))

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


class OrderedHashes:
    """The two hashes of requests given in send order, (time, digest) order as ``IdentityTally``
    sorts them, a batch at a time: nothing is kept per request, so a source that orders them
    itself (analysis's DuckDB, spilling to disk) hashes any number in constant memory."""

    def __init__(self) -> None:
        self.workload = hashlib.sha256(VERSION.encode())
        self.schedule = hashlib.sha256(VERSION.encode())
        self.first: int | None = None
        self.requests = 0
        self.asked = False  # whether any request sent an asked header: tagged ASKED_VERSION, not VERSION
        self.newer = False  # whether any is a generation request only since READ_VERSION: tagged it

    def add(self, times: list[int], digests: list[bytes], asked: bool = False, newer: bool = False) -> None:
        """The next requests in order: their send times (ns) and digests; ``asked``: whether any of
        them sent an asked header (``ASKED_HEADERS``); ``newer``: whether any is a generation request
        only since ``READ_VERSION``."""
        self.asked = self.asked or asked
        self.newer = self.newer or newer
        if not times:
            return
        if self.first is None:
            self.first = times[0]
        first, res, half = self.first, SCHEDULE_RESOLUTION_NS, SCHEDULE_RESOLUTION_NS // 2
        self.workload.update(b"".join(digests))  # as one update per digest would hash them
        self.schedule.update(b"".join([b"%d\n" % ((t - first + half) // res) for t in times]))
        self.requests += len(times)

    def identity(self, exchanges: int, request_bytes: int, rechained: int = 0) -> WorkloadIdentity:
        return WorkloadIdentity(
            workload=self.workload.hexdigest(),
            schedule=self.schedule.hexdigest(),
            requests=self.requests,
            request_bytes=request_bytes,
            exchanges=exchanges,
            rechained=rechained,
            version=version_of(self.asked, self.newer),
        )


def workload_identity(path: str | os.PathLike[str]) -> WorkloadIdentity:
    """The workload identity of the capture at ``path``, in one streaming pass."""
    from .reader import CaptureReader  # here: a warm `stats` hashes cached rows, no capture read

    tally = IdentityTally()
    for record in CaptureReader(path).records():
        tally.add(record)
    return tally.identity()


def rechained_requests(path: str | os.PathLike[str]) -> int:
    """How many of a capture's workload requests a replay sent with ``previous_response_id``
    rewritten to the target's ids (its exchanges carry ``rechained_from``), in one streaming pass."""
    from .reader import CaptureReader

    return sum(1 for r in CaptureReader(path).exchanges() if "rechained_from" in r and in_workload(r))


#: Runs that add to others' exchanges (effective settings, telemetry) and sent no traffic of their own.
_ADDING = ("enrich", "telemetry")


def traffic_runs(recorders: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``recorder`` of each run that carried traffic (recorded or replayed it), in order: not an
    enrichment's or telemetry's, and a ``replay --ray``'s shards as one run (shard 0's; they share one
    schedule and start)."""
    return [r for r in recorders if r.get("kind") not in _ADDING and not r.get("shard")]


def counted_runs(carried: Mapping[str, str], counted: Iterable[str]) -> dict[str, str]:
    """The runs a capture's configuration describes (all imported or not, why no snapshot, its
    recorder, its engine), for ``compare``, the claim card, energy and ``infertap info`` alike: of
    ``carried`` (the runs that hold its exchanges, id -> recorder kind, in order), those in
    ``counted`` (the runs of its counted generation requests: ``in_workload``, analysis's
    ``active.COUNTED``), the runs its speed and energy figures are over. A run that carried no
    generation request (a GET /v1/models alone, refused requests) is none of them; where no run is
    counted (no figures), all of ``carried``."""
    kept = set(counted)
    return {run: kind for run, kind in carried.items() if run in kept} or dict(carried)


def several_runs(runs: list[dict[str, Any]]) -> str | None:
    """``N runs appended in one capture (kinds)`` where ``runs`` (``traffic_runs``) are more than one
    (a ``replay --out`` into a folder that held a capture appends its run there); else None."""
    if len(runs) < 2:
        return None
    return f"{len(runs)} runs appended in one capture ({', '.join(r.get('kind') or 'unknown' for r in runs)})"


def schedule_words(recorder: dict[str, Any]) -> str:
    """How a run sent its requests, as the replay options that gave it (``--concurrency 2``), or
    ``as recorded`` for a recording (the clients' own timing)."""
    if recorder.get("kind") != "replay":
        return "as recorded"
    schedule = recorder.get("schedule") or {}
    kind = schedule.get("kind", "original")
    if kind == "original":
        words = ["original timing"] + ([f"--speed {schedule['speed']:g}"] if schedule.get("speed", 1) != 1 else [])
    elif kind in ("rate", "poisson"):
        words = [f"--rate {schedule.get('rate', 0):g}"] + (
            [f"--poisson --seed {schedule.get('seed', 0)}"] if kind == "poisson" else []
        )
    elif kind == "concurrency":
        words = [f"--concurrency {schedule.get('concurrency')}"]
    else:
        words = ["--concurrency original"]
    if schedule.get("max_concurrency"):
        words.append(f"--max-concurrency {schedule['max_concurrency']}")
    sessions = recorder.get("sessions") or {}
    if sessions.get("mode") == "closed":  # each turn its think time after the one it continues ends
        words.append("--sessions closed")
        if sessions.get("think_scale", 1) != 1:
            words.append(f"--think-scale {sessions['think_scale']:g}")
    return " ".join(words)


def workload_summary(identity: WorkloadIdentity, recorders: list[dict[str, Any]]) -> dict[str, Any]:
    """A capture's workload identity (``as_dict``) and, for a replay (given its runs' ``recorder``
    headers), the source identity it derives from, what changed it and whether it is the same: its text
    workload and its image, video and speech requests (``media``) both, each said apart.

    A capture of several runs (``several_runs``) is no one replay of its source, whatever each run
    did: the derivation says so first, then what each replay changed."""
    out: dict[str, Any] = identity.as_dict()
    runs = traffic_runs(recorders)
    replays = [r for r in runs if r.get("kind") == "replay"]
    if replays:
        replay = replays[0]
        source = replay.get("workload_source")
        out["source"] = source
        derived = [] if (several := several_runs(runs)) is None else [several]
        sources = {(r.get("workload_source") or {}).get("workload") for r in replays}
        if len(sources) > 1:
            derived.append(f"replays of {len(sources)} different sources (this identity compares with the first's)")
        for r in replays:
            derived += [c for c in replay_derivation(r, identity.rechained) if c not in derived]
        if not derived and source and identity.requests < (source.get("requests") or 0):
            # Nothing it was asked to change leaves requests out: it stopped (Ctrl-C, a kill) before them.
            missing, of = source["requests"] - identity.requests, source["requests"]
            derived.append(
                f"{missing} of the source's {of} requests not in this capture (the replay stopped before sending them)"
            )
        out["derived_by"] = derived
        # Requests of the source it left out, their body not kept (``not_kept``): hashed in neither
        # identity, so equal hashes do not make it the source's workload.
        left_out = any(r.get("not_kept") for r in replays)
        # Its image, video, speech and embeddings requests are traffic too: the same as the source's only where
        # both identities say so (a source hashed by an older infertap has none: not known).
        apart = {name: _apart_as_source(source, identity, name) for name in APART}
        # A source hashed under an older tag than this identity's, and nothing the replay did changes its
        # requests: an older infertap's rule hashed the source (it left requests out, or hashed them
        # otherwise), so a hash unlike this one's is no other text, only not known to be the same.
        tag = (source.get("version") or VERSION) if source else None
        known = tag in _TAGS and identity.version in _TAGS
        older = known and _TAGS.index(str(tag)) < _TAGS.index(identity.version)
        other_rule = bool(source and older and not derived and source.get("workload") != out["workload"])
        out["source_hashed_by"] = tag if other_rule else None
        text = None if not source or other_rule else source.get("workload") == out["workload"] and not left_out
        # The same requests sent in another order (a closed loop): the derivation can't name it, the set can.
        text_set = (
            None if not source or not source.get("request_set") or other_rule else source["request_set"] == out["request_set"]
        )
        text_set = text_set and not left_out
        out["same_text_as_source"] = text
        out["same_text_requests_as_source"] = text_set
        for name, (same, same_set, _) in apart.items():
            out[f"same_{name}_as_source"] = same
            out[f"same_{name}_requests_as_source"] = same_set
            out[f"{name}_change"] = None if not source or same_set else apart_change(source, identity, name, same_set)
        # None: the text the same, the media or embeddings not known to be
        out["same_as_source"] = _all([text, *(same for same, _, _ in apart.values())])
        out["same_requests_as_source"] = _all([text_set, *(same_set for _, same_set, _ in apart.values())])
        moved = None if not source else _any([m for _, _, m in apart.values()])
        out["same_schedule_as_source"] = (
            None
            if not source
            else source.get("schedule") == out["schedule"] and identity.schedule_kept and (None if moved is None else not moved)
        )
        out["capped_at"] = (replay.get("schedule") or {}).get("max_concurrency")
        moved_same = _any([m and same_set for _, same_set, m in apart.values()])  # the same requests, moved
        if source and several is None and (source.get("schedule") != out["schedule"] or moved_same):
            # Where an option gave the replay its own schedule: said beside the source (schedule_change).
            if (words := schedule_words(replay)) != "original timing":
                out["schedule_by"] = words
    return out


def _all(values: list[bool | None]) -> bool | None:
    """``and`` of values that may be unknown (None), as Python's ``and`` reads them in order."""
    out: bool | None = True
    for v in values:
        out = out and v
    return out


def _any(values: list[bool | None]) -> bool | None:
    """True where any is, else None where any is unknown, else False."""
    return True if any(values) else None if any(v is None for v in values) else False


def _apart_as_source(source: dict[str, Any] | None, identity: WorkloadIdentity, name: str) -> tuple[Any, Any, Any]:
    """Whether a replay's requests of ``APART``'s ``name`` are its source's: in the same order, whatever
    the order (``NAME_set``: an older header has none, its ordered hash says) and sent on another schedule
    (``apart_moved``); None where not known (a source hashed by an older infertap has no ``NAME``)."""
    if not source:
        return None, None, None
    if name not in source:
        # A header from before the embeddings identity: none sent here and none known of the source reads as before.
        known = name == "embeddings" and not getattr(identity, f"{name}_requests")
        return (True, True, False) if known else (None, None, apart_moved(source, identity, name))
    same = source[name] == getattr(identity, name)
    same_set = source[f"{name}_set"] == getattr(identity, f"{name}_set") if f"{name}_set" in source else same
    return same, same_set, apart_moved(source, identity, name)


def apart_moved(source: dict[str, Any], identity: WorkloadIdentity, name: str = "media") -> bool | None:
    """Whether a replay's requests of ``APART``'s ``name`` were sent on another schedule than its
    source's; None where not known (an older header has no ``NAME_schedule`` and either side sent
    some), False where neither sent any."""
    if f"{name}_schedule" in source:
        return source[f"{name}_schedule"] != getattr(identity, f"{name}_schedule")
    return None if getattr(identity, f"{name}_requests") or source.get(f"{name}_requests") else False


#: What each identity of ``APART`` hashes, in words.
APART_WORDS = {"media": "image, video or speech requests", "embeddings": "embeddings requests"}


def apart_change(source: dict[str, Any], identity: WorkloadIdentity, name: str, same: bool | None) -> str:
    """How a replay's requests of ``APART``'s ``name`` are not (or not known to be) its source's, in words."""
    what = APART_WORDS[name]
    if same is None:
        return f"its {what} not known to be the source's (an older infertap recorded its identity without them)"
    mine, theirs = getattr(identity, f"{name}_requests"), source.get(f"{name}_requests") or 0
    return (
        f"other {what} ({mine} against the source's {theirs}; "
        f"{name} {getattr(identity, f'{name}_short') or 'none'}, the source's {source.get(f'{name}_short') or 'none'})"
    )


def relation_to_source(workload: dict[str, Any], schedule: str, named: str, origin: str | None = None) -> str:
    """How a replay's traffic relates to its source's (``workload_summary``'s fields; ``schedule``: its
    schedule identity; ``named``: its source as the line names it, ``origin`` after "derived from",
    default ``named``), for ``describe`` and the claim card:
    identical, the same requests (on another schedule, in another order), the same text requests beside
    other media requests, or derived by what changed it."""
    source = workload["source"]
    derived = workload.get("derived_by") or []
    if workload.get("same_text_as_source") or (workload.get("same_text_requests_as_source") and not derived):
        # the same text requests: in the same order, or in a closed loop's
        # the media or embeddings requests' times count where they are the source's requests (else they moved by being others)
        apart_times = {n: workload.get(f"{n}_schedule") for n in APART if workload.get(f"same_{n}_requests_as_source")}
        moved = schedule_change(source, schedule, workload.get("schedule_by"), True, apart_times)
        if workload.get("same_as_source"):
            return f"identical to {named}" if workload.get("same_schedule_as_source") else f"the same requests as {named}{moved}"
        if workload.get("same_requests_as_source"):  # text, media or embeddings requests in another order
            return f"the same requests as {named}, sent in another order{moved}"
        order = "" if workload.get("same_text_as_source") else ", sent in another order"
        text = f"the same text requests as {named}{order}{moved}"
    else:
        moved = schedule_change(source, schedule, workload.get("schedule_by"), False)
        if tag := workload.get("source_hashed_by"):  # not known to be other text: hashed by another rule
            return (
                f"not known to be the same requests as {named}: hashed by another rule ({tag}, this capture's "
                f"{workload.get('version', VERSION)}: an older infertap recorded the source's identity){moved}"
            )
        changes = ", ".join(derived) or "no transform recorded (the target's answers changed a request)"
        return f"derived from {origin or named} by {changes}{moved}"
    changes = " and ".join(c for n in APART if (c := workload.get(f"{n}_change")))
    return f"{text}, but {changes}" + (f" (by {', '.join(derived)})" if derived else "")


def schedule_change(
    source: dict[str, Any],
    schedule: str,
    schedule_by: str | None,
    same_workload: bool,
    apart_schedules: Mapping[str, str | None] | None = None,
) -> str:
    """`` on another schedule (--concurrency 2)`` where a replay's schedule identity (``schedule``), or
    that of its media or embeddings requests (``apart_schedules``: ``{"media": its media_schedule}``,
    each where both it and the source's header have one), is not its ``source``'s: of the same
    requests always, of changed ones where an option of its own (``schedule_by``) moved them (a filter
    or a limit moves the times it leaves anyway); else ``""``."""
    apart_moved = any(
        s is not None and f"{n}_schedule" in source and source[f"{n}_schedule"] != s for n, s in (apart_schedules or {}).items()
    )
    if (source.get("schedule") == schedule and not apart_moved) or not (same_workload or schedule_by):
        return ""
    return " on another schedule" + (f" ({schedule_by})" if schedule_by else "")


def schedule_not_kept(workload: dict[str, Any]) -> str | None:
    """Why a replay's requests did not leave on the schedule its identity hashes (None: they did)."""
    if workload.get("schedule_kept", True):
        return None
    cap = f" {workload['capped_at']}" if workload.get("capped_at") else ""
    n = workload["capped"]
    return (
        f"schedule not kept: {n} request{'s' if n != 1 else ''} waited for --max-concurrency{cap}, "
        f"up to {workload['behind_max_ms']:.1f} ms behind"
    )


def bodies_unknown(workload: dict[str, Any]) -> str | None:
    """Why a workload's identity may leave out some of its requests (None: it leaves out none)."""
    n = workload.get("bodies_unknown") or 0
    if not n:
        return None
    return (
        f"{n} request{'s' if n != 1 else ''} sent with a body not kept (generation or not unknown): in no identity, "
        "so an equal identity does not prove the same traffic"
    )


def media_words(workload: dict[str, Any]) -> str | None:
    """The media requests beside the text workload, with their own identity (None: none sent)."""
    n = workload.get("media_requests") or 0
    if not n:
        return None
    return f"{n} image, video or speech generation request{'s' if n != 1 else ''} beside them (media {workload['media_short']})"


def embeddings_words(workload: dict[str, Any]) -> str | None:
    """The embeddings requests beside the text workload, with their own identity (None: none sent)."""
    n = workload.get("embeddings_requests") or 0
    if not n:
        return None
    return f"{n} embeddings request{'s' if n != 1 else ''} beside them (embeddings {workload['embeddings_short']})"


def replay_derivation(recorder: dict[str, Any], rechained: int = 0) -> list[str]:
    """What a replay changed of its source's workload, from its capture header's ``recorder``: the
    transforms, filters, limits and session sampling applied, and the Responses turns whose
    ``previous_response_id`` it rewrote (``rechained`` of its requests). Empty: replayed as recorded."""
    if recorder.get("kind") != "replay":
        return []
    return list(_changes(recorder, rechained))


def _changes(recorder: dict[str, Any], rechained: int) -> Iterator[str]:
    t = recorder.get("transforms") or {}
    if t.get("model"):
        yield f"--model {t['model']}"
    for old, new in (t.get("model_map") or {}).items():
        yield f"--model-map {old}={new}"
    for key in t.get("set") or ():
        yield f"--set {key}"
    for key in t.get("unset") or ():
        yield f"--unset {key}"
    if t.get("pin_defaults"):
        yield "--pin-defaults" + _pins_left_out(t.get("pins_without_place") or {}, t.get("pins_without_place_why"))
    # Of --drop-header, those a request carried (a replay before ``dropped_headers`` named all).
    dropped = t["dropped_headers"] if "dropped_headers" in t else t.get("drop_headers")
    for option, names in (("--header", t.get("headers")), ("--drop-header", dropped)):
        # a header that changes what the requests ask (ASKED_HEADERS) is part of their identity
        yield from (f"{option} {name}" for name in names or () if name.lower() in ASKED_HEADERS)
    filters = recorder.get("filters") or {}
    for key, name in (("paths", "path"), ("models", "model"), ("statuses", "status")):
        for value in filters.get(key) or ():
            yield f"--filter {name}={value}"
    for key in ("after", "before"):
        if filters.get(f"{key}_s") is not None:
            yield f"--filter {key}={filters[f'{key}_s']}"
    if recorder.get("limit") is not None:
        yield f"--limit {recorder['limit']}"
    if (recorder.get("repeat") or 1) > 1:
        yield f"--repeat {recorder['repeat']}"
    if n := recorder.get("not_kept"):
        yield f"{n} request{'s' if n != 1 else ''} of the source left out (sent with a body not kept)"
    sample = (recorder.get("sessions") or {}).get("sample") or {}
    if sample.get("fraction") is not None:
        yield f"sessions sampled {sample['fraction']:g} seed {sample.get('seed', 0)}"
    if sample.get("limit") is not None:
        yield f"sessions limited to the first {sample['limit']}"
    if rechained:
        yield f"previous_response_id rewritten to the target's ids on {rechained} request{'s' if rechained != 1 else ''}"
    # The target URL's own parameters go with every request, replacing recorded ones of their name
    # (replay/transforms.py sent_query); a credential among them is redacted and no part of the workload.
    query = without_redacted(urlsplit(recorder.get("target") or "").query)
    if names := [unquote_plus(p.partition("=")[0]) for p in query.split("&") if p]:
        yield f"the target URL's query ({', '.join(names)}) sent with every request"


def _pins_left_out(left_out: dict[str, dict[str, int]], why: dict[str, dict[str, str]] | None = None) -> str:
    """The pins a replay left out (``transforms.pins_without_place``), said beside ``--pin-defaults``:
    those requests went with the target's own defaults, so the derivation must not read as all pinned.
    ``why`` (``transforms.pins_without_place_why``, by the same keys; a replay before it kept none):
    each group's reason, so that the capture alone says it."""
    if not left_out:
        return ""
    grouped: dict[tuple[str, int, str | None], list[str]] = {}
    for name, apis in left_out.items():
        for api, n in apis.items():
            grouped.setdefault((api, n, None if why is None else why.get(name, {}).get(api)), []).append(name)
    each = "; ".join(
        f"{', '.join(names)} of {n} {api} request{'s' if n != 1 else ''}" + (f" ({said})" if said else "")
        for (api, n, said), names in grouped.items()
    )
    return f" (not pinned where the API reads no such setting or refuses its value: {each})"


def describe(workload: dict[str, Any]) -> str:
    """One line for people: the identities, the counts and, for a replay, what it derives from."""
    line = (
        f"{workload['short']} ({workload['requests']} generation requests, {workload['request_bytes']:,} body bytes; "
        f"schedule {workload['schedule_short']} at {workload['resolution_ms']:g} ms)"
    )
    if (not_kept := schedule_not_kept(workload)) is not None:
        line += f"; {not_kept}"
    if unknown := bodies_unknown(workload):
        line += f"; {unknown}"
    for words in (media_words, embeddings_words):
        if said := words(workload):
            line += f"; {said}"
    said = source_words(workload)
    return line if said is None else f"{line}; {said}"


def source_words(workload: dict[str, Any]) -> str | None:
    """How a replay's workload (``workload_summary``) relates to its source's, in the words `infertap
    info` and `stats` say it: what the replay changed, or that it is its source's (None: no replay)."""
    if "source" not in workload:
        return None
    source = workload.get("source")
    if not source:
        return "a replay whose source identity was not recorded (an older infertap)"
    return relation_to_source(workload, workload["schedule"], "its source " + source["short"], source["short"])
