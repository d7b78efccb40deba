"""compare takes each field of an exchange's enrichment from the enrichment ``enrichment_latest``
takes it from: a later enrichment that could not count (its probe failed) erased the re-tokenized
output ids, the prompt ids and the settings that compare's divergence, prompt check and settings
diff read. Real captures of the real engine, enriched by it, then by an enricher whose engine is gone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from infertap.analysis.compare import compare
from infertap.cli import cli
from infertap.launch import SMOLLM2_ALIAS
from tests.helpers import enrich_with_a_dead_engine, write_capture

pytestmark = pytest.mark.engine


def _ok(*args: str) -> None:
    done = CliRunner().invoke(cli, list(args))
    assert done.exit_code == 0, done.output


def _compared(a: Path, b: Path) -> dict[str, Any]:
    """What compare says of the enrichments: the outputs' divergence (its units), the settings, the prompts."""
    r = compare(a, b)
    return json.loads(json.dumps({k: r["config"][k] for k in ("settings", "prompts")} | {"divergence": r["divergence"]}))


def test_a_later_failed_enrichment_changes_nothing_compare_says(engine, llama_server_engine, gguf: Path, tmp_path: Path) -> None:
    questions = ["List three colours of the rainbow.", "Name four animals that live in the sea."]
    bodies = [
        {"model": SMOLLM2_ALIAS, "messages": [{"role": "user", "content": q}], "max_tokens": 40, "temperature": 0}
        for q in questions
    ]
    write_capture(tmp_path / "src", [{"offset_s": i, "body": body} for i, body in enumerate(bodies)])
    a, b = tmp_path / "a", tmp_path / "b"
    common = ("--target", engine.url, "--no-enrich", "--no-telemetry", "--concurrency", "1")
    _ok("replay", str(tmp_path / "src"), *common, "--out", str(a))
    # llama-cpp-python's repeat_penalty default is 1.1: B's answers part from A's at some token
    _ok("replay", str(tmp_path / "src"), *common, "--set", "repeat_penalty=1.0", "--out", str(b))
    for side in (a, b):
        _ok("enrich", str(side), "--engine", engine.url, "--model-file", str(gguf))
    good = _compared(a, b)
    assert good["divergence"]["first_divergence_units"] == {"token (re-tokenized)": 2}, good["divergence"]
    assert good["prompts"] == {"compared": 2, "equal": 2, "differences": {}}, good["prompts"]
    assert any(row["setting"] == "repeat_penalty" for row in good["settings"]), good["settings"]

    for side in (a, b):
        enrich_with_a_dead_engine(side)
    assert _compared(a, b) == good  # must match: a failed enrichment says nothing new

    # A later enrichment that did count is taken: another engine's (llama-server's defaults) settings.
    _ok("enrich", str(b), "--engine", llama_server_engine.url, "--model-file", str(gguf))
    other = _compared(a, b)
    assert other["settings"] != good["settings"], other["settings"]  # must differ
    assert other["divergence"]["first_divergence_units"] == {"token (re-tokenized)": 2}, other["divergence"]
