"""Which machine a power sample and an engine are on, so that a device's energy counts for the
engine that ran there (analysis/energy.py): an engine is on the recording machine when its URL is a
loopback one (``engine_is_local``, the claim card's rule), else on the machine its URL names; a
local source's device is on the recording machine; an exporter's (DCGM) on the machine its
``Hostname`` label names. An import's traffic ran on a machine its file does not name: its upstreams
and header say nothing of where, so they are none of these.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from infertap.capture.hostfacts import engine_is_local, url_parts
from infertap.capture.identity import counted_runs  # the one rule, kept where `infertap info` reads it too

#: Why an imported capture's engine machine is unknown.
IMPORTED = "its traffic was imported from a file, which does not say the machine it ran on: the recording machine, and its engine's, are unknown"


def probed_after_import(wall: float | None) -> str:
    """Why the engine facts of an import's snapshot (``enrich``'s, taken at ``wall``) are not known
    to be its traffic's: they are of the engine enrich probed, after the import, and the imported
    file names no engine, version or settings. Said beside the facts, which are kept."""
    when = datetime.fromtimestamp(wall, UTC).isoformat(timespec="seconds") if wall else "an unknown time"
    return (
        f"probed by `infertap enrich` at {when}, after the traffic was imported: "
        "the engine then, which the imported file does not say served that traffic"
    )


def imported_only(recorders: Iterable[str]) -> bool:
    """Whether all of a capture's (or a group's) traffic was imported: then no fact of this machine
    is its engine machine's. The one rule for stats, claim, compare and energy alike: ``recorders``
    are the kinds of the runs its figures are over (``counted_runs``), so that a run that carried no
    generation request (a recording stopped before any request or that only listed the models, an
    ``enrich``, a telemetry run) makes no import a recording."""
    traffic = set(recorders) - {"enrich", "telemetry"}
    return traffic == {"import"}


def describes(run_id: str | None, held: Collection[str], described: Mapping[str, str]) -> bool:
    """Whether a run's engine snapshot and host facts are of a capture's engine and machine: a run
    its figures are over (``described``, ``counted_runs``), or one that holds no exchange (an
    ``enrich``'s snapshot, a probe alone, a ``--ray`` driver's telemetry: ``held`` are the runs that
    hold one). Not a run of another recorder whose exchanges are none of its counted traffic (a
    recording of refusals alone, or that only listed the models, of another engine or machine)."""
    return run_id is None or run_id in described or run_id not in held


def described_snapshot(
    taken_by: Sequence[str | None], held: Collection[str], described: Mapping[str, str], *, imported: bool
) -> int | None:
    """Which of a capture's engine snapshots (the run that took each, oldest first) is its engine's,
    for the claim card and energy alike: the newest that ``describes`` it. Where all its traffic was
    imported and none does, the newest of any, which ``probed_by`` says is whose; else None: the
    snapshot of a run that carried none of its traffic is another engine's, not its own."""
    for i in reversed(range(len(taken_by))):
        if describes(taken_by[i], held, described):
            return i
    return len(taken_by) - 1 if imported and taken_by else None


def probed_by(kind: str | None, run_id: str | None, wall: float | None, imported: Iterable[str], *, only: bool) -> str | None:
    """Whose engine a capture's snapshot (taken by run ``run_id`` of recorder ``kind`` at ``wall``)
    is, where some of its traffic was imported (``imported``: those runs' ids; ``only``: all of it,
    ``imported_only``): an imported file names no engine, so the snapshot is another run's, or
    enrich's afterwards, never the import's. None where no traffic was imported."""
    runs = list(imported)
    if not runs:
        return None
    if kind == "enrich":
        probed = probed_after_import(wall)
    else:
        when = datetime.fromtimestamp(wall, UTC).isoformat(timespec="seconds") if wall else "an unknown time"
        probed = f"probed by run {run_id or 'unknown'} ({kind or 'unknown recorder'}) at {when}"
        if only:
            return f"{probed}, which carried none of the traffic: the imported file does not say which engine served it"
        probed += ": the engine of that run's traffic"
    if only:
        return probed
    return f"{probed}; the engine of the imported run(s) {', '.join(runs)} is unknown (the imported file does not say it)"


@dataclass
class Engine:
    """Where a capture's engine ran: ``hosts`` its machine's names, ``local`` when that is the
    recording machine; ``why`` when it can't be told."""

    hosts: frozenset[str] = frozenset()
    local: bool = False
    why: str | None = None


def device_key(source: str | None, device: str | None, labels: str | None, host: str | None) -> tuple[str, bool, str]:
    """(machine, whether the machine is assumed to be the recorder's, device) of a power sample:
    a local source's machine is the recorder's; an exporter's is its ``Hostname`` label, if any."""
    tags = _loads(labels)
    recorder = hostname(host) or ""
    if source == "exporter":
        name = str(tags.get("Hostname") or "")
        gpu = str(tags.get("gpu") or tags.get("UUID") or tags.get("device") or labels)
        return (name, False, f"gpu {gpu}") if name else (recorder, True, f"exporter gpu {gpu}")
    if device is not None:
        return recorder, True, f"gpu {device}"
    return recorder, True, f"zone {tags.get('zone') or labels}"


def on_engine(key: tuple[str, bool, str], engine: Engine) -> bool:
    """Whether a device is on the machine of ``engine``: the recorder's own devices only for a
    local engine, an exporter's by the machine its Hostname label names."""
    host, assumed, _ = key
    if assumed:
        return engine.local and host in engine.hosts
    return any(_same_host(host, h) for h in engine.hosts)


def engine_of(snapshot: str | None, upstreams: list[str], recorders: set[str], *, imported: bool = False) -> Engine:
    """Where a capture's engine ran, from its last snapshot's URL, else its recorded upstreams, and
    the recording machine's names (``recorders``). ``imported``: all its traffic was imported, and a
    file names no machine it ran on: a loopback upstream there, or a snapshot an ``enrich`` took
    here, says nothing of it."""
    if imported:
        return Engine(why=IMPORTED)
    urls = [snapshot] if snapshot else upstreams
    if not urls:
        return Engine(why="where its engine ran is unknown (no engine snapshot, no upstream recorded)")
    if all(engine_is_local(url) for url in urls):
        if not recorders:
            return Engine(why="the recording machine's name is not recorded")
        return Engine(frozenset(recorders), local=True)
    names = {_url_host(url) for url in urls}
    if len(names) != 1 or any(engine_is_local(url) for url in urls):
        return Engine(why=f"its requests went to engines on several machines ({', '.join(sorted(urls))})")
    return Engine(frozenset(names))


def scraped(url: str | None, recorder_host: str | None) -> str | None:
    """Which engine a run's ``/metrics`` samples came from, as one name for every recorder that
    scraped it: its URL's scheme, host, port and path (a loopback one on the recording machine,
    named by that machine: two machines' own 127.0.0.1:8080 are two engines); None when unknown."""
    if not url:
        return None
    parts = url_parts(url)
    if not parts.hostname:
        return None
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
    host = parts.hostname.lower()
    if engine_is_local(url):
        if not recorder_host:
            return None
        host = f"loopback of {recorder_host.lower()}"
    return f"{parts.scheme.lower()}://{host}:{port}{parts.path.rstrip('/')}"


def _url_host(url: str) -> str:
    return (url_parts(url).hostname or "").lower()  # an old capture's "user:[REDACTED]@" too


def _same_host(a: str, b: str) -> bool:
    """Two names of one machine: equal, or a short name and its fully qualified one (never two addresses' prefixes)."""
    a, b = a.lower().rstrip("."), b.lower().rstrip(".")
    if a == b:
        return True
    if _is_address(a) or _is_address(b) or ("." in a and "." in b):
        return False  # two fully qualified names that differ are two machines (gpu1.dc-a, gpu1.dc-b)
    return a.split(".", 1)[0] == b.split(".", 1)[0]


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    return True


def hostname(host: str | None) -> str | None:
    name = _loads(host).get("hostname")
    return str(name) if name else None


def _loads(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


__all__ = [
    "IMPORTED",
    "Engine",
    "counted_runs",
    "described_snapshot",
    "describes",
    "device_key",
    "engine_of",
    "hostname",
    "imported_only",
    "on_engine",
    "probed_after_import",
    "probed_by",
    "scraped",
]
