"""A capacity sweep: the recorded workload replayed at rising load until the target stops meeting its
SLOs. ``replay`` answers "how fast at the load we had"; a sweep answers "up to what load".

Each point is an ordinary replay into its own capture (``speed-2``, ``concurrency-16``, ...):
``speed`` scales the original arrival times (speed 2 = twice the request rate, same shape, lengths,
prefix reuse and conversation order), ``concurrency`` runs closed loop at N in flight. A point too
short to judge repeats the workload. Between points the sweep waits for the target to be idle, so
one point's backlog is not charged to the next, and each point sends its sessions as ``<id>@<point>``
(``s1@speed-2``; pass k of it ``s1@speed-2#k``), so a gateway keyed by session keeps them apart too.

What counts as passing is not this module's business: the caller hands in ``evaluate`` (a point's
capture -> a verdict with ``passed``; infertap.analysis.capacity holds points to SLOs over the
metrics of docs/metrics.md) and ``lost`` (live stats -> whether the point can no longer pass, to end
it instead of overloading the target for its whole length). Whether a point measured the target at
the load it names (the replayer on its schedule, the level reached, enough requests) is
infertap.replay.sweep_checks'.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from infertap.engines.load import REPORTS_LOAD, requests_inside
from infertap.errors import InfertapError

from . import sweep_checks
from .api import run_replay
from .config import ReplayConfig
from .runner import ReplayStats
from .schedule import FASTEST, MOST_IN_FLIGHT, SLOWEST, Schedule
from .warmup import MOST_WARMUP, warm_up, warmup_facts
from .workload import Item, failed_when_recorded, load


class SweepError(InfertapError):
    pass


#: With ``--search``, how far below the start speed the halving goes when every point fails (1/16):
#: each halving doubles a point's length, and a target that fails there fails the workload.
MAX_HALVINGS = 16


def load_text(value: float) -> str:
    """A load as written where six digits hold it (``1.5``, ``16``), else whole: ``:g`` printed a
    search's speed 1.015625 as 1.01562, a load never tried, and 1.0000001 as 1."""
    short = f"{value:g}"
    return short if float(short) == value else repr(float(value))


@dataclass(frozen=True, slots=True)
class Load:
    """One point's load: a multiplier of the original arrival rate, or a closed-loop concurrency."""

    kind: Literal["speed", "concurrency"]
    value: float

    @property
    def name(self) -> str:
        """The point's folder: ``speed-1.5``; as many digits as tell this load from any other."""
        return f"{self.kind}-{load_text(self.value)}"

    def schedule(self, max_concurrency: int | None) -> Schedule:
        if self.kind == "speed":
            return Schedule("original", speed=self.value, max_concurrency=max_concurrency)
        return Schedule("concurrency", concurrency=int(self.value))


@dataclass(frozen=True, slots=True)
class SweepConfig:
    """``replay`` is the base of every point (its ``out`` is the sweep's folder, its schedule's
    ``max_concurrency`` a cap kept at every speed); then which loads: ``speeds``,
    ``concurrency_levels``, or ``search`` (speeds, doubling until a point fails, then bisecting
    until the last pass and the first fail are within ``tolerance``)."""

    replay: ReplayConfig
    speeds: tuple[float, ...] = ()
    concurrency_levels: tuple[int, ...] = ()
    search: bool = False
    start_speed: float = 1.0
    tolerance: float = 0.10
    max_points: int = 16
    min_requests: int = 0  # repeat the workload until a point has at least this many requests...
    min_duration_s: float = 0.0  # ...and lasts at least this long (speed points; closed loop: estimated)
    idle_timeout_s: float = 120.0  # how long to wait for the target to empty between points
    warmup: int = 0  # the workload's first requests sent at the first point's load before it, not judged

    def __post_init__(self) -> None:
        modes = sum((bool(self.speeds), bool(self.concurrency_levels), self.search))
        if modes != 1:
            raise SweepError("give one of --speeds, --concurrency-levels or --search")
        numbers = [("--start-speed", self.start_speed), ("--tolerance", self.tolerance)]
        numbers += [("--min-duration", self.min_duration_s), ("--idle-timeout", self.idle_timeout_s)]
        for name, value in [*(("--speeds", s) for s in self.speeds), *numbers]:
            if not math.isfinite(value):  # "nan" and "inf" parse as floats: said so, not "must be > 0"
                raise SweepError(f"{name} {value}: not a finite number")
        if not all(math.isfinite(s) and SLOWEST <= s <= FASTEST for s in self.speeds) or not all(
            0 < c <= MOST_IN_FLIGHT for c in self.concurrency_levels
        ):
            raise SweepError(
                f"speeds and concurrency levels must be > 0 (speeds up to {FASTEST:g}, levels up to {MOST_IN_FLIGHT})"
            )
        loads = self.speeds or self.concurrency_levels
        if len({float(v) for v in loads}) != len(loads):
            raise SweepError(f"each load once: {', '.join(f'{v:g}' for v in loads)} repeats one")
        if (
            not 0 < self.tolerance < 1
            or not (math.isfinite(self.start_speed) and SLOWEST <= self.start_speed <= FASTEST)
            or self.max_points < 2
        ):
            raise SweepError("--tolerance must be in (0, 1), the start speed > 0, and at least 2 points allowed")
        if self.replay.sessions == "closed":
            # Closed sessions pace turns by their parent's end, not by the arrival times a speed scales,
            # and a concurrency level is a closed loop of its own: no load of a sweep varies them.
            raise SweepError(
                "--sessions closed has no load a sweep can vary (a speed scales arrival times closed sessions "
                "don't keep; a concurrency level is a closed loop already): sweep with --sessions open, where "
                "a turn is still never sent before the turn it continues ends, or run `infertap replay "
                "--sessions closed` at one load"
            )
        if not 0 <= self.warmup <= MOST_WARMUP:
            raise SweepError(f"--warmup is a number of requests, 0 to {MOST_WARMUP:,}")
        if not (0 <= self.min_requests <= 10_000_000) or not all(
            math.isfinite(v) and v >= 0 for v in (self.min_duration_s, self.idle_timeout_s)
        ):
            raise SweepError(
                "--min-requests, --min-duration and --idle-timeout are 0 or more (--min-requests at most 10,000,000)"
            )

    def loads(self) -> list[Load]:
        """The fixed loads (not for ``search``, whose loads depend on what it finds)."""
        if self.speeds:
            return [Load("speed", s) for s in self.speeds]
        return [Load("concurrency", c) for c in self.concurrency_levels]


@dataclass(slots=True)
class Point:
    load: Load
    out: Path
    summary: dict[str, Any]  # the replay's summary
    verdict: dict[str, Any]  # evaluate's; "passed" decides
    lost_early: bool = False  # ended early: it could no longer pass
    replayer_behind: bool = False  # the replayer, not only the target, fell behind the schedule (or held requests)
    unmeasured: list[str] = field(default_factory=list)  # why a pass here doesn't measure the target (sweep_checks)
    not_carried: str | None = None  # why it failed though its SLOs held: the load was not carried (sweep_checks)

    @property
    def passed(self) -> bool:
        return bool(self.verdict.get("passed")) and not self.lost_early and self.not_carried is None

    @property
    def counts(self) -> bool:
        """A pass that measures the target at its load: one the capacity may be."""
        return self.passed and not self.replayer_behind and not self.unmeasured

    def describe(self) -> dict[str, Any]:
        return {
            self.load.kind: self.load.value,
            "passed": self.passed,
            "out": str(self.out),
            "lost_early": self.lost_early,
            "replayer_behind": self.replayer_behind,
            "unmeasured": self.unmeasured,
            "not_carried": self.not_carried,
            "sent": self.summary.get("sent"),
            "wall_s": self.summary.get("wall_s"),
            "offered_requests_per_s": self.summary.get("offered_requests_per_s"),
            "schedule_lag_ms": self.summary.get("lag_ms"),
            "in_flight": self.summary.get("concurrency"),  # achieved: mean and max in flight
            **{k: v for k, v in self.verdict.items() if k != "passed"},
        }


Evaluate = Callable[[Path], dict[str, Any]]
Lost = Callable[[ReplayStats], bool]


@dataclass
class Sweep:
    """Runs the points of ``config``; ``on_point`` hears of each as it ends (to write results as
    they come), ``progress`` gets a point's live stats. ``stop()`` (Ctrl-C) ends the point in
    flight cleanly and runs no more."""

    config: SweepConfig
    evaluate: Evaluate
    lost: Callable[[int], Lost] | None = None  # given the point's request count
    on_point: Callable[[Point], None] | None = None
    on_point_start: Callable[[Load, int], None] | None = None  # the load and its request count
    progress: Callable[[ReplayStats], None] | None = None
    points: list[Point] = field(default_factory=list)
    stopped: bool = False
    aborted: dict[str, Any] | None = None  # a point that could not run after others had: its load and the error
    warmup: dict[str, Any] | None = None  # the warm-up pass, when one ran: sent, out, ends, its load
    source_failed: dict[str, int] = field(default_factory=dict)  # the workload's requests that failed when recorded, by status
    _items: list[Item] = field(default_factory=list)
    _running: Load | None = None

    def run(self) -> list[Point]:
        """The points. An error in a point after the first one ended (the target died under load: its
        probe refused) ends the sweep with what was found, ``aborted`` saying where and why; before
        that, nothing was found, and it is raised."""
        base = self.config.replay
        # The workload each point replays: its offered rate and repeats are of these (sampled) items.
        self._items, _ = load(base.capture, filters=base.filters, limit=base.limit, sample=base.sample)
        if not self._items:
            raise SweepError(f"{', '.join(map(str, base.captures))}: no exchanges to replay (after the filters)")
        self.source_failed = failed_when_recorded(self._items)
        try:
            if self.config.warmup and not self._warm_up():
                return self.points
            if self.config.search:
                self._search()
            else:
                for point_load in self.config.loads():
                    if self.stopped:
                        break
                    self._point(point_load)
        except InfertapError as exc:
            if not self.points or self._running is None:
                raise
            self.aborted = {self._running.kind: self._running.value, "error": str(exc)}
        return self.points

    # -- search ----------------------------------------------------------------------------------

    def _search(self) -> None:
        """Double until a point fails (halve while the first ones fail), then bisect the knee."""
        speed = self.config.start_speed
        passed: float | None = None
        failed: float | None = None
        floor = self.config.start_speed / MAX_HALVINGS
        while not self.stopped and len(self.points) < self.config.max_points:
            if passed is None and speed < floor:
                return  # nothing passes even at a small fraction of the recorded load: say so, don't crawl on
            if passed is not None and failed is not None:
                if (failed - passed) / passed <= self.config.tolerance:
                    return
                speed = (passed + failed) / 2
            point = self._point(Load("speed", speed))
            if point is None:
                return
            if point.passed and not point.counts:
                return  # the target was not measured at this load (sweep_checks): higher loads would measure that more
            if point.passed:
                passed = speed if passed is None else max(passed, speed)
                speed = speed * 2 if failed is None else speed
            else:
                failed = speed if failed is None else min(failed, speed)
                speed = speed / 2 if passed is None else speed

    # -- one point -------------------------------------------------------------------------------

    def _warm_up(self) -> bool:
        """The workload's first ``warmup`` requests before the first point, at its load: a cold engine
        (weights paging in, kernels compiling, caches empty) would fail the first point and cap a
        search below it. Sent one at a time they warmed one slot's prompt cache of an engine with
        several (llama-server -np, vLLM's batch), and the first point met the others cold; at the
        first point's concurrency or speed each is reached, as GuideLLM's and AIPerf's warm-ups run the
        benchmark's own load. Recorded under ``warmup/``, never judged; False after a Ctrl-C."""
        base = self.config.replay
        first = Load("speed", self.config.start_speed) if self.config.search else self.config.loads()[0]
        config = replace(
            base,
            schedule=first.schedule(base.schedule.max_concurrency),
            labels={**base.labels, "sweep_load": "warmup"},
        )
        summary = warm_up(config, self.config.warmup, Path(base.out) / "warmup", progress=self.progress)
        if summary.get("stopped_early"):
            self.stopped = True
            return False
        self.warmup = {**warmup_facts(summary), first.kind: first.value}
        self._wait_idle(summary.get("target_kind"), False)
        return True

    def _point(self, point_load: Load) -> Point | None:
        base = self.config.replay
        repeat = self._repeat(point_load)
        out = Path(base.out) / point_load.name
        config = replace(
            base,
            out=out,
            schedule=point_load.schedule(base.schedule.max_concurrency),
            repeat=repeat,
            labels={**base.labels, "sweep_load": point_load.name},
            session_tag=point_load.name,  # sessions of its own: no point's warm per-session state another's
        )
        self._running = point_load
        if self.on_point_start is not None:
            self.on_point_start(point_load, repeat * len(self._items))
        judge = self.lost(repeat * sum(i.generation for i in self._items)) if self.lost is not None else None
        verdicts: list[bool] = []

        def stop_when(stats: ReplayStats) -> bool:
            verdicts.append(bool(judge and judge(stats)))
            return verdicts[-1]

        summary = run_replay(config, progress=self.progress, stop_when=stop_when if judge and base.ray is None else None)
        # Lost early: the check stopped the point and that cut something short (a request never sent,
        # or one cancelled in flight). Where the grace let every request finish, the point ran whole:
        # judged, failed, not "ended early".
        cut = bool(summary.get("not_sent")) or bool((summary.get("ends") or {}).get("cancelled"))
        fired = bool(verdicts and verdicts[-1])
        lost_early = fired and cut
        if summary.get("stopped_early") and not fired:
            self.stopped = True  # Ctrl-C: this point is not judged, and no other runs
            return None
        summary["offered_requests_per_s"] = self._offered(point_load, summary)
        verdict = self.evaluate(out)
        behind = sweep_checks.behind(point_load, summary, verdict)
        point = Point(
            point_load,
            out,
            summary,
            verdict,
            lost_early,
            replayer_behind=behind is not None,
            unmeasured=sweep_checks.unmeasured(point_load, summary, verdict),
            not_carried=sweep_checks.not_carried(point_load, summary, verdict),
        )
        self.points.append(point)
        if self.on_point is not None:
            self.on_point(point)
        self._wait_idle(summary.get("target_kind"), lost_early)
        return point

    def _repeat(self, point_load: Load) -> int:
        """How many passes of the workload make the point long enough to judge."""
        n = len(self._items)
        repeat = math.ceil(self.config.min_requests / n) if self.config.min_requests else 1
        if self.config.min_duration_s:
            repeat = max(repeat, math.ceil(self.config.min_duration_s / max(self._pass_s(point_load), 1e-3)))
        return max(1, repeat)

    def _pass_s(self, point_load: Load) -> float:
        """How long one pass of the workload takes at this load (closed loop: an estimate)."""
        items = self._items
        if point_load.kind == "speed":  # the arrivals' span and one mean gap: how _repeated lays copies end to end
            offsets = [i.offset_ns for i in items]
            span = max(offsets) - min(offsets)
            gap = span // (len(offsets) - 1) if len(offsets) > 1 else 0
            return (span + (gap or 1_000_000)) / 1e9 / point_load.value
        return sum(i.duration_ns for i in items) / 1e9 / point_load.value

    def _offered(self, point_load: Load, summary: dict[str, Any]) -> float | None:
        """The request rate the schedule asked for (speed points); closed loop offers what it gets."""
        if point_load.kind != "speed":
            return None
        offsets = [i.offset_ns for i in self._items if i.generation]  # as the point's achieved rate counts
        if len(offsets) < 2:
            return None
        span_s = (max(offsets) - min(offsets)) / 1e9 / point_load.value
        return (len(offsets) - 1) / span_s if span_s > 0 else None  # n arrivals, n - 1 gaps between them

    def _wait_idle(self, kind: str | None, cut_short: bool) -> None:
        """Until the engine holds no request, so the next point starts clean. An engine that can't
        say (``requests_inside`` None) gets a settle time after a point cut short, whose cancelled
        requests it may still be working on: the grace period, at most the idle timeout."""
        base = self.config.replay
        headers = {n: v for n, v in base.transforms.headers.items() if n.lower() == "authorization"}
        deadline = time.monotonic() + self.config.idle_timeout_s
        while time.monotonic() < deadline:
            inside = requests_inside(base.engine_url, kind, headers=headers) if kind in REPORTS_LOAD else None
            if inside is None:
                if cut_short:
                    time.sleep(max(0.0, min(base.grace_s, deadline - time.monotonic())))
                return
            if inside == 0:
                return
            time.sleep(0.25)


def parse_numbers(text: str, kind: type[float] | type[int], what: str) -> tuple[Any, ...]:
    """``1,2,4,8`` as numbers; a SweepError naming ``what`` and the value that isn't one (a level is a
    whole number: "1.5" was refused as not being "a number")."""
    values = []
    for value in (v.strip() for v in text.split(",")):
        if not value:
            continue
        try:
            if "_" in value:  # Python's digit separator: "1_0" is not a number a user means as 10
                raise ValueError(value)
            values.append(kind(value))
        except ValueError:
            expected = "whole numbers" if kind is int else "numbers"
            raise SweepError(f"{what}: a comma-separated list of {expected}, and {value!r} is not one (in {text!r})") from None
        if not math.isfinite(values[-1]):  # float() reads "nan" and "inf", which no load is: not "must be > 0"
            raise SweepError(f"{what}: {value!r} is not a finite number (in {text!r})")
    if not values:
        raise SweepError(f"{what}: at least one value")
    return tuple(values)


def capacity_of(points: Sequence[Point]) -> tuple[Point | None, Point | None]:
    """The highest passing point below the lowest failing one, and that failing point: the knee lies
    between. A pass above a failure (noise, or a target that recovered) never raises the capacity;
    ``inconsistent`` names such points. Nor does a pass that didn't measure the target at its load
    (its replayer behind its schedule, a level not reached: sweep_checks): ``unmeasured_passes`` names those."""
    failing = [p for p in points if not p.passed]
    first_fail = min(failing, key=lambda p: p.load.value) if failing else None
    below = [p for p in points if p.counts and (first_fail is None or p.load.value < first_fail.load.value)]
    return (max(below, key=lambda p: p.load.value) if below else None), first_fail


def inconsistent(points: Sequence[Point]) -> list[float]:
    """Loads that passed above a load that failed."""
    _, first_fail = capacity_of(points)
    return sorted(p.load.value for p in points if p.passed and first_fail is not None and p.load.value > first_fail.load.value)


def behind_loads(points: Sequence[Point]) -> list[float]:
    """Loads that passed while the replayer fell behind its schedule: not the target's capacity."""
    return sorted(p.load.value for p in points if p.passed and p.replayer_behind)


def unmeasured_passes(points: Sequence[Point]) -> list[dict[str, Any]]:
    """Loads that passed without measuring the target there, each with why (sweep_checks)."""
    return [
        {p.load.kind: p.load.value, "why": p.unmeasured}
        for p in sorted(points, key=lambda p: p.load.value)
        if p.passed and p.unmeasured
    ]
