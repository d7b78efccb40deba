"""``infertap record`` refuses options that can't mean anything, with the option named, before it
listens or creates a capture: a port past 65535, sizes and timeouts that aren't above 0."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from infertap.cli import cli
from infertap.errors import ConfigError
from infertap.proxy.server import RecordConfig


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--listen", "127.0.0.1:99999"], "port 99999: 0 to 65535"),
        (["--listen", "127.0.0.1:²"], "expected HOST:PORT"),  # a digit to str.isdigit, not to int
        (["--max-body-mb", "0"], "--max-body-mb: a size above 0"),
        (["--max-segment-mb", "-1"], "--max-segment-mb: a size above 0"),
        (["--connect-timeout", "0"], "--connect-timeout 0.0: seconds, above 0"),
        (["--read-timeout", "-1"], "--read-timeout -1.0: seconds, above 0"),
        (["--graceful-timeout", "-1"], "--graceful-timeout -1.0: seconds, 0 or more"),
        (["--probe-interval", "0"], "--probe-interval 0.0: seconds, above 0"),
        (["--header-timeout", "-1"], "--header-timeout -1.0: seconds, above 0"),
        (["--max-header-kb", "0"], "--max-header-kb: a size above 0"),
        (["--max-header-kb", "nan"], "--max-header-kb: a size above 0 and finite"),
        (["--body-timeout", "-1"], "--body-timeout -1.0: seconds, above 0"),
        (["--body-timeout", "nan"], "--body-timeout nan: not a finite number of seconds"),
        (["--body-timeout", "inf"], "--body-timeout inf: not a finite number of seconds"),
        (["--body-timeout", "soon"], "Invalid value for '--body-timeout': 'soon' is not a valid float"),
        (["--body-wait", "-1"], "--body-wait -1.0: seconds, 0 or more"),
        (["--body-wait", "nan"], "--body-wait nan: not a finite number of seconds"),
    ],
)
def test_meaningless_options_are_refused_before_anything_starts(tmp_path: Path, option: list[str], message: str) -> None:
    out = tmp_path / "capture"
    result = CliRunner().invoke(cli, ["record", "--upstream", "http://127.0.0.1:9", "--out", str(out), "--no-probe", *option])
    assert result.exit_code != 0 and message in result.output, result.output
    assert "Traceback" not in result.output and not out.exists()


def test_the_library_refuses_them_too(tmp_path: Path) -> None:
    RecordConfig("http://127.0.0.1:9", tmp_path, port=0, read_timeout=None, graceful_timeout=0)  # any port; no limit; at once
    for bad in ({"port": 65536}, {"max_body_bytes": 0}, {"connect_timeout": -1.0}, {"enrich_queue": 0}, {"max_header_bytes": 0}):
        with pytest.raises(ConfigError):
            RecordConfig("http://127.0.0.1:9", tmp_path, **bad)  # type: ignore[arg-type]


def test_the_recorder_launcher_takes_any_path_like_out(fake, tmp_path):
    """``launch.recorder`` read ``out.parent`` and ``out.name``: a ``str`` failed with AttributeError."""
    from infertap.capture.reader import CaptureReader
    from infertap.launch import recorder

    _, upstream = fake
    out = str(tmp_path / "cap")
    with recorder(upstream, out) as proc:
        assert proc.url.startswith("http://127.0.0.1:")
    assert [r["type"] for r in CaptureReader(out).records()][0] == "header"


def test_a_body_timeout_of_0_is_no_limit(fake, record):
    """0 on the command line is no limit (as --read-timeout's and --header-timeout's), not a refusal."""
    import httpx

    _, upstream = fake
    rec = record(upstream, "--no-probe", "--body-timeout", "0")
    assert httpx.post(f"{rec.url}/status/200", content=b'{"tag": "t"}', timeout=10).status_code == 200
    assert rec.stop() == 0
    (x,) = rec.exchanges()
    assert (x["status"], x["end"], x["request_body"]) == (200, "complete", b'{"tag": "t"}')
    with pytest.raises(ConfigError, match="--body-timeout 0: seconds, above 0"):
        RecordConfig("http://127.0.0.1:9", Path("unused"), body_timeout=0)  # the library's "no limit" is None


@pytest.mark.parametrize("wait", ["0", "30"])
def test_body_wait_sets_how_long_a_head_of_no_length_waits_for_its_body(fake, record, wait):
    """A POST head with neither Content-Length nor chunked encoding, sent alone, waited 0.5 s for a
    body sent so, whatever the command line said: --body-wait sets it. 0: forwarded at once, bodiless
    (its answer read before anything more is sent); 30: a body sent a second later is still its own,
    one refusal with every byte, and nothing reaches the upstream."""
    import socket
    import time

    app, upstream = fake
    rec = record(upstream, "--no-probe", "--no-telemetry", "--body-wait", wait)
    host, port = rec.url.removeprefix("http://").split(":")
    body = b'{"tag": "late"}'
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"POST /status/201 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        if wait == "30":
            time.sleep(1)  # past the default wait, well within this one
            s.sendall(body)
            s.shutdown(socket.SHUT_WR)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    assert rec.stop() == 0
    (x,) = rec.exchanges()
    if wait == "0":
        assert out.startswith(b"HTTP/1.1 201") and [r["body"] for r in app.requests] == [b""]
        assert (x["end"], x["status"], x["request_body"]) == ("complete", 201, b"")
    else:
        assert out.startswith(b"HTTP/1.1 400") and app.requests == []
        assert (x["end"], x["status"], x["method"], x["request_body"]) == ("refused", 400, "POST", body)
