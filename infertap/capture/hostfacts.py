"""Facts about the machine a capture was recorded on: a number without its machine is gossip."""

from __future__ import annotations

import ipaddress
import os
import platform
import socket
import sys
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


def _smi(exe: str, args: list[str], timeout: float) -> str | None:
    import subprocess

    try:
        return subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def gpu_facts(timeout: float = 5.0) -> list[dict[str, Any]] | None:
    """GPUs as nvidia-smi reports them: name, driver, memory, VBIOS and the CUDA version the driver
    supports (from its plain output's header, ``CUDA Version: 12.4``); None when there is no
    nvidia-smi (not 'no GPU': unknown). A value nvidia-smi doesn't give is None."""
    import re
    import shutil

    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    fmt = "--format=csv,noheader,nounits"
    out = _smi(exe, [f"--query-gpu={','.join(GPU_QUERY)}", fmt], timeout)
    if out is None:  # an older driver that refuses a field: ask without the VBIOS
        out = _smi(exe, [f"--query-gpu={','.join(GPU_QUERY[:3])}", fmt], timeout)
    if out is None:
        return None
    header = _smi(exe, [], timeout) or ""
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
    return gpus


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
