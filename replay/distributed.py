"""Distributed replay on Ray: one replay worker per shard, one shared start, one merged capture.

The driver computes the schedule over the whole workload, deals conversations to shards, starts
one Ray actor per shard (spread over the cluster's nodes) and waits until every actor holds its
part. Only then does it pick the start: an instant a little ahead, converted to each worker's own
clock (offsets measured by round trips), so original timing holds across machines. Each worker
records its shard as a run of its own (its recorder id names the shard) and returns the segments;
the driver writes them into one capture. A worker that dies loses its own shard only: the
others are merged, and the error names it. A stop signal to the driver (Ctrl-C, ``kill``, the
terminal closing) stops every worker, as it stops a replay in one process, and their shards are merged.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from infertap.capture.hostfacts import list_gpus
from infertap.capture.reader import capture_id_of
from infertap.capture.segments import next_segment_index, segment_name, segment_paths
from infertap.capture.writer import CaptureWriter
from infertap.errors import InfertapError
from infertap.stopping import stop_signals

from .config import ReplayConfig
from .runner import Replay, ReplayStats, redacted_names, session_summary, summarize
from .shards import Shard, shard_schedules, split
from .workload import Item

_LEAD_S = 1.0  # from the start's announcement to the start: enough for a round trip to any node
_PINGS = 5


class DistributedReplayError(InfertapError):
    pass


class ShardWorker:
    """Replays one shard into a capture of its own in a temporary folder; a Ray actor's body.

    Plain Python so the sharding can be driven without Ray too; ``run`` runs in one of the actor's
    threads while ``progress`` and ``stop`` answer from another. ``config`` is the replay's, with
    this shard's schedule in it; ``bodies``, ``headers`` and ``offsets`` are the shard's items'.
    """

    def __init__(
        self,
        config: ReplayConfig,
        shard: Shard,
        bodies: list[bytes],
        headers: list[list[tuple[str, str]]],
        offsets: list[int] | None,
        recorder: Mapping[str, Any],
        capture_id: str,
    ) -> None:
        self.config = config
        self.shard = shard
        self.bodies, self.headers, self.offsets = bodies, headers, offsets
        self.recorder_id = f"{socket.gethostname()}-{os.getpid()}-shard{shard.index}"
        self.recorder = {**recorder, "id": self.recorder_id, "shard": shard.index}
        self.capture_id = capture_id
        # The GPUs of the host this shard runs on, asked now, not in the 1 s lead to the shared start:
        # its run's header lists them, as a replay's in one process does (the driver's are another machine's).
        self.gpus = list_gpus()
        self._replay: Replay | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = threading.Event()

    def hello(self) -> dict[str, Any]:
        return {"host": socket.gethostname(), "pid": os.getpid(), "recorder_id": self.recorder_id, "items": len(self.shard.items)}

    def clock(self) -> float:
        return time.time()

    def progress(self) -> tuple[int, int, int, int]:
        """(sent, completed, completed but not complete, generation requests not answered 2xx in full)."""
        stats = self._replay.stats if self._replay else None
        if stats is None:
            return (0, 0, 0, 0)
        return (stats.sent, stats.completed, stats.completed - stats.ends.get("complete", 0), stats.generation_failed)

    def stop(self) -> None:
        self._stop.set()
        if self._loop is not None and self._replay is not None:
            self._loop.call_soon_threadsafe(self._replay.stop)

    def run(self, start_wall: float) -> dict[str, Any]:
        """Replay from ``start_wall`` (this machine's clock); the shard's stats and capture segments."""
        folder = Path(tempfile.mkdtemp(prefix="infertap-shard-"))
        try:
            writer = CaptureWriter(
                folder / "capture", recorder=self.recorder, labels=self.config.labels, capture_id=self.capture_id, gpus=self.gpus
            ).open()
            try:
                start_ns = time.monotonic_ns() + int((start_wall - time.time()) * 1e9)
                self._replay = Replay(
                    self.config,
                    self.shard.items,
                    self.bodies,
                    self.headers,
                    writer,
                    offsets=self.offsets,
                    start_ns=start_ns,
                    enriched_later=True,
                )
                summary = _run_in_thread(self._main(self._replay))
            finally:
                writer.close()
            stats = self._replay.stats
            return {
                "shard": self.shard.index,
                **self.hello(),
                "summary": summary,
                "started_wall": writer.started_wall,
                "stats": {
                    "total": stats.total,
                    "sent": stats.sent,
                    "completed": stats.completed,
                    "generation_failed": stats.generation_failed,
                    "unfinished": stats.unfinished,
                    "response_not_kept": stats.response_not_kept,
                    "output_tokens": stats.output_tokens,
                    "tokens_counted": stats.tokens_counted,
                    "tokens_unknown": stats.tokens_unknown,
                    "tokens_by_source": dict(stats.tokens_by_source),
                    "answers_by_source": dict(stats.answers_by_source),
                    "without_usage": stats.without_usage,
                    "ends": dict(stats.ends),
                    "statuses": dict(stats.statuses),
                    "errors": dict(stats.errors),
                    "failures": dict(stats.failures),
                    "path_failures": [[path, failure, n] for (path, failure), n in stats.path_failures.items()],
                    "path_sent": dict(stats.path_sent),
                    "lags_ns": stats.lags_ns,
                    "behind_ns": stats.behind_ns,
                    "capped": stats.capped,
                    "queue_ns": stats.queue_ns,
                    "turn_lags_ns": stats.turn_lags_ns,
                    "parent_waits_ns": stats.parent_waits_ns,
                    "intervals": stats.intervals,
                    "sends": stats.sends,
                    "stopped_early": stats.stopped_early,
                },
                "segments": [(p.name, p.read_bytes()) for p in segment_paths(folder / "capture")],
                "capture_error": repr(writer.error) if writer.error else None,
            }
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    async def _main(self, replay: Replay) -> dict[str, Any]:
        self._loop = asyncio.get_running_loop()
        if self._stop.is_set():
            replay.stop()
        return await replay.run()


def _run_in_thread(coro: Any) -> Any:
    """``asyncio.run`` on a thread of its own: Ray's actor threads may already run a loop."""
    out: dict[str, Any] = {}

    def main() -> None:
        try:
            out["value"] = asyncio.run(coro)
        except BaseException as exc:  # re-raised in the caller's thread
            out["error"] = exc

    thread = threading.Thread(target=main, name="infertap-shard-replay")
    thread.start()
    thread.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def merge_segments(out: Path, parts: list[list[tuple[str, bytes]]]) -> int:
    """Write each shard's segments into ``out`` after its existing ones, shard by shard; how many."""
    out.mkdir(mode=0o700, parents=True, exist_ok=True)
    index = first = next_segment_index(out)
    for segments in parts:
        for _, data in sorted(segments):
            fd = os.open(out / segment_name(index), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            index += 1
    return index - first


def _clock_offset(ray: Any, worker: Any) -> tuple[float, float | None]:
    """(worker clock - driver clock, round trip) in seconds, from the fastest of a few pings."""
    best = (0.0, float("inf"))
    for _ in range(_PINGS):
        t1 = time.time()
        theirs = ray.get(worker.clock.remote())
        t2 = time.time()
        if t2 - t1 < best[1]:
            best = (theirs - (t1 + t2) / 2, t2 - t1)
    return best


def shard_count(ray: Any, config: ReplayConfig) -> int:
    """``config.shards``, or one shard per CPU of the connected cluster."""
    return config.shards or max(1, int(ray.cluster_resources().get("CPU", 1)))


def run_sharded(
    config: ReplayConfig,
    items: list[Item],
    bodies: Sequence[bytes],
    headers: list[list[tuple[str, str]]],
    recorder: Mapping[str, Any],
    *,
    progress: Callable[[ReplayStats], None] | None = None,
    worker: type[ShardWorker] = ShardWorker,
    stats: ReplayStats | None = None,
) -> dict[str, Any]:
    """Replay ``items`` (``bodies`` and ``headers``: theirs, ready to send; each shard's bodies are
    read here and travel with it) in ``config.shards`` Ray
    actors (default: the cluster's CPUs) on the connected cluster and merge them into ``config.out``.

    ``worker`` may be a subclass of ShardWorker (extra per-shard work, fault injection). ``stats``,
    where given, receives the shards' merged stats: the driver enriches after the merge, and recounts
    the summary's output tokens from them (``runner.recount``), as a replay in one process does."""
    import ray

    out = Path(config.out)
    workers = _start_workers(ray, worker, config, items, bodies, headers, recorder)
    with _stop_requests() as asked:  # from here to the merge: a kill stops the workers and keeps their shards
        hellos = _hellos(ray, workers)
        here = socket.gethostname()
        # Workers on this host share its clock; others get their offset measured (None: same clock).
        clocks = [(0.0, None) if h["host"] == here else _clock_offset(ray, w) for h, w in zip(hellos, workers, strict=True)]
        start = time.time() + _LEAD_S
        runs = {w.run.remote(start + offset): k for k, (w, (offset, _)) in enumerate(zip(workers, clocks, strict=True))}
        results, failed = _wait_for_runs(ray, workers, runs, ReplayStats(total=len(items)), progress, asked)
        written = merge_segments(out, [results[k]["segments"] for k in sorted(results)])
    for w in workers:
        ray.kill(w)
    summary = _merge_summaries(results, clocks, config, ReplayStats() if stats is None else stats)
    summary.update(segments=written, shards=len(workers), failed_shards=failed)
    _raise_for_failures(out, hellos, results, failed)
    return summary


def _start_workers(
    ray: Any,
    worker: type[ShardWorker],
    config: ReplayConfig,
    items: list[Item],
    bodies: Sequence[bytes],
    headers: list[list[tuple[str, str]]],
    recorder: Mapping[str, Any],
) -> list[Any]:
    """One actor per shard, each handed its part of the workload and its part of the schedule."""
    # The names the source capture redacted, learned here from the captured headers the workers
    # don't get: a secret --header gives one of them stays out of every shard's capture.
    headers_redacted, query_redacted = redacted_names(config, items)
    config = replace(config, redact_headers=headers_redacted, redact_query=query_redacted)
    parts = split(items, shard_count(ray, config))
    for part in parts:  # the prepared bodies and headers travel; the captured ones are not needed
        part.items = [replace(item, raw=b"", store=None, headers=[], settings=None) for item in part.items]
    schedules = shard_schedules(config.schedule, len(parts))
    offsets = config.schedule.offsets(items) if config.schedule.open_loop else None  # over the whole workload
    capture_id = capture_id_of(Path(config.out)) or os.urandom(16).hex()
    actor = ray.remote(worker).options(num_cpus=1, max_concurrency=4, scheduling_strategy="SPREAD")
    return [
        actor.remote(
            replace(config, schedule=part_schedule),
            part,
            [bodies[g] for g in part.origin],
            [headers[g] for g in part.origin],
            [offsets[g] for g in part.origin] if offsets is not None else None,
            recorder,
            capture_id,
        )
        for part, part_schedule in zip(parts, schedules, strict=True)
    ]


def _hellos(ray: Any, workers: list[Any]) -> list[dict[str, Any]]:
    """Each worker's hello; if one can't start, every worker is stopped and nothing is sent."""
    try:
        return ray.get([w.hello.remote() for w in workers])  # every actor is up and holds its shard
    except ray.exceptions.RayError as exc:
        for w in workers:
            ray.kill(w)
        raise DistributedReplayError(f"a replay worker could not start, nothing was sent: {exc}") from exc


@contextmanager
def _stop_requests() -> Iterator[threading.Event]:
    """An event the first stop signal sets (Ctrl-C, ``kill``, the terminal closing: ``stop_signals``,
    as a replay in one process stops on them); a second raises KeyboardInterrupt, to stop waiting
    too. Handled only from the main thread, where Python runs signal handlers; restored after."""
    asked = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield asked
        return

    def handler(signum: int, frame: object) -> None:
        if asked.is_set():
            raise KeyboardInterrupt
        asked.set()

    previous = {sig: signal.signal(sig, handler) for sig in stop_signals()}
    try:
        yield asked
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _wait_for_runs(
    ray: Any,
    workers: list[Any],
    runs: dict[Any, int],
    live: ReplayStats,
    progress: Callable[[ReplayStats], None] | None,
    asked: threading.Event,
) -> tuple[dict[int, dict[str, Any]], dict[int, str]]:
    """Each shard's result, or why it failed, by shard; once ``asked`` (a stop signal), every
    worker stops sending and gives its in-flight requests the grace period."""
    results: dict[int, dict[str, Any]] = {}
    failed: dict[int, str] = {}
    stopping = False
    pending = list(runs)
    while pending:
        if asked.is_set() and not stopping:
            stopping = True
            for w in workers:
                w.stop.remote()
        done, pending = ray.wait(pending, timeout=0.2)
        for ref in done:
            k = runs[ref]
            try:
                results[k] = ray.get(ref)
            except ray.exceptions.RayError as exc:
                failed[k] = _reason(exc)
        if progress:
            _tick(ray, live, [results[k]["stats"] for k in results], [workers[runs[ref]] for ref in pending])
            progress(live)
    return results, failed


def _raise_for_failures(
    out: Path, hellos: list[dict[str, Any]], results: dict[int, dict[str, Any]], failed: dict[int, str]
) -> None:
    """A lost shard, or a shard's capture that could not be written, fails the whole replay."""
    if failed:
        lost = ", ".join(f"shard {k} on {hellos[k]['host']} ({why})" for k, why in sorted(failed.items()))
        raise DistributedReplayError(
            f"{len(failed)} of {len(hellos)} replay workers failed, their shards are not in {out}: {lost}"
        )
    errors = [f"shard {k}: {r['capture_error']}" for k, r in sorted(results.items()) if r["capture_error"]]
    if errors:
        raise DistributedReplayError("a worker's capture could not be written: " + "; ".join(errors))


def _reason(exc: BaseException) -> str:
    """The worker's own error when it raised one, not Ray's wrapper around it."""
    cause = getattr(exc, "cause", None)
    return f"{type(cause).__name__}: {cause}" if cause is not None else f"{type(exc).__name__}: {exc}"


def _tick(ray: Any, live: ReplayStats, finished: list[dict[str, Any]], running: list[Any]) -> None:
    try:
        polled = ray.get([w.progress.remote() for w in running], timeout=5) if running else []
    except ray.exceptions.RayError:
        return  # a worker gone: its run's result will say so
    live.sent = sum(c["sent"] for c in finished) + sum(p[0] for p in polled)
    live.completed = sum(c["completed"] for c in finished) + sum(p[1] for p in polled)
    failed = sum(c["completed"] - c["ends"].get("complete", 0) for c in finished) + sum(p[2] for p in polled)
    live.ends = Counter(complete=live.completed - failed)
    live.in_flight = live.sent - live.completed
    # What the live display calls errors, as a replay in one process counts them.
    live.generation_failed = sum(c["generation_failed"] for c in finished) + sum(p[3] for p in polled)


def _merge_summaries(
    results: dict[int, dict[str, Any]], clocks: list[tuple[float, float | None]], config: ReplayConfig, merged: ReplayStats
) -> dict[str, Any]:
    """The overall summary over every shard (intervals on the driver's clock, the shards' stats merged
    into ``merged``), and one per worker."""
    ends: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    workers = []
    for k in sorted(results):
        r, s = results[k], results[k]["stats"]
        merged.total += s["total"]
        merged.sent += s["sent"]
        merged.completed += s["completed"]
        merged.generation_failed += s["generation_failed"]
        merged.unfinished += s["unfinished"]
        merged.response_not_kept += s["response_not_kept"]
        merged.output_tokens += s["output_tokens"]  # over the merged span: the shards' answers' tokens, summed
        merged.tokens_counted += s["tokens_counted"]
        merged.tokens_unknown += s["tokens_unknown"]
        merged.tokens_by_source.update(s["tokens_by_source"])
        merged.answers_by_source.update(s["answers_by_source"])
        merged.without_usage.update(s["without_usage"])
        merged.lags_ns.extend(s["lags_ns"])
        merged.behind_ns.extend(s["behind_ns"])
        merged.capped += s["capped"]
        merged.failures.update(s["failures"])
        merged.path_failures.update({(path, failure): n for path, failure, n in s["path_failures"]})
        merged.path_sent.update(s["path_sent"])
        merged.queue_ns.extend(s["queue_ns"])
        merged.turn_lags_ns.extend(s["turn_lags_ns"])
        merged.parent_waits_ns.extend(s["parent_waits_ns"])
        merged.stopped_early |= s["stopped_early"]
        ends.update(s["ends"])
        statuses.update(s["statuses"])
        merged.errors.update(s["errors"])
        anchor = round((r["started_wall"] - clocks[k][0]) * 1e9)
        merged.intervals.extend((anchor + a, anchor + b) for a, b in s["intervals"])
        merged.sends.extend((anchor + a, anchor + b) for a, b in s["sends"])
        workers.append(
            {
                "shard": k,
                "host": r["host"],
                "pid": r["pid"],
                "recorder_id": r["recorder_id"],
                "items": s["total"],
                "sent": s["sent"],
                "completed": r["summary"]["completed"],
                "unfinished": s["unfinished"],  # its streams cut short: which shard's target cut them
                "lag_ms": r["summary"]["lag_ms"],
                "ended_per_s": _rate(s["intervals"]),  # requests ended, first send to last end (not request_rate's sends)
                "clock_offset_ms": clocks[k][0] * 1e3,
                "clock_rtt_ms": None if (rtt := clocks[k][1]) is None else rtt * 1e3,
            }
        )
    merged.ends, merged.statuses = ends, statuses
    span = (max(e for _, e in merged.intervals) - min(s for s, _ in merged.intervals)) / 1e9 if merged.intervals else 0.0
    summary = summarize(merged, span, open_loop=config.schedule.open_loop)
    summary["sessions"] = session_summary(merged, config.sessions, config.think_scale, config.schedule)
    summary["workers"] = workers
    return summary


def _rate(intervals: list[tuple[int, int]]) -> float | None:
    """Requests ended (answered or not) per second over the span from the first send to the last end:
    how fast a worker got through its shard, where the summary's ``request_rate`` is of sends alone."""
    span = (max(e for _, e in intervals) - min(s for s, _ in intervals)) / 1e9 if intervals else 0
    return len(intervals) / span if span else None
