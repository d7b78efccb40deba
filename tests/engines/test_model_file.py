"""``--model-file`` that is no GGUF: a one-line error naming the file, from every command that takes
it, and no capture (or run) written by the commands that record (it ended in gguf's own traceback,
after record and replay had opened their capture)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from infertap.capture.segments import segment_paths
from infertap.cli import cli
from infertap.engines.gguf_meta import read_gguf
from infertap.errors import ConfigError
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
    with pytest.raises(ConfigError, match="cut.gguf: not a readable GGUF model file"):
        read_gguf(cut)
