"""stats' note on a group whose output tokens come from several sources says how the sources
present count, not those absent: a count of token events is no re-tokenization."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from infertap.cli import cli
from tests.analysis_builders import enrichment, event, exchange, sse, write_capture

USAGE = {"prompt_tokens": 3, "completion_tokens": 7}


def _answer(xid: str, sent_ms: float, *, usage: bool) -> dict:
    last = event(finish="stop", usage=USAGE if usage else None)
    return exchange(xid, sent_ms=sent_ms, chunks=[(1, sse(event("a"), event("b"))), (2, sse(last, "[DONE]"))])


def _note(tmp_path: Path, records: list[dict]) -> str:
    write_capture(tmp_path / "cap", records)
    result = CliRunner().invoke(cli, ["stats", str(tmp_path / "cap"), "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 0, result.output
    return " ".join(result.stdout.split())


def test_usage_beside_counted_chunks_is_not_said_to_be_re_tokenized(tmp_path: Path) -> None:
    out = _note(tmp_path, [_answer("x1", 0, usage=True), _answer("x2", 10, usage=False)])
    assert "output_tokens adds counts of different sources" in out
    assert "re-tokenized" not in out and "count of token-bearing events (chunks) is an approximation" in out


def test_usage_beside_a_re_tokenized_count_says_the_re_tokenized_one_does_not(tmp_path: Path) -> None:
    out = _note(tmp_path, [_answer("x1", 0, usage=True), _answer("x2", 10, usage=False), enrichment("x2", output_count=2)])
    assert "(llama-server's does), a re-tokenized count does not" in out and "(chunks)" not in out
