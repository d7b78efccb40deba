"""A response over ``--max-response-mb`` reaches the client whole while the recorder keeps only its
head (``response_body_size``, ``response_body_chunks``, ``response_last_ns``): one huge answer can't
grow its memory until it is killed with every exchange in flight. Analysis reads that answer as
unknown, never as the head it kept; one under the limit is kept and read exactly as before."""

from __future__ import annotations

import json

import httpx
from click.testing import CliRunner

from infertap.cli import cli

LIMIT = 8192  # bytes: --max-response-mb as the test sets it
_MB = str(LIMIT / (1024 * 1024))


def _stream(url: str, tag: str, n: int) -> bytes:
    body = {"model": "m", "messages": [{"role": "user", "content": tag}], "stream": True, "tag": tag, "n_chunks": n}
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=30) as r:
        assert r.status_code == 200
        return r.read()


def test_a_response_over_the_limit_is_relayed_whole_kept_cut_and_read_as_unknown(fake, record, tmp_path, monkeypatch) -> None:
    _, upstream = fake
    rec = record(upstream, "--max-response-mb", _MB)
    big, small = _stream(rec.url, "big", 400), _stream(rec.url, "small", 3)
    assert big == _stream(upstream, "big", 400)  # every byte, as the engine sent it
    assert len(big) > 4 * LIMIT and len(small) < LIMIT
    assert rec.stop() == 0
    cut, whole = rec.exchanges()

    assert cut["end"] == "complete" and cut["response_body_size"] == len(big)
    assert cut["response_body_chunks"] > len(cut["chunks"]) and cut["response_last_ns"] >= cut["chunk_ns"][-1]
    head = b"".join(cut["chunks"])
    assert 0 < len(head) <= LIMIT and big.startswith(head) and len(cut["chunk_ns"]) == len(cut["chunks"])
    assert b"".join(whole["chunks"]) == small and "response_body_size" not in whole  # as before

    cache = str(tmp_path / "cache")
    result = CliRunner().invoke(cli, ["stats", str(rec.out), "--json", "--cache-dir", cache])
    assert result.exit_code == 0, result.output
    [group] = json.loads(result.stdout)["groups"]
    # The cut answer: unknown, neither ok (with a truncated answer) nor an error; the other read.
    assert (group["requests"], group["ok"], group["errors"], group["response_not_kept"]) == (2, 1, 0, 1)
    assert "response not kept 1" in CliRunner().invoke(cli, ["stats", str(rec.out), "--cache-dir", cache]).output

    monkeypatch.setenv("INFERTAP_CACHE", cache)
    result = CliRunner().invoke(cli, ["compare", str(rec.out), str(rec.out), "--json"])
    assert result.exit_code == 0, result.output
    divergence = json.loads(result.stdout)["divergence"]
    # The cut pair is neither a match nor a divergence, counted; the whole one matches.
    assert divergence["pairs"] == 1 and divergence["counts"]["response_not_kept"] == 1
    assert divergence["exact_match_rate"] == 1.0


def test_responses_under_the_limit_are_kept_whole_and_read(fake, record, tmp_path) -> None:
    _, upstream = fake
    rec = record(upstream)  # the default limit, 64 MiB
    big = _stream(rec.url, "big", 400)
    assert rec.stop() == 0
    [x] = rec.exchanges()
    assert b"".join(x["chunks"]) == big and "response_body_size" not in x
    result = CliRunner().invoke(cli, ["stats", str(rec.out), "--json", "--cache-dir", str(tmp_path / "cache")])
    [group] = json.loads(result.stdout)["groups"]
    assert (group["requests"], group["ok"], group["response_not_kept"]) == (1, 1, 0)
