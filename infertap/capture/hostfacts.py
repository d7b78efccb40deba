"""Facts about the machine a capture was recorded on: a number without its machine is gossip."""

from __future__ import annotations

import ipaddress
import os
import platform
import socket
import sys
from typing import Any


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


def gpu_facts(timeout: float = 5.0) -> list[dict[str, Any]] | None:
    """GPUs as nvidia-smi reports them; None when there is no nvidia-smi (not 'no GPU': unknown)."""
    import shutil
    import subprocess

    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    gpus = []
    for line in out.strip().splitlines():
        name, driver, memory = (part.strip() for part in line.split(",", 2))
        gpus.append({"name": name, "driver": driver, "memory_mib": int(memory) if memory.isdigit() else memory})
    return gpus


def is_loopback(host: str) -> bool:
    """Whether a host name or address is this machine's loopback (a numeric check; no DNS)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
