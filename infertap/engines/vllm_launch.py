"""vLLM's launch facts: what sets its speed that its API doesn't say, read from the command line and
environment of the process serving it (`vllm serve MODEL ...`, `python -m
vllm.entrypoints.openai.api_server --model ...`). /v1/models says max_model_len and /metrics the KV
cache's size, but neither how many sequences it batches (--max-num-seqs) nor the rest below.

Options are read as vLLM 0.32's FlexibleArgumentParser reads them: `--flag v` and `--flag=v`, an
underscore in a long option's name a dash, the last one given wins, `-tp`/`-pp` for their long
names. A flag absent is vLLM's default only where that is a fixed value of its source
(engine/arg_utils.py, config/, envs.py); the batch sizes' defaults depend on the device, the usage
context and --performance-mode (`EngineArgs.get_batch_defaults`), the dtypes' "auto" on the
checkpoint and the platform: unknown, with why. A `--config` YAML file may set any flag the command
line doesn't (the command line wins over it): it is not read here, so those are unknown too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["VLLM_FACTS", "is_vllm", "vllm_facts"]

#: The facts, in the order compare shows them; ``parallel_slots`` (--max-num-seqs) is a common fact.
VLLM_FACTS = (
    "max_num_batched_tokens",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "served_dtype",
    "kv_cache_dtype",
    "prefix_caching",
    "cpu_threads_bind",
    "cpu_kvcache_space_gib",
)

_SHORT = {"-tp": "--tensor-parallel-size", "-pp": "--pipeline-parallel-size"}
# config/model.py _STR_DTYPE_TO_TORCH_DTYPE: "half" and "float" are float16's and float32's other names.
_DTYPES = {"half": "float16", "float": "float32"}
_BATCHES = (
    "vLLM's default depends on the device, the usage context and --performance-mode "
    "(engine/arg_utils.py get_batch_defaults), capped by max_model_len: not known here"
)


def is_vllm(argv: Sequence[str]) -> bool:
    """Whether ``argv`` runs vLLM's OpenAI server: `vllm serve` (its script, maybe under a python) or
    `python -m vllm.entrypoints...`."""
    return any(
        arg.startswith("vllm.entrypoints") or (arg.rsplit("/", 1)[-1] == "vllm" and argv[k + 1 : k + 2] == ["serve"])
        for k, arg in enumerate(argv)
    )


def _normalized(argv: Sequence[str]) -> list[str]:
    """``argv`` with each option named as vLLM's parser names it: dashes for underscores in a long
    option's name (up to its first "."), short aliases by their long names."""
    out = []
    for arg in argv:
        key, eq, value = arg.partition("=")
        if key.startswith("--"):
            head, dot, tail = key[2:].partition(".")
            key = "--" + head.replace("_", "-") + dot + tail
        key = _SHORT.get(key, key)
        out.append(key + eq + value)
    return out


def _last(args: Sequence[str], name: str) -> str | None:
    """The last value given to ``name`` (``--name v`` or ``--name=v``), as argparse takes it."""
    found = None
    for k, arg in enumerate(args):
        if arg == name and k + 1 < len(args):
            found = args[k + 1]
        elif arg.startswith(name + "="):
            found = arg[len(name) + 1 :]
    return found


def _number(given: str, human: bool = False) -> int | None:
    """``given`` as vLLM reads an int; ``human``: with its suffixes too (8k is 8000, 8K 8192)."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", given.strip()) if human else None
    if match:
        number, suffix = match.groups()
        if suffix.islower():
            return int(float(number) * 1000 ** ("kmgt".index(suffix) + 1))
        return int(number) * 1024 ** ("KMGT".index(suffix) + 1) if number.isdigit() else None  # 1.5K: an error
    try:
        return int(given)
    except ValueError:
        return None


def vllm_facts(argv: Sequence[str], environ: dict[str, str], pid: int) -> dict[str, dict[str, object]]:
    """The launch facts of the vLLM process ``pid``, started as ``argv`` under ``environ``."""
    args = _normalized(argv)
    config = _last(args, "--config")
    on_line = f"on the command line of process {pid}"
    facts: dict[str, dict[str, object]] = {}

    def absent(flag: str, value: object, why: str) -> dict[str, object]:
        if config:
            return {"value": None, "source": f"no {flag} {on_line}, whose --config {config} may set it: not read here"}
        return {"value": value, "source": f"{why} (no {flag} {on_line})"}

    def number(name: str, flag: str, default: int | None, why: str, human: bool = False) -> None:
        given = _last(args, flag)
        if given is None:
            facts[name] = absent(flag, default, why)
            return
        value = _number(given, human)
        facts[name] = {
            "value": value,
            "source": f"{flag} {on_line}" if value is not None else f"{flag} {on_line} is {given!r}, not a number",
        }

    number("parallel_slots", "--max-num-seqs", None, f"its max_num_seqs: {_BATCHES}")
    number("max_num_batched_tokens", "--max-num-batched-tokens", None, _BATCHES, human=True)
    number("tensor_parallel_size", "--tensor-parallel-size", 1, "vLLM's default (config/parallel.py)")
    number("pipeline_parallel_size", "--pipeline-parallel-size", 1, "vLLM's default (config/parallel.py)")

    def resolved(name: str, flag: str, auto: str, spelled: dict[str, str] | None = None) -> None:
        """A flag whose default, ``auto``, vLLM resolves at start: known only where given otherwise."""
        given = _last(args, flag)
        if given is None:
            facts[name] = absent(flag, None, f"vLLM's default {flag} auto: {auto}")
        elif given == "auto":
            facts[name] = {"value": None, "source": f"{flag} auto {on_line}: {auto}"}
        else:
            facts[name] = {"value": (spelled or {}).get(given, given), "source": f"{flag} {on_line}"}

    resolved(
        "served_dtype",
        "--dtype",
        "the checkpoint's dtype, or for a float32 one the platform's 16-bit type, resolved at start: not known here",
        _DTYPES,
    )
    resolved(
        "kv_cache_dtype",
        "--kv-cache-dtype",
        "the model's dtype, or the checkpoint's KV cache quantization, resolved at start: not known here",
    )

    # A BooleanOptionalAction: --enable-prefix-caching or --no-enable-prefix-caching, the last one given.
    switches = [a for a in args if a in ("--enable-prefix-caching", "--no-enable-prefix-caching")]
    if switches:
        facts["prefix_caching"] = {"value": switches[-1] == "--enable-prefix-caching", "source": f"{switches[-1]} {on_line}"}
    else:
        facts["prefix_caching"] = absent(
            "--enable-prefix-caching",
            None,
            "vLLM's default is the model's (is_prefix_caching_supported), off on RISC-V CPUs: not known here",
        )

    # The CPU backend's (envs.py); a GPU vLLM doesn't read them.
    variable = "VLLM_CPU_OMP_THREADS_BIND"
    facts["cpu_threads_bind"] = (
        {"value": environ[variable], "source": f"{variable} in the environment of process {pid}"}
        if variable in environ
        else {
            "value": "auto",
            "source": f"vLLM's default (envs.py): auto, a thread per physical core of a NUMA node (no {variable} for process {pid})",
        }
    )
    variable = "VLLM_CPU_KVCACHE_SPACE"
    given = environ.get(variable, "")
    if given:  # platforms/cpu.py reads it only when set and not empty, over --kv-cache-memory-bytes
        value = _number(given)
        source = f"{variable} in the environment of process {pid}"
        facts["cpu_kvcache_space_gib"] = {
            "value": value,
            "source": source if value is not None else f"{source} is {given!r}, not a number",
        }
    else:
        facts["cpu_kvcache_space_gib"] = {
            "value": None,
            "source": f"no {variable} for process {pid}: the CPU backend's KV cache is --kv-cache-memory-bytes where given, "
            "else --gpu-memory-utilization of the node's memory less what vLLM holds (v1/worker/cpu_worker.py): not known here",
        }
    return facts
