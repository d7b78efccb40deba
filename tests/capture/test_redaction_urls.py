"""A redacted URL stays a URL: what Redactor.url writes parses, and a capture holding the older
``user:[REDACTED]@`` form (which urlsplit refuses as an IPv6 host) is still read by every command."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from click.testing import CliRunner

from infertap.capture.hostfacts import engine_is_local, url_parts
from infertap.capture.redact import Redactor
from infertap.cli import cli
from infertap.engines import detect
from infertap.engines.probe import snapshot
from tests import sdk_shapes
from tests.analysis_builders import JSON_HEADERS, exchange, write_capture
from tests.fake_engines import sglang_app

OLD_LOCAL = "http://svc:[REDACTED]@127.0.0.1:30000"  # as captures recorded before this form changed hold it


@pytest.mark.parametrize(
    ("url", "secret"),
    [
        ("http://svc:pw-1234@127.0.0.1:8080/v1", "pw-1234"),
        ("http://sk-token-5678@[::1]:8080", "sk-token-5678"),
        ("https://u:pw-9@engine.example", "pw-9"),
    ],
)
def test_a_redacted_url_parses_as_the_url_it_was(url: str, secret: str) -> None:
    shown, parts = urlsplit(Redactor().url(url)), urlsplit(url)
    assert (shown.hostname, shown.port, shown.path) == (parts.hostname, parts.port, parts.path)
    assert secret not in shown.geturl()


@pytest.mark.parametrize(
    ("url", "host", "local"),
    [
        (OLD_LOCAL, "127.0.0.1", True),
        ("http://[REDACTED]@gpu-box:8000/v1", "gpu-box", False),
        ("http://svc:REDACTED@[::1]:8000", "::1", True),
        ("http://localhost:8000", "localhost", True),
    ],
)
def test_a_stored_url_of_either_form_is_read(url: str, host: str, local: bool) -> None:
    assert url_parts(url).hostname == host and engine_is_local(url) is local


def _old_form_capture(tmp_path: Path) -> Path:
    """A capture whose snapshot, exchanges and recorder name the engine in the old form."""
    routes = sglang_app().routes

    def answer(request: httpx.Request) -> httpx.Response:
        found = routes.get((request.method, request.url.path))
        return httpx.Response(200, json=found) if found is not None else httpx.Response(404, json={})

    engine = detect(httpx.Client(transport=httpx.MockTransport(answer)), "http://svc:pw@127.0.0.1:30000")
    snap = dict(snapshot(engine), url=OLD_LOCAL)
    engine.http.close()
    choice = {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    answer = {"id": "c1", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]}
    answer_body = json.dumps(sdk_shapes.chat_completion(answer)).encode()
    xs = [
        exchange(f"x{i}", sent_ms=i * 100, chunks=[(5, answer_body)], headers=JSON_HEADERS, upstream=OLD_LOCAL) for i in range(3)
    ]
    return write_capture(tmp_path / "cap", [snap, *xs], recorder={"kind": "proxy", "upstream": OLD_LOCAL, "pid": 1})


def test_claim_and_report_read_a_capture_holding_the_old_form(tmp_path: Path) -> None:
    capture = _old_form_capture(tmp_path)
    for args in (
        ["claim", str(capture), "--json", "--cache-dir", str(tmp_path / "cache")],
        ["report", str(capture), "-o", str(tmp_path / "report.html")],
    ):
        run = CliRunner().invoke(cli, args, catch_exceptions=True)
        assert run.exit_code == 0, (args, run.output, run.exception)


def test_a_url_valued_header_loses_its_query_credentials_and_keeps_the_rest() -> None:
    """``:path``, Referer, Origin and Location hold URLs: the proxy, the mitm addon and the importer
    (all through ``header_pairs``) redact their credentials as the URL's own, the rest as sent."""
    found: set[str] = set()
    out = Redactor().headers_from_asgi(
        [
            (b":path", b"/v1beta/models/g:generateContent?alt=sse&key=AIza-path-secret-1"),
            (b"Referer", b"https://app.example/chat?token=referer-secret-2#tab"),
            (b"Location", b"https://u:location-pass-3@cdn.example/o"),
            (b"Origin", b"https://app.example"),
            (b"X-Note", b"https://app.example/?token=not-a-url-header"),
        ],
        found,
    )
    assert out == [
        [":path", "/v1beta/models/g:generateContent?alt=sse&key=[REDACTED]"],
        ["Referer", "https://app.example/chat?token=[REDACTED]#tab"],
        ["Location", "https://u:REDACTED@cdn.example/o"],
        ["Origin", "https://app.example"],
        ["X-Note", "https://app.example/?token=not-a-url-header"],
    ]
    assert {"AIza-path-secret-1", "referer-secret-2", "location-pass-3"} <= found
