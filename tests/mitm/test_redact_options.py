"""``--redact-header`` and ``--redact-query`` on every recorder that is not ``record`` (whose own
tests are in tests/proxy): ``import`` and ``mitm`` (its addon's ``infertap_redact`` and
``infertap_redact_query`` under mitmdump), names in any case, one Redactor behind them all."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from infertap.capture.reader import CaptureReader
from tests.helpers import decompressed_bytes

# Secrets under names no default rule knows (not auth, key, token, secret, ...): only the options catch them.
NAMED = "GWSIG-named-by-the-option-9191"  # X-Gateway-Sig, and ?gwsig= in the URL
QUERY = "GWQ-named-by-the-option-8282"
KEPT = "TENANT-not-named-7373"  # X-Tenant-Sig: named by no option, kept
SESSION = "SESSION-named-by-the-option-6464"  # X-Session-Id, a session header the user redacts


def _files(tmp_path: Path) -> list[Path]:
    """A HAR and a flow file of one request carrying the three, its response echoing the named one in
    a header and the body."""
    from mitmproxy import io
    from mitmproxy.test import tflow

    sent = [("X-Gateway-Sig", NAMED), ("X-Tenant-Sig", KEPT), ("X-Session-Id", SESSION), ("Content-Type", "application/json")]
    answer = [("Content-Type", "application/json"), ("X-Echo-Sig", NAMED)]
    body = json.dumps({"error": {"message": f"bad signature {NAMED}"}})
    har = {
        "startedDateTime": "2026-01-01T00:00:00.000Z",
        "time": 100,
        "request": {
            "method": "POST",
            "url": f"https://gw.example.com/v1/chat/completions?gwsig={QUERY}",
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": n, "value": v} for n, v in sent],
            "postData": {"mimeType": "application/json", "text": '{"model":"m","messages":[]}'},
        },
        "response": {
            "status": 401,
            "headers": [{"name": n, "value": v} for n, v in answer],
            "content": {"mimeType": "application/json", "text": body},
        },
        "timings": {"send": 1, "wait": 50, "receive": 5},
    }
    (tmp_path / "a.har").write_text(json.dumps({"log": {"version": "1.2", "entries": [har]}}))
    flow = tflow.tflow(resp=True)
    flow.request.path = f"/v1/chat/completions?gwsig={QUERY}"
    flow.request.headers.clear()
    for n, v in sent:
        flow.request.headers.add(n, v)
    flow.response.status_code, flow.response.content = 401, body.encode()
    flow.response.headers.clear()
    for n, v in answer:
        flow.response.headers.add(n, v)
    with open(tmp_path / "a.flows", "wb") as fh:
        io.FlowWriter(fh).add(flow)
    return [tmp_path / "a.har", tmp_path / "a.flows"]


@pytest.mark.parametrize("kind", ["har", "flows"])
def test_import_redacts_the_headers_and_query_parameters_it_is_told_in_any_case(tmp_path: Path, kind: str) -> None:
    """`import --redact-header/--redact-query` (as record's): the named secrets reach no byte of
    the capture, its request headers, query, nor the response's header and body that echo them;
    without the options the same file keeps them, as no name rule knows them."""
    from click.testing import CliRunner

    from infertap.cli import cli

    source = next(p for p in _files(tmp_path) if p.suffix == f".{kind}")
    told, untold = tmp_path / "told", tmp_path / "untold"
    options = ["--redact-header", "x-GATEWAY-sig", "--redact-query", "GWSIG", "--redact-header", "X-session-ID"]
    for out, extra in ((told, options), (untold, [])):
        result = CliRunner().invoke(cli, ["import", str(source), "--out", str(out), *extra])
        assert result.exit_code == 0, result.output
    data = decompressed_bytes(told)
    assert NAMED.encode() not in data and QUERY.encode() not in data
    # A redacted session header names no session: its id reached the capture in clear as the
    # exchange's session (a flow file), or every request was in session "[REDACTED]" (a HAR).
    assert SESSION.encode() not in data
    (x,) = CaptureReader(told).exchanges()
    assert x["session"] is None and ["x-session-id", "[REDACTED]"] in x["request_headers"]
    assert next(CaptureReader(untold).exchanges())["session"] == SESSION
    assert ["x-gateway-sig", "[REDACTED]"] in x["request_headers"] and x["query"] == "gwsig=[REDACTED]"
    assert ["X-Echo-Sig", "[REDACTED]"] in x["response_headers"]
    # Must differ: a header no option names is kept, and without the options so is the named one.
    assert ["x-tenant-sig", KEPT] in x["request_headers"]
    kept = decompressed_bytes(untold)
    assert NAMED.encode() in kept and QUERY.encode() in kept


@pytest.mark.parametrize(
    ("mitmdump", "options"),
    [
        (False, ["--redact-header", "x-GATEWAY-sig", "--redact-query", "GWSIG", "--redact-header", "X-session-ID"]),
        (
            True,
            [
                "--set",
                "infertap_redact=x-GATEWAY-sig",
                "--set",
                "infertap_redact=X-session-ID",
                "--set",
                "infertap_redact_query=GWSIG",
            ],
        ),
    ],
    ids=["infertap-mitm", "mitmdump"],
)
def test_mitm_redacts_the_headers_and_query_parameters_it_is_told_in_any_case(start_mitm, fake, mitmdump, options):
    """`infertap mitm --redact-header/--redact-query`, and the addon's options under mitmdump: the
    named secrets reach no byte of the capture, where the upstream echoes them back too."""
    app, url = fake
    mitm = start_mitm("--mode", f"reverse:{url}", "--set", "infertap_match=/echo", *options, mitmdump=mitmdump)
    r = httpx.post(
        f"{mitm.url}/echo?gwsig={QUERY}",
        content=b"{}",
        headers={"X-Gateway-Sig": NAMED, "X-Tenant-Sig": KEPT, "X-Session-Id": SESSION},
        timeout=10,
    )
    assert r.status_code == 200 and NAMED in r.text  # the client got the echo as sent
    mitm.stop()
    data = decompressed_bytes(mitm.out)
    assert NAMED.encode() not in data and QUERY.encode() not in data and SESSION.encode() not in data
    (x,) = mitm.exchanges()
    assert x["session"] is None  # a redacted session header names none
    assert {n.lower(): v for n, v in x["request_headers"]}["x-gateway-sig"] == "[REDACTED]"
    assert x["query"] == "gwsig=[REDACTED]"
    assert KEPT.encode() in data  # must differ: a header no option names is kept
