"""Stand-ins for what this machine can't produce: a GPU (an ``nvidia-smi`` that answers in its
documented CSV, a module shaped like nvidia-ml-py's ``pynvml``), a DCGM exporter serving its
documented Prometheus text, and a machine with no power telemetry at all. Everything else in the
telemetry tests is the real thing."""

from __future__ import annotations

import os
import shlex
import socket
import stat
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from tests.fake_upstream import lifespan

#: The query SmiSource documents (gpu.py): nvidia-smi answers one CSV line per GPU, in this order.
SMI_FIELDS = "index,power.draw,utilization.gpu,memory.used,clocks.sm,temperature.gpu,clocks_event_reasons.active"
SMI_FIELDS_OLD = SMI_FIELDS.replace("clocks_event_reasons", "clocks_throttle_reasons")  # drivers before 535
SMI_FORMAT = "--format=csv,noheader,nounits"
#: What nvidia-smi says when the driver lost its GPUs (a failing round of ``traced_smi``).
SMI_LOST = "Unable to determine the device handle for GPU0000:01:00.0: Unknown Error"
#: The start of plain ``nvidia-smi``'s output: the driver and the CUDA version it supports.
SMI_BANNER = """Thu Jan 30 10:00:00 2025
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 570.86.15              Driver Version: 570.86.15      CUDA Version: 12.8     |
|-----------------------------------------+------------------------+----------------------+
"""


def nvidia_smi(
    folder: Path,
    rows: list[str],
    *,
    old_driver: bool = False,
    fail: str | None = None,
    fail_once: str | None = None,
    hang: bool = False,
    reject_on: str = "stdout",
    gpus: int | None = None,
) -> Path:
    """An executable ``folder/nvidia-smi`` answering the documented ``--query-gpu`` with ``rows``
    (one CSV line per GPU), as a driver of that age would, and the probe's query of each GPU's name,
    driver, memory and VBIOS with a line for each of ``gpus`` (as many as ``rows`` by default);
    every call's arguments are appended to ``folder/calls.log``. ``old_driver``: the newer reasons field is refused (exit 2, the message on
    ``reject_on``), the older one answered. ``fail``: every call fails with that message (exit 9);
    ``fail_once``: only the first. ``hang``: every call waits on a driver that never answers."""
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "calls.log"
    fields = SMI_FIELDS_OLD if old_driver else SMI_FIELDS
    answer = "".join(row + "\n" for row in rows)
    # The probe's query (hostfacts.GPU_QUERY), its CSV a line per GPU; drivers refusing vbios_version are asked the rest.
    listed = len(rows) if gpus is None else gpus
    names = "".join("NVIDIA H200, 570.86.15, 143771\n" for _ in range(listed))
    facts = "".join("NVIDIA H200, 570.86.15, 143771, 96.00.74.00.0B\n" for _ in range(listed))
    refuse = ">&2" if reject_on == "stderr" else ""
    lines = [
        "#!/bin/sh",
        f'echo "$*" >> {shlex.quote(str(log))}',
    ]
    if hang:
        lines += ["exec sleep 600"]  # exec: the process a timeout kills is the one holding the pipes
    if fail is not None:
        lines += [f"echo {shlex.quote(fail)}", "exit 9"]
    if fail_once is not None:
        failed = shlex.quote(str(folder / "failed-once"))
        lines += [f"if [ ! -e {failed} ]; then touch {failed}; echo {shlex.quote(fail_once)}; exit 9; fi"]
    if old_driver:
        lines += [
            'case "$*" in *clocks_event_reasons.active*)',
            f"  echo 'Field \"clocks_event_reasons.active\" is not a valid field to query.' {refuse}",
            "  echo \"Use 'nvidia-smi --help-query-gpu' for a list of valid fields.\" " + refuse,
            "  exit 2 ;;",
            "esac",
        ]
    lines += [
        'case "$*" in',
        f'  "--query-gpu={fields} {SMI_FORMAT}") printf %s {shlex.quote(answer)} ;;',
        f'  "--query-gpu=name,driver_version,memory.total {SMI_FORMAT}") printf %s {shlex.quote(names)} ;;',
        f'  "--query-gpu=name,driver_version,memory.total,vbios_version {SMI_FORMAT}") printf %s {shlex.quote(facts)} ;;',
        f'  "") printf %s {shlex.quote(SMI_BANNER)} ;;',
        '  *) echo "unknown query: $*" >&2; exit 2 ;;',
        "esac",
    ]
    exe = folder / "nvidia-smi"
    exe.write_text("\n".join(lines) + "\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC | stat.S_IXGRP | stat.S_IXOTH)
    return exe


def traced_smi(folder: Path, trace: list[list[str]], failing: range = range(0)) -> Path:
    """A stand-in ``nvidia-smi`` whose power changes from round to round: the n-th ``--query-gpu``
    sampling round answers ``trace[n % len(trace)]`` (one CSV line per GPU, as ``constant_gpus``);
    the rounds in ``failing`` fail as a driver that lost the GPUs does (exit 9), none read. The
    probe is told of as many GPUs as the longest round has."""
    exe = nvidia_smi(folder, [], gpus=max(map(len, trace)))
    rounds = folder / "rounds"
    rounds.mkdir(exist_ok=True)
    for k, rows in enumerate(trace):
        (rounds / str(k)).write_text("".join(row + "\n" for row in rows))
    failed = [f'  if [ "$n" -ge {failing.start} ] && [ "$n" -lt {failing.stop} ]; then echo "{SMI_LOST}"; exit 9; fi']
    answer = f"  cat {shlex.quote(str(rounds))}/$((n % {len(trace)})); exit 0"
    return _answered_first(exe, _each_round(folder, [*(failed if failing else []), answer]))


def switched_smi(folder: Path, before: list[str], after: list[str], switch: Path) -> Path:
    """A stand-in ``nvidia-smi`` answering the sampling query with ``before`` until the file
    ``switch`` exists (a test's own event makes it: no clock), then with ``after``; the probe is
    told of as many GPUs as the longer has. A GPU's power cell ``[N/A]`` is one that stopped
    answering it, as nvidia-smi prints a reading it can't get."""
    exe = nvidia_smi(folder, before, gpus=max(len(before), len(after)))
    later = folder / "after"
    later.write_text("".join(row + "\n" for row in after))
    query = f"--query-gpu={SMI_FIELDS} {SMI_FORMAT}"
    switched = (
        f'if [ "$*" = {shlex.quote(query)} ] && [ -e {shlex.quote(str(switch))} ]; then cat {shlex.quote(str(later))}; exit 0; fi'
    )
    return _answered_first(exe, [switched])


def hung_listing(folder: Path) -> Path:
    """A stand-in ``nvidia-smi`` whose sampling query answers at once with no GPU row, but whose
    listing of the GPUs (a writer's and the probe's ``--query-gpu=name,...``, its plain banner)
    waits on a driver that never answers."""
    exe = nvidia_smi(folder, [], gpus=2)
    return _answered_first(
        exe, ['case "$*" in --query-gpu=name*|"") exec sleep 600 ;; esac']
    )  # exec: the process a timeout kills


def hung_after(folder: Path, rows: list[str], rounds: int) -> Path:
    """A stand-in ``nvidia-smi`` whose driver hangs mid-run: its first ``rounds`` sampling queries
    answer ``rows``, every later one waits on a driver that never answers; the probe's and a
    writer's listing of the GPUs is answered throughout (the GPUs are known)."""
    exe = nvidia_smi(folder, rows)
    hang = f'  if [ "$n" -ge {rounds} ]; then exec sleep 600; fi'  # exec: the process a timeout kills
    return _answered_first(exe, _each_round(folder, [hang]))


def slow_once(folder: Path, rows: list[str]) -> Path:
    """A stand-in ``nvidia-smi`` whose first sampling query waits on a driver busy past any timeout
    (until killed), every later one answering ``rows`` at once: one slow call in a run."""
    exe = nvidia_smi(folder, rows)
    hang = '  if [ "$n" -eq 0 ]; then exec sleep 600; fi'  # exec: the process a timeout kills
    return _answered_first(exe, _each_round(folder, [hang]))


def holding_output(folder: Path, rows: list[str]) -> Path:
    """A stand-in ``nvidia-smi`` whose sampling query starts a process of its own that inherits its
    output (the pipes its caller reads) and hangs, and then hangs itself: killed, it exits, while
    the other keeps the pipes open. That one's pid is written to ``folder/holder.pid``."""
    exe = nvidia_smi(folder, rows)
    holder = shlex.quote(str(folder / "holder.pid"))
    hang = [f"  sleep 600 & echo $! > {holder}", "  exec sleep 600"]  # exec: the process a timeout kills
    return _answered_first(exe, _each_round(folder, hang))


def _each_round(folder: Path, then: list[str]) -> list[str]:
    """Shell lines answering the sampling query: the round's number, from 0, in ``$n``, then ``then``."""
    counter = shlex.quote(str(folder / "round"))
    query = f"--query-gpu={SMI_FIELDS} {SMI_FORMAT}"
    count = f"  n=$(cat {counter} 2>/dev/null || echo 0); echo $((n + 1)) > {counter}"
    return [f'if [ "$*" = {shlex.quote(query)} ]; then', count, *then, "fi"]


def _answered_first(exe: Path, shell: list[str]) -> Path:
    """The stand-in ``exe`` with ``shell`` run before its own answers (its ``case "$*" in``)."""
    lines = exe.read_text().splitlines()
    at = lines.index('case "$*" in')
    lines[at:at] = shell
    exe.write_text("\n".join(lines) + "\n")
    return exe


def hung_nvml(folder: Path) -> Path:
    """A folder holding a stand-in ``pynvml`` (nvidia-ml-py) for a process of its own (put it first
    on PYTHONPATH): one GPU whose driver never answers a reading, as NVML hangs on a GPU fallen off
    the bus, its caller's thread stuck in the call for good (no timeout, no kill ends it)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pynvml.py").write_text(
        '''"""Stand-in nvidia-ml-py: one GPU whose every reading never returns (tests/telemetry/stand_ins.py)."""
import threading

NVML_CLOCK_SM = 1
NVML_TEMPERATURE_GPU = 0


class NVMLError(Exception):
    def __init__(self, value):
        super().__init__(f"NVML error {value}")
        self.value = value


def nvmlInit():
    pass


def nvmlShutdown():
    pass


def nvmlDeviceGetCount():
    return 1


def nvmlDeviceGetHandleByIndex(index):
    return index


def _hung(*args):
    threading.Event().wait()


nvmlDeviceGetPowerUsage = nvmlDeviceGetTotalEnergyConsumption = nvmlDeviceGetUtilizationRates = _hung
nvmlDeviceGetMemoryInfo = nvmlDeviceGetClockInfo = nvmlDeviceGetTemperature = _hung
nvmlDeviceGetCurrentClocksEventReasons = nvmlDeviceGetCurrentClocksThrottleReasons = _hung
'''
    )
    return folder


def rapl_zone(folder: Path, microjoules: int = 5_000_000) -> Path:
    """A powercap tree holding one CPU package's RAPL zone whose counter reads ``microjoules``, as
    ``/sys/class/powercap`` holds it where it is readable (``infertap.telemetry.host._RAPL``)."""
    zone = folder / "intel-rapl:0"
    zone.mkdir(parents=True, exist_ok=True)
    (zone / "name").write_text("package-0\n")
    (zone / "energy_uj").write_text(f"{microjoules}\n")
    return folder


def smi_calls(exe: Path) -> list[str]:
    log = exe.parent / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def constant_gpus(*watts: float) -> list[str]:
    """nvidia-smi rows for GPUs drawing a constant power each."""
    return [f"{i}, {w:.2f}, 50, 1024, 1980, 60, 0x0000000000000000" for i, w in enumerate(watts)]


def no_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """This process as on a machine without NVML, nvidia-smi or readable RAPL (whatever this one has)."""
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    monkeypatch.setattr("infertap.telemetry.host._RAPL", tmp_path / "no-powercap")
    empty = tmp_path / "empty-bin"
    empty.mkdir(exist_ok=True)
    monkeypatch.setenv("PATH", str(empty))


def gpus_on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, exe: Path) -> None:
    """``exe`` (a stand-in nvidia-smi) the only GPU telemetry there is (found before any real
    nvidia-smi on PATH); no NVML, no RAPL."""
    path = os.environ.get("PATH", "")
    no_gpu(monkeypatch, tmp_path)
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{path}")


# -- NVML -----------------------------------------------------------------------------------------


class NVMLError(Exception):
    """As nvidia-ml-py's: carries an NVML return code."""

    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_FUNCTION_NOT_FOUND = 13
MISSING = object()  # a reading whose function the driver's library lacks


class Hung:
    """A reading whose call hangs in the driver until ``release()``, then answers ``value``:
    ``entered`` is set once a call is in it."""

    def __init__(self, value: Any) -> None:
        self.value = value
        self.entered = threading.Event()
        self._released = threading.Event()

    def wait(self) -> Any:
        self.entered.set()
        self._released.wait()
        return self.value

    def release(self) -> None:
        self._released.set()


def fake_nvml(devices: list[dict[str, Any]], *, init_error: int | None = None, init_hung: Hung | None = None) -> ModuleType:
    """A module shaped like ``pynvml``: ``devices[i]`` maps a reading to its raw NVML value (mW,
    mJ, bytes, ...), to an NVML error code it raises, or to a ``Hung`` call. Readings: power, energy, utilization,
    memory, sm_clock, temperature, event_reasons, throttle_reasons (``MISSING``: the driver's library
    lacks the function, and nvidia-ml-py raises FUNCTION_NOT_FOUND). ``init_hung``: ``nvmlInit``
    hangs in the driver until it is released. ``module.calls`` counts the calls per function."""
    nvml = ModuleType("pynvml")
    calls: Counter[str] = Counter()
    nvml.calls = calls  # type: ignore[attr-defined]
    nvml.NVMLError = NVMLError  # type: ignore[attr-defined]
    nvml.NVML_CLOCK_SM = 1  # type: ignore[attr-defined]
    nvml.NVML_TEMPERATURE_GPU = 0  # type: ignore[attr-defined]
    state = {"init": False}

    def init() -> None:
        calls["nvmlInit"] += 1
        if init_hung is not None:
            init_hung.wait()
        if init_error is not None:
            raise NVMLError(init_error)
        state["init"] = True

    def shutdown() -> None:
        calls["nvmlShutdown"] += 1
        state["init"] = False

    def count() -> int:
        calls["nvmlDeviceGetCount"] += 1
        return len(devices)

    def handle(i: int) -> int:
        calls["nvmlDeviceGetHandleByIndex"] += 1
        return i

    def reader(function: str, reading: str, wrap: Any = None) -> Any:
        def read(h: int, *args: Any) -> Any:
            calls[function] += 1
            if not state["init"]:
                raise NVMLError(1)  # NVML_ERROR_UNINITIALIZED
            value = devices[h].get(reading, MISSING)
            if isinstance(value, Hung):
                value = value.wait()
            if value is MISSING:
                raise NVMLError(NVML_ERROR_FUNCTION_NOT_FOUND)
            if isinstance(value, NVMLError):
                raise value
            return wrap(value) if wrap else value

        return read

    nvml.nvmlInit = init  # type: ignore[attr-defined]
    nvml.nvmlShutdown = shutdown  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetCount = count  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetHandleByIndex = handle  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetPowerUsage = reader("nvmlDeviceGetPowerUsage", "power")  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetTotalEnergyConsumption = reader("nvmlDeviceGetTotalEnergyConsumption", "energy")  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetUtilizationRates = reader(  # type: ignore[attr-defined]
        "nvmlDeviceGetUtilizationRates", "utilization", lambda v: SimpleNamespace(gpu=v, memory=0)
    )
    nvml.nvmlDeviceGetMemoryInfo = reader(  # type: ignore[attr-defined]
        "nvmlDeviceGetMemoryInfo", "memory", lambda v: SimpleNamespace(used=v, total=v * 2, free=v)
    )
    nvml.nvmlDeviceGetClockInfo = reader("nvmlDeviceGetClockInfo", "sm_clock")  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetTemperature = reader("nvmlDeviceGetTemperature", "temperature")  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetCurrentClocksEventReasons = reader(  # type: ignore[attr-defined]
        "nvmlDeviceGetCurrentClocksEventReasons", "event_reasons"
    )
    nvml.nvmlDeviceGetCurrentClocksThrottleReasons = reader(  # type: ignore[attr-defined]
        "nvmlDeviceGetCurrentClocksThrottleReasons", "throttle_reasons"
    )
    return nvml


def nvml_device(**overrides: Any) -> dict[str, Any]:
    """One GPU's raw NVML readings: 150 W (in mW), an energy counter at 1 MJ (in mJ), ..."""
    return {
        "power": 150_000,
        "energy": 1_000_000_000,
        "utilization": 87,
        "memory": 40 * 1024**3,
        "sm_clock": 1980,
        "temperature": 65,
        "event_reasons": 0x4,
        "throttle_reasons": 0x4,
        **overrides,
    }


# -- Prometheus endpoints --------------------------------------------------------------------------


async def _answer(send: Any, status: int, body: bytes, content_type: bytes = b"text/plain; version=0.0.4") -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Exposition:
    """A Prometheus endpoint serving whatever ``status`` and ``text`` are now (tests change them);
    ``asked`` counts requests per path."""

    def __init__(self, text: str = "", status: int = 200) -> None:
        self.text = text
        self.status = status
        self.asked: Counter[str] = Counter()
        self.headers: list[dict[str, str]] = []  # each request's headers, names lowercased

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await lifespan(receive, send)
        self.asked[scope["path"]] += 1
        self.headers.append({k.decode().lower(): v.decode() for k, v in scope["headers"]})
        await _answer(send, self.status, self.text.encode())


class DcgmExporter:
    """A DCGM exporter (dcgm-exporter's default counters) for one GPU, label gpu="0": power
    ``watts`` and, with ``energy_counter``, the energy counter since boot in mJ, rising at
    ``watts`` (the draw it reports) from a large boot-time value."""

    def __init__(self, watts: float, *, energy_counter: bool = True, hostname: str | None = None) -> None:
        self.watts = watts
        self.energy_counter = energy_counter
        self.hostname = hostname or socket.gethostname()  # the machine whose GPUs it reports: this one by default
        self.t0 = time.time()
        self.asked = 0

    def text(self) -> str:
        labels = (
            'gpu="0",UUID="GPU-5a3c1e2b-0000-0000-0000-000000000000",device="nvidia0",modelName="NVIDIA H200",'
            f'Hostname="{self.hostname}"'
        )
        lines = [
            "# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).",
            "# TYPE DCGM_FI_DEV_SM_CLOCK gauge",
            f"DCGM_FI_DEV_SM_CLOCK{{{labels}}} 1980",
            "# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).",
            "# TYPE DCGM_FI_DEV_POWER_USAGE gauge",
            f"DCGM_FI_DEV_POWER_USAGE{{{labels}}} {self.watts:.3f}",
        ]
        if self.energy_counter:
            millijoules = 5_000_000_000 + (time.time() - self.t0) * self.watts * 1000
            lines += [
                "# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).",
                "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter",
                f"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{labels}}} {millijoules:.0f}",
            ]
        return "\n".join(lines) + "\n"

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await lifespan(receive, send)
        self.asked += 1
        if scope["path"] != "/metrics":
            return await _answer(send, 404, b"404 page not found\n")
        await _answer(send, 200, self.text().encode())


class WithoutMetrics:
    """An engine app that, like most engines, has no ``/metrics`` (404): the rest goes to ``app``."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.metrics_asked = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/metrics":
            self.metrics_asked += 1
            return await _answer(send, 404, b'{"detail": "Not Found"}', b"application/json")
        await self.app(scope, receive, send)


class VllmGauges:
    """An engine app with vLLM's scheduler gauges on ``/metrics`` (vLLM itself needs a GPU): the
    requests in flight beyond ``slots`` are ``vllm:num_requests_waiting``, those within them fill
    ``vllm:kv_cache_usage_perc``. The rest goes to ``app`` (a tests.slot_engine.SlotEngine)."""

    def __init__(self, app: Any, slots: int) -> None:
        self.app = app
        self.slots = slots
        self.in_flight = 0

    def text(self) -> str:
        waiting = max(0, self.in_flight - self.slots)
        running = self.in_flight - waiting
        labels = 'engine="0",model_name="m"'
        return (
            "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
            "# TYPE vllm:num_requests_running gauge\n"
            f"vllm:num_requests_running{{{labels}}} {running:.1f}\n"
            "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"
            "# TYPE vllm:num_requests_waiting gauge\n"
            f"vllm:num_requests_waiting{{{labels}}} {waiting:.1f}\n"
            "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n"
            "# TYPE vllm:kv_cache_usage_perc gauge\n"
            f"vllm:kv_cache_usage_perc{{{labels}}} {running / self.slots:.4f}\n"
        )

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/metrics":
            return await _answer(send, 200, self.text().encode())
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1
