"""The host: CPU utilization, the engine's process (CPU and resident memory) when it runs on this
machine, and RAPL package energy where ``/sys/class/powercap`` is readable.

Names: ``host_cpu_percent`` (system-wide, 100 = every CPU busy), ``engine_process_cpu_percent``
(100 = one CPU), ``engine_process_rss_bytes``, ``host_rapl_energy_joules`` (a counter per CPU
package, label ``zone``: ``intel-rapl:0:package-0``). Only package zones: ``psys``, a top-level
zone too where the platform has it, is the whole platform, packages included, and the analysis
sums the zones.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .samples import Sample

if TYPE_CHECKING:
    import psutil

_RAPL = Path("/sys/class/powercap")


class HostSource:
    name = "host"

    def __init__(self, engine_port: int | None = None) -> None:
        import psutil  # here: the analysis imports this module for is_package alone

        psutil.cpu_percent(interval=None)  # the first reading is meaningless; this starts the clock
        self.process = _listener(engine_port) if engine_port else None
        if self.process is not None:
            self.process.cpu_percent(interval=None)
        self.zones = _rapl_zones()

    def sample(self) -> list[Sample]:
        import psutil

        samples = [Sample("host_cpu_percent", {}, psutil.cpu_percent(interval=None))]
        if self.process is not None:
            try:
                with self.process.oneshot():
                    pid = {"pid": str(self.process.pid)}
                    samples.append(Sample("engine_process_cpu_percent", pid, self.process.cpu_percent(interval=None)))
                    samples.append(Sample("engine_process_rss_bytes", pid, float(self.process.memory_info().rss)))
            except psutil.Error:
                self.process = None  # the engine went away; the host is still worth sampling
        for zone, path in self.zones:
            try:
                samples.append(Sample("host_rapl_energy_joules", {"zone": zone}, int(path.read_text()) / 1e6))  # µJ
            except (OSError, ValueError):
                continue
        return samples

    def close(self) -> None:
        pass


def _listener(port: int) -> psutil.Process | None:
    """The process listening on ``port`` on this machine, when we may see it."""
    import psutil

    try:
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
                return psutil.Process(conn.pid)
    except (psutil.Error, OSError):
        return None
    return None


def _rapl_zones() -> list[tuple[str, Path]]:
    """The CPU packages' RAPL zones whose energy counter this user can read."""
    zones = []
    for zone in sorted(_RAPL.glob("intel-rapl:[0-9]*")):
        if zone.name.count(":") != 1:
            continue  # a sub-zone (core, uncore, dram) of a package already counted
        energy = zone / "energy_uj"
        try:
            name = (zone / "name").read_text().strip()
            energy.read_text()
        except OSError:
            continue
        if is_package(name):  # not psys: the platform, which holds the packages
            zones.append((f"{zone.name}:{name}", energy))
    return zones


def is_package(zone: str) -> bool:
    """Whether a RAPL zone (its name, or the ``zone`` label ending in it) is a CPU package's."""
    return zone.rsplit(":", 1)[-1].startswith("package")
