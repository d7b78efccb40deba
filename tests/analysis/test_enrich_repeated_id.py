"""``infertap enrich`` wrote an enrichment's exchange id alone, so of an id two exchanges of a capture
carry (a segment copied in twice) its enrichments attached to none: neither exchange took its counts.
It now writes which of them (``occurrence``, in record order), and each attaches to its own, in the
tables and in compare's summaries alike; an enrichment without one (an older infertap's) stays
attached to none (tests/analysis/test_enrichment_choice.py)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from infertap.analysis import Analysis
from infertap.analysis.compare import Run, Workspace
from infertap.capture.reader import CaptureReader
from infertap.cli import cli
from tests.analysis_builders import body, event, exchange, sse, write_capture
from tests.fake_engines import llama_server_app
from tests.fake_upstream import ServerThread


def test_infertap_enrich_attaches_each_enrichment_of_a_repeated_id_to_its_own_exchange(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    path = write_capture(
        tmp_path / "cap",
        [
            exchange("dup", sent_ms=0, request=body("q0"), chunks=[(5, sse(event("a", finish="stop")))]),
            exchange("dup", sent_ms=10, request=body("q1"), chunks=[(5, sse(event("b", finish="length")))]),
            exchange("one", sent_ms=20, request=body("q2"), chunks=[(5, sse(event("c", finish="stop")))]),
        ],
    )
    with ServerThread(llama_server_app()) as server:
        run = CliRunner().invoke(cli, ["enrich", str(path), "--engine", server.url])
    assert run.exit_code == 0, run.output
    written = [(r["exchange_id"], r["occurrence"]) for r in CaptureReader(path).records() if r["type"] == "enrichment"]
    assert written == [("dup", 1), ("dup", 2), ("one", 1)]  # the id as recorded, and which of its exchanges
    with Analysis([path], cache_dir=tmp_path / "cache") as an:
        rows = an.sql(
            "SELECT exchange_id, attached, json_extract_string(response, '$.finish_reason') FROM enrichments ORDER BY 1"
        ).fetchall()
        # Must differ from before: each copy takes its own enrichment (its own answer's finish reason).
        assert rows == [("dup", True, "stop"), ("dup~2", True, "length"), ("one", True, "stop")]
        got = dict(an.sql("SELECT exchange_id, output_tokens_source FROM metrics").fetchall())
        assert got == {"dup": "tokenize", "dup~2": "tokenize", "one": "tokenize"}  # must match: all three alike
        assert not any("attached to none" in w for w in an.warnings), an.warnings
    with Workspace() as ws:
        Run(path, ws, "a", metrics=False)
        assert sorted(ws.con.execute("SELECT exchange_id FROM a_e").fetchall()) == [("dup",), ("dup~2",), ("one",)]
