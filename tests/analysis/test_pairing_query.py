"""compare's identical-request rule keyed a request by method, path, asked headers and body, not its
query, which the workload identity counts: two requests of one body to Azure OpenAI's
``?api-version=2024-10-21`` and ``?api-version=2025-01-01`` were paired as the same question. The
query is now part of the key, read as the identity reads it (``asked_query``: a parameter the capture
redacted left out); a request without one keys as before."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from infertap.analysis.compare import compare
from infertap.analysis.pairing import pair
from infertap.analysis.summaries import request_key
from infertap.capture.identity import exchange_digest
from tests.helpers import write_capture

AZURE = "/openai/deployments/gpt/chat/completions"
BODY = {"model": "gpt", "messages": [{"role": "user", "content": "hi"}]}
OTHER = {**BODY, "messages": [{"role": "user", "content": "plain"}]}


def _capture(path: Path, query: str) -> list[dict[str, Any]]:
    """Two requests: one of no query on every side, one of the query given."""
    return write_capture(path, [{"body": OTHER}, {"path": AZURE, "body": BODY, "query": query}])


def _pairs(a: Path, b: Path) -> tuple[int, int]:
    r = compare(a, b)
    return r["pairing"]["pairs"], r["pairing"]["by"]["identical request"]


def test_requests_to_another_query_are_no_identical_request(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    a = _capture(tmp_path / "a", "api-version=2024-10-21")
    b = _capture(tmp_path / "b", "api-version=2025-01-01")
    # Must differ: one body, another api-version (and the identity says so too).
    assert exchange_digest(a[1]) != exchange_digest(b[1])
    assert request_key(a[1]) != request_key(b[1])
    assert [x["id"] for x, _ in pair(a, b).pairs] == ["src-0"]
    assert _pairs(tmp_path / "a", tmp_path / "b") == (1, 1)

    # Must match: a credential the capture redacted on one side only, as the identity leaves it out.
    c = _capture(tmp_path / "c", "api-version=2024-10-21&key=[REDACTED]")
    assert exchange_digest(a[1]) == exchange_digest(c[1])
    assert request_key(a[1]) == request_key(c[1])
    assert [x["id"] for x, _ in pair(a, c).pairs] == ["src-0", "src-1"]
    assert _pairs(tmp_path / "a", tmp_path / "c") == (2, 2)


def test_a_request_without_a_query_keeps_its_key(tmp_path: Path) -> None:
    """The key of old, blake2b of (method, path, body is None) and the body: with no query, or one of
    nothing but a redacted credential."""
    for query in ("", "key=[REDACTED]"):
        [x] = write_capture(tmp_path / f"q{len(query)}", [{"body": OTHER, "query": query}])
        old = hashlib.blake2b(repr(("POST", "/v1/chat/completions", False)).encode() + b"\0" + x["request_body"], digest_size=16)
        assert request_key(x) == old.digest(), query
        assert request_key({k: v for k, v in x.items() if k != "query"}) == old.digest()  # a record without the field
