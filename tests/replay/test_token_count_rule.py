"""One output-token rule for every command (docs/metrics.md, ``output_tokens``): the engine's usage,
else the enrichment's count by the engine's tokenizer, else a stream's token events. The same
workload replayed against the real engine, enriched and not, through replay's summary, ``stats``
and the claim card."""

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
from tests.helpers import write_capture

pytestmark = pytest.mark.engine


def _chat(question: str, stream: bool) -> dict[str, Any]:
    # streamed without stream_options.include_usage: llama-cpp-python's stream then reports no usage
    return {
        "model": SMOLLM2_ALIAS,
        "messages": [{"role": "user", "content": question}],
        "max_tokens": 40,
        "temperature": 0,
        "stream": stream,
    }


def _run(*args: str) -> dict[str, Any]:
    done = CliRunner().invoke(cli, [*args, "--json"])
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def _stats(capture: Path, cache: Path) -> dict[str, Any]:
    [group] = _run("stats", str(capture), "--cache-dir", str(cache))["groups"]
    return group


def _claim(capture: Path, cache: Path) -> dict[str, Any]:
    return _run("claim", str(capture), "--cache-dir", str(cache))


def _counts(capture: Path) -> tuple[dict[str, int], dict[str, int]]:
    """Each answer's enrichment count (the engine's tokenizer), and each one's usage, by exchange id."""
    records = list(CaptureReader(capture).records())
    enriched = {r["exchange_id"]: r["output_tokens"]["count"] for r in records if r["type"] == "enrichment"}
    usage = {}
    for r in records:
        if r["type"] == "exchange" and not json.loads(r["request_body"]).get("stream"):
            usage[r["id"]] = json.loads(b"".join(r["chunks"]))["usage"]["completion_tokens"]
    return enriched, usage


def _events(capture: Path, cache: Path) -> dict[str, int]:
    """Each streamed answer's token events: its own count where it reported no usage (``chunks``)."""
    with Analysis([capture], cache_dir=cache) as a:
        return dict(a.query("SELECT exchange_id, token_event_count FROM exchanges WHERE streamed").rows)


def test_replay_stats_and_the_claim_card_count_output_tokens_by_one_rule(engine, gguf: Path, tmp_path: Path) -> None:
    """With an enriched replay, stats counted each stream without usage by the engine's tokenizer
    while replay's own summary counted its token events: two output tokens/s of one run. The summary
    now takes the enrichment's count as stats does; not enriched (``--no-enrich``), both count token
    events and say so, and once ``infertap enrich`` has run stats counts them by the tokenizer, its
    source saying why it differs from the summary's. A whole answer's usage wins over the tokenizer."""
    # SmolLM2 answers the first in Japanese: llama-cpp-python streams a character of several tokens as
    # one event, so its token events (33) are fewer than the tokenizer's count of its text (39).
    questions = ["Translate to Japanese: good morning, thank you, goodbye.", "Name three colours.", "Say hello in French."]
    items = [{"offset_s": i * 0.1, "body": _chat(q, stream=i < 2)} for i, q in enumerate(questions)]
    write_capture(tmp_path / "src", items)
    cache = tmp_path / "cache"
    replay = ["replay", str(tmp_path / "src"), "--target", engine.url, "--model-file", str(gguf)]
    replay += ["--concurrency", "1", "--no-telemetry"]  # llama-cpp-python serves one request at a time

    enriched = _run(*replay, "--out", str(tmp_path / "enriched"))
    group = first = _stats(tmp_path / "enriched", cache)
    tokens, usage = _counts(tmp_path / "enriched")
    streamed = [xid for xid in tokens if xid not in usage]
    assert enriched["ok"] == group["ok"] == 3 and len(streamed) == 2 and len(usage) == 1, (enriched, tokens)
    counts = enriched["output_tokens"]
    assert counts["source"] == group["output_tokens_source"] == {"usage": 1, "tokenize": 2}, (counts, group)
    by_source = {"usage": sum(usage.values()), "tokenize": sum(tokens[x] for x in streamed)}
    assert counts["by_source"] == group["workload"]["output_tokens"]["by_source"] == by_source, (counts, group)
    assert counts["total"] == group["workload"]["output_tokens"]["total"] == sum(by_source.values())
    rate = group["throughput"]["output_tokens_per_s"]
    assert enriched["throughput"]["output_tokens_per_s"] == pytest.approx(rate, rel=1e-6)
    card = _claim(tmp_path / "enriched", cache)
    assert card["workload"]["value"]["output_tokens"] == counts["total"], card["workload"]
    assert card["figures"]["throughput"]["output_tokens_per_s"] == pytest.approx(rate, rel=1e-6)
    assert "the engine's tokenizer ×2" in card["workload"]["source"], card["workload"]
    events = _events(tmp_path / "enriched", cache)
    assert sum(events[x] for x in streamed) != by_source["tokenize"], (events, tokens)  # must differ: a mismatch shows

    bare = _run(*replay, "--no-enrich", "--out", str(tmp_path / "bare"))
    group = _stats(tmp_path / "bare", cache)
    counts = bare["output_tokens"]
    assert counts["source"] == group["output_tokens_source"] == {"usage": 1, "chunks": 2}, (counts, group)
    assert counts["by_source"] == group["workload"]["output_tokens"]["by_source"], (counts, group)
    assert counts["by_source"]["chunks"] == sum(_events(tmp_path / "bare", cache).values()), counts
    assert bare["throughput"]["output_tokens_per_s"] == pytest.approx(group["throughput"]["output_tokens_per_s"], rel=1e-6)
    card = _claim(tmp_path / "bare", cache)
    assert card["workload"]["value"]["output_tokens"] == counts["total"]
    assert "a stream's token events (an approximation) ×2" in card["workload"]["source"], card["workload"]
    text = CliRunner().invoke(cli, [*replay, "--no-enrich", "--out", str(tmp_path / "text")], env={"COLUMNS": "300"})
    assert text.exit_code == 0, text.output
    said = " ".join(text.output.split())
    assert "counted by the engine's usage ×1, token events ×2 (an approximation: no enrichment counted them" in said, said

    # Enriched afterwards: stats counts the streams by the engine's tokenizer, as the enriched replay's
    # summary did; the summary printed before says it counted token events.
    done = CliRunner().invoke(cli, ["enrich", str(tmp_path / "bare"), "--engine", engine.url, "--model-file", str(gguf)])
    assert done.exit_code == 0, done.output
    after = _stats(tmp_path / "bare", cache)
    tokens, usage = _counts(tmp_path / "bare")
    assert after["output_tokens_source"] == {"usage": 1, "tokenize": 2}, after
    assert after["workload"]["output_tokens"]["by_source"] == {
        "usage": counts["by_source"]["usage"],  # the engine's usage wins over its tokenizer's count
        "tokenize": sum(n for xid, n in tokens.items() if xid not in usage),
    }
    # the tokenizer's count is not the events' the summary said it counted: labelled, not passed off as one
    assert after["workload"]["output_tokens"]["by_source"]["tokenize"] != counts["by_source"]["chunks"], (after, counts)
    card = _claim(tmp_path / "bare", cache)
    assert card["workload"]["value"]["output_tokens"] == after["workload"]["output_tokens"]["total"]
    # compare's tpot (over output_tokens) is stats' of each side: the tokenizer's count now, not the events'
    result = _run("compare", str(tmp_path / "enriched"), str(tmp_path / "bare"))
    [tpot] = [row for row in result["speed"] if row["metric"] == "tpot"]
    assert tpot["a"]["p50"] == pytest.approx(first["metrics"]["tpot"]["p50"]), (tpot, first["metrics"])
    assert tpot["b"]["p50"] == pytest.approx(after["metrics"]["tpot"]["p50"]), (tpot, after["metrics"])
    assert after["metrics"]["tpot"]["p50"] != pytest.approx(group["metrics"]["tpot"]["p50"])  # must differ: by events


def test_a_sharded_replay_s_summary_counts_by_its_enrichment_as_stats_does(
    engine, gguf: Path, tmp_path: Path, ray_cluster
) -> None:
    """A ``--ray`` replay is enriched after its shards' summary is merged: that summary counted each
    stream without usage by its token events while stats of its capture counted the engine's
    tokenizer. The shards now hand over those answers' ids and the enrichment its counts, so the two
    say the same; ``--no-enrich`` still counts token events, as stats then does."""
    questions = ["Translate to Japanese: good morning, thank you, goodbye.", "Name three colours.", "Say hello in French."]
    items = [{"offset_s": i * 0.1, "body": _chat(q, stream=i < 2)} for i, q in enumerate(questions)]
    write_capture(tmp_path / "src", items)
    cache = tmp_path / "cache"
    replay = ["replay", str(tmp_path / "src"), "--target", engine.url, "--model-file", str(gguf)]
    replay += ["--concurrency", "1", "--no-telemetry", "--ray", ray_cluster, "--shards", "1"]  # one request at a time

    sharded = _run(*replay, "--out", str(tmp_path / "sharded"))
    group = _stats(tmp_path / "sharded", cache)
    tokens, usage = _counts(tmp_path / "sharded")
    streamed = [xid for xid in tokens if xid not in usage]
    assert sharded["ok"] == group["ok"] == 3 and len(streamed) == 2, (sharded, tokens)
    counts = sharded["output_tokens"]
    assert counts["source"] == group["output_tokens_source"] == {"usage": 1, "tokenize": 2}, (counts, group)
    by_source = {"usage": sum(usage.values()), "tokenize": sum(tokens[x] for x in streamed)}
    assert counts["by_source"] == group["workload"]["output_tokens"]["by_source"] == by_source, (counts, group)
    rate = group["throughput"]["output_tokens_per_s"]
    assert sharded["throughput"]["output_tokens_per_s"] == pytest.approx(rate, rel=1e-6)
    events = _events(tmp_path / "sharded", cache)
    assert sum(events[x] for x in streamed) != by_source["tokenize"], (events, tokens)  # must differ: a mismatch shows

    bare = _run(*replay, "--no-enrich", "--out", str(tmp_path / "bare"))
    group = _stats(tmp_path / "bare", cache)
    counts = bare["output_tokens"]
    assert counts["source"] == group["output_tokens_source"] == {"usage": 1, "chunks": 2}, (counts, group)
    assert counts["by_source"]["chunks"] == sum(_events(tmp_path / "bare", cache).values()), counts
