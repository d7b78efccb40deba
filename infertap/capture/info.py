"""What a capture holds, at a glance (``infertap info``): counts, span, engines, paths, endings."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable
from typing import Any

from infertap.apis import header
from infertap.recorders import recorder_running, writer_of

from .identity import IdentityTally, counted_runs, in_workload, plain_body, workload_summary
from .reader import CaptureReader


def _model_of(body: bytes) -> str | None:
    if not body or body[:1] != b"{":
        return None
    try:
        model = json.loads(body).get("model")
    except (ValueError, AttributeError, RecursionError):
        return None
    return model if isinstance(model, str) else None


class _Tally:
    """Counts over one pass of the records, so that a capture larger than memory summarizes too."""

    def __init__(self) -> None:
        self.types: Counter[str] = Counter()
        self.paths: Counter[str] = Counter()
        self.statuses: Counter[str] = Counter()
        self.ends: Counter[str] = Counter()
        self.models: Counter[str] = Counter()
        self.servers: Counter[str] = Counter()
        self.engines: Counter[str] = Counter()
        self.upstreams: Counter[str] = Counter()
        self.runs: dict[str, dict[str, Any]] = {}
        self.labels: dict[str, str] = {}
        self.first: float | None = None
        self.last: float | None = None
        self.raw_bytes = 0
        self.unsearched: Counter[str] = Counter()  # bodies kept as sent, encoded, not searched for credentials
        self.current = ""  # the run whose records follow: footers belong to it

    def add(self, record: dict[str, Any], counted: bool = False) -> None:
        """Every record counts by its type; the kinds that say more add it to their own counts.
        ``counted``: an exchange that is a generation request sent to the engine (``in_workload``)."""
        rtype = record.get("type", "?")
        self.types[rtype] += 1
        if rtype == "header":
            self.header(record)
        elif rtype == "exchange":
            self.exchange(record, counted)
        elif rtype == "footer" and record.get("loop_lag"):
            self.runs[self.current]["loop_lag"] = record["loop_lag"]  # the run's latest (footers are cumulative)
        elif rtype == "engine":
            version = ((record.get("facts") or {}).get("version") or {}).get("value")
            self.engines[f"{record.get('kind') or 'unknown'} {version or '(version unknown)'} at {record.get('url')}"] += 1

    def header(self, record: dict[str, Any]) -> None:
        """A run per run id, however many segments it wrote (each segment starts with a header)."""
        self.current = record["run_id"]
        run = self.runs.setdefault(
            self.current,
            {
                "recorder": record.get("recorder", {}),
                "host": record.get("host") or {},
                "wall": record.get("wall"),
                "segments": 0,
                "exchanges": 0,
                "counted": 0,  # its generation requests sent to the engine (``in_workload``)
            },
        )
        run["segments"] += 1
        self.labels.update(record.get("labels") or {})
        upstream = (record.get("recorder") or {}).get("upstream")
        if upstream and run["segments"] == 1:
            self.upstreams[upstream] += 1

    def exchange(self, record: dict[str, Any], counted: bool) -> None:
        """What was asked of whom, how it ended, and the span: from the first send to the last end."""
        if self.current in self.runs:  # a run whose header was read (a torn head leaves none)
            self.runs[self.current]["exchanges"] += 1
            self.runs[self.current]["counted"] += counted
        self.paths[f"{record['method']} {record['path']}"] += 1
        self.statuses[str(record.get("status"))] += 1
        self.ends[record.get("end", "?")] += 1
        model = _model_of(record.get("request_body", b""))
        if model:
            self.models[model] += 1
        server = header(record.get("response_headers"), "server")
        if server:
            self.servers[server] += 1
        start = record["wall"]
        stop = start + (record["sent_ns"] - record["start_ns"] + record.get("end_ns", 0)) / 1e9
        self.first = start if self.first is None else min(self.first, start)
        self.last = stop if self.last is None else max(self.last, stop)
        self.raw_bytes += len(record.get("request_body", b"")) + sum(len(c) for c in record.get("chunks", ()))
        sides = [side for side in ("request", "response") if f"{side}_body_unsearched" in record]
        if sides:
            self.unsearched.update(sides)
            self.unsearched["exchanges"] += 1


def _writer_alive(tally: _Tally) -> int | None:
    """The pid of a run's recorder that still runs on this machine (the last such run's): a capture
    that is not closed because it is being written, not because its recorder died. Any run, not only
    the last: a record still running while an enrich appended and closed its own run is writing."""
    for run in reversed(list(tally.runs.values())):
        if (pid := _alive(run)) is not None:
            return pid
    return None


def _alive(run: dict[str, Any]) -> int | None:
    return recorder_running(*writer_of(run["recorder"] or {}, run["host"], run["wall"]))


#: Why a run holds no engine snapshot, by its recorder's kind: only record and replay probe an engine.
_NO_SNAPSHOT = {
    "import": "imported from a file: an import probes no engine",
    "mitm": "recorded through infertap mitm, which probes no engine",
    "replay": "replayed with --no-probe, or the probe of its target failed",
}


#: Why a capture none of whose runs holds an exchange has no engine snapshot: none was needed.
NO_TRAFFIC = "no run carried any traffic: no engine served a request to describe"


def no_snapshot_reason(recorders: Iterable[str]) -> str:
    """Why a capture holds no engine snapshot, by ``recorders``: the kinds of the runs that hold its
    exchanges (as ``machines.imported_only`` takes them). A run that carried none (a recording
    stopped before any request) needed no snapshot, so it is not blamed for lacking one."""
    default = "recorded with --no-probe, or the probe failed"
    traffic = sorted(set(recorders) - {"enrich", "telemetry"})  # an enrich or telemetry run records no exchange
    return "; ".join(dict.fromkeys(_NO_SNAPSHOT.get(kind, default) for kind in traffic)) or NO_TRAFFIC


def _traffic_recorders(tally: _Tally) -> list[str]:
    """The kinds of the runs that carried the capture's traffic, by the rule the claim card and
    compare judge a capture by (``counted_runs``): those of its generation requests sent to the
    engine, else, where none was, those holding any exchange."""
    kinds = {run_id: str(r["recorder"].get("kind", "?")) for run_id, r in tally.runs.items() if r["exchanges"]}
    return sorted(set(counted_runs(kinds, (run_id for run_id, r in tally.runs.items() if r["counted"])).values()))


def _not_imported(tally: _Tally) -> dict[str, int]:
    """What the capture's imports left out of every exchange (their headers' ``recorder.not_imported``,
    by kind: tcp, udp, dns flows, websocket_messages), added over its import runs; ``{}`` for none."""
    total: Counter[str] = Counter()
    for run in tally.runs.values():
        total.update((run["recorder"] or {}).get("not_imported") or {})
    return {kind: n for kind, n in sorted(total.items()) if n}


def not_imported_text(not_imported: dict[str, int]) -> str:
    """``not_imported`` counts as words: "2 dns, 1 tcp, 3 websocket messages"."""
    return ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in not_imported.items())


def summarize(path: str | os.PathLike[str]) -> dict[str, Any]:
    reader = CaptureReader(path)
    tally = _Tally()
    identity = IdentityTally()
    for record in reader.records():
        exchange = record.get("type") == "exchange"
        plain = plain_body(record) if exchange else None  # its encoding undone once, for both
        counted = exchange and in_workload(record, plain)  # read once, for both
        tally.add(record, counted)
        identity.add(record, generation=counted, plain=plain)
    first, last = tally.first, tally.last
    return {
        "path": str(reader.path),
        "segments": len(reader.segments),
        "bytes_on_disk": sum(p.stat().st_size for p in reader.segments),
        "body_bytes": tally.raw_bytes,
        "records": dict(tally.types),
        "exchanges": tally.types.get("exchange", 0),
        "runs": len(tally.runs),
        "recorders": sorted({r["recorder"].get("kind", "?") for r in tally.runs.values()}),
        # The kinds of the runs that carried its traffic (``counted_runs``: a run of refusals alone, or
        # that only listed the models, is none of them): why it has no engine snapshot, where it has none.
        "traffic_recorders": _traffic_recorders(tally),
        "upstreams": dict(tally.upstreams),
        # The exporters its runs scraped (--telemetry-url, redacted as recorded): its energy's and engine state's sources.
        "telemetry_urls": list(dict.fromkeys(u for r in tally.runs.values() for u in r["recorder"].get("telemetry_urls") or ())),
        "labels": tally.labels,
        "first_wall": first,
        "last_wall": last,
        "span_s": (last - first) if first is not None and last is not None else 0.0,
        "engines": dict(tally.engines),
        "server_headers": dict(tally.servers),
        "models": dict(tally.models),
        "paths": dict(tally.paths.most_common()),
        "statuses": dict(tally.statuses.most_common()),
        "ends": dict(tally.ends.most_common()),
        "loop_lag": {rid: r["loop_lag"] for rid, r in tally.runs.items() if "loop_lag" in r},  # per recording run
        "closed_cleanly": reader.closed_cleanly,
        "writing": None if reader.closed_cleanly else _writer_alive(tally),
        "torn": [str(t) for t in reader.torn],
        # Exchanges with a body kept compressed as sent, that could not be decoded to search it for
        # credentials (request_body_unsearched, response_body_unsearched): one may be inside it on disk.
        "unsearched": {key: tally.unsearched[key] for key in ("exchanges", "request", "response")},
        "not_imported": _not_imported(tally),
        "workload": workload_summary(identity.identity(), [r["recorder"] for r in tally.runs.values()]),
    }
