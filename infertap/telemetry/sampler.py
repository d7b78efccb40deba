"""The sampling threads: each source on a thread of its own at its interval, each round of one
source written as one ``telemetry`` record stamped when it was read. A source that hangs (an
nvidia-smi stuck in the driver, an NVML call that never returns) thus holds only its own rounds:
the host's RAPL counter and the engine's ``/metrics`` go on being read, so their series have no
gap the GPU caused. None of it runs on an event loop or blocks one: the capture writer's
``write`` only queues.

Each source is opened on its own thread too, not the caller's, and ``start`` returns without
waiting for the openings: a source whose opening hangs (an NVML init stuck in the driver, seconds on
a GPU machine without persistence mode) holds neither a recorder's start nor any other source. One
not open within ``open_s`` is recorded as unknown then, as a source that failed is, and is read if
it opens. A replay, whose traffic is its own to start, asks ``start`` to wait for the openings, at
most ``open_s``, so that the first rounds come before its first requests.

A source that fails outright (it can't be opened, nvidia-smi did not answer within its timeout, an
endpoint answered 404) is recorded once as unknown with its reason and asked again after its
interval, then after twice as long for each failure in a row, at most ``retry_s``: one slow call
costs a round or two, not ``retry_s`` of samples (a run shorter than that lost all of its GPU's),
while a source that stays down is asked ever more rarely. It is recorded again when it comes back.
A round that loses some or all of its readings for a passing reason (``PartialRound``: one GPU's
reading timed out, an nvidia-smi run failed) keeps the others, is recorded the same way (once per
reason, again after a clean round), and the source stays on its interval.

Closing, every source not resting after a failure is read once more, so that a run's energy
reaches its end, and ``close`` returns within ``close_s`` whatever a source does: a source still
in a call by then (a read, or its opening) is abandoned on its daemon thread, and recorded as
having stopped answering when that call began, so analysis reads the time since as a gap in its
samples, not as samples held.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any, Protocol
from urllib.parse import urlsplit

from infertap.capture.hostfacts import engine_is_local
from infertap.capture.records import new_telemetry
from infertap.errors import ConfigError

from .samples import PartialRound, Sample, SourceError

log = logging.getLogger("infertap.telemetry")


class Source(Protocol):
    name: str

    def sample(self) -> list[Sample]: ...

    def close(self) -> None: ...


#: Seconds between scrapes of a Prometheus endpoint (the engine's /metrics, a --telemetry-url exporter).
PROMETHEUS_INTERVAL_S = 1.0


@dataclass(frozen=True, slots=True)
class TelemetryConfig:
    """What to sample: the engine at ``engine_url`` (its ``/metrics``; its process when it is on
    this machine), any other Prometheus ``exporters``, GPUs and the host."""

    engine_url: str | None = None
    exporters: Sequence[str] = ()
    gpu: bool = True
    host: bool = True
    interval_s: float = 0.25  # GPU and host
    engine_interval_s: float = PROMETHEUS_INTERVAL_S  # Prometheus endpoints
    retry_s: float = 30.0  # the longest a source that fails outright rests before it is asked again
    # How long a source has to open (NVML's init takes seconds on a GPU machine without persistence
    # mode) before it is recorded as unknown, the run going on; the longest start(wait=True) waits.
    open_s: float = 5.0
    # The longest close() waits for the sources' last rounds: a round begun before close and the
    # last one, each within a source's own timeout (nvidia-smi's 5 s, a scrape's 2 s).
    close_s: float = 10.0
    headers: Mapping[str, str] = field(default_factory=dict)  # for the engine's /metrics (its API key)

    def __post_init__(self) -> None:
        check_telemetry(self.exporters, self.interval_s)
        if not (self.engine_interval_s > 0 and self.retry_s > 0 and self.close_s > 0 and self.open_s > 0):
            raise ConfigError("telemetry intervals must be > 0 seconds")


def check_telemetry(exporters: Sequence[str], interval_s: float) -> None:
    """Telemetry options a recorder's config checks when it is made, before anything is written."""
    if not interval_s > 0:
        raise ConfigError(f"--telemetry-interval {interval_s}: must be > 0 seconds")
    for url in exporters:
        if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
            raise ConfigError(
                f"--telemetry-url {url!r}: an http(s) URL of a Prometheus endpoint, e.g. http://127.0.0.1:9400/metrics"
            )


class Sampler:
    """``Sampler(config, writer.write).start()`` ... ``close()``; a context manager too."""

    def __init__(
        self,
        config: TelemetryConfig,
        write: Callable[[Mapping[str, Any]], None],
        clock: Callable[[], float] = time.time,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        wait: Callable[[threading.Event, float], object] = threading.Event.wait,
    ) -> None:
        self.config = config
        self._write = write
        self._clock = clock  # a sample's wall time: the capture writer's ``wall_now``, on its exchanges' clock
        # What schedules the rounds: a clock and a wait for the next one (or the stop, which ends it);
        # a test's own make a round's schedule exact. Start's and close's bounds keep the real ones.
        self._monotonic = monotonic
        self._wait = wait
        self._stop = threading.Event()
        self._lock = threading.Lock()  # the sources' threads write one at a time, and none after close
        self._closed = False
        self.records = 0
        self._slots: list[_Slot] = []

    def start(self, *, wait: bool = False) -> Sampler:
        """Start every source's thread, which opens it, and return: a source whose opening hangs (an
        NVML init stuck in the driver) holds no caller. One not open within ``open_s`` is recorded as
        unknown then, by a watch of its own. ``wait``: return once every source is open, at most
        ``open_s`` (a replay, whose traffic waits for it: its first requests' energy is measured)."""
        self._slots = self._sources()
        for slot in self._slots:
            slot.thread = threading.Thread(target=self._run, args=(slot,), name=f"infertap-telemetry-{slot.name}", daemon=True)
            slot.thread.start()
        deadline = time.monotonic() + self.config.open_s
        if wait:
            self._not_opened(deadline)
        else:  # not a source's thread: it ends at open_s, or at close
            threading.Thread(target=self._watch_openings, args=(deadline,), name="infertap-opening-watch", daemon=True).start()
        return self

    def _watch_openings(self, deadline: float) -> None:
        """At ``deadline``, the sources not open yet; nothing once sampling stopped before it."""
        if not self._stop.wait(max(0.0, deadline - time.monotonic())):
            self._not_opened(deadline)

    def _not_opened(self, deadline: float) -> None:
        """Record each source not open by ``deadline`` as unknown (once sampling stopped, nothing)."""
        for slot in self._slots:
            if not slot.opened.wait(max(0.0, deadline - time.monotonic())) and not self._stop.is_set():
                why = f"did not open within {self.config.open_s:g} s: sampling went on without it, and reads it if it opens"
                log.warning("telemetry source %s %s", slot.name, why)
                slot.failed(why, self._unknown)

    def close(self) -> None:
        """Stop, after one last round of every working source, within ``close_s``: a source still
        in a call then is left to its daemon thread and recorded as stopped answering."""
        self._stop.set()
        deadline = time.monotonic() + self.config.close_s
        for slot in self._slots:
            if slot.thread is not None:
                slot.thread.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            for slot in self._slots:
                asked = slot.asked
                if slot.thread is not None and slot.thread.is_alive() and asked is not None:
                    when = datetime.fromtimestamp(asked, UTC).isoformat(timespec="milliseconds")
                    what = "asked then" if slot.source is not None else "asked to open then"
                    why = f"stopped answering at {when}: {what}, it had not answered when sampling stopped"
                    log.warning("telemetry source %s %s", slot.name, why)
                    self._record(new_telemetry(slot.name, asked, [], unknown=why))
            self._closed = True  # an abandoned source that answers later writes nothing

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _sources(self) -> list[_Slot]:
        """Every source asked for, each opened by its own thread (``_read``)."""
        from .gpu import gpu_source
        from .host import HostSource
        from .prometheus import PrometheusSource

        c = self.config
        slots: list[_Slot] = []
        if c.engine_url:
            metrics = c.engine_url.rstrip("/") + "/metrics"
            slots.append(_Slot("engine", lambda: PrometheusSource(metrics, "engine", headers=c.headers), c.engine_interval_s))
        for url in c.exporters:
            slots.append(_Slot("exporter", partial(PrometheusSource, url, "exporter"), c.engine_interval_s))
        if c.gpu:
            slots.append(_Slot("gpu", gpu_source, c.interval_s))
        if c.host:
            slots.append(_Slot("host", lambda: HostSource(_local_port(c.engine_url)), c.interval_s))
        return slots

    def _run(self, slot: _Slot) -> None:
        """One source's rounds, the first opening it, until close, then its last one (one begun
        after close was asked, so that it reaches the run's end), unless it rests after a failure
        or was abandoned."""
        while not self._stop.is_set():
            self._sample(slot)
            self._wait(self._stop, max(0.0, slot.due - self._monotonic()))
        if slot.source is not None and not slot.resting and not self._closed:
            self._sample(slot)
        if slot.source is not None:
            slot.source.close()

    def _sample(self, slot: _Slot) -> None:
        now = self._monotonic()  # the round's due time counts from its start: a slow read does not delay the next
        slot.asked = self._clock()  # also the wall time of its samples: when the source was read
        try:
            self._read(slot, now, slot.asked)
        finally:
            slot.asked = None

    def _read(self, slot: _Slot, now: float, wall: float) -> None:
        slot.due = now + slot.interval_s
        slot.resting = False
        try:
            if slot.source is None:
                try:
                    slot.source = slot.make()  # opened, then read in the same round
                finally:
                    slot.opened.set()
                if self._closed:  # it opened only after close gave up on it: nothing to read it for
                    return
                # Its samples are stamped when read, not when its opening was asked (an httpx
                # client takes tens of ms to make, an NVML init seconds): a counter's rate holds.
                wall = slot.asked = self._clock()
            samples = slot.source.sample()
        except PartialRound as exc:
            slot.failed(str(exc), self._unknown)
            slot.failures = 0
            self._samples(slot, wall, exc.samples)
            return
        except SourceError as exc:
            self._rest(slot, str(exc))
            return
        except Exception as exc:  # a source's bug must not end its sampling for good, nor reach the caller
            log.warning("telemetry source %s failed: %r", slot.name, exc)
            self._rest(slot, repr(exc))
            return
        slot.reported, slot.failures = None, 0
        self._samples(slot, wall, samples)

    def _rest(self, slot: _Slot, reason: str) -> None:
        """A source that failed outright: recorded, then asked again after ``backoff``, counted
        from when it failed (a call that timed out took its timeout already)."""
        slot.failed(reason, self._unknown)
        slot.failures += 1
        slot.due = self._monotonic() + backoff(slot.interval_s, slot.failures, self.config.retry_s)
        slot.resting = True

    def _samples(self, slot: _Slot, wall: float, samples: list[Sample]) -> None:
        if samples:
            with self._lock:
                self._record(new_telemetry(slot.name, wall, [[s.name, s.labels, s.value] for s in samples]))

    def _unknown(self, source: str, reason: str) -> None:
        with self._lock:
            self._record(new_telemetry(source, self._clock(), [], unknown=reason))

    def _record(self, record: Mapping[str, Any]) -> None:
        """Write one record (the caller holds ``_lock``); nothing once closed."""
        if not self._closed:
            self._write(record)
            self.records += 1


@dataclass
class _Slot:
    name: str
    make: Callable[[], Source]
    interval_s: float
    source: Source | None = None
    due: float = 0.0
    reported: str | None = None  # the unknown reason last recorded, so it is recorded once
    failures: int = 0  # outright failures in a row: how long it rests (``backoff``)
    resting: bool = False  # it failed outright and rests: not read at close either
    thread: threading.Thread | None = None
    opened: threading.Event = field(default_factory=threading.Event)  # its first opening returned or failed
    asked: float | None = None  # the wall time of the call it is in (a read, its opening), if any

    def failed(self, reason: str, unknown: Callable[[str, str], None]) -> None:
        if reason != self.reported:
            unknown(self.name, reason)
            self.reported = reason


def backoff(interval_s: float, failures: int, retry_s: float) -> float:
    """How long a source rests after ``failures`` outright failures in a row: its interval, doubled
    for each failure after the first, at most ``retry_s``."""
    return min(retry_s, interval_s * 2.0 ** min(failures - 1, 64))


def _local_port(url: str | None) -> int | None:
    """The engine's port when it runs on this machine (its process can then be sampled)."""
    if not url or not engine_is_local(url):
        return None
    parts = urlsplit(url)
    return parts.port or (443 if parts.scheme == "https" else 80)
