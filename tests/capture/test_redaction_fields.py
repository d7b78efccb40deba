"""Credentials a body holds under names read by where they stand (an MCP server's
``authorization_token``, an MCP tool's ``headers``, an Azure On Your Data ``authentication``
object) or inside a URL-valued string: redacted through the real recorder, and never replayed."""

from __future__ import annotations

import json

import httpx
import pytest

from infertap.capture.reader import CaptureReader
from infertap.capture.redact import REDACTED, Redactor
from infertap.replay import ReplayConfig, ReplayError, Transforms, run_replay
from infertap.replay.transforms import redacted_fields
from tests.helpers import decompressed_bytes

SECRETS = {
    "mcp": "MCPTOKEN-SECRET-111",
    "azure": "AZSEARCH-SECRET-222",
    "es_key": "ESKEY-SECRET-333",
    "cosmos": "AccountKey=COSMOS-SECRET-444==",
    "header": "XCUSTOM-SECRET-555",
    "cookie": "session=COOKIE-SECRET-666",
    "url_key": "URLKEY-SECRET-777",
    "url_password": "URLPASS-SECRET-888",
}


def _body() -> dict:
    s = SECRETS
    return {
        "model": "m",
        "stream": False,
        "messages": [{"role": "user", "content": "open https://docs.example/?key=prompt-text-stays please"}],
        "mcp_servers": [{"type": "url", "url": "https://mcp.example/sse", "name": "x", "authorization_token": s["mcp"]}],
        "data_sources": [
            {"type": "azure_search", "parameters": {"authentication": {"type": "api_key", "key": s["azure"]}}},
            {
                "type": "elasticsearch",
                "parameters": {"authentication": {"type": "key_and_key_id", "key": s["es_key"], "key_id": "es-id"}},
            },
            {
                "type": "azure_cosmos_db",
                "parameters": {"authentication": {"connection_string": f"AccountEndpoint=https://c;{s['cosmos']}"}},
            },
        ],
        "tools": [
            {
                "type": "mcp",
                "server_label": "a",
                "server_url": f"https://bot:{s['url_password']}@mcp.example/v1?api_key={s['url_key']}&region=eu",
                "headers": {"X-Custom-Token": s["header"], "Cookie": s["cookie"], "X-Trace": "trace-kept"},
            }
        ],
    }


def test_credentials_under_contextual_names_and_in_urls_never_reach_the_capture(fake, record):
    app, url = fake
    rec = record(url, "--no-probe", "--no-telemetry")
    raw = json.dumps(_body()).encode()
    r = httpx.post(rec.url + "/echo-body", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 400 and SECRETS["mcp"].encode() in r.content  # the upstream got the real values
    assert rec.stop() == 0
    data = decompressed_bytes(rec.out)
    for secret in SECRETS.values():
        assert secret.encode() not in data, secret
    (x,) = rec.exchanges()
    stored = json.loads(x["request_body"])
    assert stored["mcp_servers"][0]["authorization_token"] == REDACTED
    assert stored["data_sources"][0]["parameters"]["authentication"] == {"type": "api_key", "key": REDACTED}
    assert stored["data_sources"][2]["parameters"]["authentication"]["connection_string"] == REDACTED
    tool = stored["tools"][0]
    assert tool["headers"] == {"X-Custom-Token": REDACTED, "Cookie": REDACTED, "X-Trace": "trace-kept"}
    assert tool["server_url"] == f"https://bot:REDACTED@mcp.example/v1?api_key={REDACTED}&region=eu"
    assert stored["messages"] == _body()["messages"]  # prose that quotes a URL is no URL
    assert stored["mcp_servers"][0]["url"] == "https://mcp.example/sse"
    # every other byte as sent
    quoted = [SECRETS[k] for k in ("mcp", "azure", "es_key", "header", "cookie")] + [
        "es-id",
        f"AccountEndpoint=https://c;{SECRETS['cosmos']}",
    ]
    expected = raw.decode()
    for value in quoted:
        expected = expected.replace(json.dumps(value), json.dumps(REDACTED))
    expected = expected.replace(SECRETS["url_password"], "REDACTED").replace(SECRETS["url_key"], REDACTED)
    assert x["request_body"] == expected.encode()
    assert all(s.encode() not in b"".join(x["chunks"]) for s in SECRETS.values())


def test_a_body_field_is_read_as_the_parsed_walk_reads_it():
    """Bytes and parsed value agree: the engine snapshot's redaction (``json_value``) and a replay's
    check read the same fields as the body scan."""
    body = _body()
    clean = Redactor().json_value(body)
    assert json.loads(Redactor().body(json.dumps(body).encode())) == clean
    assert sorted(redacted_fields(clean)) == [
        "data_sources.0.parameters.authentication.key",
        "data_sources.1.parameters.authentication.key",
        "data_sources.1.parameters.authentication.key_id",
        "data_sources.2.parameters.authentication.connection_string",
        "mcp_servers.0.authorization_token",
        "tools.0.headers.Cookie",
        "tools.0.headers.X-Custom-Token",
        "tools.0.server_url",
    ]


@pytest.mark.parametrize(
    "keep",
    [
        {
            "tools": [
                {"type": "function", "parameters": {"properties": {"authentication": {"type": "string", "description": "how"}}}}
            ]
        },
        {"headers": {"X-Trace": "t-1", "Accept": "application/json"}},
        {"authentication": {"type": "system_assigned_managed_identity"}},
        {"url": "https://example.com/a?page=2&q=cats#top"},
        {"content": "https://example.com/?key=shown in prose"},
    ],
)
def test_what_only_looks_like_those_fields_is_kept_byte_for_byte(keep):
    raw = json.dumps({"model": "m", **keep}).encode()
    assert Redactor().body(raw) == raw


def test_a_recorded_mcp_token_is_never_replayed(fake, record, tmp_path):
    """The replay of a body whose token the recorder took out is refused until the target's is
    given: the target never gets the placeholder nor, ever, the user's token."""
    app, url = fake
    rec = record(url, "--no-probe", "--no-telemetry")
    body = {"model": "m", "stream": False, "messages": [{"role": "user", "content": "hi"}]}
    body["mcp_servers"] = [
        {"type": "url", "url": f"https://mcp.example/?token={SECRETS['url_key']}", "authorization_token": SECRETS["mcp"]}
    ]
    assert httpx.post(rec.url + "/v1/chat/completions", json=body).status_code == 200
    assert rec.stop() == 0
    app.requests.clear()
    with pytest.raises(ReplayError, match="--set mcp_servers.0.url=VALUE|--set mcp_servers.0.authorization_token=VALUE"):
        run_replay(ReplayConfig(rec.out, url, tmp_path / "out", probe=False))
    assert app.requests == []
    given = Transforms(set_values=[("mcp_servers.0.authorization_token", "TARGET-TOKEN-1"), ("mcp_servers.0.url", "https://t/")])
    run_replay(ReplayConfig(rec.out, url, tmp_path / "given", probe=False, transforms=given))
    (sent,) = [r for r in app.requests if r["path"] == "/v1/chat/completions"]
    assert json.loads(sent["body"])["mcp_servers"] == [
        {"type": "url", "url": "https://t/", "authorization_token": "TARGET-TOKEN-1"}
    ]
    assert not any(s.encode() in r["body"] for r in app.requests for s in SECRETS.values())
    assert CaptureReader(tmp_path / "given").exchanges()
