"""How many threads an engine computes with and its batch sizes, read from the command line (and
environment) of the process serving it, where it runs on this machine: llama-server's /props and
llama-cpp-python's API say neither, and the same GGUF ran 5x slower per token on llama-cpp-python
(half the cores by default) than on llama-server, which no fact of the snapshot explained.

A flag given wins over its environment variable (llama.cpp's arg.cpp, argparse then pydantic's
settings in llama-cpp-python); neither given, the engine's own default where it is a number known
here (llama-server's thread count is its count of this host's math cores: unknown). vLLM's, its
batch sizes, parallelism, dtypes and CPU threads, are read in ``vllm_launch``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from infertap.capture.hostfacts import engine_is_local, url_parts

from .vllm_launch import VLLM_FACTS, is_vllm, vllm_facts

__all__ = ["LAUNCH_FACTS", "LLAMA_FACTS", "launch_facts", "read_launch_facts"]

LLAMA_FACTS = ("threads", "threads_batch", "batch_size", "ubatch_size")
#: The facts, in the order compare shows them (vLLM's --max-num-seqs is the common parallel_slots).
LAUNCH_FACTS = (*LLAMA_FACTS, *VLLM_FACTS)

# Per engine kind, per fact: its flags, its environment variable.
_FLAGS: dict[str, dict[str, tuple[tuple[str, ...], str]]] = {
    "llama-server": {
        "threads": (("-t", "--threads"), "LLAMA_ARG_THREADS"),
        "threads_batch": (("-tb", "--threads-batch"), "LLAMA_ARG_THREADS_BATCH"),
        "batch_size": (("-b", "--batch-size"), "LLAMA_ARG_BATCH"),
        "ubatch_size": (("-ub", "--ubatch-size"), "LLAMA_ARG_UBATCH"),
    },
    "llama-cpp-python": {  # llama_cpp/server/settings.py's ModelSettings
        "threads": (("--n_threads",), "N_THREADS"),
        "threads_batch": (("--n_threads_batch",), "N_THREADS_BATCH"),
        "batch_size": (("--n_batch",), "N_BATCH"),
        "ubatch_size": (("--n_ubatch",), "N_UBATCH"),
    },
}


def _defaults(kind: str) -> dict[str, tuple[int | None, str]]:
    """Each fact's value when neither its flag nor its variable is given, and where that comes from."""
    if kind == "llama-server":
        cores = "llama-server's default: the math cores it counts on this host (-1), not known here"
        return {
            "threads": (None, cores),
            "threads_batch": (None, f"{cores}; the same as its threads"),
            "batch_size": (2048, "llama-server's default (common.h n_batch)"),
            "ubatch_size": (512, "llama-server's default (common.h n_ubatch)"),
        }
    cpus = os.cpu_count() or 1
    return {
        "threads": (max(cpus // 2, 1), f"llama-cpp-python's default: half of this host's {cpus} CPUs"),
        "threads_batch": (cpus, f"llama-cpp-python's default: this host's {cpus} CPUs"),
        "batch_size": (512, "llama-cpp-python's default (settings.py n_batch)"),
        "ubatch_size": (512, "llama-cpp-python's default (settings.py n_ubatch)"),
    }


def _flag(argv: Sequence[str], names: tuple[str, ...]) -> str | None:
    """The last value given to any of ``names`` (``-t 4`` or ``--threads=4``), as argument parsers take it."""
    found = None
    for k, arg in enumerate(argv):
        if arg in names and k + 1 < len(argv):
            found = argv[k + 1]
        elif "=" in arg and arg.split("=", 1)[0] in names:
            found = arg.split("=", 1)[1]
    return found


def launch_facts(kind: str, argv: Sequence[str], environ: dict[str, str], pid: int) -> dict[str, dict[str, object]]:
    """The facts of the engine process ``pid`` of ``kind``, started as ``argv`` under ``environ``."""
    if kind == "vllm":
        return vllm_facts(argv, environ, pid)
    facts: dict[str, dict[str, object]] = {}
    if kind == "llama-cpp-python":  # a config file replaces every flag and default (its __main__.py): not read here
        config = environ.get("CONFIG_FILE") or _flag(argv, ("--config_file",))
        if config:
            return {
                name: {"value": None, "source": f"set by the config file {config} of process {pid}, not read here"}
                for name in _FLAGS[kind]
            }
    defaults = _defaults(kind)
    for name, (flags, variable) in _FLAGS[kind].items():
        given, source = _flag(argv, flags), f"{flags[-1]} on the command line of process {pid}"
        if given is None and variable in environ:
            given, source = environ[variable], f"{variable} in the environment of process {pid}"
        if given is None:
            value, why = defaults[name]
            facts[name] = {"value": value, "source": f"{why} (no {flags[-1]} nor {variable} for process {pid})"}
            continue
        try:
            number = int(given)
        except ValueError:
            facts[name] = {"value": None, "source": f"{source} is {given!r}, not a number"}
            continue
        if kind == "llama-cpp-python" and name.startswith("threads") and number == -1:
            number, source = os.cpu_count() or 1, f"{source}: -1, this host's CPUs"
        facts[name] = {"value": number if number >= 0 else None, "source": source if number >= 0 else f"{source}: {number}"}
    return facts


def read_launch_facts(url: str, kind: str) -> dict[str, dict[str, object]]:
    """The engine's launch facts where it listens on this machine, each unknown with why where not."""
    names = ("parallel_slots", *VLLM_FACTS) if kind == "vllm" else LLAMA_FACTS if kind in _FLAGS else ()
    if not names:
        return {}
    import psutil

    from .runtime_digest import _listener

    def unknown(why: str) -> dict[str, dict[str, object]]:
        return {name: {"value": None, "source": why} for name in names}

    if not engine_is_local(url):
        return unknown("the engine is not on this machine: its command line can't be read from here")
    parts = url_parts(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        pid = _listener(port)
        if not pid:
            return unknown(f"no process of this user listens on port {port}: its command line can't be read")
        proc = psutil.Process(pid)
        argv = proc.cmdline()
        parent = proc.parent()
        # vLLM's engine core, forked after its API server bound the port, holds the socket too under
        # a title of its own (VLLM::EngineCore): the server that started it is its parent.
        if not _is_engine(kind, argv) and parent is not None and _is_engine(kind, parent.cmdline()):
            proc, pid, argv = parent, parent.pid, parent.cmdline()
        try:
            environ = proc.environ()
        except (psutil.Error, OSError):
            environ = {}
    except (psutil.Error, OSError) as exc:
        return unknown(f"cannot read the command line of the process on port {port} ({exc})")
    if not _is_engine(kind, argv):  # a forwarder in front of it (ssh -L, socat): its flags are not the engine's
        return unknown(f"process {pid} on port {port} is not a {kind} ({os.path.basename(argv[0]) if argv else '?'})")
    return launch_facts(kind, argv, environ, pid)


def _is_engine(kind: str, argv: Sequence[str]) -> bool:
    if kind == "vllm":
        return is_vllm(argv)
    if kind == "llama-server":
        return bool(argv) and "llama-server" in os.path.basename(argv[0])
    return any(arg.startswith("llama_cpp.server") or "llama_cpp/server" in arg for arg in argv)
