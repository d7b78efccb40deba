"""A request whose body the recorder did not keep (``request_body_size``, an empty ``request_body``)
is left out of a replay, counted and said: sent empty it would be another request. A request
recorded with a body that really is empty is sent; one infertap refused was never sent, and isn't."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from click.testing import CliRunner

from infertap.capture.records import request_body_unknown
from infertap.cli import cli
from tests.fake_upstream import FakeUpstream, ServerThread
from tests.helpers import write_capture


def chat(tag: str) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": tag}], "stream": False, "tag": tag}


def _replay(capture: Path, url: str, out: Path, *extra: str) -> Any:
    args = ["replay", str(capture), "--target", url, "--out", str(out), "--no-probe", "--no-telemetry", *extra]
    return CliRunner().invoke(cli, args)


def test_a_body_not_kept_is_left_out_and_said_an_empty_one_is_sent(tmp_path: Path) -> None:
    write_capture(
        tmp_path / "cap",
        [
            {"body": chat("kept")},
            # Passed on upstream but not kept (infertap mitm over infertap_max_body, a failed search).
            {"body": b"", "fields": {"request_body_size": 9000}},
            # An import's request whose body the file doesn't hold.
            {"body": b"", "fields": {"body_not_in_file": ["request"], "request_body_size": 40}},
            {"method": "GET", "path": "/v1/models", "body": b""},  # empty, and known to be
            # Refused by infertap over --max-body-mb: the upstream never saw it.
            {"body": b"", "end": "refused", "status": 413, "fields": {"request_body_size": 9000, "proxy_generated": True}},
        ],
    )
    app = FakeUpstream()
    with ServerThread(app) as server:
        done = _replay(tmp_path / "cap", server.url, tmp_path / "o1", "--json")
        assert done.exit_code == 0, done.output
        summary = json.loads(done.stdout)
        assert summary["not_kept"] == 2 and summary["sent"] == 2
        assert [(r["path"], r["body"]) for r in app.requests] == [
            ("/v1/chat/completions", json.dumps(chat("kept")).encode()),
            ("/v1/models", b""),
        ]
        assert "2 exchanges left out, not sent" in done.stderr
        app.requests.clear()
        text = _replay(tmp_path / "cap", server.url, tmp_path / "o2")
        assert text.exit_code == 0, text.output
        assert "left out" in text.stdout and "not kept" in text.stdout
        assert len(app.requests) == 2
        # Counted among those the filters choose: a GET chosen alone leaves nothing out.
        only = _replay(tmp_path / "cap", server.url, tmp_path / "o3", "--json", "--filter", "path=/v1/models")
        assert only.exit_code == 0 and json.loads(only.stdout)["not_kept"] == 0
    # Every exchange kept: nothing left out.
    write_capture(tmp_path / "whole", [{"body": chat("a")}, {"body": chat("b")}])
    with ServerThread(FakeUpstream()) as server:
        whole = _replay(tmp_path / "whole", server.url, tmp_path / "o5", "--json")
        assert whole.exit_code == 0 and json.loads(whole.stdout)["not_kept"] == 0


def test_only_bodies_not_kept_left_is_a_clear_error(tmp_path: Path) -> None:
    write_capture(tmp_path / "cap", [{"body": chat("a")}, {"offset_s": 5, "body": b"", "fields": {"request_body_size": 9}}])
    app = FakeUpstream()
    with ServerThread(app) as server:
        done = _replay(tmp_path / "cap", server.url, tmp_path / "out", "--filter", "after=4")
        assert done.exit_code != 0 and "request bodies not kept" in done.output
        assert app.requests == []
    assert (tmp_path / "cap").exists()


def test_a_request_the_real_recorder_refused_over_max_body_is_not_replayed(fake: Any, record: Any, tmp_path: Path) -> None:
    app, url = fake
    rec = record(url, "--max-body-mb", "0.001")
    assert httpx.post(f"{rec.url}/v1/chat/completions", json={**chat("big"), "pad": "x" * 5000}, timeout=10).status_code == 413
    assert httpx.post(f"{rec.url}/v1/chat/completions", json=chat("small"), timeout=10).status_code == 200
    rec.stop()
    app.requests.clear()
    done = _replay(rec.out, url, tmp_path / "out", "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["not_kept"] == 0  # refused, never sent: not among those left out
    assert [json.loads(r["body"])["tag"] for r in app.requests] == ["small"]


def test_a_body_mitmproxy_streamed_unseen_is_unknown_and_not_replayed(tmp_path: Path) -> None:
    """``infertap mitm`` marks a body mitmproxy streamed with no hook between (``request_body_not_kept``):
    its empty body, with no size known, is as unknown as one ``request_body_size`` marks."""
    why = {"request_body_not_kept": "mitmproxy streamed it with no hook between"}
    assert request_body_unknown({"request_body": b"", **why})
    assert not request_body_unknown({"request_body": b""})
    write_capture(tmp_path / "cap", [{"body": chat("kept")}, {"body": b"", "fields": why}])
    app = FakeUpstream()
    with ServerThread(app) as server:
        done = _replay(tmp_path / "cap", server.url, tmp_path / "out", "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["not_kept"] == 1
    assert [r["body"] for r in app.requests] == [json.dumps(chat("kept")).encode()]
