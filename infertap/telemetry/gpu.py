"""GPUs, per device: power, the energy counter where the GPU keeps one, utilization, memory used, SM
clock, temperature and the reasons clocks are held down. Through NVML (nvidia-ml-py) when a driver
answers, else amdsmi on AMD GPUs (power, energy, activity, VRAM), else ``nvidia-smi --query-gpu`` (a
process per sample: coarser, and no energy counter).

Names: ``gpu_power_watts``, ``gpu_energy_joules`` (a counter since the driver loaded),
``gpu_utilization_percent``, ``gpu_memory_used_bytes``, ``gpu_sm_clock_mhz``,
``gpu_temperature_celsius``, ``gpu_clock_event_reasons`` (NVML's bitmask: thermal, power cap, ...);
label ``gpu`` (the index).

A reading the device refuses outright (NVML's NOT_SUPPORTED or FUNCTION_NOT_FOUND, amdsmi's
NOT_SUPPORTED, a value it reports as N/A) is not asked again; any other error (a timeout, a driver
busy for a moment) loses that reading for one round only: the round's other samples are kept, the
reason is recorded (``PartialRound``), and the reading is asked again next round, so that one
hiccup never silences a GPU's power for the rest of a run. nvidia-smi reads every GPU in one
process, so a run of it that fails loses that whole round, and only that round; one that times out
is asked again after a rest that grows while it keeps timing out (sampler.py), and not while a run
killed for it is still stuck in the driver: each retry would leave one more process stuck there.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from .samples import PartialRound, Sample, SourceError

#: nvidia-smi fields, in order, with the sample each becomes and its scale.
_SMI_FIELDS = (
    ("power.draw", "gpu_power_watts", 1.0),
    ("utilization.gpu", "gpu_utilization_percent", 1.0),
    ("memory.used", "gpu_memory_used_bytes", 1024.0 * 1024.0),  # MiB
    ("clocks.sm", "gpu_sm_clock_mhz", 1.0),
    ("temperature.gpu", "gpu_temperature_celsius", 1.0),
    ("clocks_event_reasons.active", "gpu_clock_event_reasons", 1.0),  # hex bitmask; older drivers: clocks_throttle_reasons
)
#: NVML's return codes for a reading this device or its driver's library lacks (NVML_ERROR_NOT_SUPPORTED,
#: NVML_ERROR_FUNCTION_NOT_FOUND): the only errors that stop a reading for good.
_NVML_REFUSED = frozenset({3, 13})
#: amdsmi's statuses for the same (AMDSMI_STATUS_NOT_SUPPORTED = 2, _NOT_YET_IMPLEMENTED = 3), by code or name.
_AMD_REFUSED = frozenset({2, 3})
_AMD_REFUSED_NAMES = ("NOT_SUPPORTED", "NOT_YET_IMPLEMENTED")
_AGAIN = "this round lost, asked again next round"
#: The longest a run of nvidia-smi that timed out is waited for once killed.
KILL_WAIT_S = 1.0


def gpu_source() -> NvmlSource | AmdSource | SmiSource:
    """NVML when it initialises, else amdsmi (AMD) when it does, else nvidia-smi when it is on PATH;
    a SourceError saying why not."""
    reasons = []
    try:
        import pynvml  # nvidia-ml-py

        return NvmlSource(pynvml)
    except (ImportError, SourceError) as exc:
        reasons.append(f"NVML unavailable ({exc})")
    try:
        import amdsmi  # ROCm's bindings; not on PyPI, present where ROCm is

        return AmdSource(amdsmi)
    except (ImportError, SourceError) as exc:
        reasons.append(f"amdsmi unavailable ({exc})")
    exe = shutil.which("nvidia-smi")
    if exe is None:
        raise SourceError(f"no GPU telemetry: {', '.join(reasons)}, and no nvidia-smi on PATH")
    return SmiSource(exe)


class NvmlSource:
    name = "gpu"

    def __init__(self, nvml: ModuleType) -> None:
        self.nvml = nvml
        try:
            nvml.nvmlInit()
            self.handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        except nvml.NVMLError as exc:
            raise SourceError(f"NVML: {exc}") from exc
        self.unsupported: set[tuple[int, str]] = set()  # (device, reading) refused once: not asked again

    def sample(self) -> list[Sample]:
        nvml = self.nvml
        reads: list[tuple[str, Callable[[Any], float]]] = [
            ("gpu_power_watts", lambda h: nvml.nvmlDeviceGetPowerUsage(h) / 1000.0),  # mW
            ("gpu_energy_joules", lambda h: nvml.nvmlDeviceGetTotalEnergyConsumption(h) / 1000.0),  # mJ
            ("gpu_utilization_percent", lambda h: nvml.nvmlDeviceGetUtilizationRates(h).gpu),
            ("gpu_memory_used_bytes", lambda h: nvml.nvmlDeviceGetMemoryInfo(h).used),
            ("gpu_sm_clock_mhz", lambda h: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM)),
            ("gpu_temperature_celsius", lambda h: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU)),
            ("gpu_clock_event_reasons", self._reasons),
        ]
        return _round(self.handles, reads, self.unsupported, nvml.NVMLError, _nvml_refused)

    def _reasons(self, handle: Any) -> float:
        """Clock event reasons; a driver before 535 knows them only by their older name."""
        nvml = self.nvml
        newer = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        if newer is not None:
            try:
                return float(newer(handle))
            except nvml.NVMLError as exc:
                if not _nvml_refused(exc):
                    raise
        return float(nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle))

    def close(self) -> None:
        try:
            self.nvml.nvmlShutdown()
        except self.nvml.NVMLError:
            pass


class SmiSource:
    name = "gpu"

    def __init__(self, exe: str, timeout: float = 5.0) -> None:
        self.exe = exe
        self.timeout = timeout
        self.fields = list(_SMI_FIELDS)
        self.stuck: list[subprocess.Popen[str]] = []  # runs killed after their timeout that had not exited yet

    def sample(self) -> list[Sample]:
        self._reap()
        if self.stuck:
            # Another run would stick behind it in the same driver call: one more process each retry.
            pids = ", ".join(str(proc.pid) for proc in self.stuck)
            raise SourceError(
                f"nvidia-smi not run again: its last run (pid {pids}) is still stuck in the driver since it was killed; "
                "run again once it exits"
            )
        query = ",".join(["index", *(field for field, _, _ in self.fields)])
        try:
            proc = subprocess.Popen(
                [self.exe, f"--query-gpu={query}", "--format=csv,noheader,nounits"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        except (OSError, subprocess.SubprocessError) as exc:  # it can't be run at all: the sampler retries later
            raise SourceError(f"nvidia-smi: {exc}") from exc
        try:
            stdout, stderr = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired as exc:
            # Not a passing loss: asked again every round, a hung driver would hold a new process (and
            # the GPU's sampling thread) for the timeout each time. The sampler backs off instead,
            # from its interval: one slow call costs a round or two, a hung driver ever fewer calls.
            raise SourceError(f"nvidia-smi did not answer within {self.timeout:g} s{self._end(proc)}") from exc
        done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
        if done.returncode != 0:
            if self.fields[-1][0] == "clocks_event_reasons.active" and "clocks_event_reasons" in done.stdout + done.stderr:
                self.fields[-1] = ("clocks_throttle_reasons.active", "gpu_clock_event_reasons", 1.0)  # a driver before 535
                return self.sample()
            said = (done.stdout + done.stderr).strip()[:200]
            raise PartialRound(f"nvidia-smi exited {done.returncode}: {said}; {_AGAIN}", [])
        return list(self._parse(done.stdout))

    def _end(self, proc: subprocess.Popen[str]) -> str:
        """Kill a run of nvidia-smi that did not answer, waiting ``KILL_WAIT_S`` at most for it to
        exit: one stuck in the driver (uninterruptible) does not until its call returns, and
        ``subprocess.run``'s unbounded wait held the GPU's thread for as long, past its timeout.
        Such a run is kept in ``stuck``, reaped once it exits; what to add to the reason."""
        proc.kill()
        for pipe in (proc.stdout, proc.stderr):  # not read again; a process of its own still holding them gets EPIPE
            if pipe is not None:
                pipe.close()
        try:
            proc.wait(KILL_WAIT_S)
        except subprocess.TimeoutExpired:
            self.stuck.append(proc)
            return f", nor exited within {KILL_WAIT_S:g} s of being killed (stuck in the driver): left to exit on its own"
        return ""

    def _reap(self) -> None:
        """Reap the runs left stuck that have exited since, so that none stays a zombie."""
        self.stuck = [proc for proc in self.stuck if proc.poll() is None]

    def _parse(self, text: str) -> list[Sample]:
        """One line per GPU: its index and a cell per field. A line that is not that (a cell neither a
        number nor nvidia-smi's bracketed "[N/A]", a line cut short, a message) is dropped whole, its
        columns being untrustworthy, and the round ends in ``PartialRound`` naming it with the rest kept."""
        samples, bad = [], []
        for line in text.strip().splitlines():
            index, *values = (part.strip() for part in line.split(","))
            cells = [_number(value) for value in values]
            if not index.isdigit() or len(values) != len(self.fields):
                bad.append(f"{line[:80]!r} ({len(values) + 1} of {len(self.fields) + 1} cells)")
            elif unread := [v for v, n in zip(values, cells, strict=True) if n is None and not v.startswith("[")]:
                bad.append(f"{line[:80]!r} ({', '.join(map(repr, unread))} is no number)")
            else:
                samples += [
                    Sample(name, {"gpu": index}, number * scale)
                    for (_, name, scale), number in zip(self.fields, cells, strict=True)
                    if number is not None
                ]
        if bad:
            raise PartialRound(f"nvidia-smi answered what is not its --query-gpu CSV: {'; '.join(bad)}; {_AGAIN}", samples)
        return samples

    def close(self) -> None:
        self._reap()  # one still stuck is reaped by subprocess when this process next starts one


def _number(text: str) -> float | None:
    """A CSV cell as a number: decimal, or hex (the reasons bitmask); None for [N/A], [Not Supported]
    or anything else that is no number (the caller tells those apart)."""
    try:
        return float(int(text, 16)) if text.lower().startswith("0x") else float(text)
    except ValueError:
        return None


class AmdSource:
    """AMD GPUs through amdsmi (ROCm's Python bindings), under the same sample names as NVIDIA's."""

    name = "gpu"

    def __init__(self, amdsmi: ModuleType) -> None:
        self.amdsmi = amdsmi
        try:
            amdsmi.amdsmi_init()
            self.handles = list(amdsmi.amdsmi_get_processor_handles())
        except amdsmi.AmdSmiException as exc:
            raise SourceError(f"amdsmi: {exc}") from exc
        if not self.handles:
            raise SourceError("amdsmi: no GPU")
        self.unsupported: set[tuple[int, str]] = set()

    def sample(self) -> list[Sample]:
        a = self.amdsmi
        reads: list[tuple[str, Callable[[Any], float | None]]] = [
            ("gpu_power_watts", lambda h: _first(a.amdsmi_get_power_info(h), "current_socket_power", "average_socket_power")),
            ("gpu_energy_joules", self._energy),
            ("gpu_utilization_percent", lambda h: _first(a.amdsmi_get_gpu_activity(h), "gfx_activity")),
            ("gpu_memory_used_bytes", lambda h: _scaled(_first(a.amdsmi_get_gpu_vram_usage(h), "vram_used"), 1024.0 * 1024.0)),
        ]
        return _round(self.handles, reads, self.unsupported, a.AmdSmiException, _amd_refused)

    def _energy(self, handle: Any) -> float | None:
        """The energy accumulator times its resolution (µJ); its key was renamed across ROCm releases."""
        count = self.amdsmi.amdsmi_get_energy_count(handle)
        ticks = _first(count, "energy_accumulator", "power")
        resolution = _first(count, "counter_resolution")
        return None if ticks is None or resolution is None else ticks * resolution / 1e6

    def close(self) -> None:
        try:
            self.amdsmi.amdsmi_shut_down()
        except self.amdsmi.AmdSmiException:
            pass


def _round(
    handles: Sequence[Any],
    reads: Sequence[tuple[str, Callable[[Any], float | None]]],
    unsupported: set[tuple[int, str]],
    error: type[BaseException],
    refused: Callable[[BaseException], bool],
) -> list[Sample]:
    """One round of every reading of every GPU. A reading the device refuses (``refused``, or a
    value of None: N/A) joins ``unsupported`` and is not asked again; another ``error`` skips it
    this round only, and the round ends in ``PartialRound`` with the samples that were read."""
    samples, failed = [], []
    for index, handle in enumerate(handles):
        for name, read in reads:
            if (index, name) in unsupported:
                continue
            try:
                value = read(handle)
            except error as exc:
                if refused(exc):
                    unsupported.add((index, name))
                else:
                    failed.append(f"gpu {index} {name}: {exc}")
                continue
            if value is None:
                unsupported.add((index, name))
            else:
                samples.append(Sample(name, {"gpu": str(index)}, float(value)))
    if failed:
        raise PartialRound(f"a reading failed this round (asked again next round): {'; '.join(failed)}", samples)
    return samples


def _nvml_refused(exc: BaseException) -> bool:
    return getattr(exc, "value", None) in _NVML_REFUSED


def _amd_refused(exc: BaseException) -> bool:
    return getattr(exc, "err_code", None) in _AMD_REFUSED or any(name in str(exc) for name in _AMD_REFUSED_NAMES)


def _first(values: Any, *keys: str) -> float | None:
    """The first of ``keys`` holding a number ("N/A" and missing keys skipped)."""
    if not isinstance(values, dict):
        return None
    for key in keys:
        value = values.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


def _scaled(value: float | None, scale: float) -> float | None:
    return None if value is None else value * scale
