"""A request body sent compressed (the Codex CLI sends its /responses bodies zstd-compressed at level
3 with ``Content-Encoding: zstd``; other clients gzip) was read as its raw bytes: no JSON, so no
generation request. Its traffic was in no figure and no workload identity, so two Codex sessions
asking other things were the same workload ("no generation requests" to compare). It is read as
the JSON it carries now; a compressed request asks what its JSON asks, whatever the compressor
wrote around it (a gzip header's time)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import zstandard

from infertap.analysis.claim import claim
from infertap.analysis.compare import compare
from infertap.apis import read_request
from infertap.capture.identity import workload_identity
from tests.helpers import write_capture

HEADERS = [["content-type", "application/json"], ["authorization", "Bearer [REDACTED]"]]


def _turn(question: str) -> dict[str, object]:
    """A Responses request as Codex sends one: its instructions, the conversation as input items, stored nowhere."""
    items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": question}]}]
    return {"model": "gpt-5-codex", "instructions": "You are Codex.", "input": items, "stream": False, "store": False}


def _answer(text: str) -> bytes:
    message = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": text, "annotations": []}]}  # fmt: skip
    return json.dumps({"id": "resp_1", "object": "response", "created_at": 0, "model": "gpt-5-codex", "status": "completed", "output": [message]}).encode()  # fmt: skip


def _zstd(question: str) -> dict[str, object]:
    """The request zstd-compressed at level 3 (codex-rs http-client's ``zstd::stream::encode_all(.., 3)``)."""
    raw = zstandard.ZstdCompressor(level=3).compress(json.dumps(_turn(question)).encode())
    return {"body": raw, "headers": [*HEADERS, ["content-encoding", "zstd"]]}


def _gzip(question: str, mtime: int) -> dict[str, object]:
    raw = gzip.compress(json.dumps(_turn(question)).encode(), mtime=mtime)
    return {"body": raw, "headers": [*HEADERS, ["Content-Encoding", "gzip"]]}


def _capture(path: Path, requests: list[dict[str, object]], answers: list[str]) -> Path:
    write_capture(path, [{"path": "/v1/responses", **r, "chunks": [_answer(a)]} for r, a in zip(requests, answers, strict=True)])
    return path


def test_a_compressed_request_is_read_as_its_json() -> None:
    request = read_request({"path": "/v1/responses", "request_body": _zstd("fix the test")["body"], "request_headers": _zstd("x")["headers"]})  # fmt: skip
    assert request.generation and request.model == "gpt-5-codex" and request.last_user == "fix the test"
    # Bytes that aren't what their Content-Encoding names are read as they are: no request.
    garbled = read_request({"path": "/v1/responses", "request_body": b"\x28\xb5\x2f\xfd garbage", "request_headers": _zstd("x")["headers"]})  # fmt: skip
    assert not garbled.generation


def test_compressed_requests_are_the_workload_and_are_compared(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    asks = ["fix the failing test", "explain the diff"]
    a = _capture(tmp_path / "a", [_zstd(q) for q in asks], ["done", "it renames"])
    other = _capture(tmp_path / "other", [_zstd(asks[0]), _zstd("write a README")], ["done", "it renames"])
    again = _capture(tmp_path / "again", [_gzip(q, mtime=i + 7) for i, q in enumerate(asks)], ["done", "it renames"])
    plain = _capture(tmp_path / "plain", [{"body": _turn(q)} for q in asks], ["done", "it moves"])
    ids = {p.name: workload_identity(p) for p in (a, other, again, plain)}
    assert ids["a"].requests == len(asks)
    # Must differ: other questions; must match: the same JSON, however compressed, or not at all.
    assert ids["a"].workload != ids["other"].workload
    assert ids["a"].workload == ids["again"].workload == ids["plain"].workload
    assert claim(a, cache_dir=tmp_path / "cache")["workload"]["value"]["identity"] == ids["a"].workload
    assert not compare(a, other)["traffic"]["identical"]
    same = compare(a, again)
    assert same["traffic"]["identical"] and same["divergence"]["exact_match_rate"] == 1
    d = compare(a, plain)["divergence"]
    assert d["pairs"] == len(asks) and d["counts"]["exact"] == 1
    assert d["most_divergent"][0]["text"] == ["it renames", "it moves"]
