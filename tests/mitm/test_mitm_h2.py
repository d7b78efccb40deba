"""HTTP/2 through `infertap mitm`: who ended a stream is recorded the right way round.

mitmproxy words an RST_STREAM from either peer "stream reset by client (CODE)" and either
connection closing "peer closed connection"; the addon used to read the first as the client gone
and the second as the upstream failing, so an engine that reset a stream was recorded as a client
that left (or as complete, after an end marker), and a client that closed its connection as an
engine failure."""

from __future__ import annotations

import pytest

from tests.mitm.h2peers import H2Upstream, h2_stream


@pytest.fixture
def h2_upstream(tmp_path):
    with H2Upstream(tmp_path) as upstream:
        yield upstream.url


@pytest.fixture
def h2_mitm(start_mitm, h2_upstream):
    mitm = start_mitm("--mode", f"reverse:{h2_upstream}", "--set", "ssl_insecure=true", "--no-telemetry")
    return mitm, mitm.port


def _ending(mitm) -> tuple[str, str | None, bool, bytes]:
    mitm.stop()
    (x,) = mitm.exchanges()
    assert x["http_version"] == "2.0"
    return x["end"], x["error"], bool(x.get("closed_after_end")), b"".join(x["chunks"])


def test_an_upstream_reset_is_an_upstream_error(h2_mitm):
    mitm, port = h2_mitm
    got = h2_stream(port, "/v1/chat/completions?n=2&then=reset")
    end, error, _, body = _ending(mitm)
    assert (end, body) == ("upstream_error", got) and "INTERNAL_ERROR" in error


def test_an_upstream_cancelling_its_stream_is_an_upstream_error_not_a_client_gone(h2_mitm):
    """A CANCEL reset is how a client gives its stream up (RFC 9113 8.7), but an upstream may send
    one too (an engine aborting a request), its client still connected: mitmproxy words both
    alike, and this one was recorded as the client's."""
    mitm, port = h2_mitm
    got = h2_stream(port, "/v1/chat/completions?n=2&then=cancel")
    end, error, _, body = _ending(mitm)
    assert (end, body) == ("upstream_error", got) and "CANCEL" in error


def test_through_a_regular_proxy_a_cancel_is_told_by_its_side_too(start_mitm, h2_upstream):
    """In a CONNECT tunnel mitmproxy's stream lies deeper in its layers: both sides still told."""
    mitm = start_mitm("--set", "ssl_insecure=true", "--no-telemetry")
    target = h2_upstream.removeprefix("https://")
    h2_stream(mitm.port, "/v1/chat/completions?n=2&then=cancel", connect=target)
    h2_stream(mitm.port, "/v1/chat/completions?n=50&then=hold", events=2, how="cancel", connect=target)
    mitm.stop()
    assert [(x["http_version"], x["end"]) for x in mitm.exchanges()] == [
        ("2.0", "upstream_error"),
        ("2.0", "client_disconnected"),
    ]


def test_an_upstream_reset_after_the_end_marker_is_an_upstream_error_not_a_client_gone(h2_mitm):
    mitm, port = h2_mitm
    got = h2_stream(port, "/v1/chat/completions?n=2&then=done-reset")
    end, _, after_end, body = _ending(mitm)
    assert (end, after_end, body) == ("upstream_error", False, got) and got.endswith(b"[DONE]\n\n")


def test_an_upstream_closing_its_connection_mid_stream_is_an_upstream_error(h2_mitm):
    mitm, port = h2_mitm
    got = h2_stream(port, "/v1/chat/completions?n=2&then=close")
    end, error, _, body = _ending(mitm)
    assert (end, body) == ("upstream_error", got) and error


def test_a_client_closing_its_connection_mid_stream_is_a_client_gone(h2_mitm):
    mitm, port = h2_mitm
    got = h2_stream(port, "/v1/chat/completions?n=50&then=hold", events=2, how="close")
    end, _, _, body = _ending(mitm)
    assert end == "client_disconnected" and body.startswith(got)


def test_a_client_cancelling_its_stream_is_a_client_gone(h2_mitm):
    mitm, port = h2_mitm
    got = h2_stream(port, "/v1/chat/completions?n=50&then=hold", events=2, how="cancel")
    end, error, _, body = _ending(mitm)
    assert end == "client_disconnected" and "CANCEL" in error and body.startswith(got)


def test_a_whole_stream_is_complete(h2_mitm):
    mitm, port = h2_mitm
    got = h2_stream(port, "/v1/chat/completions?n=3&then=done")
    end, error, _, body = _ending(mitm)
    assert (end, error, body) == ("complete", None, got) and got.count(b"data:") == 4
