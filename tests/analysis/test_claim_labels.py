"""`infertap enrich --label` stored its labels with the engine's snapshot (``engines.labels``), and
nothing read them: the claim card names the engine in ``runtime`` and shows them there now. A capture
written by the project's writer, enriched by the real `enrich` against a served llama-server stand-in."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from infertap.cli import cli
from tests.fake_engines import llama_server_app
from tests.fake_upstream import ServerThread
from tests.helpers import write_capture


def _invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_the_labels_given_to_enrich_are_on_the_card_beside_the_engine(tmp_path: Path) -> None:
    labelled, bare = tmp_path / "labelled", tmp_path / "bare"
    with ServerThread(llama_server_app()) as server:
        for path, labels in ((labelled, ["--label", "gpu=H200", "--label", "rack=r7"]), (bare, [])):
            write_capture(path, [{}])  # recorded with --no-probe: no snapshot of its own
            _invoke("enrich", str(path), "--engine", server.url, *labels)
    cache = str(tmp_path / "cache")
    card = json.loads(_invoke("claim", str(labelled), "--json", "--cache-dir", cache))
    assert card["runtime"]["value"]["labels"] == {"gpu": "H200", "rack": "r7"}
    assert "labels: --label given to the probe that took the snapshot" in card["runtime"]["source"]
    [line] = [x for x in _invoke("claim", str(labelled), "--cache-dir", cache).splitlines() if x.startswith("  runtime:")]
    assert line.startswith("  runtime: llama-server ") and ", labels gpu=H200, rack=r7" in line, line
    assert "labels gpu=H200, rack=r7" in _invoke("claim", str(labelled), "--markdown", "--cache-dir", cache)
    # Must stay: an engine enriched with no --label names none.
    card = json.loads(_invoke("claim", str(bare), "--json", "--cache-dir", cache))
    assert card["runtime"]["value"]["labels"] == {} and "labels" not in card["runtime"]["source"]
    [line] = [x for x in _invoke("claim", str(bare), "--cache-dir", cache).splitlines() if x.startswith("  runtime:")]
    assert "labels" not in line
