"""Which files of the process behind an engine's port are the engine's runtime: one rule for every kind.

An engine's code is its program and the shared libraries of its own it loads. llama.cpp's
``llama-server`` is a small program whose server lives in ``libllama-server-impl.so``, beside
``libllama`` and ``libggml*``; llama-cpp-python runs in Python, its code in the ``libllama`` and
``libggml*`` its package ships. So the runtime is the program (a native engine's; a Python
interpreter says nothing of the engine) and every library of the engine's mapped into the
process: a changed library is a changed runtime.

The process on the port may not be the engine at all: a port forwarder (``ssh -L``,
``kubectl port-forward``, socat) listens there as well as an engine does. It is taken for the
engine only when it runs the engine's program (its executable's name, or the command's program
and subcommand; the rest of a command line is no evidence: ``kubectl port-forward svc/llama-server``
names the engine too) or, for an engine that runs in Python, maps its package's libraries.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["RUNTIMES", "Found", "Runtime", "runtime_files"]


@dataclass(frozen=True, slots=True)
class Runtime:
    """Where an engine kind's code is."""

    #: A native engine's commands: the program's name, then the subcommand that serves, if any.
    programs: tuple[tuple[str, ...], ...] = ()
    #: An engine that runs in Python: the package whose folder holds its libraries.
    package: str | None = None
    #: How the names of its shared libraries start; the first names its main library.
    libraries: tuple[str, ...] = ()


_LLAMA_CPP = ("libllama", "libggml", "libmtmd")  # libllama-server-impl, libllama-common, libllama, libggml-cpu...

RUNTIMES = {
    "llama-server": Runtime(programs=(("llama-server",), ("llama", "serve")), libraries=_LLAMA_CPP),
    "ollama": Runtime(programs=(("ollama",),), libraries=("libggml",)),
    "llama-cpp-python": Runtime(package="llama_cpp", libraries=_LLAMA_CPP),
    "vllm": Runtime(package="vllm", libraries=("_C",)),
    "sglang": Runtime(package="sgl_kernel", libraries=("common_ops",)),
}

_FORWARDER = "a port forwarder (ssh -L, kubectl port-forward, socat) or another program in front of the engine"


@dataclass(frozen=True, slots=True)
class Found:
    files: tuple[str, ...]  # the program, or the main library, first
    what: str  # what the first file is: "binary", "python package llama_cpp's native library"


def _is_library(path: str) -> bool:
    name = Path(path).name
    return ".so" in name or name.endswith((".dylib", ".dll"))


def _libraries(runtime: Runtime, mapped: Iterable[str]) -> tuple[str, ...]:
    """The engine's libraries among the ``mapped`` files, the main one first, then by kind and name:
    a native engine's by their names; a Python engine's every library in its package's folder (vLLM
    ships ``_C`` and, by build, ``_moe_C``, ``cumem_allocator``, flash attention's...), once it maps
    its main one."""
    found = set()
    for path in mapped:
        name = Path(path).name
        if runtime.package is None:
            ours = name.startswith(runtime.libraries)
        else:
            ours = f"/{runtime.package}/" in path
        if ours and _is_library(path):
            found.add(path)
    main = runtime.libraries[:1]
    if runtime.package is not None and not any(Path(p).name.startswith(main) for p in found):
        return ()  # the package's other libraries alone: not the engine's process
    prefixes = runtime.libraries
    rank = {p: next((i for i, prefix in enumerate(prefixes) if Path(p).name.startswith(prefix)), len(prefixes)) for p in found}
    return tuple(sorted(found, key=lambda p: (rank[p], Path(p).name, p)))


def _runs(runtime: Runtime, exe: str, argv: Sequence[str]) -> bool:
    names = {Path(exe).name.removesuffix(".exe")}
    if argv:
        names.add(Path(argv[0]).name.removesuffix(".exe"))
    return any(command[0] in names and tuple(argv[1 : len(command)]) == command[1:] for command in runtime.programs)


def runtime_files(kind: str | None, exe: str, argv: Sequence[str], mapped: Iterable[str]) -> Found | str:
    """The runtime's files of a process running ``exe`` as ``argv`` with the files ``mapped``, taken
    for an engine of ``kind``; or why none of them is known to be the engine's."""
    runtime = RUNTIMES.get(kind or "")
    if "python" in Path(exe).name:
        if runtime is None or runtime.package is None:
            return f"it runs Python ({exe}) and infertap knows no native library of {kind!r} to hash"
        libraries = _libraries(runtime, mapped)
        if not libraries:
            return (
                f"it runs Python ({exe}) and maps no {runtime.libraries[0]}*.so of {runtime.package}: not {kind}, or {_FORWARDER}"
            )
        return Found(libraries, f"python package {runtime.package}'s native library")
    if runtime is None:
        return f"it runs {exe}, and infertap knows no program of {kind!r} to tell the engine from {_FORWARDER}"
    if not runtime.programs:
        return f"it runs {exe}, where {kind} runs in Python: {_FORWARDER}"
    if not _runs(runtime, exe, argv):
        programs = " or ".join(repr(" ".join(c)) for c in runtime.programs)
        return f"it runs {exe}, not {kind}'s program ({programs}): {_FORWARDER}"
    return Found((exe, *_libraries(runtime, mapped)), "binary")
