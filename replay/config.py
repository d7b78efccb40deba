"""``ReplayConfig``: every option of a replay in one value, from ``infertap replay`` down to the workers.

The command line builds one, ``run_replay`` takes it, and a sharded replay hands it to each Ray
worker with that shard's schedule in it (``dataclasses.replace``): options are named once, not
re-listed by every layer they pass through. Frozen, so a layer can't change what another reads.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from infertap.capture.records import MAX_RESPONSE_BYTES
from infertap.errors import ConfigError, check_headers, check_seconds, check_url
from infertap.telemetry import check_telemetry

from .schedule import Schedule
from .transforms import Transforms
from .workload import Filters, SessionSample


@dataclass(frozen=True, slots=True)
class ReplayConfig:
    """What to replay (``capture``, or several captures as one workload, narrowed by ``filters``, ``limit``, ``repeat``), where
    (``target``), into which capture (``out``), how (``schedule``, ``transforms``) and how the
    target is described (``probe``, ``enrich``, ``model_file``)."""

    capture: str | os.PathLike[str] | tuple[str | os.PathLike[str], ...]
    target: str
    out: str | os.PathLike[str]
    schedule: Schedule = Schedule()  # original timing
    transforms: Transforms = field(default_factory=Transforms)  # requests replayed as captured
    filters: Filters | None = None
    limit: int | None = None  # the first N exchanges, after the filters
    repeat: int = 1  # the workload N times, back to back
    labels: Mapping[str, str] = field(default_factory=dict)  # stored in the replay's capture header
    probe: bool = True  # a snapshot of the target; without it, no enrichment either
    enrich: bool = True  # per-exchange effective tokens and settings
    model_file: str | None = None  # the target's GGUF, for facts it doesn't publish
    grace_s: float = 5.0  # on a stop, how long in-flight requests may finish
    ray: str | None = None  # a Ray cluster to shard over ("": RAY_ADDRESS or a local one); None: this process
    shards: int | None = None  # with ray: how many workers (None: the cluster's CPUs)
    connect_timeout: float = 10.0
    read_timeout: float | None = 600.0  # between bytes from the target; None: no limit
    max_response_bytes: int = MAX_RESPONSE_BYTES  # kept of one response (record's); past it read whole, kept cut
    sessions: str = "open"  # "open": original times, a turn never before its parent ends; "closed": parent's end + think time
    think_scale: float = 1.0  # with sessions closed: the recorded think time scaled
    sample: SessionSample | None = None  # whole sessions only (--sample-sessions, --limit-sessions)
    session_tag: str | None = None  # a sweep's point: its sessions sent and recorded as <id>@<tag> (workload._tagged)
    telemetry: bool = True  # the target's /metrics, GPUs and the host, sampled into the replay's capture
    telemetry_urls: tuple[str, ...] = ()  # other Prometheus exporters (a DCGM exporter's /metrics)
    telemetry_interval_s: float = 0.25
    redact_headers: tuple[str, ...] = ()  # more headers whose values the replay's capture redacts (as record's)
    redact_query: tuple[str, ...] = ()  # more query parameters whose values it redacts

    def __post_init__(self) -> None:
        check_telemetry(self.telemetry_urls, self.telemetry_interval_s)
        check_url("--target", self.target)
        out = Path(self.out).resolve()
        for capture in self.captures:
            source = Path(capture).resolve()
            if out == source or source in out.parents:
                raise ConfigError(
                    f"--out {self.out}: the source capture {capture} itself, or inside it (its runs would be mixed): "
                    "give another folder"
                )
        check_headers("--header", self.transforms.headers)
        if self.model_file is not None:
            from infertap.engines.gguf_check import check_gguf

            check_gguf(self.model_file)  # before the replay's capture is opened
        for name, value, least, most in (("--repeat", self.repeat, 1, 1_000_000), ("--limit", self.limit, 1, 1 << 40)):
            if value is not None and not (isinstance(value, int) and least <= value <= most):
                raise ConfigError(f"{name} {value}: a whole number, {least} or more (at most {most})")
        check_seconds("--grace", self.grace_s, zero=True)
        if not (isinstance(self.max_response_bytes, int) and 0 < self.max_response_bytes <= 1 << 40):
            raise ConfigError(f"--max-response-mb: a size above 0, at most 1 TiB ({self.max_response_bytes} bytes)")
        check_seconds("--connect-timeout", self.connect_timeout)
        check_seconds("--read-timeout", self.read_timeout)  # None: no limit (0 on the command line)
        if self.sessions not in ("open", "closed"):
            raise ConfigError(f"--sessions {self.sessions!r}: open or closed")
        if isinstance(self.think_scale, float) and not math.isfinite(self.think_scale):
            raise ConfigError(f"--think-scale {self.think_scale}: not a finite number")
        if not (isinstance(self.think_scale, (int, float)) and self.think_scale > 0):
            raise ConfigError(f"--think-scale {self.think_scale}: a positive number")
        if self.sessions == "closed" and not self.schedule.open_loop:
            raise ConfigError(
                "--sessions closed paces turns by their think time: use an open-loop schedule (original timing, --rate)"
            )

    @property
    def captures(self) -> tuple[str | os.PathLike[str], ...]:
        """The captures replayed, as one workload where there are several."""
        return self.capture if isinstance(self.capture, tuple) else (self.capture,)

    @property
    def engine_url(self) -> str:
        """The target without its query: where probes, enrichment and telemetry go. A query on the
        target (``?key=...``) is for the replayed requests; joined to ``/metrics`` it made
        ``/?key=.../metrics``."""
        return urlunsplit(urlsplit(self.target)._replace(query="", fragment=""))


__all__ = ["ReplayConfig"]
