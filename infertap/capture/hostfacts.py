"""Facts about the machine a capture was recorded on: a number without its machine is gossip."""

from __future__ import annotations

import ipaddress
import os
import platform
import re
import shutil
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult, urlsplit


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def host_facts() -> dict[str, Any]:
    """Cheap facts only: this runs once per capture run, before any traffic."""
    return {
        "hostname": socket.gethostname(),
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": _memory_bytes(),
        "python": sys.version.split()[0],
    }


#: What is asked of nvidia-smi about each GPU; drivers that refuse ``vbios_version`` are asked the rest.
GPU_QUERY = ("name", "driver_version", "memory.total", "vbios_version")
#: The longest a writer or a probe waits for nvidia-smi to list the GPUs, all its calls together:
#: one answers in tens of ms; a hung driver may never answer, nor die when killed.
GPU_LIST_TIMEOUT_S = 2.0
#: What nvidia-smi prints (exit 6) where its driver runs with no GPU: a list of none, not an unknown one.
_NO_DEVICES = "No devices were found"


@dataclass(frozen=True)
class GpuList:
    """The machine's GPUs as nvidia-smi lists them (``gpus``; None where there is no nvidia-smi),
    or why that list is unknown (``unknown``: nvidia-smi failed or did not answer in time, or the
    writer did not ask, as an import of traffic recorded elsewhere). Analysis reads a machine with
    an unknown list as one that may have GPUs: its CPU packages' RAPL counters are not its energy."""

    gpus: list[dict[str, Any]] | None
    unknown: str | None = None

    def facts(self) -> dict[str, Any]:
        """As host facts hold it: ``gpus``, and ``gpus_unknown`` where the list is unknown."""
        return {"gpus": self.gpus, **({"gpus_unknown": self.unknown} if self.unknown else {})}


#: The listing in flight, [thread, its result once done]: a call while one runs waits on it, so a
#: hung nvidia-smi is not asked again by every probe, each leaving one more process stuck.
_asking: list[Any] = []
_asking_lock = threading.Lock()


def list_gpus(timeout: float = GPU_LIST_TIMEOUT_S) -> GpuList:
    """The GPUs nvidia-smi lists, asked on a thread of its own and waited for ``timeout`` seconds
    at most: a process stuck in the driver outlives its kill (its pipes stay open), and
    ``subprocess.run`` would wait on it for ever, holding a recorder's start. Past ``timeout`` the
    list is unknown, saying so; the thread is left to end when nvidia-smi does."""
    with _asking_lock:
        if _asking and _asking[0].is_alive():
            thread, found = _asking
        else:
            found = []
            thread = threading.Thread(target=lambda: found.append(_gpu_list(timeout)), name="infertap-gpu-list", daemon=True)
            thread.start()
            _asking[:] = [thread, found]
    thread.join(timeout)
    return found[0] if found else GpuList(None, f"nvidia-smi did not answer within {timeout:g} s")


def gpu_facts(timeout: float = GPU_LIST_TIMEOUT_S) -> list[dict[str, Any]] | None:
    """GPUs as nvidia-smi reports them (``list_gpus``): None where there is none or its list is unknown."""
    return list_gpus(timeout).gpus


def _smi(exe: str, args: list[str], timeout: float) -> tuple[str | None, str]:
    """nvidia-smi's output, or None and why it gave none."""
    import subprocess

    try:
        return subprocess.run([exe, *args], capture_output=True, text=True, timeout=max(timeout, 0.01), check=True).stdout, ""
    except subprocess.TimeoutExpired:
        return None, "timeout"
    except subprocess.CalledProcessError as exc:
        said = " ".join(f"{exc.stdout or ''} {exc.stderr or ''}".split())[:200]
        return None, f"nvidia-smi exited {exc.returncode}: {said}" if said else f"nvidia-smi exited {exc.returncode}"
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"nvidia-smi: {exc}"


def _gpu_list(timeout: float) -> GpuList:
    """Name, driver, memory, VBIOS and the CUDA version the driver supports (from its plain
    output's header, ``CUDA Version: 12.4``) of each GPU; all calls within ``timeout``. A value
    nvidia-smi doesn't give is None."""
    deadline = time.monotonic() + timeout
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return GpuList(None)  # no nvidia-smi: no NVIDIA GPU, or its tools are not installed
    fmt = "--format=csv,noheader,nounits"
    out, why = _smi(exe, [f"--query-gpu={','.join(GPU_QUERY)}", fmt], deadline - time.monotonic())
    if out is None and why != "timeout":  # an older driver that refuses a field: ask without the VBIOS
        out, why = _smi(exe, [f"--query-gpu={','.join(GPU_QUERY[:3])}", fmt], deadline - time.monotonic())
    if out is None:
        if _NO_DEVICES in why:
            return GpuList([])
        return GpuList(None, f"nvidia-smi did not answer within {timeout:g} s" if why == "timeout" else why)
    header = _smi(exe, [], deadline - time.monotonic())[0] or ""  # the CUDA version only: none is no loss of GPUs
    cuda = re.search(r"CUDA Version:\s*([0-9][0-9.]*)", header)
    gpus = []
    for line in out.strip().splitlines():
        name, driver, memory, vbios = ([part.strip() for part in line.split(",", 3)] + [""])[:4]
        gpus.append(
            {
                "name": name,
                "driver": driver,
                "memory_mib": int(memory) if memory.isdigit() else memory,
                "vbios": vbios if vbios and vbios != "[N/A]" else None,
                "cuda": cuda.group(1) if cuda else None,
            }
        )
    return GpuList(gpus)


def url_parts(url: str) -> SplitResult:
    """``url`` split without its userinfo, which nothing here needs: captures recorded before the
    redacted password was written ``user:REDACTED@`` hold ``user:[REDACTED]@``, which ``urlsplit``
    takes for an IPv6 host and refuses. A URL that still can't be split is split as empty."""
    scheme, sep, rest = url.partition("://")
    if sep:
        end = min((i for i in map(rest.find, "/?#") if i >= 0), default=len(rest))
        url = f"{scheme}://{rest[:end].rpartition('@')[2]}{rest[end:]}"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  # raises on a port that is no number
    except ValueError:
        return urlsplit("")
    return parts


def engine_is_local(url: str) -> bool:
    """Whether the engine at ``url`` runs on the recording machine: its host is a loopback name or
    address. Only then are this machine's facts, process, GPUs and RAPL the engine's (the probe's
    ``host_is_engine_host``, the claim card's device, the energy counted for it)."""
    return is_loopback(url_parts(url).hostname or "")


def is_loopback(host: str) -> bool:
    """Whether a host name or address is this machine's loopback (a numeric check; no DNS)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
