"""``run_replay``: the one call behind ``infertap replay``. Validates everything it can before sending."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from infertap.capture.redact import Redactor
from infertap.capture.writer import CaptureWriter
from infertap.engines import ProbeError
from infertap.engines.enrich import Enricher, enrich_capture
from infertap.engines.probe import open_engine
from infertap.errors import InfertapError

from .runner import Replay, ReplayStats
from .schedule import Schedule
from .transforms import TransformError, Transforms, pinned_settings
from .workload import Filters, Item, load


class ReplayError(InfertapError):
    pass


def _prepare(
    items: list[Item], transforms: Transforms, target_kind: str | None
) -> tuple[list[bytes], list[list[tuple[str, str]]]]:
    if transforms.pin_defaults and not any(item.settings for item in items):
        raise ReplayError(
            "--pin-defaults needs the source's effective settings, and this capture has no enrichment records: "
            "record with probing on (the default), or run `infertap enrich CAPTURE --engine URL` first"
        )
    bodies, headers = [], []
    for item in items:
        pinned = pinned_settings(item.settings) if transforms.pin_defaults and item.settings else None
        try:
            bodies.append(transforms.body(item.body, pinned=pinned, target_kind=target_kind))
        except TransformError as exc:
            raise ReplayError(f"exchange {item.source_id} ({item.method} {item.path}): {exc}") from exc
        headers.append(transforms.request_headers(item.headers))
    return bodies, headers


def run_replay(
    capture: str | os.PathLike[str],
    target: str,
    out: str | os.PathLike[str],
    *,
    schedule: Schedule | None = None,
    transforms: Transforms | None = None,
    filters: Filters | None = None,
    limit: int | None = None,
    repeat: int = 1,
    labels: Mapping[str, str] | None = None,
    probe: bool = True,
    enrich: bool = True,
    model_file: str | None = None,
    grace_s: float = 5.0,
    progress: Callable[[ReplayStats], None] | None = None,
    on_start: Callable[[dict[str, Any]], None] | None = None,
    ray: str | None = None,
    shards: int | None = None,
    connect_timeout: float = 10.0,
    read_timeout: float | None = 600.0,
) -> dict[str, Any]:
    """Replay ``capture`` against ``target`` into the capture ``out``; returns the run's summary.

    SIGINT/SIGTERM (when called from the main thread) stop sending, give in-flight requests
    ``grace_s`` seconds, and close the capture cleanly.

    With ``ray`` (a cluster address, or ``""`` for Ray's default: ``RAY_ADDRESS`` or a local
    cluster), the workload is split into ``shards`` (default: the cluster's CPUs) replayed by Ray
    actors from one shared start; the target is probed and the exchanges enriched from here
    afterwards. See replay/distributed.py.
    """
    schedule = schedule or Schedule()
    transforms = transforms or Transforms()
    shown = Redactor().url(target)  # the target as recorded and reported: a password in it redacted
    if ray is not None:
        from .shards import shard_schedules

        shard_schedules(schedule, 1)  # a schedule that can't be sharded fails before anything else
    items, source = load(capture, filters=filters, limit=limit, repeat=repeat)
    probe_headers = {n: v for n, v in transforms.headers.items() if n.lower() == "authorization"}
    target_kind = None
    if probe:
        try:
            engine = open_engine(target, model_file=model_file, headers=probe_headers)
            target_kind = engine.kind
            engine.http.close()
        except ProbeError as exc:
            if str(exc).startswith("cannot reach"):
                raise ReplayError(f"the target refuses connections, nothing was sent: {exc}") from exc
            target_kind = None  # an HTTP server that isn't a known engine: replay anyway
    bodies, headers = _prepare(items, transforms, target_kind)
    recorder = {
        "kind": "replay",
        "source": source,
        "target": shown,
        "target_kind": target_kind,
        "schedule": schedule.describe(),
        "transforms": {
            "model_map": transforms.model_map,
            "model": transforms.model,
            "set": [k for k, _ in transforms.set_values],
            "unset": transforms.unset,
            "headers": sorted(transforms.headers),
            "drop_headers": sorted(transforms.drop_headers),
            "pin_defaults": transforms.pin_defaults,
        },
        "limit": limit,
        "repeat": repeat,
        "pid": os.getpid(),
    }
    if ray is not None:
        return _run_on_ray(
            ray,
            shards,
            items,
            bodies,
            headers,
            target,
            Path(out),
            schedule,
            recorder,
            labels=labels,
            probe=probe,
            enrich=enrich,
            model_file=model_file,
            probe_headers=probe_headers,
            grace_s=grace_s,
            progress=progress,
            on_start=on_start,
            source=source,
            target_kind=target_kind,
            timeouts=(connect_timeout, read_timeout),
            shown=shown,
        )
    writer = CaptureWriter(Path(out), recorder=recorder, labels=labels).open()
    enricher: Enricher | None = None
    replay: Replay | None = None
    try:
        if probe:
            enricher = Enricher(
                target,
                writer.write,
                labels=labels,
                model_file=model_file,
                enrich=enrich,
                busy=lambda: replay.stats.in_flight if replay else 0,
                headers=probe_headers,
            ).start()
        replay = Replay(
            items,
            bodies,
            headers,
            target,
            writer,
            schedule,
            grace_s=grace_s,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            on_exchange=enricher.submit if enricher else None,
        )
        if on_start:
            on_start(
                {"items": len(items), "source": source, "target": shown, "target_kind": target_kind, "out": str(writer.path)}
            )
        summary = asyncio.run(_main(replay, progress))
    finally:
        if enricher is not None:
            enricher.close()
        writer.close()
    summary.update(
        out=str(writer.path),
        source=source,
        target=shown,
        target_kind=target_kind,
        snapshots=enricher.snapshots if enricher else 0,
        enriched=enricher.enriched if enricher else 0,
    )
    if writer.error:
        raise ReplayError(f"the replay's capture could not be written: {writer.error}")
    return summary


async def _main(replay: Replay, progress: Callable[[ReplayStats], None] | None) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    in_main = threading.current_thread() is threading.main_thread()
    if in_main:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, replay.stop)
    ticker = asyncio.create_task(_tick(replay, progress)) if progress else None
    try:
        return await replay.run()
    finally:
        if ticker is not None:
            ticker.cancel()
            progress(replay.stats)  # type: ignore[misc]
        if in_main:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)


async def _tick(replay: Replay, progress: Callable[[ReplayStats], None]) -> None:
    while True:
        progress(replay.stats)
        await asyncio.sleep(0.2)


def _run_on_ray(
    address: str,
    shards: int | None,
    items: list[Item],
    bodies: list[bytes],
    headers: list[list[tuple[str, str]]],
    target: str,
    out: Path,
    schedule: Schedule,
    recorder: dict[str, Any],
    *,
    labels: Mapping[str, str] | None,
    probe: bool,
    enrich: bool,
    model_file: str | None,
    probe_headers: dict[str, str],
    grace_s: float,
    progress: Callable[[ReplayStats], None] | None,
    on_start: Callable[[dict[str, Any]], None] | None,
    source: dict[str, Any],
    target_kind: str | None,
    timeouts: tuple[float, float | None],
    shown: str,
) -> dict[str, Any]:
    try:
        import ray
    except ImportError:
        raise ReplayError("replay --ray needs Ray: pip install 'infertap[scale]'") from None
    from .distributed import run_sharded

    started_here = not ray.is_initialized()
    if started_here:
        _check_reachable(address)
        try:
            ray.init(address=address or None, log_to_driver=False, configure_logging=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ReplayError(f"cannot join the Ray cluster at {address or 'RAY_ADDRESS or a new local one'}: {exc}") from exc
    try:
        n = shards or max(1, int(ray.cluster_resources().get("CPU", 1)))
        if on_start:
            on_start(
                {"items": len(items), "source": source, "target": shown, "target_kind": target_kind, "out": str(out), "shards": n}
            )
        summary = run_sharded(
            items,
            bodies,
            headers,
            target,
            out,
            schedule,
            {**recorder, "shards": n},
            shards=n,
            labels=labels,
            grace_s=grace_s,
            progress=progress,
            timeouts=timeouts,
        )
    finally:
        if started_here:
            ray.shutdown()
    counts = {"enriched": 0}
    if probe:  # one snapshot of the target, and the exchanges enriched, as a run of its own
        counts = enrich_capture(out, target, model_file=model_file, labels=labels, headers=probe_headers, enrich=enrich)
    summary.update(
        out=str(out), source=source, target=shown, target_kind=target_kind, snapshots=int(probe), enriched=counts["enriched"]
    )
    return summary


def _check_reachable(address: str) -> None:
    """Fail in seconds on a cluster address nobody answers at: Ray itself retries for minutes."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return  # "", "auto", "local": Ray's own discovery
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as exc:
        raise ReplayError(f"no Ray cluster answers at {address} ({exc}); nothing was sent") from exc
