"""compare's identical-request rule keyed a request by method, path and body only: two requests of one
body that asked for other features (``anthropic-beta``) were paired as the same question and their
answers compared as if they were. The headers that change what a request asks (the workload
identity's ``asked_headers``) are now part of its key; a request without them keys as before."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from infertap.analysis.compare import compare
from infertap.analysis.pairing import pair
from infertap.analysis.summaries import request_key
from tests.helpers import write_capture

BODY = {"model": "claude-x", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
OTHER = {**BODY, "messages": [{"role": "user", "content": "plain"}]}
ANSWER = json.dumps(
    {"type": "message", "role": "assistant", "content": [{"type": "text", "text": "hello"}], "stop_reason": "end_turn",
     "usage": {"input_tokens": 3, "output_tokens": 2}}
).encode()  # fmt: skip
BASE = [["content-type", "application/json"], ["x-api-key", "[REDACTED]"], ["anthropic-version", "2023-06-01"]]


def _capture(path: Path, beta: list[list[str]]) -> list[dict[str, Any]]:
    """Two Messages requests: one of the same headers on every side, one whose ``anthropic-beta`` is given."""
    return write_capture(
        path,
        [
            {"path": "/v1/messages", "body": OTHER, "headers": BASE, "chunks": [ANSWER]},
            {"path": "/v1/messages", "body": BODY, "headers": [*BASE, *beta], "chunks": [ANSWER]},
        ],
    )


def test_requests_that_ask_other_features_are_no_identical_request(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    a = _capture(tmp_path / "a", [["anthropic-beta", "context-management-2025-06-27,output-128k-2025-02-19"]])
    b = _capture(tmp_path / "b", [["anthropic-beta", "output-128k-2025-02-19"]])
    # Must match: the same features over two lines, in another order, another header's case.
    same = [["Anthropic-Beta", "output-128k-2025-02-19"], ["anthropic-beta", " context-management-2025-06-27"]]
    c = _capture(tmp_path / "c", same)

    # Must differ: one body, another anthropic-beta.
    r = compare(tmp_path / "a", tmp_path / "b")
    assert (r["pairing"]["pairs"], r["pairing"]["by"]["identical request"]) == (1, 1), r["pairing"]
    assert "1 exchange of A and 1 of B have no counterpart" in r["pairing"]["explain"]
    assert request_key(a[1]) != request_key(b[1])
    assert [x["id"] for x, _ in pair(a, b).pairs] == ["src-0"]

    r = compare(tmp_path / "a", tmp_path / "c")
    assert (r["pairing"]["pairs"], r["pairing"]["by"]["identical request"]) == (2, 2), r["pairing"]
    assert request_key(a[1]) == request_key(c[1])
    assert [x["id"] for x, _ in pair(a, c).pairs] == ["src-0", "src-1"]

    # anthropic-version too: another API version reads the body otherwise.
    v2 = write_capture(
        tmp_path / "v2", [{"path": "/v1/messages", "body": OTHER, "headers": [*BASE[:2], ["anthropic-version", "2099-01-01"]]}]
    )
    assert request_key(v2[0]) != request_key(a[0])


def test_a_request_without_them_keeps_its_key(tmp_path: Path) -> None:
    """The key of old: blake2b of (method, path, body is None) and the body, whatever other headers were sent."""
    records = write_capture(
        tmp_path / "c",
        [{"body": OTHER, "headers": [["content-type", "application/json"], ["user-agent", "u/1"], ["x-api-key", "[REDACTED]"]]}],
    )
    x = records[0]
    old = hashlib.blake2b(repr(("POST", "/v1/chat/completions", False)).encode() + b"\0" + x["request_body"], digest_size=16)
    assert request_key(x) == old.digest()
    # A value the user redacted is not known, so not part of it (as the identity reads it).
    redacted = {**x, "request_headers": [*x["request_headers"], ["anthropic-beta", "[REDACTED]"]]}
    assert request_key(redacted) == old.digest()
