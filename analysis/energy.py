"""Energy and engine state over a group's span, from the captures' telemetry (docs/metrics.md).

Energy is attributed by time, not per request: the joules the engine's devices drew while the
group's requests ran, divided among its requests and output tokens.

Whose devices: a capture's engine is on the recording machine when its URL (the engine snapshot's,
else its exchanges' upstream) is a loopback one, the claim card's rule
(``infertap.capture.hostfacts.engine_is_local``); only then do the machine's own GPUs (NVML, amdsmi,
nvidia-smi) and RAPL count. An exporter's series (DCGM) count for the engine whose machine its
``Hostname`` label names, the recording machine's or a remote engine's; one without that label
counts as the recording machine's (analysis/machines.py). A device is named by its machine and its own name, so that two
recorders on one machine, read together, count its GPUs once; and each machine's devices are
measured by one family: NVML's, else the exporter's (the same GPUs under other names), else RAPL.
A group whose telemetry holds no device of its engines' machines has energy unknown, saying why.

Over what time: the group's active time, as its rates (analysis/active.py): each run's part of
the group (its first send to its last end there), so runs read together a while apart (a replay
appended an hour after the recording) are each measured over their own time, never over the idle
time between them, which ``measured.between_runs_s`` says. A device counts for a run where it has
a sample within two sampling intervals of both ends of its part, each run's samples by their
own interval (a run sampled every 2 s is not held to another's 250 ms): a run recorded without
telemetry is not given the last run's samples; and not where its power samples cover less than
half of the part, the rest gaps (``MOSTLY``: a source that lost most of its rounds); nor where a
device its capture knows (sampled in it, or listed by nvidia-smi in its engine snapshots or headers)
does not reach both ends while others do: their energy alone would be a part given as the whole;
the machine's GPUs are known where RAPL measures, so the CPU packages are never its energy alone,
nor where its capture gives no GPU set of the machine (no list: a header older than the list, an
nvidia-smi that did not answer), which is unknown, not none; and an imported run is measured by no
telemetry (its traffic ran elsewhere). A run none of whose devices does is unmeasured: the
figures per request and token are then of the measured runs' requests alone, and ``measured`` says
what share that is. Engine state is read over the same time, each stretch of it on its own
(``engine_state``). A counter that goes down was reset (a driver reload, an engine restart, RAPL's
wrap) and counts from zero after it, as Prometheus's ``increase`` counts. A device sampled by
several captures keeps each capture's series apart (``series.joined``): resets are found within
one capture's own samples only, never between two recorders' rounds. So does an engine counter
(preemptions, prefix cache hits) that several recorders scraped from one engine (one URL, a
loopback one on one machine): it is counted once; two engines' add.
"""

from __future__ import annotations

import bisect
import heapq
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from infertap.telemetry import gauges
from infertap.telemetry.host import is_package
from infertap.telemetry.series import (
    Series,
    Span,
    counter_rates,
    gaps,
    idle_mean,
    increase,
    integral,
    joined,
    merged,
    reach,
    reaches,
    summed,
)

from .active import COUNTED, RunPart, active, seconds
from .machines import (
    Engine,
    counted_runs,
    described_snapshot,
    describes,
    device_key,
    engine_of,
    hostname,
    imported_only,
    on_engine,
    scraped,
)
from .store import Analysis

#: Energy sources, best first: (telemetry name, kind, scale to joules or watts, what the result says).
SOURCES = (
    ("gpu_energy_joules", "counter", 1.0, "GPU energy counter (NVML or amdsmi)"),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", 1e-3, "GPU energy counter (DCGM exporter)"),
    ("gpu_power_watts", "power", 1.0, "GPU power samples, integrated (NVML, amdsmi or nvidia-smi)"),
    ("DCGM_FI_DEV_POWER_USAGE", "power", 1.0, "GPU power samples, integrated (DCGM exporter)"),
    ("host_rapl_energy_joules", "counter", 1.0, "CPU package energy counter (RAPL)"),  # package zones only
)
#: Sources that name the same devices the same way, best family first; within a family each
#: device takes the first of its sources it has (a counter before power samples).
FAMILIES = (
    ("gpu_energy_joules", "gpu_power_watts"),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_POWER_USAGE"),
    ("host_rapl_energy_joules",),
)
_SOURCE = {name: (kind, scale, label) for name, kind, scale, label in SOURCES}
#: The least share of a run's part a device's power samples must cover (the rest gaps bridged by a
#: straight line) for its energy to be measured there: below it, the run is not measured.
MOSTLY = 0.5
#: What kind of source each family is (``energy.kinds``): two runs measured by different kinds are
#: not measured alike (an exporter's counter against the machine's own NVML readings, or none).
KINDS = dict(zip(FAMILIES, ("NVML or nvidia-smi", "DCGM exporter", "RAPL"), strict=True))
_KIND = {name: kind for family, kind in KINDS.items() for name in family}
#: Engine state: gauges whose peak matters, per engine family (vLLM, SGLang, llama-server --metrics).
KV_CACHE = gauges.KV_CACHE
WAITING = tuple(gauges.WAITING.values())
RUNNING = tuple(gauges.RUNNING.values())
PREEMPTIONS = ("vllm:num_preemptions_total", "vllm:num_preemptions")
PREFIX_HITS = ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total")
PREFIX_QUERIES = ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total")
#: An output token count that counts tokens: the engine's, the enrichment's, or a stream's events
#: (docs/metrics.md: an approximation). A body not streamed is one event whatever it holds.
KNOWN_TOKENS = "(output_tokens_source IN ('usage', 'tokenize') OR (output_tokens_source = 'chunks' AND streamed))"

_Series = Series
_Span = Span


@dataclass(eq=False)
class _Device:
    """One device's samples of one source name: each capture's own series, in time order."""

    name: str
    series: list[_Series]
    device: str = ""  # its own name ("gpu 0") and machine, as printed
    host: str = ""


def _named(device: _Device, several: bool) -> str:
    """A device as the energy texts name it: by its own name ("gpu 0"), and its machine's where the
    runs span ``several`` machines, each with its own "gpu 0"."""
    name = device.device or device.name
    return f"{name} of {device.host or 'its machine'}" if several else name


class Telemetry:
    """A capture set's telemetry, loaded once, then asked per group."""

    def __init__(self, analysis: Analysis) -> None:
        self.analysis = analysis
        state = [*KV_CACHE, *WAITING, *PREEMPTIONS, *PREFIX_HITS, *PREFIX_QUERIES]
        names = [s[0] for s in SOURCES] + state
        placeholders = ", ".join("?" for _ in names)
        rows = analysis.sql(
            f"SELECT t.capture, t.source, t.name, t.device, t.labels, t.wall_ns, t.value, r.host, t.run_id FROM telemetry t "
            f"LEFT JOIN runs r ON r.capture = t.capture AND r.run_id = t.run_id "
            f"WHERE t.name IN ({placeholders}) AND t.value IS NOT NULL ORDER BY t.wall_ns",
            names,
        ).fetchall()
        runs = _scraped(analysis) if any(row[1] == "engine" for row in rows) else {}
        asked, failed = _intervals(analysis), _failures(analysis)
        # Each series' sampling interval asked for (ns), by id: its run's (a power series is one run's
        # samples); and the times its source failed in that run, which no step of its spacing holds.
        self.interval: dict[int, int] = {}
        self.failed: dict[int, list[int]] = {}
        # Engine state: name -> (engine, label set) -> capture -> run -> samples. The engine is the
        # one its run scraped, so that two recorders of one engine are two series of one counter;
        # each run's samples a series of its own, as power's, so that a run is not read from
        # another's (``_serves``).
        self.series: dict[str, dict[tuple[str, str], dict[str, dict[str | None, _Series]]]] = defaultdict(
            lambda: defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
        )
        # Power: capture -> (machine, assumed, device) -> name -> run -> samples; ``assumed``: the
        # machine is the recorder's. Each run's samples are a series of their own, judged by the
        # interval that run asked for: a recorder restarted with another --telemetry-interval, or
        # a run appended to a capture, is not held to another run's spacing.
        self.power: dict[str, dict[tuple[str, bool, str], dict[str, dict[str | None, _Series]]]] = defaultdict(
            lambda: defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
        )
        for capture, source, name, device, labels, wall_ns, value, host, run_id in rows:
            if name in _SOURCE:
                key = device_key(source, device, labels, host)
                if name == "host_rapl_energy_joules" and not is_package(key[2]):
                    continue  # psys, the whole platform with the packages in it (earlier captures have it)
                samples = self.power[capture][key][name][run_id]
                samples.append((wall_ns, value))
                self.interval[id(samples)] = asked.get((capture, run_id, source), 0)
                self.failed[id(samples)] = failed.get((capture, run_id, source), [])
            else:
                # An exporter's URL is not recorded: its series are each capture's own.
                engine = runs.get((capture, run_id)) if source == "engine" else None
                samples = self.series[name][(engine or f"{source} of {capture}", str(labels))][capture][run_id]
                samples.append((wall_ns, value))
                self.interval[id(samples)] = asked.get((capture, run_id, source), 0)
                self.failed[id(samples)] = failed.get((capture, run_id, source), [])
        # The GPUs nvidia-smi lists on each capture's recording machine (by index), as keys of its own
        # devices: its engine snapshots' host facts hold that list (the probe asks nvidia-smi, on the
        # recorder), a run header's where one holds it too. Listed, a GPU is known whether or not its
        # telemetry started.
        self.listed: dict[str, set[tuple[str, bool, str]]] = defaultdict(set)
        # Each capture's machines whose GPU set is known (a list, or no nvidia-smi there), by name;
        # and why it is not for the others (a header older than the list, an nvidia-smi that did not answer).
        self.gpus_known: dict[str, set[str]] = defaultdict(set)
        self.gpus_unknown: dict[str, dict[str, dict[str, None]]] = defaultdict(lambda: defaultdict(dict))
        for capture, host, what in analysis.sql(
            "SELECT capture, host, 'run header' FROM runs WHERE host IS NOT NULL "
            "UNION ALL SELECT capture, host, 'engine snapshot' FROM engines WHERE host IS NOT NULL ORDER BY 3 DESC"
        ).fetchall():
            gpus = _listed(host)
            self.listed[capture] |= {device_key("gpu", str(i), None, host) for i in range(gpus)}
            machine = (hostname(host) or "").lower()
            why = _gpus_unknown(host, what)
            if why is None:
                self.gpus_known[capture].add(machine)
            else:
                self.gpus_unknown[capture][machine][why] = None
        # Imported runs: their traffic was not recorded here, so no telemetry of the capture measured it.
        self.imported: set[_Key] = set(analysis.sql("SELECT capture, run_id FROM runs WHERE recorder = 'import'").fetchall())
        self.reach: dict[int, int] = {}
        self._engines: dict[str, Engine] | None = None
        self._spans_ready = False

    def _reaches(self, samples: _Series, span: _Span) -> bool:
        """Whether one capture's series reaches ``span``'s ends, within two of its own sampling
        intervals (the series are the loaded ones, kept for this object's life: ids are stable)."""
        return reaches(samples, span[0], span[1], self._reach(samples))

    def _reach(self, samples: _Series) -> int:
        """A loaded series' reach (``series.reach``), by its run's interval and its source's failures."""
        if id(samples) not in self.reach:
            self.reach[id(samples)] = reach(samples, self.interval.get(id(samples), 0), self.failed.get(id(samples), ()))
        return self.reach[id(samples)]

    def _covers(self, device: _Device, span: _Span) -> bool:
        """Whether some capture's samples of ``device`` are near each end of ``span``, each capture's
        by its own sampling interval: a run sampled every 2 s is not held to another's 250 ms."""
        return all(any(self._reaches(s, (t, t)) for s in device.series) for t in span)

    def energy(self, runs: Sequence[RunPart], ok: int, tokens: int, sessions: int) -> dict[str, Any] | None:
        """Joules the engines' devices drew while the group's runs were active (``runs``: each run's
        part, analysis/active.py), and what they come to per request, token and session; None
        without power telemetry; its figures None, ``unknown`` saying why, where the telemetry held
        is not of the engine's devices."""
        if not any(r.capture in self.power for r in runs):
            return None
        parts = self._parts(runs)
        machines, why = self._machines(parts)
        joules, idle, labels, kinds, devices = 0.0, None, [], [], 0
        measured: set[_Key] = set()
        spans: list[_Span] = []
        bridged: dict[str, list[_Span]] = {}
        sparse: list[str] = []  # the runs left unmeasured because a device's samples were mostly gaps there
        for engine_captures, chosen, known in machines:
            # Devices are named by machine where the runs span several: two machines' "gpu 0" told apart.
            hosts = {d.host.lower() for d in chosen} | {d.host.lower() for ds in known.values() for d in ds}
            several = len(machines) > 1 or len(hosts) > 1
            covered = {
                k: self._measuring(chosen, known.get(k[0], []), k, p.span, sparse, several)
                for k, p in parts.items()
                if k[0] in engine_captures
            }
            here = [k for k, ds in covered.items() if ds]
            measured.update(here)
            spans += [parts[k].span for k in here]
            idle_spans = self._idle(engine_captures, merged(parts[k].span for k in here))
            for device in chosen:
                own = merged(parts[k].span for k in here if device in covered[k])
                if own:
                    joules += sum(_joules(device, span) for span in own)
                    if found := [g for span in own for g in self._gaps(device, span)]:
                        label = _named(device, several)
                        bridged[label] = bridged.get(label, []) + found
                    devices += 1
                    labels += [_SOURCE[device.name][2]] if _SOURCE[device.name][2] not in labels else []
                    kinds += [_KIND[device.name]] if _KIND[device.name] not in kinds else []
                    # Idle: each device's own mean while nothing ran, then summed over devices, as mean_watts is.
                    watts = idle_mean(_watts(device), idle_spans)
                    idle = idle if watts is None else (idle or 0.0) + watts
        why = "; ".join(filter(None, [why, *sparse])) or None
        if not devices:
            return _unknown(why) if why else None
        partly = _partly(parts, measured, why)
        return self._figures(parts, measured, joules, merged(spans), ok, tokens, sessions) | {
            "idle_watts": idle,
            "source": "; ".join(labels) + (f"; partly measured: {partly}" if partly else ""),
            "kinds": kinds,
            "partly_measured": partly,
            "devices": devices,
            "interpolated": _interpolated(bridged, seconds(merged(spans))),
        }

    def _measuring(
        self, chosen: list[_Device], known: list[_Device], key: _Key, span: _Span, sparse: list[str], several: bool = False
    ) -> list[_Device]:
        """The devices that measure a run's part: those whose samples reach its ends; none where some
        such device's power samples cover less than ``MOSTLY`` of it, the rest gaps (a source that
        lost most of its rounds), whose energy there would be mostly a straight line; and none where
        a device its capture knows (``known``: it reported in the capture, or its header lists it)
        does not reach both ends while others do: the others' energy alone would be a part of the
        engine's given as the whole. The run is then unmeasured, partly measured or unknown saying
        so in ``sparse``, never a guess given as a figure; each device named by its machine where
        the runs span ``several``."""
        found = [d for d in chosen if self._covers(d, span)]
        if found and (why := self._unmeasurable(key, found)):
            sparse.append(why)
            return []
        if found and (short := [d for d in known if d not in found and not self._covers(d, span)]):
            others = ", ".join(f"{_named(d, several)}'s" for d in found)
            for d in short:
                share = self._coverage(d, span)
                what = "power samples" if _SOURCE[d.name][0] == "power" else "energy counter's samples"
                name = _named(d, several)
                said = f"{name} has no {what} in" if share == 0 else f"{name}'s {what} cover {share:.0%} of"
                sparse.append(f"{said} run {key[1]} of {key[0]} ({others} cover it)")
            return []
        for d in found:
            length = span[1] - span[0]
            share = 1 - seconds(merged(self._gaps(d, span))) * 1e9 / length if length > 0 else 1.0
            if share < MOSTLY:
                sparse.append(
                    f"{_named(d, several)}'s power samples cover {share:.0%} of run {key[1]} of {key[0]}, the rest gaps in them"
                )
                return []
        return found

    def _unmeasurable(self, key: _Key, found: list[_Device]) -> str | None:
        """Why devices that cover a run's part do not measure it: the run is an import (its traffic
        ran elsewhere, or here at another time), or they are the CPU packages' RAPL counters of a
        machine whose GPUs are unknown (no list in its capture: one written before the list, an
        nvidia-smi that did not answer), which may have drawn most of the power."""
        if key in self.imported:
            return f"run {key[1]} of {key[0]} is an import: its traffic was not recorded on this machine, whose telemetry is no measure of it"
        if found[0].name not in FAMILIES[-1]:
            return None
        unknown = sorted({d.host for d in found} - self.gpus_known[key[0]])
        if not unknown:
            return None
        why = "; ".join(dict.fromkeys(w for h in unknown for w in self.gpus_unknown[key[0]][h])) or "no GPU list"
        machines = ", ".join(h or "the recording machine" for h in unknown)
        return (
            f"the GPUs of {machines} are unknown ({why}), so its CPU packages' RAPL counters alone do not measure "
            f"run {key[1]} of {key[0]}"
        )

    def _coverage(self, device: _Device, span: _Span) -> float:
        """The share of ``span`` between a device's first and last samples in it, less the gaps
        between them: how much of a run a device that does not reach its ends measured."""
        length = span[1] - span[0]
        if length <= 0:
            return 0.0
        inside = merged(
            (max(s[0][0], span[0]), min(s[-1][0], span[1]))
            for s in device.series
            if s and s[0][0] < span[1] and s[-1][0] > span[0]
        )
        bridged = merged(g for lo, hi in inside for g in self._gaps(device, (lo, hi)))
        return max(0.0, seconds(inside) - seconds(bridged)) * 1e9 / length

    def _gaps(self, device: _Device, span: _Span) -> list[_Span]:
        """The parts of ``span`` a device's power samples leave a gap over (more than two of its
        sampling intervals between two samples): its energy there a straight line between them. A
        counter's increase across a gap is measured (the device counted through it): none."""
        if _SOURCE[device.name][0] != "power":
            return []
        found = []
        for k, (lo, hi) in joined(device.series, *span):
            samples = device.series[k]
            found += gaps(samples, lo, hi, self._reach(samples))
        return found

    def power_series(self, runs: Sequence[RunPart]) -> tuple[str, _Series] | None:
        """The power of the devices ``energy`` counts for one capture's engine over its runs' parts
        (its machine's, by the same rules), summed over them where every one has a sample so far,
        with what measured it; None where energy would have none (a remote engine's report plotted
        the recording machine's own GPUs)."""
        parts = self._parts(runs)
        if not parts:
            return None
        chosen = [d for _, devices, _ in self._machines(parts)[0] for d in devices]
        if not chosen:
            return None
        label = "; ".join(dict.fromkeys(_SOURCE[d.name][2] for d in chosen))
        return label, summed([_watts(d) for d in chosen])

    def _figures(
        self,
        parts: dict[_Key, _Part],
        measured: set[_Key],
        joules: float,
        spans: list[_Span],
        ok: int,
        tokens: int,
        sessions: int,
    ) -> dict[str, Any]:
        """Per request, token and session, over the measured runs' requests only. The group's own
        counts are those of the windows' exchanges when their ok counts agree (the windows hold the
        group's exchanges: as many means the same ones); else only a wholly measured group, with
        every token count known, has figures per request and token. The time measured is the
        measured runs' active time; ``between_runs_s`` the idle time between the group's runs, left out."""
        whole = all(k in measured for k in parts)
        exact = sum(p.ok for p in parts.values()) == ok
        got = [parts[c] for c in measured]
        ok_m = ok if whole else sum(p.ok for p in got) if exact else None
        known_ok, known_tokens = sum(p.known_ok for p in got), sum(p.known_tokens for p in got)
        per_request = joules / ok_m if ok_m else None
        if exact:  # J per request over the mean output tokens of the requests whose count is known
            per_token = per_request * known_ok / known_tokens if per_request is not None and known_tokens else None
        else:
            per_token = joules / tokens if whole and tokens and all(p.known_ok == p.ok for p in got) else None
        span_s = seconds(spans)
        session_count = sessions if whole else len({s for p in got for s in p.sessions}) if exact else None
        return {
            "joules": joules,
            "joules_per_request": per_request,
            "joules_per_output_token": per_token,
            "watt_hours_per_session": joules / 3600 / session_count if session_count else None,
            "mean_watts": joules / span_s if span_s > 0 else None,
            "measured": {
                "requests": ok_m,
                "of": ok,
                "share": ok_m / ok if ok_m is not None and ok else None,
                "captures": len({c for c, _ in measured}),
                "of_captures": len({c for c, _ in parts}),
                "runs": len(measured),
                "of_runs": len(parts),
                "tokens_known_for": known_ok if exact else None,
                "seconds": span_s,
                "between_runs_s": _between(list(parts.values())),
            },
        }

    # -- where and when -------------------------------------------------------------------------

    def _machines(
        self, parts: dict[_Key, _Part]
    ) -> tuple[list[tuple[list[str], list[_Device], dict[str, list[_Device]]]], str | None]:
        """Per engine machine: its captures, its devices (one family, each device by its best
        source, merged over the captures that sampled it) and each capture's known devices of that
        family (``_known``); and why some capture's engine has none."""
        engines = self.engines()
        by_machine: dict[str, list[str]] = defaultdict(list)
        reasons = []
        captures = list(dict.fromkeys(c for c, _ in parts))
        for capture in captures:
            engine = engines.get(capture, Engine(why="its engine's URL is not recorded (no snapshot, no upstream)"))
            if engine.why:
                reasons.append(engine.why)
                continue
            by_machine[min(engine.hosts)].append(capture)
        out = []
        for here in by_machine.values():
            engine = engines[here[0]]
            candidates = [
                (key, names)
                for c in captures
                for key, names in self.power.get(c, {}).items()
                if any(on_engine(key, engines[x]) for x in here)
            ]
            chosen, family = self._family(candidates, [p.span for k, p in parts.items() if k[0] in here])
            if chosen:
                out.append((here, chosen, {c: self._known(c, chosen, family, engines) for c in here}))
            elif not candidates:
                held = sorted(
                    {
                        f"{host or 'an unnamed machine'}'s own devices" if assumed else f"an exporter's series of {host}"
                        for c in captures
                        for host, assumed, _ in self.power.get(c, {})
                    }
                )
                where = "" if engine.local else ", not the recording machine"
                reasons.append(
                    f"no device of the engine's machine ({', '.join(sorted(engine.hosts))}{where}) was sampled: the "
                    f"telemetry holds {' and '.join(held)} (an exporter counts for the machine its Hostname label names)"
                )
        return out, "; ".join(dict.fromkeys(reasons)) or None

    def _family(
        self, candidates: list[tuple[tuple[str, bool, str], dict[str, dict[str | None, _Series]]]], spans: list[_Span]
    ) -> tuple[list[_Device], dict[tuple[str, str], _Device]]:
        """The first family any of whose devices covers one of ``spans``: each of its devices by the
        first of its sources that does, with the series of every capture that sampled it; and every
        device of that family sampled, covering or not (by its first source sampled where none
        covers), by (machine, device)."""
        by_device: dict[tuple[str, str], dict[str, list[_Series]]] = defaultdict(lambda: defaultdict(list))
        for (host, _, device), names in candidates:
            for name, by_run in names.items():
                by_device[(host.lower(), device)][name].extend(by_run.values())
        for family in FAMILIES:
            chosen, every = [], {}
            for (host, device), sources in by_device.items():
                for name in family:
                    found = _Device(name, sources.get(name, []), device, host)
                    if found.series and any(self._covers(found, s) for s in spans):
                        chosen.append(found)
                        every[(host, device)] = found
                        break
                else:
                    if name := next((n for n in family if sources.get(n)), ""):
                        every[(host, device)] = _Device(name, sources[name], device, host)
            if chosen:
                return chosen, every
        return [], {}

    def _known(
        self, capture: str, chosen: list[_Device], family: dict[tuple[str, str], _Device], engines: dict[str, Engine]
    ) -> list[_Device]:
        """The devices of the chosen family that ``capture`` says its engine's machine has: those it
        sampled at some point, and the GPUs nvidia-smi lists there (``listed``) where the family is
        the machine's own GPUs; one never sampled has no series (covers nothing). Where the family
        is RAPL's, the machine's GPUs are known too, listed or sampled by any GPU source: the CPU
        packages alone are not the engine's energy on a machine with GPUs (their telemetry failed
        to start, or read none of this group's runs), so those GPUs, covering none of the runs
        (else their family would measure), leave them unmeasured."""
        engine, names = engines[capture], _names(chosen)
        power = self.power.get(capture, {})
        keys = {(k[0].lower(), k[2]) for k, by in power.items() if on_engine(k, engine) and names & set(by)}
        listed = {(k[0].lower(), k[2]) for k in self.listed.get(capture, ()) if on_engine(k, engine)}
        if chosen[0].name in FAMILIES[0]:
            keys |= listed
        gpus: dict[tuple[str, str], _Device] = {}
        if chosen[0].name in FAMILIES[-1]:
            for k, by in power.items():
                if on_engine(k, engine) and (name := next((n for n in by if n not in names), "")):
                    gpus[(k[0].lower(), k[2])] = _Device(name, list(by[name].values()), k[2], k[0])
            keys |= listed | set(gpus)
        return [family.get(k) or gpus.get(k) or _Device("gpu_power_watts", [], k[1], k[0]) for k in sorted(keys)]

    def engines(self) -> dict[str, Engine]:
        """Each capture's engine: the last engine snapshot's URL of a run that describes it
        (``described_snapshot``, as the claim card reads it), else the upstreams its exchanges went
        to; its machine the recording one's (its describing runs') when that URL is local."""
        if self._engines is None:
            a = self.analysis
            # An import's upstreams and host facts are of a machine its file does not name, never this one.
            carried: dict[str, dict[str, str]] = defaultdict(dict)
            counted: dict[str, list[str]] = defaultdict(list)
            sent: dict[tuple[str, str], list[str]] = {}
            # Whether all of it was imported, and where its engine is, are judged by the runs its
            # figures are over, as the card and compare judge them (``counted_runs``): a recording
            # that only listed the models holds exchanges, and its (loopback) upstream, but none of
            # the traffic measured.
            for capture, run_id, urls, kind, used in a.sql(
                "SELECT capture, run_id, list(DISTINCT upstream) FILTER (WHERE recorder IS DISTINCT FROM 'import' AND upstream IS NOT NULL), "
                f"any_value(recorder), bool_or({COUNTED}) FROM exchanges GROUP BY capture, run_id ORDER BY capture, min(sent_wall_ns)"
            ).fetchall():
                carried[capture][str(run_id)] = str(kind or "")
                sent[(capture, str(run_id))] = sorted(urls or [])
                if used:
                    counted[capture].append(str(run_id))
            upstreams: dict[str, list[str]] = defaultdict(list)
            imported = set()
            described: dict[str, dict[str, str]] = {}
            for capture, runs in carried.items():
                described[capture] = counted_runs(runs, counted[capture])
                if imported_only(described[capture].values()):
                    imported.add(capture)
                for run_id in described[capture]:
                    upstreams[capture] += [u for u in sent[(capture, run_id)] if u not in upstreams[capture]]
            # The engine's URL: the last snapshot of a run that describes it (as the claim card's),
            # not one a run of another engine took that carried none of the traffic measured.
            taken: dict[str, list[tuple[str, str | None]]] = defaultdict(list)
            for capture, url, run_id in a.sql(
                "SELECT capture, url, run_id FROM engines WHERE url IS NOT NULL ORDER BY capture, coalesce(wall, -1e300)"
            ).fetchall():
                taken[capture].append((url, None if run_id is None else str(run_id)))
            snap: dict[str, str] = {}
            for capture, snaps in taken.items():
                taken_by = [run_id for _, run_id in snaps]
                i = described_snapshot(taken_by, carried[capture], described.get(capture, {}), imported=capture in imported)
                if i is not None:
                    snap[capture] = snaps[i][0]
            # The recording machine: that of the runs that describe its engine, not another
            # recorder's appended to it that carried none of its traffic.
            hosts: dict[str, set[str]] = defaultdict(set)
            for capture, run_id, host in a.sql(
                "SELECT capture, run_id, host FROM runs WHERE recorder IS DISTINCT FROM 'import'"
            ).fetchall():
                if describes(str(run_id), carried[capture], described.get(capture, {})) and (name := hostname(host)):
                    hosts[capture].add(name)
            self._engines = {
                c: engine_of(snap.get(c), upstreams.get(c) or [], hosts[c], imported=c in imported)
                for c in {*snap, *upstreams, *hosts}
            }
        return self._engines

    def _parts(self, runs: Sequence[RunPart]) -> dict[_Key, _Part]:
        """Each run's part of the group (analysis/active.py) with what its window holds: the run's
        generation requests within the part, their ok count, known token counts and sessions."""
        self._spans()
        rows = self.analysis.sql(
            "WITH p AS (SELECT unnest(?::VARCHAR[]) AS capture, unnest(?::VARCHAR[]) AS run_id, "
            "unnest(?::BIGINT[]) AS lo, unnest(?::BIGINT[]) AS hi) "
            "SELECT p.capture, p.run_id, count(*) FILTER (WHERE ok), count(*) FILTER (WHERE ok AND known), "
            "coalesce(sum(output_tokens) FILTER (WHERE ok AND known), 0), "
            "list(DISTINCT [session_capture, session]) FILTER (WHERE session IS NOT NULL) "
            "FROM p LEFT JOIN _energy_spans e ON e.generation AND e.capture = p.capture AND e.run_id IS NOT DISTINCT FROM p.run_id "
            "AND e.sent_wall_ns >= p.lo AND e.end_wall_ns <= p.hi GROUP BY p.capture, p.run_id",
            [[r.capture for r in runs], [r.run_id for r in runs], [r.first for r in runs], [r.last for r in runs]],
        ).fetchall()
        counts = {(c, r): row for c, r, *row in rows}
        parts = {}
        for run in runs:
            n, k, t, sessions = counts[(run.capture, run.run_id)]
            # A session is named within the captures it is linked across (session_capture), as stats
            # counts them: two gateways' turns of one session are one, two replays' "s-1" two.
            parts[(run.capture, run.run_id)] = _Part(run, n, k, int(t), {(c, x) for c, x in sessions or []})
        return parts

    def _spans(self) -> None:
        """The exchanges' spans and token counts, copied once from the metrics view for every group."""
        if not self._spans_ready:
            self.analysis.sql(
                "CREATE OR REPLACE TEMP TABLE _energy_spans AS SELECT capture, run_id, session, session_capture, generation, ok, sent_wall_ns, "
                f"end_wall_ns, output_tokens, {KNOWN_TOKENS} AS known FROM metrics WHERE end_wall_ns IS NOT NULL"
            )
            self._spans_ready = True

    def _idle(self, captures: Sequence[str], spans: list[_Span]) -> list[_Span]:
        """The parts of ``spans`` when no exchange of ``captures`` was in flight: the gaps between
        their busy stretches, found by DuckDB so that millions of requests never come into Python."""
        idle: list[_Span] = []
        for lo, hi in spans:
            rows = self.analysis.sql(
                "WITH x AS (SELECT sent_wall_ns AS s, end_wall_ns AS e FROM _energy_spans "
                "WHERE capture IN (SELECT unnest(?::VARCHAR[])) AND end_wall_ns >= ? AND sent_wall_ns <= ?), "
                "g AS (SELECT s, max(e) OVER (ORDER BY s, e ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before FROM x) "
                "SELECT coalesce(before, ?), s FROM g WHERE before IS NULL OR before < s "
                "UNION ALL SELECT max(e), ? FROM x",
                [list(captures), lo, hi, lo, hi],
            ).fetchall()
            idle += [(max(a, lo), min(b, hi)) for a, b in rows if a is not None and min(b, hi) > max(a, lo)]
        return idle

    # -- engine state ---------------------------------------------------------------------------

    def engine_state(self, runs: Sequence[RunPart]) -> dict[str, Any] | None:
        """The engine's peak KV cache usage and queue, its preemptions and prefix cache hit rate over
        the group's active time: each active stretch read on its own (analysis/active.py), counters'
        increases added and gauges' peaks the highest, so runs far apart are neither left unread nor
        read across the time between them. A figure is unknown where a stretch has no reading of
        it, ``unknown`` saying which; an engine that exposes none has no figure and says nothing."""
        stretches = _stretches(runs)
        captures = list(dict.fromkeys(r.capture for r in runs))
        kv, kv_missing = self._peak(stretches, captures, KV_CACHE)
        waiting, waiting_missing = self._peak(stretches, captures, WAITING)
        preemptions, preemptions_missing = self._delta(stretches, captures, PREEMPTIONS)
        hits, hits_missing = self._delta(stretches, captures, PREFIX_HITS)
        queries, queries_missing = self._delta(stretches, captures, PREFIX_QUERIES)
        state: dict[str, Any] = {
            "kv_cache_usage_max": kv,
            "requests_waiting_max": waiting,
            "preemptions": preemptions,
            "prefix_cache_hit_rate": _ratio(hits, queries),
        }
        missing = {
            "kv_cache_usage_max": ("no reading", kv_missing),
            "requests_waiting_max": ("no reading", waiting_missing),
            "preemptions": ("no series reaching both ends", preemptions_missing),
            # A stretch either counter misses, once: both missing one is one stretch unread, not two.
            "prefix_cache_hit_rate": (
                "no series reaching both ends",
                [s for s in stretches if any(s is m for m in (*hits_missing, *queries_missing))],
            ),
        }
        unknown = {name: _unread(what, gaps, len(stretches)) for name, (what, gaps) in missing.items() if gaps}
        if not unknown and all(v is None for v in state.values()):
            return None
        return state | ({"unknown": unknown} if unknown else {})

    def _pick(
        self, captures: Sequence[str], names: Sequence[str]
    ) -> tuple[str, dict[tuple[str, str], dict[str, dict[str | None, _Series]]]]:
        """The first name any of ``captures`` has (one engine family's): per (engine, label set), each
        capture's series of it, one a run."""
        for name in names:
            found = {
                key: {c: by_capture[c] for c in captures if c in by_capture}
                for key, by_capture in self.series.get(name, {}).items()
            }
            found = {key: series for key, series in found.items() if series}
            if found:
                return name, found
        return "", {}

    def _peak(
        self, stretches: list[_Stretch], captures: Sequence[str], names: Sequence[str]
    ) -> tuple[float | None, list[_Stretch]]:
        """The highest reading over the stretches, each scrape's series read as one
        (``gauges.per_scrape``), each stretch from its own runs' captures; and the stretches with no
        reading (the figure is then unknown)."""
        name, found = self._pick(captures, names)
        peaks, missing = [], []
        for stretch in stretches:
            scrapes: dict[tuple[str, str, int], list[float]] = defaultdict(list)
            for (engine, _), by_capture in found.items():
                for capture, samples in _serving(by_capture, stretch):
                    for t, v in _within(samples, stretch.span):
                        scrapes[(engine, capture, t)].append(v)
            if scrapes:
                peaks.append(max(gauges.per_scrape(name, values) for values in scrapes.values()))
            elif found:
                missing.append(stretch)
        return (max(peaks) if peaks and not missing else None), missing

    def _delta(
        self, stretches: list[_Stretch], captures: Sequence[str], names: Sequence[str]
    ) -> tuple[float | None, list[_Stretch]]:
        """A counter's increase over the stretches, added, each engine's counted once: where several
        recorders scraped one engine, each piece is read from one of their series (``series.joined``),
        as a device several captures sampled is; different engines add. And the stretches where an
        engine (or label set) was read but no series of it reaches both ends (the figure is then
        unknown: a sum without that engine's part would be short, unsaid)."""
        found = self._pick(captures, names)[1]
        total, missing = 0.0, []
        for stretch in stretches:
            read, short = False, False
            for by_capture in found.values():
                scraped = [s for _, s in _serving(by_capture, stretch)]
                series = [s for s in scraped if self._reaches(s, stretch.span)]
                if series:
                    read = True
                    total += sum(increase(series[k], *piece) for k, piece in joined(series, *stretch.span))
                elif scraped:
                    short = True  # an engine (or label set) read here, but not across the stretch: its part unknown
            if found and (short or not read):
                missing.append(stretch)
        return (total if found and not missing else None), missing


@dataclass
class _Stretch:
    """One stretch of a group's active time: its span, and the runs active in it (their captures' telemetry reads it)."""

    span: _Span
    runs: list[RunPart]

    @property
    def captures(self) -> set[str]:
        return {r.capture for r in self.runs}


def _serving(by_capture: dict[str, dict[str | None, _Series]], stretch: _Stretch) -> list[tuple[str, _Series]]:
    """The series that read ``stretch``, with their captures: its own runs', and those of a run of its
    captures sampled during it with no part in it (telemetry only: a --ray driver's). Another run's
    samples ending before it or starting after it are not its: a run appended with --no-telemetry
    read the one before's last scrape held flat, its preemptions 0 where they are unknown."""
    own = {(r.capture, r.run_id) for r in stretch.runs}
    lo, hi = stretch.span
    return [
        (capture, samples)
        for capture, by_run in by_capture.items()
        if capture in stretch.captures
        for run_id, samples in by_run.items()
        if (capture, run_id) in own or (samples and samples[0][0] <= hi and samples[-1][0] >= lo)
    ]


def _stretches(runs: Sequence[RunPart]) -> list[_Stretch]:
    """The group's active time (analysis/active.py) as stretches, each with the runs whose parts it joins."""
    return [_Stretch(span, [r for r in runs if span[0] <= r.first <= span[1]]) for span in active(runs)]


def _within(samples: _Series, span: _Span) -> _Series:
    """The samples taken within ``span`` (the series is in time order)."""
    lo = bisect.bisect_left(samples, (span[0], float("-inf")))
    return samples[lo : bisect.bisect_right(samples, (span[1], float("inf")))]


def _unread(what: str, missing: list[_Stretch], of: int) -> str:
    """Why an engine figure is unknown: which of the group's active stretches it has no reading of."""
    named = "; ".join(
        f"{datetime.fromtimestamp(s.span[0] / 1e9, UTC):%Y-%m-%d %H:%M:%S} UTC for {(s.span[1] - s.span[0]) / 1e9:.1f} s "
        f"({', '.join(f'run {r.run_id} of {r.capture}' for r in s.runs)})"
        for s in missing
    )
    return f"{what} of the engine's /metrics in {len(missing)} of the {of} stretches the group's runs were active: {named}"


#: A run of a capture: (capture, run id).
_Key = tuple[str, str | None]


@dataclass
class _Part:
    """A run's part of a group: its span there (analysis/active.py), the ok requests of the run in
    it, how many of those have a known output token count and those tokens, their sessions."""

    run: RunPart
    ok: int
    known_ok: int
    known_tokens: int
    sessions: set[tuple[str, str]]

    @property
    def span(self) -> _Span:
        return self.run.span


def _intervals(analysis: Analysis) -> dict[tuple[str, str | None, str], int]:
    """Each run's sampling interval asked for of each telemetry source (ns), as its header says
    (``runs.telemetry_intervals_s``): a run sampled every 2 s appended to one sampled every 250 ms
    has no gap read into each of its intervals, nor the other's gaps hidden by its 2 s; none for
    runs older than the field."""
    found: dict[tuple[str, str | None, str], int] = {}
    for capture, run_id, text in analysis.sql(
        "SELECT capture, run_id, telemetry_intervals_s FROM runs WHERE telemetry_intervals_s IS NOT NULL"
    ).fetchall():
        for source, every in json.loads(text).items():
            if isinstance(every, (int, float)) and every > 0:
                found[(capture, run_id, source)] = int(every * 1e9)
    return found


def _failures(analysis: Analysis) -> dict[tuple[str, str | None, str], list[int]]:
    """When each run's telemetry sources recorded a failure (a lost round, a source that stopped
    answering: the sampler records one at its start and again after a clean round), in time order."""
    found: dict[tuple[str, str | None, str], list[int]] = defaultdict(list)
    for capture, run_id, source, wall_ns in analysis.sql(
        "SELECT capture, run_id, source, wall_ns FROM telemetry WHERE unknown IS NOT NULL AND wall_ns IS NOT NULL ORDER BY wall_ns"
    ).fetchall():
        found[(capture, run_id, source)].append(wall_ns)
    return found


def _scraped(analysis: Analysis) -> dict[tuple[str, str], str | None]:
    """The engine whose ``/metrics`` each run scraped (``machines.scraped``): its recorder's
    upstream (``record``), else its engine snapshot's URL (a replay's target), else the one upstream
    its exchanges went to."""
    rows = analysis.sql(
        "SELECT r.capture, r.run_id, r.host, coalesce(r.upstream, "
        "(SELECT arg_max(e.url, coalesce(e.wall, -1e300)) FROM engines e WHERE e.capture = r.capture AND e.run_id = r.run_id), "
        "(SELECT CASE WHEN count(DISTINCT x.upstream) = 1 THEN any_value(x.upstream) END FROM exchanges x "
        "WHERE x.capture = r.capture AND x.run_id = r.run_id)) FROM runs r"
    ).fetchall()
    return {(capture, run_id): scraped(url, hostname(host)) for capture, run_id, host, url in rows}


def _names(devices: list[_Device]) -> set[str]:
    """The source names of the family ``devices`` were chosen from."""
    return {n for family in FAMILIES if any(d.name in family for d in devices) for n in family}


def _listed(host: str) -> int:
    """How many GPUs host facts list (nvidia-smi's, asked by the probe; none where it was absent)."""
    try:
        gpus = json.loads(host).get("gpus")
    except (ValueError, AttributeError):
        return 0
    return len(gpus) if isinstance(gpus, list) else 0


def _gpus_unknown(host: str, what: str) -> str | None:
    """Why a run header's or engine snapshot's host facts (``what``) leave the machine's GPU set
    unknown, or None where they give it: a list (of none too) or null (no nvidia-smi there). No list
    (written before headers held one) is unknown, as is a list nvidia-smi did not give (``gpus_unknown``)."""
    try:
        facts = json.loads(host)
    except ValueError:
        facts = None
    if not isinstance(facts, dict) or not ("gpus" in facts and (facts["gpus"] is None or isinstance(facts["gpus"], list))):
        return f"its {what} has no GPU list: written before infertap listed a machine's GPUs"
    return f"its {what}: {facts['gpus_unknown']}" if facts.get("gpus_unknown") else None


def _unknown(why: str) -> dict[str, Any]:
    return {
        "joules": None,
        "joules_per_request": None,
        "joules_per_output_token": None,
        "watt_hours_per_session": None,
        "mean_watts": None,
        "idle_watts": None,
        "source": f"unknown: {why}",
        "devices": 0,
        "unknown": why,
        "interpolated": None,
    }


def _interpolated(bridged: dict[str, list[_Span]], measured_s: float) -> dict[str, Any] | None:
    """How much of the measured time some device's power was bridged across a gap in its samples:
    ``seconds`` (the union over devices), its ``share`` of the measured time, and each device's
    seconds; None where no device's samples had a gap."""
    if not bridged:
        return None
    union = seconds(merged(g for found in bridged.values() for g in found))
    return {
        "seconds": union,
        "share": union / measured_s if measured_s > 0 else None,
        "devices": {label: seconds(merged(found)) for label, found in sorted(bridged.items())},
    }


def _partly(parts: dict[_Key, _Part], measured: set[_Key], why: str | None) -> str | None:
    """How much was measured when only some runs were (in captures where each is one run), which
    ``source`` ends with; None where every run was."""
    if all(k in measured for k in parts):
        return None
    ok = sum(p.ok for k, p in parts.items() if k in measured)
    total = sum(p.ok for p in parts.values())
    captures = {c for c, _ in parts}
    unit = "captures" if len(captures) == len(parts) else "runs"
    return f"{len(measured)} of {len(parts)} {unit}, {ok} of {total} ok requests" + (f" ({why})" if why else "")


def _between(parts: list[_Part]) -> float:
    """The idle time between a group's runs (its span less its active time): no part of its energy."""
    return (max(p.span[1] for p in parts) - min(p.span[0] for p in parts)) / 1e9 - seconds(active(p.run for p in parts))


def _watts(device: _Device) -> _Series:
    """A device's power samples: as sampled, or its counter's rate between two samples of one
    capture (two recorders' rounds a millisecond apart are no rate), every capture's in time order."""
    kind, scale, _ = _SOURCE[device.name]
    each = [counter_rates(s, scale) if kind == "counter" else [(t, v * scale) for t, v in s] for s in device.series]
    return list(heapq.merge(*each))


def _joules(device: _Device, span: _Span) -> float:
    """Over ``span``, each piece from one capture's own series (``series.joined``)."""
    kind, scale, _ = _SOURCE[device.name]
    read = increase if kind == "counter" else integral
    return sum(read(device.series[k], *piece) * scale for k, piece in joined(device.series, *span))


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None
