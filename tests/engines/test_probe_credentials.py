"""An engine URL's credentials never reach its snapshot: not its facts' sources, not its URL."""

from __future__ import annotations

import json

import httpx

from infertap.engines import detect
from infertap.engines.base import Engine
from infertap.engines.probe import snapshot
from infertap.engines.runtime_digest import runtime_digest
from tests.fake_engines import sglang_app

PASSWORD = "pw-snapshot-31337"
REMOTE = f"http://svc:{PASSWORD}@gpu-box.example:30000"  # another machine's engine, with its password


def _engine(url: str) -> Engine:
    """SGLang at ``url``, answered through httpx's MockTransport: an engine on another machine."""
    routes = sglang_app().routes

    def answer(request: httpx.Request) -> httpx.Response:
        found = routes.get((request.method, request.url.path))
        return httpx.Response(200, json=found) if found is not None else httpx.Response(404, json={"detail": "Not Found"})

    return detect(httpx.Client(transport=httpx.MockTransport(answer)), url)


def test_the_runtime_digest_of_a_remote_engine_names_its_url_without_the_password() -> None:
    digest = runtime_digest(REMOTE, "sglang")
    assert digest.sha256 is None and PASSWORD not in digest.what
    assert "http://svc:REDACTED@gpu-box.example:30000 is not on this machine" in digest.what


def test_a_snapshot_of_an_engine_reached_with_a_password_holds_it_nowhere() -> None:
    engine = _engine(REMOTE)
    snap = snapshot(engine)
    engine.http.close()
    assert snap["kind"] == "sglang" and not snap["host_is_engine_host"]
    assert PASSWORD not in json.dumps(snap, default=str)
    assert "svc:REDACTED@gpu-box.example" in snap["facts"]["runtime_sha256"]["source"]


def test_a_fact_whose_source_quotes_the_url_loses_its_password_in_the_snapshot() -> None:
    """The backstop: whatever an adapter's message quotes, the snapshot keeps no password."""
    engine = _engine(REMOTE)
    plain_facts = engine.facts

    def quoting() -> dict:
        facts = plain_facts()
        facts["version"]["source"] += f" (asked {engine.base})"
        return facts

    engine.facts = quoting  # type: ignore[method-assign]
    snap = snapshot(engine)
    engine.http.close()
    assert PASSWORD not in json.dumps(snap, default=str) and "(asked http://svc:" in snap["facts"]["version"]["source"]
