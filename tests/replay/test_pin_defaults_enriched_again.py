"""``--pin-defaults`` pins the source engine's defaults from the enrichment ``enrichment_latest``
takes settings from: a later enrichment whose probe failed knows none, and pinned nothing. A real
capture enriched by the real engine, then by an enricher whose engine is gone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from infertap.capture.reader import CaptureReader
from infertap.cli import cli
from infertap.launch import SMOLLM2_ALIAS
from tests.helpers import enrich_with_a_dead_engine, write_capture

pytestmark = pytest.mark.engine


def _ok(*args: str) -> None:
    done = CliRunner().invoke(cli, list(args))
    assert done.exit_code == 0, done.output


def _pinned_penalty(src: Path, target: str, out: Path) -> object:
    """The repeat_penalty a --pin-defaults replay of ``src`` sent (absent: none)."""
    _ok("replay", str(src), "--target", target, "--pin-defaults", "--no-enrich", "--no-telemetry", "--out", str(out))
    (sent,) = [json.loads(x["request_body"]) for x in CaptureReader(out).exchanges()]
    return sent.get("repeat_penalty", "absent")


def test_a_later_failed_enrichment_leaves_the_defaults_pinned(engine, llama_server_engine, gguf: Path, tmp_path: Path) -> None:
    body = {"model": SMOLLM2_ALIAS, "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 8, "temperature": 0}
    src = tmp_path / "src"
    write_capture(src, [{"offset_s": 0, "body": body}])
    _ok("enrich", str(src), "--engine", engine.url, "--model-file", str(gguf))
    assert _pinned_penalty(src, engine.url, tmp_path / "good") == 1.1  # llama-cpp-python's default

    enrich_with_a_dead_engine(src)
    assert _pinned_penalty(src, engine.url, tmp_path / "after") == 1.1  # must match: nothing erased

    _ok("enrich", str(src), "--engine", llama_server_engine.url, "--model-file", str(gguf))
    assert _pinned_penalty(src, engine.url, tmp_path / "other") == 1.0  # must differ: llama-server's default, newer
