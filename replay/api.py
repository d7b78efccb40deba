"""``run_replay``: the one call behind ``infertap replay``. Validates everything it can before sending."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from infertap.capture.identity import WorkloadIdentity
from infertap.capture.redact import Redactor
from infertap.capture.writer import CaptureWriter
from infertap.engines import ProbeError
from infertap.engines.enrich import Enricher, enrich_capture
from infertap.engines.probe import open_engine
from infertap.errors import InfertapError
from infertap.ray_cluster import ray_cluster
from infertap.stopping import stop_signals
from infertap.telemetry import recorded_telemetry, start_telemetry
from infertap.wording import counted

from .bodies import Bodies
from .config import ReplayConfig
from .runner import Replay, ReplayStats, recount
from .transforms import Pin, PinGaps, TransformError, Transforms, pinned_settings
from .workload import Item, SessionSample, Workload, failed_when_recorded, load_workload

Progress = Callable[[ReplayStats], None]
OnStart = Callable[[dict[str, Any]], None]
StopWhen = Callable[[ReplayStats], bool]


class ReplayError(InfertapError):
    pass


@dataclass
class _Prepared:
    """The workload as it will be sent, and what the replay's capture and summary say about it."""

    items: list[Item]
    bodies: Bodies  # read again from the source capture when sent
    headers: list[list[tuple[str, str]]]
    source: dict[str, Any]  # the source capture's identity
    target_kind: str | None  # None: not probed, or not a known engine
    shown: str  # the target as recorded and reported: a password in it redacted
    probe_headers: dict[str, str]  # the target's credentials, for probes; never stored
    identity: WorkloadIdentity  # the source's workload identity, computed as it was loaded
    as_recorded: int = 0  # bodies no JSON object it can read (multipart, cut, mislabelled) that --model-map sends as recorded
    not_kept: int = 0  # exchanges left out: their request body was not kept (request_body_size), never sent empty
    source_refused: int = 0  # exchanges the source's recorder refused: never sent upstream, not replayed
    repeat: int = 1  # passes over the workload: the counts above and below are of one (the source's exchanges)
    unpinned: int = 0  # with --pin-defaults: exchanges whose id's enrichment names no exchange held, pinned nothing
    placed: dict[str, dict[str, str]] = field(default_factory=dict)  # a --set/--unset name -> API -> name written
    # with --pin-defaults: a pinned setting -> API -> requests (per pass) it was left out of, and why, by the same keys
    pins_without_place: dict[str, dict[str, int]] = field(default_factory=dict)
    pins_without_place_why: dict[str, dict[str, str]] = field(default_factory=dict)

    def facts(self) -> dict[str, Any]:
        """Where from, against what, and what of the source is left out or sent as recorded (``counted``
        per pass of ``--repeat``, the source's exchanges, each count alike): told ``on_start``, and in the summary."""
        facts = {"source": self.source, "target": self.shown, "target_kind": self.target_kind, "not_kept": self.not_kept}
        left: dict[str, Any] = {"source_refused": self.source_refused, "as_recorded": self.as_recorded, "unpinned": self.unpinned}
        left["placed"] = self.placed
        left["pins_without_place"] = self.pins_without_place
        left["pins_without_place_why"] = self.pins_without_place_why
        # what failed when recorded, replayed as recorded: likely to fail again, whatever the target
        left["source_failed"] = failed_when_recorded([item for item in self.items if item.repeat == 0])
        return {**facts, **left, "repeat": self.repeat, "counted": "per pass"}

    def start_info(self, out: Path, **extra: Any) -> dict[str, Any]:
        """What ``on_start`` is told once everything is ready."""
        return {"items": len(self.items), **self.facts(), "out": str(out), **extra}


def run_replay(
    config: ReplayConfig,
    *,
    progress: Progress | None = None,
    on_start: OnStart | None = None,
    stop_when: StopWhen | None = None,
) -> dict[str, Any]:
    """Replay ``config.capture`` against ``config.target`` into the capture ``config.out``; returns
    the run's summary. ``progress`` is called with the live stats a few times a second, and
    ``on_start`` once, with what is about to be replayed, just before the first request (its
    ``as_recorded``: how many bodies, no JSON object, a ``--model-map`` leaves as recorded; ``not_kept``:
    how many exchanges are left out for their request body not having been kept, in the summary too).
    ``stop_when``, asked as often as ``progress``, ends the run early when it says so (a capacity
    sweep's point that is clearly lost); in-flight requests get the grace period, as on Ctrl-C.
    Not with ``config.ray``.

    SIGINT/SIGTERM/SIGHUP (when called from the main thread) stop sending, give in-flight requests
    ``config.grace_s`` seconds, and close the capture cleanly.

    With ``config.ray`` (a cluster address, or ``""`` for Ray's default: ``RAY_ADDRESS`` or a local
    cluster), the workload is split into ``config.shards`` (default: the cluster's CPUs) replayed by
    Ray actors from one shared start; the target is probed and the exchanges enriched from here
    afterwards. See replay/distributed.py.
    """
    shown = Redactor(config.redact_headers, config.redact_query).url(config.target)
    if config.ray is not None:
        from .shards import shard_schedules

        shard_schedules(config.schedule, 1)  # a schedule that can't be sharded fails before anything else
    prepared = _prepare(config, shown)
    recorder = _recorder(config, prepared)
    if config.ray is not None:
        return _run_on_ray(config, prepared, recorder, progress, on_start)
    return _run_here(config, prepared, recorder, progress, on_start, stop_when)


def _prepare(config: ReplayConfig, shown: str) -> _Prepared:
    """Load the workload, probe the target, check every request's transforms: all that can fail,
    before sending. The bodies themselves stay in the source capture until sent (replay/bodies.py)."""
    transforms = config.transforms
    workload = load_workload(
        config.capture,
        filters=config.filters,
        limit=config.limit,
        repeat=config.repeat,
        sample=config.sample,
        transforms=transforms,
        session_tag=config.session_tag,
    )
    probe_headers = {n: v for n, v in transforms.headers.items() if n.lower() == "authorization"}
    if (key := transforms.key_header("/v1/models")) is not None:  # an engine's own endpoints take a bearer token
        probe_headers[key[0]] = key[1]
    target_kind = _target_kind(config, probe_headers) if config.probe else None
    bodies, headers, gaps = _transform(workload, transforms, target_kind)
    without_place, why = _pin_gaps(workload.items, gaps)
    return _Prepared(
        workload.items,
        bodies,
        headers,
        workload.source,
        target_kind,
        shown,
        probe_headers,
        workload.identity,
        workload.as_recorded,
        workload.not_kept,
        workload.source_refused,
        config.repeat,
        workload.unpinned if transforms.pin_defaults else 0,
        transforms.placed(workload.apis) if transforms.set_values or transforms.unset else {},
        without_place,
        why,
    )


def _target_kind(config: ReplayConfig, probe_headers: dict[str, str]) -> str | None:
    """The target's engine kind; a target that refuses connections is an error, nothing sent."""
    try:
        engine = open_engine(config.engine_url, model_file=config.model_file, headers=probe_headers)
        kind = engine.kind
        engine.http.close()
    except ProbeError as exc:
        if str(exc).startswith("cannot reach"):
            raise ReplayError(f"the target refuses connections, nothing was sent: {exc}") from exc
        return None  # an HTTP server that isn't a known engine: replay anyway
    return kind


def _transform(
    workload: Workload, transforms: Transforms, target_kind: str | None
) -> tuple[Bodies, list[list[tuple[str, str]]], dict[int, PinGaps]]:
    """The requests as they will be sent: each body transformed when it is read again to be sent,
    having been checked as the workload loaded (``workload.refused``), and each distinct header set
    transformed once; the pins each item's body goes without (by its index), its API having no
    place for them (``setting_places.pin_gap``)."""
    items = workload.items
    if transforms.pin_defaults and not any(item.settings for item in items) and workload.unpinned:
        raise ReplayError(
            f"--pin-defaults has no settings to pin: the enrichments of this capture name no exchange it holds "
            f"({counted(workload.unpinned, 'exchange')} of their ids): an id several exchanges carry with no occurrence, "
            "or an occurrence past the id's exchanges"
        )
    if transforms.pin_defaults and not any(item.settings for item in items):
        raise ReplayError(
            "--pin-defaults needs the source's effective settings, and this capture has no enrichment records: "
            "record with probing on (the default), or run `infertap enrich CAPTURE --engine URL` first"
        )
    if workload.refused is not None:
        item, why = workload.refused
        raise ReplayError(f"exchange {item.source_id} ({item.method} {item.path}): {why}")
    bodies = Bodies(items, transforms, target_kind)
    gaps: dict[int, PinGaps] = {}
    # A pinned setting can decide whether a --set applies, and one may have no place in its API: check with them.
    if transforms.pinning_matters or transforms.pin_defaults:
        for index, item in enumerate(items):
            if not (transforms.pinning_matters or (item.settings and transforms.places_settings(item.path))):
                continue
            left_out: PinGaps = {}
            try:
                transforms.body(
                    item.body,
                    pinned=_pinned(item),
                    target_kind=target_kind,
                    path=item.path,
                    headers=item.headers,
                    left_out=left_out,
                )
            except TransformError as exc:
                raise ReplayError(f"exchange {item.source_id} ({item.method} {item.path}): {exc}") from exc
            if left_out:
                gaps[index] = left_out
    for item in items:  # checked and identified as recorded; sent where the target reads its model
        item.path = transforms.sent_path(item.path)
    # By the captured list and the key's header (its path's API): items share one per header set.
    done: dict[tuple[int, tuple[str, str] | None], list[tuple[str, str]]] = {}
    headers = []
    for item in items:
        shared = (id(item.headers), transforms.key_header(item.path))
        sent = done.get(shared)
        if sent is None:
            sent = done[shared] = transforms.request_headers(item.headers, item.path)
        headers.append(sent)
    return bodies, headers, gaps


def _pin_gaps(items: list[Item], gaps: dict[int, PinGaps]) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, str]]]:
    """The pins left out (``_transform``'s gaps), as the replay says them: setting -> API -> how
    many requests of one pass went without it, and setting -> API -> why."""
    counts: dict[str, dict[str, int]] = {}
    why: dict[str, dict[str, str]] = {}
    for index, left_out in gaps.items():
        if items[index].repeat:
            continue  # counted per pass, as the other counts of the source's exchanges
        for (name, api), words in sorted(left_out.items()):
            per_api = counts.setdefault(name, {})
            per_api[api] = per_api.get(api, 0) + 1
            why.setdefault(name, {}).setdefault(api, words)
    return counts, why


def _pinned(item: Item) -> dict[str, Pin] | None:
    return pinned_settings(item.settings) if item.settings else None


def _recorder(config: ReplayConfig, prepared: _Prepared) -> dict[str, Any]:
    """The replay capture's ``recorder``: where the workload came from and how it was replayed."""
    transforms = config.transforms
    return {
        "kind": "replay",
        "source": prepared.source,
        "target": prepared.shown,
        "target_kind": prepared.target_kind,
        "schedule": config.schedule.describe(),
        "transforms": {
            "model_map": transforms.model_map,
            "model": transforms.model,
            "set": [k for k, _ in transforms.set_values],
            "unset": transforms.unset,
            # where a request's API reads a name given above under another: {"max_tokens": {"responses": "max_output_tokens"}}
            "placed": prepared.placed,
            "headers": sorted(transforms.headers),
            "drop_headers": sorted(transforms.drop_headers),
            # those a request carried: a header none sent is dropped from nothing, no change to the workload
            "dropped_headers": transforms.dropped(item.headers for item in prepared.items),
            "pin_defaults": transforms.pin_defaults,
            "unpinned": prepared.unpinned,  # exchanges whose id's enrichment names no exchange held: pinned nothing
            # pins an API has no place for (or refuses the value of), left out: {"min_p": {"messages": 2}}
            "pins_without_place": prepared.pins_without_place,
            # and why, by the same keys: the capture alone says it ({"min_p": {"messages": "messages reads no such ..."}})
            "pins_without_place_why": prepared.pins_without_place_why,
            "api_key": bool(transforms.api_key),  # whether one was given, never its value
            "as_recorded": prepared.as_recorded,  # bodies no JSON object: --model-map can't apply, sent as recorded
        },
        "limit": config.limit,
        "not_kept": prepared.not_kept,  # exchanges left out: their request body was not kept
        "source_refused": prepared.source_refused,  # exchanges the source's recorder refused: never sent, not replayed
        "repeat": config.repeat,
        "sessions": {"mode": config.sessions, "think_scale": config.think_scale, **_sampled(config.sample)},
        "pid": os.getpid(),
        # The source's workload identity (capture/identity.py): this replay's own is compared with it.
        "workload_source": prepared.identity.as_dict(),
        "filters": vars(config.filters) if config.filters else None,
        **_telemetry_urls(config),
    }


def _telemetry_urls(config: ReplayConfig) -> dict[str, Any]:
    """The exporters the replay scrapes, redacted as its target is, and its sampling intervals."""
    redact = Redactor(config.redact_headers, config.redact_query).url
    return recorded_telemetry(config.telemetry, config.telemetry_urls, redact, config.telemetry_interval_s)


def _write_driver_samples(config: ReplayConfig, samples: list[Mapping[str, Any]]) -> None:
    """The driver's telemetry of a ``--ray`` replay, as a run of its own after the shards'."""
    if samples:
        recorder = {"kind": "telemetry", "of": "replay --ray (its driver)", "pid": os.getpid(), **_telemetry_urls(config)}
        with CaptureWriter(Path(config.out), recorder=recorder, labels=config.labels, list_gpus=True) as writer:
            for record in samples:
                writer.write(record)


def _sampled(sample: SessionSample | None) -> dict[str, Any]:
    if sample is None:
        return {}
    return {"sample": {"fraction": sample.fraction, "seed": sample.seed, "limit": sample.limit}}


def _run_here(
    config: ReplayConfig,
    prepared: _Prepared,
    recorder: dict[str, Any],
    progress: Progress | None,
    on_start: OnStart | None,
    stop_when: StopWhen | None = None,
) -> dict[str, Any]:
    """Replay in this process, the target probed and the exchanges enriched as they complete."""
    # The machine's GPUs in the run's header, as the recorder lists them: with --no-probe and GPU
    # telemetry that failed, RAPL alone would otherwise measure a machine whose GPUs drew the power.
    writer = CaptureWriter(Path(config.out), recorder=recorder, labels=config.labels, list_gpus=True).open()
    enricher: Enricher | None = None
    replay: Replay | None = None
    sampler = start_telemetry(
        config.telemetry,
        config.engine_url,
        config.telemetry_urls,
        config.telemetry_interval_s,
        prepared.probe_headers,
        writer.write,
        writer.wall_now,
        wait=True,  # its sources open before its first request is sent: its energy measured from the start
    )
    try:
        if config.probe:
            enricher = Enricher(
                config.engine_url,
                writer.write,
                labels=config.labels,
                model_file=config.model_file,
                enrich=config.enrich,
                busy=lambda: replay.stats.in_flight if replay else 0,
                headers=prepared.probe_headers,
            ).start()
        replay = Replay(
            config,
            prepared.items,
            prepared.bodies,
            prepared.headers,
            writer,
            on_exchange=enricher.submit if enricher else None,
        )
        if on_start:
            on_start(prepared.start_info(writer.path))
        summary = asyncio.run(_main(replay, progress, stop_when))
    finally:
        if enricher is not None:
            enricher.close()
        if sampler is not None:
            sampler.close()
        writer.close()
    if enricher is not None:  # the answers without usage its enrichment counted: counted so, as stats counts them
        recount(summary, replay.stats, dict(enricher.output_counts))
    summary.update(
        out=str(writer.path),
        **prepared.facts(),
        snapshots=enricher.snapshots if enricher else 0,
        enriched=enricher.enriched if enricher else 0,
    )
    if writer.error:
        raise ReplayError(f"the replay's capture could not be written: {writer.error}")
    if replay.failure is not None:
        raise ReplayError(
            f"the replay stopped: {replay.failure}. The {counted(summary['sent'], 'exchange')} sent before "
            f"{'is' if summary['sent'] == 1 else 'are'} recorded in {writer.path}"
        )
    return summary


async def _main(replay: Replay, progress: Progress | None, stop_when: StopWhen | None = None) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    in_main = threading.current_thread() is threading.main_thread()
    signals = stop_signals() if in_main else ()
    # The loop's handlers, once removed, leave the signals at their defaults: a caller's own (the
    # demo's, which stop its engines) are put back.
    previous = {sig: signal.getsignal(sig) for sig in signals}
    for sig in signals:
        loop.add_signal_handler(sig, replay.stop)
    ticker = asyncio.create_task(_tick(replay, progress, stop_when)) if progress or stop_when else None
    try:
        return await replay.run()
    finally:
        if ticker is not None:
            ticker.cancel()
        if progress is not None:
            progress(replay.stats)
        for sig in signals:
            loop.remove_signal_handler(sig)
            if (handler := previous[sig]) is not None:
                signal.signal(sig, handler)


async def _tick(replay: Replay, progress: Progress | None, stop_when: StopWhen | None) -> None:
    while True:
        if progress is not None:
            progress(replay.stats)
        if stop_when is not None and stop_when(replay.stats):
            replay.stop()
            return
        await asyncio.sleep(0.2)


def _run_on_ray(
    config: ReplayConfig,
    prepared: _Prepared,
    recorder: dict[str, Any],
    progress: Progress | None,
    on_start: OnStart | None,
) -> dict[str, Any]:
    """Replay in shards on Ray; then one snapshot of the target, and the exchanges enriched, as a run of its own."""
    assert config.ray is not None
    out = Path(config.out)
    with ray_cluster(config.ray, command="replay --ray", untouched="nothing was sent", error=ReplayError) as ray:
        from .distributed import run_sharded, shard_count

        n = shard_count(ray, config)
        if on_start:
            on_start(prepared.start_info(out, shards=n))
        # Telemetry from the driver (the target's /metrics, and this machine), kept in memory while
        # the shards run and written after their merge, as a run of its own.
        samples: list[Mapping[str, Any]] = []
        sampler = start_telemetry(
            config.telemetry,
            config.engine_url,
            config.telemetry_urls,
            config.telemetry_interval_s,
            prepared.probe_headers,
            samples.append,
            wait=True,
        )
        # A shard samples nothing itself: its header says the driver sampled its time (telemetry_by).
        merged = ReplayStats()  # the shards' stats: recounted below once the enrichment has counted
        sharded = {**recorder, "shards": n, **({"telemetry_by": "driver"} if config.telemetry else {})}
        try:
            summary = run_sharded(
                replace(config, shards=n),
                prepared.items,
                prepared.bodies,
                prepared.headers,
                sharded,
                progress=progress,
                stats=merged,
            )
        finally:
            if sampler is not None:
                sampler.close()
            # Written beside whatever shards were merged, a lost shard's error or not: it kept them out.
            if out.exists():
                _write_driver_samples(config, samples)
    counts = {"enriched": 0}
    if config.probe:
        output_counts: dict[str, int] = {}
        counts = enrich_capture(
            out,
            config.engine_url,
            model_file=config.model_file,
            labels=config.labels,
            headers=prepared.probe_headers,
            enrich=config.enrich,
            output_counts=output_counts,
        )
        # the answers without usage its enrichment counted: counted so, as stats counts them (and _run_here)
        recount(summary, merged, output_counts)
    summary.update(out=str(out), **prepared.facts(), snapshots=int(config.probe), enriched=counts["enriched"])
    return summary
