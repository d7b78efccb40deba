"""A later enrichment that could not count (its probe failed) must not erase an earlier one's
counts: each field of ``enrichment_latest`` comes from the newest enrichment that has it
(docs/metrics.md, ``output_tokens``). A real capture of the real engine, enriched by it, then by
an enricher whose engine is gone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from infertap.analysis import Analysis
from infertap.capture.reader import CaptureReader
from infertap.cli import cli
from infertap.launch import SMOLLM2_ALIAS
from tests.helpers import enrich_with_a_dead_engine, write_capture

pytestmark = pytest.mark.engine


def _run(*args: str) -> dict[str, Any]:
    done = CliRunner().invoke(cli, [*args, "--json"])
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def _counts(capture: Path, cache: Path) -> dict[str, tuple[Any, ...]]:
    with Analysis([capture], cache_dir=cache) as a:
        rows = a.query(
            "SELECT exchange_id, output_tokens, output_tokens_source, output_tokens_run_id, prompt_tokens FROM metrics"
        ).rows
    return {r[0]: tuple(r[1:]) for r in rows}


def test_a_later_failed_enrichment_keeps_the_earlier_counts(engine, gguf: Path, tmp_path: Path) -> None:
    """A failed enrichment newer than a good one turned each stream without usage from the engine's
    tokenizer count back to its token events, changing tokens/s silently; now the good one's count
    stands, and names its run. A later good enrichment still replaces an earlier one."""
    body = {
        "model": SMOLLM2_ALIAS,
        "messages": [{"role": "user", "content": "Translate to Japanese: good morning, thank you, goodbye."}],
    }
    body |= {"max_tokens": 40, "temperature": 0, "stream": True}  # no usage; its Japanese: fewer events than tokens
    write_capture(tmp_path / "src", [{"offset_s": 0, "body": body}])
    cache, cap = tmp_path / "cache", tmp_path / "cap"
    _run("replay", str(tmp_path / "src"), "--target", engine.url, "--no-enrich", "--no-telemetry", "--out", str(cap))
    bare = _counts(cap, cache)
    [(xid, (events, source, run, _))] = bare.items()
    assert source == "chunks" and run is None, bare

    done = CliRunner().invoke(cli, ["enrich", str(cap), "--engine", engine.url, "--model-file", str(gguf)])
    assert done.exit_code == 0, done.output
    good = _counts(cap, cache)
    tokens, source, good_run, prompt = good[xid]
    assert source == "tokenize" and good_run is not None and prompt is not None, good
    assert tokens != events, (tokens, events)  # must differ: the tokenizer's count is not the events'
    rate = _run("stats", str(cap), "--cache-dir", str(cache))["groups"][0]["throughput"]["output_tokens_per_s"]

    enrich_with_a_dead_engine(cap)
    records = [r for r in CaptureReader(cap).records() if r["type"] == "enrichment"]
    assert records[-1]["output_tokens"] == {"ids": None, "count": None, "source": "engine unknown (probe failed)"}
    assert _counts(cap, cache)[xid] == (tokens, "tokenize", good_run, prompt)  # must match: nothing erased
    after = _run("stats", str(cap), "--cache-dir", str(cache))["groups"][0]["throughput"]["output_tokens_per_s"]
    assert after == pytest.approx(rate, rel=1e-9)

    # a later enrichment that did count is the one taken: its run is named
    done = CliRunner().invoke(cli, ["enrich", str(cap), "--engine", engine.url, "--model-file", str(gguf)])
    assert done.exit_code == 0, done.output
    latest = _counts(cap, cache)[xid]
    assert latest[:2] == (tokens, "tokenize") and latest[2] not in (None, good_run), (latest, good_run)
