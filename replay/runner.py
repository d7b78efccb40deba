"""Running a replay: one shared upstream client (proxy/upstream.py), a dispatcher that owns the deadlines, a task per request.

Each replayed exchange is recorded with the proxy's capture format, plus the link to its source
and its schedule fidelity: ``scheduled_ns`` (when it was due), ``lag_ns`` (how late the dispatcher
sent it, not counting intentional waits), ``queue_ns`` (waiting for a ``--max-concurrency`` slot)
and ``dep_wait_ns`` (waiting for the request its conversation continues). None of these waits is
inside the exchange's latency, which starts at ``sent_ns`` as in the proxy. The summary's
``behind_ms`` is how far behind its schedule each request left, the cap's wait included: a replay
whose requests waited for the cap did not keep its schedule (``schedule_kept``), however small
the dispatcher's own lag.

Request bodies come from ``bodies``: a list, or a workload's ``Bodies``, read again from the
source capture a window ahead of the dispatcher (``ReadAhead``). A body that can't be read (the
capture changed since it was loaded) stops the run as Ctrl-C does, and ``failure`` says why.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote_plus, urlsplit

from infertap.apis import (
    ErrorMarkScan,
    answer_tokens,
    ended_answer,
    kept_response_id,
    read_counted,
    read_response,
    response_not_kept,
    tail_usage,
    unfinished,
)
from infertap.capture.records import Exchange, new_exchange
from infertap.capture.redact import REDACTED, Redactor
from infertap.capture.scrubbing import Scrubbed
from infertap.capture.writer import CaptureWriter
from infertap.errors import UpstreamError
from infertap.proxy.exchange import UpstreamCall
from infertap.proxy.upstream import UpstreamClient, UpstreamResponse
from infertap.quantiles import quantile
from infertap.wording import counted

from .bodies import BodyError, ReadAhead
from .config import ReplayConfig
from .schedule import Schedule, sessions_timed_by, sleep_until
from .transforms import TransformError, rechained, sent_query
from .workload import Item

log = logging.getLogger("infertap.replay")


def redacted_names(config: ReplayConfig, items: Sequence[Item]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The header and query parameter names the replay's capture redacts beyond the defaults: those
    given (``--redact-header``, ``--redact-query``) and those the source capture redacted (their
    values recorded as the placeholder), so that a value ``--header`` gives one is not written in
    clear where the recording kept it out. Read from the items' captured headers, which a sharded
    replay doesn't ship to its workers: it hands them these names instead."""
    headers, params = set(config.redact_headers), set(config.redact_query)
    seen: set[int] = set()  # items share one header list per distinct set
    for item in items:
        if id(item.headers) not in seen:
            seen.add(id(item.headers))
            headers.update(name for name, value in item.headers if REDACTED in value)
        if REDACTED in item.query:
            params.update(unquote_plus(p.partition("=")[0]) for p in item.query.split("&") if p.partition("=")[2] == REDACTED)
    return tuple(sorted(headers)), tuple(sorted(params))


def _redactor(config: ReplayConfig, items: Sequence[Item]) -> Redactor:
    """The replay capture's redactor: the defaults and ``redacted_names``."""
    return Redactor(*redacted_names(config, items))


def _response_id(record: Exchange) -> str | None:
    """The id the target gave an answered response (what a later turn's previous_response_id names),
    or named in the kept head of one cut at --max-response-mb."""
    if record["end"] != "complete" or not 200 <= (record["status"] or 0) < 300:
        return None
    return kept_response_id(record) if response_not_kept(record) else read_response(record).response_id


@dataclass
class ReplayStats:
    """Live counters, read by a progress display from the same loop."""

    total: int = 0
    sent: int = 0
    completed: int = 0
    in_flight: int = 0
    ends: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)  # each error message (cut short) of what was sent, a 2xx body's too
    failures: Counter[str] = field(default_factory=Counter)  # what was sent and not answered 2xx in full: status or end
    # the same by path (its query left out), beside what each path sent: a target that serves no
    # /v1/messages refuses every request there, which a count of 404s alone doesn't say
    path_failures: Counter[tuple[str, str]] = field(default_factory=Counter)
    path_sent: Counter[str] = field(default_factory=Counter)
    lags_ns: list[int] = field(default_factory=list)
    queue_ns: list[int] = field(default_factory=list)
    behind_ns: list[int] = field(default_factory=list)  # sent minus due, less the wait for a parent: the cap's wait in
    capped: int = 0  # requests that waited for a --max-concurrency slot: sent later than their schedule
    turn_lags_ns: list[int] = field(default_factory=list)  # the lags of turns that continue another
    parent_waits_ns: list[int] = field(default_factory=list)  # open sessions: past its time, waiting for its parent
    intervals: list[tuple[int, int]] = field(default_factory=list)  # (sent, end), elapsed ns
    sends: list[tuple[int, int]] = field(default_factory=list)  # (due, sent), elapsed ns: the request rates
    open_ns: dict[int, int] = field(default_factory=dict)  # item index -> sent, elapsed ns, while in flight
    # generation requests sent that ended other than complete with a 2xx, were unfinished, or answered
    # 2xx with an error in the body (or one no adapter reads): the live errors, as a sweep's error_rate counts them
    generation_failed: int = 0
    # answered 2xx in full, by a stream that ended ([DONE] or the body's end) with no finish reason
    # (infertap.apis.unfinished: the target cut it): not ok, not failed. Counted from its last events as each answer ends.
    unfinished: int = 0
    # generation requests answered 2xx in full, and kept only in part (past --max-response-mb): the
    # answer unknown, neither ok nor failed, as stats counts it (response_not_kept)
    response_not_kept: int = 0
    # of the ok generation answers: their output tokens as stats counts them (apis.answer_tokens: usage,
    # else a stream's token events; an enrichment's count before those, ``count_enriched``), how many
    # answers were counted, how many had no count (a whole body with no usage), and by which source
    output_tokens: int = 0
    tokens_counted: int = 0
    tokens_unknown: int = 0
    tokens_by_source: Counter[str] = field(default_factory=Counter)  # tokens
    answers_by_source: Counter[str] = field(default_factory=Counter)  # answers
    # the answers counted without the engine's usage: exchange id -> its token events (None: no count),
    # which an enrichment's count replaces, as stats' metrics view does
    without_usage: dict[str, int | None] = field(default_factory=dict)
    elapsed_ns: Callable[[], int] = time.monotonic_ns  # the clock of those elapsed ns (the capture's)
    stopped_early: bool = False


_ERRORS_SHOWN = 3  # the most frequent error messages in the summary
_ERROR_CHARS = 200


def no_response(summary: dict[str, Any]) -> str | None:
    """Why a replay that sent requests got no response to any of them (a target down, a wrong
    port, a refused TLS handshake), or None when at least one was answered."""
    statuses = summary["statuses"]
    if not summary["sent"] or set(statuses) - {"None"} or summary["stopped_early"]:
        return None  # answered, or stopped by Ctrl-C (what was in flight was cancelled, not refused)
    errors = summary.get("errors") or {}
    reason = f": {next(iter(errors))}" if errors else ""
    return f"none of the {counted(summary['sent'], 'request')} sent got a response from the target{reason}"


def _failure(record: Exchange) -> str | None:
    """Why a request sent failed, for the summary: its HTTP status when that is an error, else how it
    ended (``timeout``, ``upstream_error``, ``cancelled``); None: answered 2xx in full."""
    status = record["status"]
    if status is not None and not 200 <= status < 300:
        return str(status)
    return None if record["end"] == "complete" and status is not None else str(record["end"])


def _by_path(stats: ReplayStats) -> dict[str, dict[str, Any]]:
    """Per path that had a failure: its requests sent and its failures, the most frequent first."""
    paths: dict[str, dict[str, Any]] = {}
    for (path, failure), n in stats.path_failures.most_common():
        entry = paths.setdefault(path, {"sent": stats.path_sent[path], "failures": {}})
        entry["failures"][failure] = n
    return paths


def _pct(values: list[int], q: float) -> float | None:
    """Milliseconds, by the one percentile definition of docs/metrics.md."""
    return quantile(sorted(values), q) / 1e6 if values else None


def request_rate(sends: Sequence[tuple[int, int]], open_loop: bool) -> dict[str, float | None]:
    """Requests per second from the first send to the last, as sent and as scheduled (open loop;
    a closed loop asks for no rate): (n - 1) over the span, so that ``--rate R`` schedules R exactly.
    Lag percentiles can be small while the rate falls short (a cap's waits, turns held back for
    their parents): a load generator's first check is the rate it achieved against the one asked."""
    rate: dict[str, float | None] = {"sent": None, "scheduled": None}
    if len(sends) < 2:
        return rate
    due, sent = [d for d, _ in sends], [t for _, t in sends]
    if span := max(sent) - min(sent):
        rate["sent"] = (len(sends) - 1) * 1e9 / span
    if open_loop and (span := max(due) - min(due)):
        rate["scheduled"] = (len(sends) - 1) * 1e9 / span
    return rate


def throughput(ok: int, intervals: Sequence[tuple[int, int]], output_tokens: int | None = None) -> dict[str, float | None]:
    """The ``ok`` requests (answered 2xx, in full, finished) per second over the replay's span, from
    the first send to the last end, as GuideLLM's and AIPerf's summaries give completed requests/s,
    and their output tokens (as stats counts them, ``apis.answer_tokens``, where any was counted: None else) over the same
    span, as a sweep's points have them; ``request_rate`` is of sends, first to last."""
    span = (max(e for _, e in intervals) - min(s for s, _ in intervals)) / 1e9 if intervals else 0.0
    return {
        "span_s": span or None,
        "ok_per_s": ok / span if span else None,
        "output_tokens_per_s": output_tokens / span if span and output_tokens is not None else None,
    }


def token_counts(stats: ReplayStats) -> dict[str, Any]:
    """The ok generation answers' output tokens: counted of how many, how many had no count, and by
    which source (answers, ``source``; tokens, ``by_source``), named as stats names them."""
    return {
        "total": stats.output_tokens,
        "counted": stats.tokens_counted,
        "unknown": stats.tokens_unknown,
        "source": {k: n for k, n in stats.answers_by_source.most_common() if n},
        "by_source": {k: n for k, n in stats.tokens_by_source.most_common() if stats.answers_by_source[k]},
    }


def count_enriched(stats: ReplayStats, enriched: Mapping[str, int]) -> int:
    """Counts the answers without usage that the target's enrichment counted (``enriched``: exchange
    id -> its output tokens by the engine's tokenizer) by that count, source ``tokenize``, as stats'
    metrics view does (docs/metrics.md, ``output_tokens``), instead of their token events or no
    count: the summary and stats of the replay's capture then say the same. How many it recounted."""
    recounted = [xid for xid in stats.without_usage if xid in enriched]
    for xid in recounted:
        events = stats.without_usage.pop(xid)
        if events is None:
            stats.tokens_unknown -= 1
            stats.tokens_counted += 1
        else:
            stats.output_tokens -= events
            stats.tokens_by_source["chunks"] -= events
            stats.answers_by_source["chunks"] -= 1
        stats.output_tokens += enriched[xid]
        stats.tokens_by_source["tokenize"] += enriched[xid]
        stats.answers_by_source["tokenize"] += 1
    return len(recounted)


def recount(summary: dict[str, Any], stats: ReplayStats, enriched: Mapping[str, int]) -> None:
    """The summary's output tokens and tokens/s again, once the enrichment (which ends after the
    replay) has counted answers without usage (``count_enriched``)."""
    if count_enriched(stats, enriched):
        summary["output_tokens"] = token_counts(stats)
        summary["throughput"] = throughput(summary["ok"], stats.intervals, stats.output_tokens if stats.tokens_counted else None)


def summarize(stats: ReplayStats, wall_s: float, *, open_loop: bool = True) -> dict[str, Any]:
    """The end-of-run summary: what was sent, how it ended, how faithful the schedule was."""
    span = (max(e for _, e in stats.intervals) - min(s for s, _ in stats.intervals)) if stats.intervals else 0
    busy = sum(e - s for s, e in stats.intervals)
    edges = sorted([(s, 1) for s, _ in stats.intervals] + [(e, -1) for _, e in stats.intervals])
    level = peak = 0
    for _, step in edges:
        level += step
        peak = max(peak, level)
    failed = sum(stats.failures.values())
    ok = stats.sent - failed - stats.unfinished - stats.response_not_kept
    return {
        "sent": stats.sent,
        "completed": stats.ends.get("complete", 0),  # the response read to its end, whatever its status
        "ok": ok,  # answered 2xx, in full, finished, with no error in the body, and kept whole
        "failed": failed,
        "unfinished": stats.unfinished,  # answered 2xx in full, by a stream that ended with no finish reason
        "response_not_kept": stats.response_not_kept,  # answered 2xx in full, kept only in part: unknown
        # by HTTP status, by ending where none was an error, or by what a 2xx body said ("an error in a 200 body")
        "failures": dict(stats.failures.most_common()),
        "failures_by_path": _by_path(stats),
        "not_sent": stats.total - stats.sent,
        "ends": dict(stats.ends),
        "statuses": dict(stats.statuses),
        "errors": dict(stats.errors.most_common(_ERRORS_SHOWN)),
        "lag_ms": {"p50": _pct(stats.lags_ns, 0.5), "p99": _pct(stats.lags_ns, 0.99), "max": _pct(stats.lags_ns, 1.0)},
        "queue_wait_ms": {"p50": _pct(stats.queue_ns, 0.5), "p99": _pct(stats.queue_ns, 0.99), "max": _pct(stats.queue_ns, 1.0)},
        "behind_ms": {"p50": _pct(stats.behind_ns, 0.5), "p99": _pct(stats.behind_ns, 0.99), "max": _pct(stats.behind_ns, 1.0)},
        "capped": stats.capped,
        "schedule_kept": not stats.capped,
        "request_rate": request_rate(stats.sends, open_loop),
        "throughput": throughput(ok, stats.intervals, stats.output_tokens if stats.tokens_counted else None),
        "output_tokens": token_counts(stats),
        "concurrency": {"mean": busy / span if span else float(bool(stats.intervals)), "max": peak},
        "wall_s": wall_s,
        "stopped_early": stats.stopped_early,
    }


def session_summary(stats: ReplayStats, mode: str, think_scale: float, schedule: Schedule) -> dict[str, Any]:
    """How faithfully turns kept their rule, and which waits were the target's: in open mode a turn
    due before its parent ended on the target waited for it (the target was slower than recorded);
    in closed mode a turn is due at its parent's end plus its think time, so no wait is the target's."""
    waits = stats.parent_waits_ns
    return {
        "mode": mode,
        "schedule": sessions_timed_by(schedule),  # what set a turn's time in open mode: recorded times only where "original"
        "think_scale": think_scale,
        "turns": len(stats.turn_lags_ns),
        "turn_lag_ms": {
            "p50": _pct(stats.turn_lags_ns, 0.5),
            "p99": _pct(stats.turn_lags_ns, 0.99),
            "max": _pct(stats.turn_lags_ns, 1.0),
        },
        "waited_for_parent": sum(1 for w in waits if w > 0),  # the target's fault: its parent ended later than recorded
        "parent_wait_ms": {"p50": _pct(waits, 0.5), "p99": _pct(waits, 0.99), "max": _pct(waits, 1.0)},
    }


class Replay:
    """Sends ``items`` to ``config.target`` on ``config.schedule`` and records each exchange into ``writer``."""

    def __init__(
        self,
        config: ReplayConfig,
        items: list[Item],
        bodies: Sequence[bytes],
        headers: Sequence[Sequence[tuple[str, str]]],
        writer: CaptureWriter,
        *,
        on_exchange: Callable[[Exchange], None] | None = None,
        redactor: Redactor | None = None,
        offsets: list[int] | None = None,
        start_ns: int | None = None,
        enriched_later: bool = False,
    ) -> None:
        """``config`` gives the target, the schedule, the timeouts and the grace period; ``bodies``
        and ``headers`` are the items' requests as they will be sent (transformed).

        ``offsets`` (open loop) and ``start_ns`` (a ``time.monotonic_ns()`` deadline) come from a
        sharded replay: the schedule was computed over the whole workload and every shard starts
        at one shared instant. By default the schedule is computed here and starts now.
        ``enriched_later``: a shard's exchanges are enriched by its driver after the merge, so it keeps
        its answers without usage by id as an enriched replay does (``count_enriched``)."""
        self.config = config
        self.items = items
        self.bodies = bodies
        self.headers = headers
        self.target = config.target.rstrip("/")
        self.writer = writer
        self.schedule = schedule = config.schedule
        self.connect_timeout, self.read_timeout = config.connect_timeout, config.read_timeout
        url = urlsplit(config.target)
        self._prefix = url.path.rstrip("/").encode("latin-1")  # a target mounted under a path keeps it
        self._target_query = url.query  # the target's own parameters (a key), sent with every request
        self.grace_s = config.grace_s
        self.on_exchange = on_exchange
        # answers without usage kept by id only where an enrichment may count them (count_enriched)
        self._keep_without_usage = (on_exchange is not None or enriched_later) and config.probe and config.enrich
        self.redactor = redactor or _redactor(config, items)
        self._shown = self.redactor.url(self.target)  # recorded with each exchange, a password in it redacted
        self._url_credentials = self.redactor.url_credentials(self.target)
        self.redactor.query(url.query, self._url_credentials)  # a key in the target's query: never recorded either
        self._scrubbed = Scrubbed(self.redactor, self._written)
        self.offsets = offsets
        self.start_ns = start_ns
        self.stats = ReplayStats(total=len(items), elapsed_ns=writer.elapsed_ns)
        self._done = [asyncio.Event() for _ in items]
        self._tasks: set[asyncio.Task[None]] = set()
        self._reads: set[asyncio.Task[None]] = set()  # answers their tail can't judge, read whole
        self._cap = asyncio.Semaphore(schedule.max_concurrency) if schedule.max_concurrency else None
        self._slots = asyncio.Condition()
        self._stopping = False
        self._dispatcher: asyncio.Task[None] | None = None
        self._client: UpstreamClient | None = None
        self._seq = 0
        # --sessions closed: a turn is sent its think time after both its parent and the turn its
        # think time was measured from (a later-ending turn of its session) have ended here, not at
        # its recorded time: the target may end them in the other order.
        self._closed = config.sessions == "closed"
        self._children: dict[int, list[Item]] = {}
        if self._closed:
            for item in items:
                if item.parent is not None:
                    for since in dict.fromkeys((item.parent, item.think_from)):
                        if since is not None:
                            self._children.setdefault(since, []).append(item)
        self._later: dict[int, asyncio.TimerHandle] = {}  # turns waiting out their think time
        # Closed loop: each request's turns, and the turns whose parent is done, by index (a heap).
        self._turns_of: dict[int, list[int]] = {}
        if not schedule.open_loop:
            for item in items:
                if item.parent is not None:
                    self._turns_of.setdefault(item.parent, []).append(item.index)
        self._ready: list[int] = []
        self._ids: dict[int, str] = {}  # item index -> the id of its recorded exchange, for its turns' parent_id
        # Responses turns that name a stored response: the target's id for their parent's response.
        self._chained = {item.parent for item in items if item.previous_response_id is not None and item.parent is not None}
        self._response_ids: dict[int, str | None] = {}
        self._finished = asyncio.Event()  # every item settled
        self._stop_requested = asyncio.Event()  # Ctrl-C: ends the wait for the last requests, whenever it comes
        self._cut_short = asyncio.Event()  # a second Ctrl-C: ends the grace period
        self._ahead: ReadAhead | None = None  # bodies read from the capture, a window ahead
        self.failure: BodyError | None = None  # why the run stopped early, when a body couldn't be read

    def stop(self) -> None:
        """Stop sending (Ctrl-C); in-flight requests get the grace period, then are cancelled. A
        second stop ends the grace period now, as a second Ctrl-C ends record's: with a long
        ``--grace`` (for long answers) only a kill was left, and a kill loses the capture's end."""
        if self._stopping:
            self._cut_short.set()
        else:
            self._stopping = True
            self._stop_requested.set()
            self.stats.stopped_early = True
            if self._dispatcher is not None:
                self._dispatcher.cancel()
            for handle in self._later.values():
                handle.cancel()
            self._later.clear()
            self._finished.set()

    async def run(self) -> dict[str, Any]:
        started = time.monotonic()
        self._client = client = UpstreamClient(self.target, connect_timeout=self.connect_timeout, read_timeout=self.read_timeout)
        if not isinstance(self.bodies, list):
            self._ahead = ReadAhead(self.bodies).start()
        try:
            self._dispatcher = asyncio.create_task(self._dispatch())
            try:
                await self._dispatcher
            except asyncio.CancelledError:
                if not self._stopping:
                    raise
            if self._closed and self.items:
                await self._finished.wait()  # later turns are spawned as their parents end
            while self._tasks and not self._stopping:  # every request sent has its time, until a Ctrl-C
                stopped = asyncio.ensure_future(self._stop_requested.wait())
                await asyncio.wait({*self._tasks, stopped}, return_when=asyncio.FIRST_COMPLETED)
                stopped.cancel()
            if self._tasks:  # stopped: the grace period, then the rest are cancelled
                tasks = set(self._tasks)
                graced = asyncio.ensure_future(asyncio.wait(tasks))
                cut = asyncio.ensure_future(self._cut_short.wait())
                await asyncio.wait({graced, cut}, timeout=self.grace_s, return_when=asyncio.FIRST_COMPLETED)
                graced.cancel()  # the wait only: its requests are cancelled below
                cut.cancel()
                pending = {task for task in tasks if not task.done()}
                for task in pending:
                    task.cancel()
                if pending:
                    await asyncio.wait(pending)
        finally:
            await self._scrubbed.drained()  # recorded before the replay's capture closes
            if self._reads:  # every answer counted before the summary
                await asyncio.wait(set(self._reads))
            await client.aclose()
            if self._ahead is not None:
                await asyncio.get_running_loop().run_in_executor(None, self._ahead.close)
        summary = summarize(self.stats, time.monotonic() - started, open_loop=self.schedule.open_loop)
        summary["capped_at"] = self.schedule.max_concurrency
        summary["sessions"] = session_summary(self.stats, self.config.sessions, self.config.think_scale, self.config.schedule)
        return summary

    # -- dispatch ------------------------------------------------------------------------------

    async def _dispatch(self) -> None:
        t0_mono = self.start_ns or time.monotonic_ns()
        t0 = t0_mono - self.writer.started_ns  # on the writer's clock, as scheduled_ns is
        if self.schedule.open_loop:
            offsets = self.offsets if self.offsets is not None else self.schedule.offsets(self.items)
            for item, offset in zip(self.items, offsets, strict=True):
                if self._closed and item.parent is not None:
                    continue  # sent after its parent, by _follow
                await sleep_until(t0_mono + offset)
                self._spawn(item, t0 + offset)
        else:
            await sleep_until(t0_mono)
            await self._dispatch_closed()

    async def _dispatch_closed(self) -> None:
        """Closed loop: the next request to take a slot is the first, in recorded order, that can be
        sent now (it continues nothing, or what it continues is done). A turn waiting for its parent
        holds no slot, so the sessions beside it go on; it is in flight from its slot on."""
        n = len(self.items)
        roots = iter([item.index for item in self.items if item.parent is None])
        root = next(roots, n)

        def chosen() -> int:
            return min(root, self._ready[0]) if self._ready else root

        def room() -> bool:
            i = chosen()
            return i < n and self.stats.in_flight < self.schedule.limit(self.items[i])

        for _ in range(n):
            async with self._slots:
                await self._slots.wait_for(room)
            i = chosen()
            if i == root:
                root = next(roots, n)
            else:
                heapq.heappop(self._ready)
            self._spawn(self.items[i], self.writer.elapsed_ns())

    def _spawn(self, item: Item, scheduled_ns: int, think_ns: int | None = None) -> None:
        self._later.pop(item.index, None)
        self.stats.in_flight += 1
        task = asyncio.create_task(self._send(item, scheduled_ns, think_ns))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _release(self) -> None:
        self.stats.in_flight -= 1
        async with self._slots:
            self._slots.notify_all()

    # -- one request ---------------------------------------------------------------------------

    async def _send(self, item: Item, scheduled_ns: int, think_ns: int | None = None) -> None:
        try:
            body = await self._ahead.get(item.index) if self._ahead is not None else self.bodies[item.index]
        except asyncio.CancelledError:
            self._done[item.index].set()
            await asyncio.shield(self._release())
            raise
        except Exception as exc:
            await self._unreadable(item, exc)
            return
        found = set(self._url_credentials)  # the credentials sent (redacted in the record): not in its response either
        record = new_exchange(
            source_id=item.source_id,
            repeat=item.repeat,
            turn=item.turn,
            scheduled_ns=scheduled_ns,
            session=item.session,
            wall=time.time(),
            start_ns=self.writer.elapsed_ns(),
            sent_ns=0,
            method=item.method,
            path=item.path,
            query=item.query,
            request_headers=self.redactor.header_pairs(self.headers[item.index], found),
            request_body=body,  # redacted once it is over, by _settle: off the loop when it is large
            upstream=self._shown,
            lag_ns=0,
            queue_ns=0,
            dep_wait_ns=0,
        )
        if think_ns is not None:
            record["think_ns"] = think_ns
        call = UpstreamCall(record, self.redactor, self.writer.elapsed_ns, "target", self.config.max_response_bytes)
        # its error marks searched as its bytes arrive, not all at once on the loop as it ends
        scan = ErrorMarkScan.of_path(item.path) if item.generation else None
        acquired = False
        response: UpstreamResponse | None = None
        try:
            dep_wait, queue_wait, acquired = await self._wait_turn(item)
            if self._stopping:  # Ctrl-C while it waited for its parent or a slot: stopped, not sent
                record.update({"end": "cancelled", "error": "replay stopped before it was sent"})
                return
            assert self._client is not None
            sent = self._body(item, record, body)
            if sent is None:
                return  # a stateful turn whose parent the target gave no id: recorded as refused, not sent
            query = sent_query(item.query, self._target_query)
            record["query"] = self.redactor.query(query)  # as sent: the target's key in it redacted
            target = self._prefix + (item.path + ("?" + query if query else "")).encode("latin-1")
            headers = [(n.encode("latin-1"), v.encode("latin-1")) for n, v in self.headers[item.index]]
            self._seq += 1
            call.sent()
            self._count_sent(record, scheduled_ns, dep_wait, queue_wait, item)
            response = await call.open(self._client, item.method, target, headers, sent)
            await call.relay(response, seen=None if scan is None else scan.feed)
        except UpstreamError as exc:
            call.failed(exc)
        except asyncio.CancelledError:
            record.update({"end": "cancelled", "error": "replay stopped while the request was in flight"})
            raise
        finally:
            if record["sent_ns"] and record["end"] != "refused":
                call.ended()
            if response is not None:
                await response.aclose()
            if acquired:
                self._cap.release()  # type: ignore[union-attr]
            self._settle(item, record, found, scan)
            await asyncio.shield(self._release())

    async def _wait_turn(self, item: Item) -> tuple[int, int, bool]:
        """Wait for the request this one's conversation continues, then for a concurrency slot:
        returns both waits (ns, kept out of the lag) and whether a slot was taken."""
        dep_wait = queue_wait = 0
        if item.parent is not None and not self._done[item.parent].is_set():
            t = time.monotonic_ns()
            await self._done[item.parent].wait()
            dep_wait = time.monotonic_ns() - t
        if self._cap is None:
            return dep_wait, 0, False
        must_wait = self._cap.locked()
        t = time.monotonic_ns()
        await self._cap.acquire()
        queue_wait = time.monotonic_ns() - t if must_wait else 0
        return dep_wait, queue_wait, True

    async def _unreadable(self, item: Item, exc: Exception) -> None:
        """The item's body can't be read: nothing is sent, and the run stops, as on Ctrl-C, with
        every exchange sent so far recorded. Stopped once: the next body that can't be read (a
        capture's whole segment gone) is no second Ctrl-C, which would cancel the requests in flight
        instead of giving them the grace period."""
        if self.failure is None:
            self.failure = exc if isinstance(exc, BodyError) else BodyError(f"exchange {item.source_id}: {exc!r}")
        if not self._stopping:
            self.stop()
        self._done[item.index].set()
        self.stats.completed += 1
        await asyncio.shield(self._release())

    def _body(self, item: Item, record: Exchange, body: bytes) -> bytes | None:
        """The request's body as sent, its turn linked to the target's exchanges: ``parent_id`` names the
        exchange its parent became here, and a ``previous_response_id`` the target's id for that response.
        None when the response it names is not its parent's here (that turn is not in this replay: its
        parent, if any, was linked by its session) or the target gave the parent's response no id: the
        turn is refused, never sent stale nor continuing another conversation."""
        if item.parent is not None and (parent_id := self._ids.get(item.parent)) is not None:
            record["parent_id"] = parent_id
        if item.previous_response_id is None:
            return body
        if item.parent is None or item.parent_response_id != item.previous_response_id:
            # The response it names is of a turn this replay doesn't send: the target can't know its id.
            self._refuse(
                record,
                f"not sent: its previous_response_id {item.previous_response_id!r} names a response of a turn "
                "this replay doesn't send (a filter or --limit left it out, or the capture starts mid-conversation)",
            )
            return None
        response_id = self._response_ids.get(item.parent)
        if response_id is None:
            self._refuse(
                record,
                f"not sent: its previous_response_id {item.previous_response_id!r} names the response of the "
                "turn it continues, and the target returned no response id for that turn",
            )
            return None
        try:
            body = rechained(body, response_id)
        except TransformError as exc:
            self._refuse(record, f"not sent: {exc}")
            return None
        record["request_body"] = body
        record["rechained_from"] = item.previous_response_id
        return body

    def _refuse(self, record: Exchange, why: str) -> None:
        record["end"], record["sent_ns"], record["error"] = "refused", self.writer.elapsed_ns(), why

    def _count_sent(self, record: Exchange, scheduled_ns: int, dep_wait: int, queue_wait: int, item: Item) -> None:
        """Schedule fidelity: how late the request left, not counting the waits it was meant to have
        (the dispatcher's lag), and how far behind its schedule it left, the cap's wait counted."""
        behind = max(0, record["sent_ns"] - scheduled_ns - dep_wait)
        lag = max(0, behind - queue_wait)
        if item.parent is not None:
            self.stats.turn_lags_ns.append(lag)
            if not self._closed:
                # Open: due at its recorded time; what it waited past that for its parent is the target's.
                self.stats.parent_waits_ns.append(dep_wait)
        record.update({"seq": self._seq, "lag_ns": lag, "queue_ns": queue_wait, "dep_wait_ns": dep_wait})
        self.stats.sent += 1
        self.stats.open_ns[self._seq] = record["sent_ns"]
        self.stats.lags_ns.append(lag)
        self.stats.behind_ns.append(behind)
        self.stats.sends.append((scheduled_ns, record["sent_ns"]))
        if self._cap is not None:
            self.stats.queue_ns.append(queue_wait)
            self.stats.capped += queue_wait > 0

    def _follow(self, item: Item) -> None:
        """The turns that wait on ``item``'s end (those that continue it, or a turn beside it whose
        think time runs from it) and on nothing else still running, each sent its (scaled) think time
        after ``item`` ended here: after the later of its parent's end and the end its think time was
        measured from, the agent's own pacing whatever the target's speed or order; not lag."""
        ended = self.writer.elapsed_ns()
        loop = asyncio.get_running_loop()
        for child in self._children.get(item.index, ()):
            assert child.parent is not None
            if not self._done[child.parent].is_set() or (
                child.think_from is not None and not self._done[child.think_from].is_set()
            ):
                continue  # the other end it waits on comes later: followed from there
            think = round((child.think_ns or 0) * self.config.think_scale)
            self._later[child.index] = loop.call_later(think / 1e9, self._spawn, child, ended + think, think)

    def _settle(self, item: Item, record: Exchange, found: set[str], scan: ErrorMarkScan | None = None) -> None:
        """The request is over: release its conversation, count it, and record it if it was sent (or refused)."""
        if record["sent_ns"]:
            self._ids[item.index] = record["id"]
            if item.index in self._chained:
                self._response_ids[item.index] = _response_id(record)
        self._done[item.index].set()
        for turn in self._turns_of.pop(item.index, ()):
            heapq.heappush(self._ready, turn)  # may take a slot now (closed loop)
        self.stats.open_ns.pop(record["seq"], None)
        if record["sent_ns"]:  # what was sent (or refused) and recorded: the endings add up to it
            self.stats.ends[record["end"]] += 1
            self.stats.statuses[str(record["status"])] += 1
            if record["error"]:
                self.stats.errors[str(record["error"])[:_ERROR_CHARS]] += 1
            # a refused turn was never sent: counted in not_sent, not among the failures of those sent
            path = record["path"].split("?", 1)[0]
            if record["end"] != "refused":
                self.stats.path_sent[path] += 1
            if record["end"] != "refused" and (failure := _failure(record)) is not None:
                self._count_failure(path, failure, item.generation)
            elif record["end"] != "refused" and item.generation:
                if response_not_kept(record):  # its answer unknown: neither ok nor failed, as stats counts it
                    self.stats.response_not_kept += 1
                self._judge(record, scan)  # answered 2xx in full: finished, with no error? (before its body is scrubbed)
        self.stats.completed += 1
        if self._closed and not self._stopping:
            self._follow(item)
        if self.stats.completed == self.stats.total:
            self._finished.set()
        if record["sent_ns"]:
            if record["end"] != "refused":
                self.stats.intervals.append((record["sent_ns"], record["sent_ns"] + record["end_ns"]))
            # Its body redacted now, not before it was sent: a large one on a worker thread, the
            # dispatcher's deadlines kept meanwhile (its bytes are the capture's, but --set may add a
            # credential, and this replay may redact more names than the source's recorder did).
            self._scrubbed.record(record, found, request=True)

    def _written(self, record: Exchange) -> None:
        self.writer.write(record)
        if self.on_exchange is not None:
            self.on_exchange(record)

    def _judge(self, record: Exchange, scan: ErrorMarkScan | None = None) -> None:
        """Judges a generation request answered 2xx in full as ``stats`` does: unfinished when its
        stream ended with no finish reason, failed when its body reports an error (or is no answer an
        adapter reads), and each among the live errors; else its output tokens counted. Read from its
        last events here (a few KiB), or, where they can't tell (an encoded body, a body sent whole,
        say) or report no usage (a stream counted by its token events, ``apis.answer_tokens``), whole
        on a worker thread. ``scan``: its error marks, searched as its bytes arrived."""
        try:
            marked = None if scan is None else scan.ended()
            cut, told, tokens, error = ended_answer(record, generation=True, marked=marked)
        except Exception:  # a reader's bug: the exchange is recorded whole, the analysis reads it again
            log.exception("exchange %s: its answer could not be read for a finish reason", record["id"])
            return
        if cut is None or (not cut and (not told or tokens is None)):
            read = asyncio.ensure_future(self._read_whole(dict(record, chunks=list(record["chunks"])), cut is None))
            self._reads.add(read)
            read.add_done_callback(self._reads.discard)
        else:
            self._count_answer(record, cut, error, True, tokens, "usage")  # told by its tail: the engine's usage

    def _count_answer(
        self, record: Mapping[str, Any], cut: bool, error: str | None, readable: bool, tokens: int | None, source: str | None
    ) -> None:
        """One judged answer: unfinished, failed by its body (``_in_band``), or its output tokens."""
        if cut:
            self._count_unfinished()
        elif (failure := _in_band(record["status"], error, readable)) is not None:
            self._count_failure(record["path"].split("?", 1)[0], failure, True)
            self.stats.errors[(error or failure)[:_ERROR_CHARS]] += 1
        else:
            self._count_tokens(record["id"], tokens, source)

    def _count_failure(self, path: str, failure: str, generation: bool) -> None:
        self.stats.failures[failure] += 1
        self.stats.path_failures[path, failure] += 1
        if generation:  # of the generation requests sent, as a sweep's error_rate counts
            self.stats.generation_failed += 1

    def _count_tokens(self, xid: str, tokens: int | None, source: str | None) -> None:
        """An ok answer's output tokens (``apis.answer_tokens``, as stats counts them) and their
        source; None: unknown. One without usage is kept by id, for its enrichment's count."""
        if source != "usage" and self._keep_without_usage:
            self.stats.without_usage[xid] = tokens
        if tokens is None:
            self.stats.tokens_unknown += 1
        else:
            self.stats.output_tokens += tokens
            self.stats.tokens_counted += 1
            self.stats.tokens_by_source[source or "chunks"] += tokens
            self.stats.answers_by_source[source or "chunks"] += 1

    def _count_unfinished(self) -> None:
        self.stats.unfinished += 1
        self.stats.generation_failed += 1  # a generation request (only those are judged)

    async def _read_whole(self, record: Mapping[str, Any], judge: bool) -> None:
        """``_judge``'s whole read, of a copy of the record taken before its body was scrubbed: whether
        it was cut (``judge``: its tail couldn't tell), and if not, its error and output tokens."""
        try:
            judged = await asyncio.get_running_loop().run_in_executor(None, _read_answer, record, judge)
        except Exception:  # a reader's bug: the exchange is recorded whole, the analysis reads it again
            log.exception("exchange %s: its answer could not be read for a finish reason", record["id"])
            return
        self._count_answer(record, *judged)


def _read_answer(record: Mapping[str, Any], judge: bool) -> tuple[bool, str | None, bool, int | None, str | None]:
    """(cut, error, readable, tokens) of an answer read whole: whether it was cut (where ``judge``), the
    error its body reports (``error_message``), whether an adapter read it, and its output tokens as
    ``stats`` counts them (``answer_tokens``: its usage, else a stream's token events). An answer kept
    only in part is unknown (none of those), its tokens the usage in its kept tail (``tail_usage``, as
    the analysis counts it): the longest answers, a runaway stream, weigh most in output tokens/s."""
    if response_not_kept(record):
        kept = tail_usage(record)
        return False, None, True, kept.output_tokens if kept is not None else None, "usage"
    parsed, events = read_counted(record)  # once: the judgement and the counts read the same reading
    if judge and unfinished(record, parsed):
        return True, None, True, None, None
    tokens, source = answer_tokens(parsed.output_tokens, streamed_generation=bool(parsed.streamed), token_events=events)
    return False, parsed.error_message, parsed.readable, tokens, source


def _in_band(status: int, error: str | None, readable: bool) -> str | None:
    """Why a 2xx answer read in full failed, in compare's words (analysis.compare_outcomes): its body
    reports an error (an error object or event, a finish reason ``error``, a failed Responses status:
    an overloaded or failing engine's in-band error), or no adapter reads it; stats counts neither
    ok. None: an answer."""
    if error is not None:
        return f"an error in a {status} body"
    return None if readable else f"a {status} body not read"
