"""``run_replay``: the one call behind ``infertap replay``. Validates everything it can before sending."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from proxy.engines import ProbeError
from proxy.enrich import Enricher
from proxy.errors import InfertapError
from proxy.probe import open_engine
from proxy.writer import CaptureWriter

from .runner import Replay, ReplayStats
from .schedule import Schedule
from .transforms import TransformError, Transforms, pinned_settings
from .workload import Filters, Item, load


class ReplayError(InfertapError):
    pass


def _prepare(items: list[Item], transforms: Transforms, target_kind: str | None) -> tuple[list[bytes], list[list[tuple[str, str]]]]:
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
) -> dict[str, Any]:
    """Replay ``capture`` against ``target`` into the capture ``out``; returns the run's summary.

    SIGINT/SIGTERM (when called from the main thread) stop sending, give in-flight requests
    ``grace_s`` seconds, and close the capture cleanly.
    """
    schedule = schedule or Schedule()
    transforms = transforms or Transforms()
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
        "target": target,
        "target_kind": target_kind,
        "schedule": schedule.describe(),
        "transforms": {
            "model_map": transforms.model_map, "model": transforms.model, "set": [k for k, _ in transforms.set_values],
            "unset": transforms.unset, "headers": sorted(transforms.headers), "drop_headers": sorted(transforms.drop_headers),
            "pin_defaults": transforms.pin_defaults,
        },
        "limit": limit, "repeat": repeat, "pid": os.getpid(),
    }  # fmt: skip
    writer = CaptureWriter(Path(out), recorder=recorder, labels=labels).open()
    enricher: Enricher | None = None
    replay: Replay | None = None
    try:
        if probe:
            enricher = Enricher(
                target, writer.write, labels=labels, model_file=model_file, enrich=enrich,
                busy=lambda: replay.stats.in_flight if replay else 0, headers=probe_headers,
            ).start()  # fmt: skip
        replay = Replay(items, bodies, headers, target, writer, schedule, grace_s=grace_s,
                        on_exchange=enricher.submit if enricher else None)  # fmt: skip
        if on_start:
            on_start({"items": len(items), "source": source, "target_kind": target_kind, "out": str(writer.path)})
        summary = asyncio.run(_main(replay, progress))
    finally:
        if enricher is not None:
            enricher.close()
        writer.close()
    summary.update(out=str(writer.path), source=source, target=target, target_kind=target_kind,
                   snapshots=enricher.snapshots if enricher else 0, enriched=enricher.enriched if enricher else 0)  # fmt: skip
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
