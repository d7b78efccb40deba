"""Telemetry: what the engine and the machine did while traffic flowed, sampled out of band into the
capture as ``telemetry`` records (docs/capture-format.md), beside the exchanges they explain.

Sources (``sources``): the engine's Prometheus ``/metrics`` and any other exporter
(``prometheus``), GPUs through NVML or ``nvidia-smi`` (``gpu``), the host's CPU, the engine
process and RAPL package energy (``host``). ``Sampler`` runs each on a thread of its own at its
interval, so a source that hangs holds no other's rounds; a failing source is recorded once as
unknown, with its reason, and never touches traffic.
"""

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .sampler import PROMETHEUS_INTERVAL_S, Sampler, TelemetryConfig, check_telemetry

__all__ = ["Sampler", "TelemetryConfig", "check_telemetry", "recorded_telemetry", "start_telemetry"]


def recorded_telemetry(
    enabled: bool, exporters: Sequence[str], redact: Callable[[str], str], interval_s: float
) -> dict[str, Any]:
    """What a recorder's header says of its telemetry: whether it sampled at all (``telemetry``: a
    run recorded with --no-telemetry says so, apart from one that sampled and found no power), what
    it scraped (``telemetry_urls``), each URL as ``redact`` records an upstream's (userinfo, query
    tokens): where its energy and engine figures came from; and each source's sampling interval
    asked for (``telemetry_intervals_s``: ``interval_s``, --telemetry-interval, for GPUs and the
    host, the Prometheus one for the engine and exporters), which analysis tells a gap in the
    samples by (analysis/energy.py)."""
    if not enabled:
        return {"telemetry": False}
    return {
        "telemetry": True,
        "telemetry_urls": [redact(url) for url in exporters],
        "telemetry_intervals_s": {
            "gpu": interval_s,
            "host": interval_s,
            "engine": PROMETHEUS_INTERVAL_S,
            "exporter": PROMETHEUS_INTERVAL_S,
        },
    }


def start_telemetry(
    enabled: bool,
    engine_url: str | None,
    exporters: Sequence[str],
    interval_s: float,
    headers: Mapping[str, str],
    write: Callable[[Mapping[str, Any]], None],
    clock: Callable[[], float] = time.time,
    *,
    wait: bool = False,
) -> Sampler | None:
    """A running sampler for a recorder (record, replay, mitm), or None when telemetry is off;
    ``clock`` stamps its samples (the capture writer's ``wall_now``, where there is one); ``wait``:
    for its sources to open first, at most ``open_s`` (``Sampler.start``), where the caller starts
    the traffic (a replay); a recording proxy starts at once, its clients' traffic when it comes."""
    if not enabled:
        return None
    config = TelemetryConfig(engine_url=engine_url, exporters=tuple(exporters), interval_s=interval_s, headers=dict(headers))
    return Sampler(config, write, clock).start(wait=wait)
