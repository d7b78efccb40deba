"""``--set`` and ``--model-map`` on a request body sent with a content-encoding (the Codex CLI sends
its ``/responses`` bodies zstd-compressed, other clients gzip theirs) stopped the replay with "body
transforms need a JSON body": the JSON inside is edited now, and sent encoded as it came."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path
from typing import Any

import pytest
import zstandard

from infertap.analysis import Analysis
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


def _refused(tmp_path: Path, exchange: dict[str, Any], transforms: Transforms, match: str) -> None:
    """A replay with ``transforms`` refuses ``exchange`` before anything is sent, saying ``match``."""
    app = FakeUpstream()
    write_capture(tmp_path / "src", [exchange])
    with ServerThread(app) as server, pytest.raises(ReplayError, match=match):
        run_replay(
            ReplayConfig(tmp_path / "src", server.url, tmp_path / "out", probe=False, telemetry=False, transforms=transforms)
        )
    assert app.requests == []


def test_a_body_recorded_cut_short_inside_its_encoding_is_sent_as_recorded_and_refused_by_a_set(tmp_path: Path) -> None:
    """A gzip body cut in its trailer still holds the whole JSON: ``--set`` edited it and sent a whole
    body the client never sent. Cut inside the JSON, the refusal was a JSON error that said nothing of
    the cut. Both are refused now, naming the exchange and why; without transforms both go as recorded."""
    whole = _sent("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tag": "c"}, "gzip")
    trailer = {**whole, "body": whole["body"][:-4]}  # the CRC and size missing: the JSON whole inside
    assert json.loads(zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(trailer["body"]))["tag"] == "c"
    middle = {**whole, "body": whole["body"][: len(whole["body"]) // 2]}
    said = r"exchange src-0 \(POST /v1/chat/completions\): its request body was recorded cut short: its \d+ bytes stop inside the gzip stream"
    for name, cut in (("trailer", trailer), ("middle", middle)):
        # Must differ: cut short, a --set (or a --model-map that applies) refuses it before anything is sent.
        _refused(tmp_path / name / "set", cut, Transforms(set_values=[("temperature", 0)]), said)
        # Sent as recorded, cut as it was: with no transform, or a map that names none of its models (or
        # can't read which: cut inside the JSON, said as a body it can't read).
        maps = [("other", Transforms(model_map={"other": "big"}))]
        if name == "trailer":
            _refused(tmp_path / name / "map", cut, Transforms(model_map={"m": "big"}), said)
        else:
            maps.append(("map", Transforms(model_map={"m": "big"})))
        for how, transforms in (("plain", Transforms()), *maps):
            app, summary = _replay(tmp_path / name / how, [cut], transforms)
            assert summary["sent"] == 1 and [r["body"] for r in app.requests] == [cut["body"]], (name, how)
            assert summary["as_recorded"] == (name == "middle" and how != "plain"), (name, how)
    # Must match: the whole body is edited and sent whole.
    app, summary = _replay(tmp_path / "whole", [whole], Transforms(set_values=[("temperature", 0)]))
    assert summary["sent"] == 1 and _decoded(app.requests[0]["body"], "gzip")["temperature"] == 0


def test_a_deflate_body_is_encoded_again_with_the_wrapping_it_came_in(tmp_path: Path) -> None:
    """Raw deflate (no zlib header, as some clients send it) went out zlib-wrapped after a ``--set``."""
    raw = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    stream = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    forms = {"raw": stream.compress(raw) + stream.flush(), "zlib": zlib.compress(raw)}
    headers = [["content-type", "application/json"], ["content-encoding", "deflate"]]
    for form, body in forms.items():
        exchange = {"path": "/v1/chat/completions", "body": body, "headers": headers}
        app, summary = _replay(tmp_path / form, [exchange], Transforms(set_values=[("temperature", 0)]))
        assert summary["sent"] == 1
        sent = app.requests[0]["body"]
        wbits = -zlib.MAX_WBITS if form == "raw" else zlib.MAX_WBITS
        assert json.loads(zlib.decompress(sent, wbits)) == {**json.loads(raw), "temperature": 0}, form  # must match
        with pytest.raises(zlib.error):  # must differ: not in the other wrapping
            zlib.decompress(sent, zlib.MAX_WBITS if form == "raw" else -zlib.MAX_WBITS)


def test_plain_json_under_a_gzip_label_is_sent_as_recorded_refused_by_a_set_and_said(tmp_path: Path, monkeypatch) -> None:
    """A body labelled gzip that is plain JSON: a server that undoes the encoding refuses it, so the
    replay sends it as recorded. A ``--set`` stopped the replay mid-run with "this one isn't JSON"; it
    is refused before anything is sent now, and the analysis, which reads it as JSON, says so."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tag": "p"}
    plain = {
        **_sent("/v1/chat/completions", body, None),
        "headers": [["content-type", "application/json"], ["content-encoding", "gzip"]],
    }
    said = r"exchange src-0 \(POST /v1/chat/completions\): .*its bytes are plain JSON, not the gzip its Content-Encoding says"
    _refused(tmp_path / "set", plain, Transforms(set_values=[("temperature", 0)]), said)
    app, summary = _replay(tmp_path / "asis", [plain], Transforms())
    assert summary["sent"] == 1 and [r["body"] for r in app.requests] == [plain["body"]]
    # A --model-map passes it as recorded, and says so, as a body it can't read.
    app, summary = _replay(tmp_path / "map", [plain], Transforms(model_map={"m": "big"}))
    assert [r["body"] for r in app.requests] == [plain["body"]] and summary["as_recorded"] == 1
    with Analysis([tmp_path / "asis" / "src"]) as an:
        [warning] = an.warnings
        assert "1 request body is plain JSON sent under a Content-Encoding it is not in: read as JSON here" in warning
        assert an.sql("SELECT count(*) FROM requests WHERE generation").fetchall() == [(1,)]  # read as JSON
    # Must match: the same body gzipped is read and edited, and nothing is said.
    encoded = _sent("/v1/chat/completions", body, "gzip")
    app, summary = _replay(tmp_path / "gz", [encoded], Transforms(model_map={"m": "big"}))
    assert _decoded(app.requests[0]["body"], "gzip")["model"] == "big" and summary["as_recorded"] == 0
    with Analysis([tmp_path / "gz" / "src"]) as an:
        assert an.warnings == []
