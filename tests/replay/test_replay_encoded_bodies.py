"""``--set`` and ``--model-map`` on a request body sent with a content-encoding (the Codex CLI sends
its ``/responses`` bodies zstd-compressed, other clients gzip theirs) stopped the replay with "body
transforms need a JSON body": the JSON inside is edited now, and sent encoded as it came."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
import zstandard

from infertap.replay import ReplayConfig, ReplayError, Transforms, run_replay
from tests.fake_upstream import FakeUpstream, ServerThread
from tests.helpers import write_capture

_ENCODE = {"zstd": zstandard.ZstdCompressor().compress, "gzip": gzip.compress}


def _decoded(body: bytes, encoding: str | None) -> dict[str, Any]:
    if encoding == "zstd":
        return json.loads(zstandard.ZstdDecompressor().decompressobj().decompress(body))
    return json.loads(gzip.decompress(body) if encoding == "gzip" else body)


def _codex(tag: str, model: str = "gpt-5-codex") -> dict[str, Any]:
    return {"model": model, "input": [{"role": "user", "content": tag}], "stream": True, "tag": tag}


def _sent(path: str, body: dict[str, Any], encoding: str | None) -> dict[str, Any]:
    headers = [["content-type", "application/json"]] + ([["content-encoding", encoding]] if encoding else [])
    raw = json.dumps(body).encode()
    return {"path": path, "body": _ENCODE[encoding](raw) if encoding else raw, "headers": headers}


def _replay(tmp_path: Path, exchanges: list[dict[str, Any]], transforms: Transforms) -> tuple[FakeUpstream, dict[str, Any]]:
    write_capture(tmp_path / "src", exchanges)
    app = FakeUpstream()
    with ServerThread(app) as server:
        summary = run_replay(
            ReplayConfig(tmp_path / "src", server.url, tmp_path / "out", probe=False, telemetry=False, transforms=transforms)
        )
    return app, summary


def _encoding(request: dict[str, Any]) -> str | None:
    return next((v.decode() for n, v in request["headers"] if n.lower() == b"content-encoding"), None)


def test_transforms_edit_an_encoded_body_and_send_it_encoded_as_it_came(tmp_path: Path) -> None:
    exchanges = [
        _sent("/v1/responses", _codex("z"), "zstd"),
        _sent(
            "/v1/chat/completions", {"model": "gpt-5-codex", "messages": [{"role": "user", "content": "g"}], "tag": "g"}, "gzip"
        ),
        _sent("/v1/chat/completions", {"model": "gpt-5-codex", "messages": [{"role": "user", "content": "p"}], "tag": "p"}, None),
    ]
    transforms = Transforms(model_map={"gpt-5-codex": "big"}, set_values=[("temperature", 0)])
    app, summary = _replay(tmp_path, exchanges, transforms)
    assert summary["sent"] == 3, summary
    got = {_decoded(r["body"], _encoding(r))["tag"]: r for r in app.requests}
    for x, tag, encoding in zip(exchanges, "zgp", ("zstd", "gzip", None), strict=True):
        request = got[tag]
        assert _encoding(request) == encoding  # encoded as it came, under the same header
        recorded = _decoded(x["body"], encoding)
        assert _decoded(request["body"], encoding) == {**recorded, "model": "big", "temperature": 0}


def test_an_encoded_body_no_transform_applies_to_is_sent_as_recorded(tmp_path: Path) -> None:
    """Must match: a map that names another model changes nothing, and the bytes go as recorded."""
    exchange = _sent("/v1/responses", _codex("z", model="gpt-5"), "zstd")
    app, summary = _replay(tmp_path, [exchange], Transforms(model_map={"gpt-5-codex": "big"}))
    assert summary["sent"] == 1 and [r["body"] for r in app.requests] == [exchange["body"]]


def test_a_body_that_does_not_decode_as_its_encoding_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    broken = {**_sent("/v1/responses", _codex("z"), "zstd"), "body": b"not zstd at all"}
    app = FakeUpstream()
    write_capture(tmp_path / "src", [broken])
    with ServerThread(app) as server, pytest.raises(ReplayError, match="don't decode as its Content-Encoding 'zstd'"):
        run_replay(
            ReplayConfig(
                tmp_path / "src",
                server.url,
                tmp_path / "out",
                probe=False,
                telemetry=False,
                transforms=Transforms(set_values=[("temperature", 0)]),
            )
        )
    assert app.requests == []
