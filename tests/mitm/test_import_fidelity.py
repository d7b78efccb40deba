"""Imports read as the files mean them (HAR 1.2, mitmproxy flows), as `infertap record` would have
recorded the same traffic where the file can say: a HAR body kept decoded, times from the send, no
time made up where the file has none, the traffic's own dates, session headers; a flow's ending
from its error; and analysis reading no token times into an imported stream."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest

from infertap.analysis import Analysis, speed_stats
from infertap.capture.reader import CaptureReader
from infertap.capture.redact import REDACTED
from infertap.mitm.importer import import_file
from tests import sdk_shapes
from tests.helpers import decompressed_bytes


def _data(delta: dict, finish: str | None = None) -> str:
    """One chat chunk's SSE event, written compactly as OpenAI writes it, checked."""
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # fmt: skip
    return "data: " + json.dumps(sdk_shapes.chat_chunk(chunk), separators=(",", ":")) + "\n\n"


SSE = _data({"content": "t "}) * 5 + _data({}, "stop") + "data: [DONE]\n\n"


def _entry(started: str, timings: dict | None, *, encoded: bool = False, session: str | None = None) -> dict:
    headers = [{"name": "Content-Type", "value": "text/event-stream"}]
    if encoded:
        headers.append({"name": "Content-Encoding", "value": "gzip"})  # the body below is decoded, as HAR keeps it
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": started}]}
    entry = {
        "startedDateTime": started,
        "time": sum(v for v in (timings or {}).values() if v > 0) or 700,
        "request": {
            "method": "POST",
            "url": "https://api.example.com/v1/chat/completions",
            "httpVersion": "http/2.0",
            "headers": [{"name": "x-session-id", "value": session}] if session else [],
            "postData": {"mimeType": "application/json", "text": json.dumps(body)},
        },
        "response": {"status": 200, "headers": headers, "content": {"mimeType": "text/event-stream", "text": SSE}},
    }
    if timings is not None:
        entry["timings"] = timings
    return entry


def test_a_har_is_read_as_the_spec_means_it(tmp_path: Path) -> None:
    setup = {"blocked": 300, "dns": 100, "connect": 200, "ssl": 150}
    entries = [
        _entry(
            "2025-01-02T10:00:00.000+00:00", {"send": 1, "wait": 50, "receive": 49, "blocked": -1}, encoded=True, session="S1"
        ),
        _entry("2025-01-02T10:00:01.000+00:00", {**setup, "send": 1, "wait": 50, "receive": 49}, session="S1"),
        _entry("2025-01-02T10:00:02.000+00:00", None),
    ]
    (tmp_path / "a.har").write_text(json.dumps({"log": {"version": "1.2", "entries": entries}}))
    assert import_file(tmp_path / "a.har", tmp_path / "cap")["kept"] == 3
    header = next(r for r in CaptureReader(tmp_path / "cap").records() if r["type"] == "header")
    assert dt.datetime.fromtimestamp(header["wall"], dt.UTC).date() == dt.date(2025, 1, 2)  # the traffic's own day
    xs = list(CaptureReader(tmp_path / "cap").exchanges())
    assert [(x["headers_ns"], x["end_ns"]) for x in xs[:2]] == [(51_000_000, 100_000_000)] * 2  # from the send
    assert xs[2]["headers_ns"] is None and xs[2]["end_ns"] == 700_000_000  # no timings: the whole time, no first byte
    assert [x["session"] for x in xs] == ["S1", "S1", None] and {x["http_version"] for x in xs} == {"2.0"}
    assert all(n.lower() != "content-encoding" for n, _ in xs[0]["response_headers"])
    with Analysis([tmp_path / "cap"], cache_dir=tmp_path / "cache") as a:
        (g,) = speed_stats(a)["groups"]
        rows = a.sql("SELECT readable, sent_wall_ns FROM exchanges ORDER BY seq").fetchall()
    assert [r for r, _ in rows] == [True, True, True]  # the decoded body read, not gunzipped again
    assert dt.datetime.fromtimestamp(rows[0][1] / 1e9, dt.UTC) == dt.datetime(2025, 1, 2, 10, 0, tzinfo=dt.UTC)
    m = g["metrics"]
    assert m["ttft"]["n"] == 0 and m["tpot"]["n"] == 0  # no token's time is in a HAR
    assert m["e2e"]["p50"] == 100.0


def test_a_flow_files_endings_come_from_its_errors(tmp_path: Path) -> None:
    from mitmproxy import io
    from mitmproxy.flow import Error
    from mitmproxy.test import tflow

    def flow(resp: bool, error: str | None, session: str | None = None, h2: str = ""):
        f = tflow.tflow(resp=resp)
        f.request.path = "/v1/chat/completions"
        if "client" in h2:
            f.request.http_version = "HTTP/2.0"
        if "upstream" in h2:
            f.server_conn.alpn = b"h2"
        if error:
            f.error = Error(error)
        if session:
            f.request.headers.add("x-session-id", "A")
            f.request.headers.add("x-session-id", session)  # repeated: the last, as record reads it
        return f

    flows = [
        flow(True, "Client disconnected."),
        flow(True, "HTTP/1 protocol error: peer closed connection without sending complete message body"),
        flow(False, "Client disconnected."),
        # A CANCEL reset over HTTP/2 on both sides: the client's giving up, or the upstream's, which
        # a flow file doesn't tell (it was taken for the client's)
        flow(False, "stream reset by client (CANCEL)", h2="client upstream"),
        flow(False, None),  # in flight when the file was saved
        flow(True, None, session="S2"),
        # mitmproxy words the upstream's RST_STREAM "reset by client" too
        flow(False, "stream reset by client (INTERNAL_ERROR)", h2="client upstream"),
        flow(False, "stream reset by client (CANCEL)", h2="upstream"),  # an HTTP/1 client resets no stream
        flow(False, "peer closed connection", h2="client"),  # an HTTP/1 upstream neither: the client's
    ]
    for i, f in enumerate(flows):
        f.request.timestamp_start += i
    with open(tmp_path / "flows", "wb") as fh:
        writer = io.FlowWriter(fh)
        for f in flows:
            writer.add(f)
    import_file(tmp_path / "flows", tmp_path / "cap")
    xs = list(CaptureReader(tmp_path / "cap").exchanges())
    assert [x["end"] for x in xs] == [
        "client_disconnected",
        "upstream_error",
        "client_disconnected",
        "unknown",
        "upstream_error",
        "complete",
        "upstream_error",
        "upstream_error",
        "client_disconnected",
    ]
    assert "no response" in xs[4]["error"] and xs[5]["session"] == "S2"


def test_an_imports_claim_card_names_its_files_clock(tmp_path: Path) -> None:
    """The card said "the recording process's monotonic clock (ns)" of a HAR's millisecond wall times."""
    from infertap.analysis.claim import claim

    (tmp_path / "a.har").write_text(
        json.dumps({"log": {"version": "1.2", "entries": [_entry("2025-01-02T10:00:00.000+00:00", None)]}})
    )
    import_file(tmp_path / "a.har", tmp_path / "cap")
    header = next(r for r in CaptureReader(tmp_path / "cap").records() if r["type"] == "header")
    assert header["recorder"]["pid"] == os.getpid()  # info tells an import still writing from one that died
    clock = claim(tmp_path / "cap", cache_dir=tmp_path / "cache")["measuring_side"]["value"]["clock"]
    assert "times from the file" in clock and "monotonic" not in clock


def test_a_har_entry_past_latin_1_or_the_clock_is_kept_or_named_never_a_crash(tmp_path: Path) -> None:
    """A header value outside Latin-1 (an X-Title with an emoji) crashed the import after the first
    exchange, leaving a capture that said it had closed cleanly; a timing of 1e308 ms too."""
    entries = [
        _entry("2025-01-02T10:00:00.000+00:00", None, session="S1"),
        _entry("2025-01-02T10:00:01.000+00:00", None, session="café ☕"),
        _entry("2025-01-02T10:00:02.000+00:00", {"send": 1, "wait": 1e308, "receive": 1}),
        _entry("2025-01-02T10:00:03.000+00:00", None),
    ]
    entries[0]["request"]["headers"].append({"name": "X-Title", "value": "Café ☕"})
    (tmp_path / "a.har").write_text(json.dumps({"log": {"version": "1.2", "entries": entries}}))
    counts = import_file(tmp_path / "a.har", tmp_path / "cap")
    assert (counts["kept"], counts["unreadable"]) == (3, 1) and "OverflowError" in counts["first_unreadable"]
    xs = list(CaptureReader(tmp_path / "cap").exchanges())
    # the session as the proxy reads those bytes on the wire (UTF-8 read as Latin-1)
    assert [x["session"] for x in xs] == ["S1", "café ☕".encode().decode("latin-1"), None]
    assert ["x-title", "Café ☕"] in xs[0]["request_headers"]  # its name as record stores it


def test_a_har_of_http2_keeps_no_credential_of_its_urls_and_no_pseudo_header(tmp_path: Path) -> None:
    """An HTTP/2 HAR lists ``:path`` (with Gemini's ``?key=``) among the headers, and a Referer or a
    Location holds a URL with a credential in its query: each is redacted as the URL is, and the
    pseudo-headers, which a replay must not send, are left out."""
    key, token, signature = "AIzaHARPATH-SECRET-444", "REFERER-SECRET-555", "LOCATION-SECRET-666"
    entry = {
        "startedDateTime": "2026-01-01T00:00:00.000Z",
        "time": 100,
        "request": {
            "method": "POST",
            "url": f"https://generativelanguage.googleapis.com/v1beta/models/g:generateContent?key={key}",
            "httpVersion": "http/2.0",
            "headers": [
                {"name": ":method", "value": "POST"},
                {"name": ":authority", "value": "generativelanguage.googleapis.com"},
                {"name": ":path", "value": f"/v1beta/models/g:generateContent?key={key}"},
                {"name": "content-type", "value": "application/json"},
                {"name": "referer", "value": f"https://myapp.example/chat?token={token}&tab=2"},
                {"name": "origin", "value": "https://myapp.example"},
            ],
            "postData": {"mimeType": "application/json", "text": '{"contents":[]}'},
        },
        "response": {
            "status": 302,
            "headers": [
                {"name": ":status", "value": "302"},
                {"name": "location", "value": f"https://cdn.example/o?X-Goog-Signature={signature}"},
            ],
            "content": {"mimeType": "application/json", "text": '{"candidates":[]}'},
        },
        "timings": {"send": 1, "wait": 50, "receive": 5},
    }
    (tmp_path / "g.har").write_text(json.dumps({"log": {"version": "1.2", "entries": [entry]}}))
    import_file(tmp_path / "g.har", tmp_path / "cap", all_paths=True)
    data = decompressed_bytes(tmp_path / "cap")
    for secret in (key, token, signature):
        assert secret.encode() not in data, secret
    (x,) = CaptureReader(tmp_path / "cap").exchanges()
    assert x["request_headers"] == [
        ["content-type", "application/json"],
        ["referer", f"https://myapp.example/chat?token={REDACTED}&tab=2"],
        ["origin", "https://myapp.example"],
    ]
    assert x["response_headers"] == [["location", f"https://cdn.example/o?X-Goog-Signature={REDACTED}"]]
    assert x["query"] == f"key={REDACTED}"


def test_a_flow_file_cut_short_imports_the_flows_before_the_damage(tmp_path: Path) -> None:
    """A flow file cut short (mitmdump killed mid-write, a full disk) imported nothing: the read
    error at its tail threw away every good flow before it."""
    from click.testing import CliRunner
    from mitmproxy import io
    from mitmproxy.test import tflow

    from infertap.cli import cli

    with open(tmp_path / "ok.flows", "wb") as fh:
        writer = io.FlowWriter(fh)
        for i in range(5):
            f = tflow.tflow(resp=True)
            f.request.path = "/v1/chat/completions"
            f.request.content = json.dumps({"i": i}).encode()
            writer.add(f)
    data = (tmp_path / "ok.flows").read_bytes()
    (tmp_path / "cut.flows").write_bytes(data[:-20])
    result = CliRunner().invoke(cli, ["import", str(tmp_path / "cut.flows"), "--out", str(tmp_path / "cap")])
    assert result.exit_code == 0, result.output
    assert "imported 4 exchanges" in result.stdout and "after its flow 4 is damaged" in result.stderr
    assert [json.loads(x["request_body"])["i"] for x in CaptureReader(tmp_path / "cap").exchanges()] == [0, 1, 2, 3]
    counts = import_file(tmp_path / "cut.flows", tmp_path / "cap2")
    assert (counts["kept"], counts["unreadable"]) == (4, 1)
    (tmp_path / "head.flows").write_bytes(data[:10])  # not even one flow: no flow file
    refused = CliRunner().invoke(cli, ["import", str(tmp_path / "head.flows"), "--out", str(tmp_path / "cap3")])
    assert refused.exit_code == 1 and "not a readable mitmproxy flow file" in refused.output


def test_a_har_with_a_byte_order_mark_or_a_leading_blank_line_is_read_as_a_har(tmp_path: Path) -> None:
    """A BOM sent the file to mitmproxy's own HAR reader (imported as "mitmproxy", negative first-byte
    times); a leading newline had it refused."""
    har = json.dumps({"log": {"version": "1.2", "entries": [_entry("2025-01-02T10:00:00.000+00:00", {"send": 1, "wait": 50})]}})
    (tmp_path / "bom.har").write_text(har, encoding="utf-8-sig")
    (tmp_path / "blank.har").write_text("\r\n  " + json.dumps(json.loads(har), indent=2))
    for name in ("bom.har", "blank.har"):
        counts = import_file(tmp_path / name, tmp_path / f"cap-{name}")
        (x,) = CaptureReader(tmp_path / f"cap-{name}").exchanges()
        assert (counts["kind"], x["imported"], x["headers_ns"]) == ("har", "har", 51_000_000), name


@pytest.mark.filterwarnings("ignore:tagMap is deprecated", "ignore:typeMap is deprecated")  # mitmproxy's addons import ldap3
def test_a_har_entrys_failure_and_a_body_it_does_not_hold_are_kept_never_read_as_complete(tmp_path: Path) -> None:
    """Chrome writes a failed request's reason in ``response._error`` (mitmproxy's savehar too): an
    aborted stream (status 200, part of its text) was imported complete, a refused connection
    (status 0) upstream_error with no error and a first-byte time. A HAR saved without content
    said a body was sent and held none: it read as an empty request or answer."""
    from click.testing import CliRunner
    from mitmproxy.addons.savehar import SaveHar
    from mitmproxy.flow import Error
    from mitmproxy.test import tflow

    from infertap.cli import cli

    start = "2025-01-02T10:00:0{}.000+00:00"
    aborted = _entry(start.format(0), {"send": 1, "wait": 50, "receive": 30})
    aborted["response"]["_error"] = "net::ERR_ABORTED"
    aborted["response"]["content"]["text"] = SSE[:150]
    refused = _entry(start.format(1), {"blocked": 2, "send": 0, "wait": 3, "receive": 0})
    refused["response"] = {
        "status": 0,
        "headers": [],
        "content": {"size": 0, "mimeType": "x-unknown"},
        "_error": "net::ERR_CONNECTION_REFUSED",
    }
    timed_out = _entry(start.format(2), {"send": 1, "wait": 30000})
    timed_out["response"] = {**refused["response"], "_error": "net::ERR_TIMED_OUT"}
    no_answer = _entry(start.format(3), {"send": 1, "wait": 50, "receive": 5})
    no_answer["response"]["content"] = {"size": 712, "mimeType": "text/event-stream"}  # saved without content
    no_request = _entry(start.format(4), {"send": 1, "wait": 50, "receive": 5})
    no_request["request"]["bodySize"] = 48
    del no_request["request"]["postData"]
    gone = tflow.tflow(resp=False)  # mitmproxy's own savehar of a flow whose client left
    gone.request.method, gone.request.path = "POST", "/v1/chat/completions"
    gone.error = Error("Client disconnected.")
    (saved,) = SaveHar().make_har([gone])["log"]["entries"]
    saved["startedDateTime"] = start.format(5)
    entries = [aborted, refused, timed_out, no_answer, no_request, saved]
    (tmp_path / "a.har").write_text(json.dumps({"log": {"version": "1.2", "entries": entries}}))
    result = CliRunner().invoke(cli, ["import", str(tmp_path / "a.har"), "--out", str(tmp_path / "cap")])
    assert result.exit_code == 0 and "imported 6 exchanges" in result.stdout, result.output
    assert "2 exchanges sent a body that is not in the file" in result.stderr
    xs = list(CaptureReader(tmp_path / "cap").exchanges())
    assert [(x["end"], x["error"], x["status"]) for x in xs] == [
        ("client_disconnected", "net::ERR_ABORTED", 200),
        ("upstream_error", "net::ERR_CONNECTION_REFUSED", None),
        ("timeout", "net::ERR_TIMED_OUT", None),
        ("complete", None, 200),
        ("complete", None, 200),
        ("client_disconnected", "Client disconnected.", None),
    ]
    assert xs[0]["chunks"] == [SSE[:150].encode()] and [x["headers_ns"] for x in xs[1:3]] == [None, None]
    assert [x.get("body_not_in_file") for x in xs[3:5]] == [["response"], ["request"]]
    assert xs[4]["request_body_size"] == 48 and all("body_not_in_file" not in x for x in xs[:3] + xs[5:])


def test_an_answer_a_har_does_not_hold_is_unknown_never_an_empty_answer(tmp_path: Path) -> None:
    """Chrome saves a HAR without a body's text (``content`` with its ``size`` only; Firefox with
    ``"text": ""``): marked ``body_not_in_file`` on import, but analysis read it as an answer no
    adapter understood: compare scored the pair a divergence (similarity 0, among the most
    divergent) and stats an error. It is neither: left out of compare's divergence and of stats'
    answers, errors and tokens, and said."""
    from click.testing import CliRunner

    from infertap.analysis.compare import compare
    from infertap.cli import cli

    def entry(second: int, answer: str, saved: str = "yes") -> dict:
        e = _entry(f"2025-01-02T10:00:0{second}.000+00:00", {"send": 1, "wait": 50, "receive": 49})
        e["request"]["postData"]["text"] = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": f"q{second}"}]})  # fmt: skip
        text = SSE.replace("t ", answer)
        content = {"size": len(text), "mimeType": "text/event-stream", "text": text}
        if saved == "chrome":
            del content["text"]
        elif saved == "firefox":
            content["text"] = ""
        e["response"]["content"] = content
        return e

    runs = {
        "a": [entry(0, "4 "), entry(1, "yes "), entry(2, "blue "), entry(3, "red ")],
        "b": [entry(0, "5 ", "chrome"), entry(1, "yes ", "firefox"), entry(2, "blue "), entry(3, "green ")],
        "c": [entry(0, "5 ", "chrome"), entry(1, "yes ", "firefox"), entry(2, "blue "), entry(3, "red ")],
    }
    for name, entries in runs.items():
        (tmp_path / f"{name}.har").write_text(json.dumps({"log": {"version": "1.2", "entries": entries}}))
        result = CliRunner().invoke(cli, ["import", str(tmp_path / f"{name}.har"), "--out", str(tmp_path / name)])
        assert result.exit_code == 0, result.output
    for a, b in (("a", "b"), ("b", "c")):  # an answer against none, and none against none
        d = compare(tmp_path / a, tmp_path / b)["divergence"]
        assert (d["pairs"], d["counts"]["exact"], d["counts"].get("not_in_file")) == (2, 1, 2), d  # blue = blue, red != green
        assert d["counts"].get("unreadable", 0) == 0 and d["similarity_mean"] < 1
        assert all(
            m["b_id"] not in {x["id"] for x in list(CaptureReader(tmp_path / b).exchanges())[:2]} for m in d["most_divergent"]
        )
    assert compare(tmp_path / "c", tmp_path / "c")["divergence"]["counts"]["exact"] == 2  # the answers it holds match
    result = CliRunner().invoke(cli, ["compare", str(tmp_path / "b"), str(tmp_path / "c")])
    assert "2 pairs not compared (an answer not in the file it was imported from" in " ".join(result.output.split())
    with Analysis([tmp_path / "b"], cache_dir=tmp_path / "cache") as an:
        (g,) = speed_stats(an)["groups"]
    assert (g["requests"], g["ok"], g["errors"], g["not_in_file"], g["unreadable"]) == (4, 2, 0, 2, 0)
    assert g["metrics"]["output_tokens"]["n"] == 2


def test_a_body_mitmproxy_did_not_keep_is_not_in_the_file_never_an_empty_answer(tmp_path: Path) -> None:
    """mitmproxy keeps no body it streamed (infertap's addon streams every response, so ``mitmdump
    -s addon.py -w flows`` saves each as "content missing"; ``stream_large_bodies`` a large one), and
    its savehar writes such a body as size 0, text "": both were imported as empty answers, which
    ``stats`` counted as errors (100% of such a file). Marked ``body_not_in_file``, as a HAR saved
    without content is; an empty body the file does hold, a HEAD's, a 204's stay as they are."""
    from mitmproxy import io
    from mitmproxy.test import tflow

    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    choice = {"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}
    whole = {"id": "c", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]}
    answer = json.dumps(sdk_shapes.chat_completion(whole)).encode()
    flows = []
    for i, (kept, req_kept) in enumerate([(answer, True), (None, True), (b"", True), (answer, False)]):
        f = tflow.tflow(resp=True)
        f.request.path, f.request.method = "/v1/chat/completions", "POST"
        f.request.content = body
        f.request.timestamp_start += i
        f.response.headers["content-length"] = str(len(answer))
        f.response.content = kept
        if not req_kept:
            f.request.content = None
            f.request.headers["content-length"] = str(len(body))
        flows.append(f)
    with open(tmp_path / "flows", "wb") as fh:
        writer = io.FlowWriter(fh)
        for f in flows:
            writer.add(f)
    assert import_file(tmp_path / "flows", tmp_path / "flowcap")["bodies_not_in_file"] == 2
    xs = list(CaptureReader(tmp_path / "flowcap").exchanges())
    assert [x.get("body_not_in_file") for x in xs] == [None, ["response"], None, ["request"]]
    assert xs[3]["request_body_size"] == len(body) and xs[2]["chunks"] == [] and xs[0]["chunks"] == [answer]
    with Analysis([tmp_path / "flowcap"], cache_dir=tmp_path / "cache") as an:
        (g,) = speed_stats(an)["groups"]
    # the empty answer is unreadable; the request not in the file is of no known API, so no generation
    assert (g["requests"], g["not_in_file"], g["errors"]) == (3, 1, 1)

    def entry(second: int, method: str, status: int, length: str, text: str) -> dict:
        e = _entry(f"2025-01-02T10:00:0{second}.000+00:00", {"send": 1, "wait": 50, "receive": 49})
        e["request"]["method"] = method
        e["response"].update(status=status, bodySize=len(text), headers=[{"name": "Content-Length", "value": length}])
        e["response"]["content"] = {"size": len(text), "mimeType": "application/json", "text": text}
        return e

    entries = [
        entry(0, "POST", 200, str(len(answer)), ""),  # savehar of a streamed body: not in the file
        entry(1, "POST", 200, str(len(answer)), answer.decode()),
        entry(2, "HEAD", 200, "712", ""),  # a HEAD's length is of a body never sent
        entry(3, "POST", 204, "5", ""),
        entry(4, "POST", 200, "0", ""),
    ]
    (tmp_path / "s.har").write_text(json.dumps({"log": {"version": "1.2", "entries": entries}}))
    assert import_file(tmp_path / "s.har", tmp_path / "harcap")["bodies_not_in_file"] == 1
    xs = list(CaptureReader(tmp_path / "harcap").exchanges())
    assert [x.get("body_not_in_file") for x in xs] == [["response"], None, None, None, None]


@pytest.mark.filterwarnings("ignore:tagMap is deprecated", "ignore:typeMap is deprecated")  # ldap3, by mitmproxy.addons
def test_a_body_a_har_holds_only_the_head_of_is_not_in_the_file_never_a_shorter_answer(tmp_path: Path) -> None:
    """Firefox keeps at most 1 MiB of a response in a HAR, its ``content.size`` the whole: the head
    was imported as the answer (a stream cut after its first events read as a shorter reply, a
    cut request replayed as sent). A text shorter than the size the file gives is not in the file;
    one as long is, and so is mitmproxy's savehar's, whose size is the encoded body's."""
    from mitmproxy.addons.savehar import SaveHar
    from mitmproxy.test import tflow

    def entry(second: int, *, cut_answer: bool = False, cut_request: bool = False) -> dict:
        e = _entry(f"2025-01-02T10:00:0{second}.000+00:00", {"send": 1, "wait": 50, "receive": 49})
        request = e["request"]["postData"]["text"]
        e["request"]["bodySize"] = len(request)
        e["request"]["postData"]["text"] = request[:20] if cut_request else request
        e["response"]["content"] = {"size": len(SSE), "mimeType": "text/event-stream", "text": SSE[:200] if cut_answer else SSE}
        return e

    entries = [entry(0), entry(1, cut_answer=True), entry(2, cut_request=True)]
    firefox = {"log": {"version": "1.2", "creator": {"name": "Firefox", "version": "140.0"}, "entries": entries}}
    (tmp_path / "f.har").write_text(json.dumps(firefox))
    assert import_file(tmp_path / "f.har", tmp_path / "cap")["bodies_not_in_file"] == 2
    xs = list(CaptureReader(tmp_path / "cap").exchanges())
    assert [x.get("body_not_in_file") for x in xs] == [None, ["response"], ["request"]]
    assert xs[1]["chunks"] == [SSE[:200].encode()]  # the head the file holds, kept
    assert xs[2]["request_body_size"] == entries[2]["request"]["bodySize"]
    with Analysis([tmp_path / "cap"], cache_dir=tmp_path / "cache") as an:
        (g,) = speed_stats(an)["groups"]
    # the cut request is no generation request it can read; the cut answer unknown, not a short one
    assert (g["requests"], g["ok"], g["not_in_file"], g["metrics"]["output_tokens"]["n"]) == (2, 1, 1, 1)

    small = tflow.tflow(resp=True)  # a small gzipped answer: its encoded length is more than its text
    small.request.method, small.request.path = "POST", "/v1/chat/completions"
    small.response.headers["content-encoding"] = "gzip"
    small.response.content = b'{"choices":[]}'
    saved = SaveHar().make_har([small])
    assert saved["log"]["entries"][0]["response"]["content"]["size"] > len(b'{"choices":[]}')
    (tmp_path / "m.har").write_text(json.dumps(saved))
    assert import_file(tmp_path / "m.har", tmp_path / "mcap")["bodies_not_in_file"] == 0
    (x,) = CaptureReader(tmp_path / "mcap").exchanges()
    assert x["chunks"] == [b'{"choices":[]}'] and "body_not_in_file" not in x


@pytest.mark.filterwarnings("ignore:tagMap is deprecated", "ignore:typeMap is deprecated")  # ldap3, by mitmproxy.addons
def test_an_imported_request_is_sent_when_the_file_says_it_went_not_when_it_was_begun(tmp_path: Path) -> None:
    """A HAR's ``startedDateTime`` is before its blocked, dns and connect time (a browser queueing a
    request for one of its 6 connections per host, seconds under load), a flow's request start
    before its upload was read; the file's other times count from the send. The import sent every
    exchange at its start, so its end (sent + e2e) came early by that much, concurrency and think
    times with it. mitmproxy's own HAR of a flow says what its flow file says."""
    from mitmproxy import io
    from mitmproxy.addons.savehar import SaveHar
    from mitmproxy.test import tflow

    queued = {"blocked": 2000, "dns": 100, "connect": 200, "ssl": 150, "send": 1, "wait": 50, "receive": 49}
    entries = [
        _entry("2025-01-02T10:00:00.000+00:00", queued),
        _entry("2025-01-02T10:00:01.000+00:00", {"blocked": -1, "dns": -1, "connect": -1, "send": 1, "wait": 50, "receive": 49}),
    ]
    (tmp_path / "c.har").write_text(json.dumps({"log": {"creator": {"name": "WebInspector"}, "entries": entries}}))
    import_file(tmp_path / "c.har", tmp_path / "cap")
    xs = list(CaptureReader(tmp_path / "cap").exchanges())
    assert [x["sent_ns"] - x["start_ns"] for x in xs] == [2_300_000_000, 0]
    assert [(x["headers_ns"], x["end_ns"]) for x in xs] == [(51_000_000, 100_000_000)] * 2
    with Analysis([tmp_path / "cap"], cache_dir=tmp_path / "cache") as a:
        sent = [r[0] for r in a.sql("SELECT sent_wall_ns FROM exchanges ORDER BY seq").fetchall()]
    at = dt.datetime(2025, 1, 2, 10, tzinfo=dt.UTC).timestamp()
    assert sent == [round((at + 2.3) * 1e9), round((at + 1) * 1e9)]  # the first went after the second began

    f = tflow.tflow(resp=True)
    f.request.path, f.request.method = "/v1/chat/completions", "POST"
    f.request.timestamp_start, f.request.timestamp_end = 1000.0, 1000.25  # a 250 ms upload
    f.response.timestamp_start, f.response.timestamp_end = 1000.5, 1002.0
    with open(tmp_path / "flows", "wb") as fh:
        io.FlowWriter(fh).add(f)
    (tmp_path / "m.har").write_text(json.dumps(SaveHar().make_har([f])))
    times = []
    for name in ("flows", "m.har"):
        import_file(tmp_path / name, tmp_path / f"cap-{name}")
        (x,) = CaptureReader(tmp_path / f"cap-{name}").exchanges()
        times.append((x["sent_ns"] - x["start_ns"], x["headers_ns"], x["end_ns"]))
    assert times == [(250_000_000, 250_000_000, 1_750_000_000)] * 2


def test_what_an_import_does_not_read_is_counted_and_a_websocket_is_never_an_empty_answer(tmp_path: Path) -> None:
    """A flow file's tcp, udp and dns flows were dropped unsaid, and a WebSocket (Responses'
    WebSocket mode, OpenAI's Realtime) became a complete empty 101 that compare matched exactly."""
    from click.testing import CliRunner
    from mitmproxy import io
    from mitmproxy.test import tflow

    from infertap.cli import cli

    ws = tflow.twebsocketflow()  # three messages
    ws.request.path = "/v1/responses"
    with open(tmp_path / "a.flows", "wb") as fh:
        writer = io.FlowWriter(fh)
        for f in (ws, tflow.ttcpflow(), tflow.tudpflow(), tflow.tdnsflow(), tflow.tdnsflow()):
            writer.add(f)
    result = CliRunner().invoke(cli, ["import", str(tmp_path / "a.flows"), "--out", str(tmp_path / "cap")])
    assert result.exit_code == 0, result.output
    assert "not imported: 2 dns, 1 tcp, 1 udp, 3 websocket messages" in result.stderr
    header = next(r for r in CaptureReader(tmp_path / "cap").records() if r["type"] == "header")
    assert header["recorder"]["not_imported"] == {"dns": 2, "tcp": 1, "udp": 1, "websocket_messages": 3}
    (x,) = CaptureReader(tmp_path / "cap").exchanges()
    assert (x["status"], x["websocket_messages"]) == (101, 3)  # the upgrade kept, its messages counted
    compared = CliRunner().invoke(cli, ["compare", "--json", str(tmp_path / "cap"), str(tmp_path / "cap")])
    assert compared.exit_code == 0, compared.output
    divergence = json.loads(compared.stdout)["divergence"]
    assert divergence["counts"] == {"not_in_file": 1}  # unknown, never an exact match of nothing
    assert divergence["pairs"] == 0 and divergence["exact_match_rate"] is None

    entry = _entry("2025-01-02T10:00:00.000+00:00", None)
    entry["_resourceType"], entry["_webSocketMessages"] = "websocket", [{"type": "send", "data": "{}"}] * 2
    (tmp_path / "a.har").write_text(json.dumps({"log": {"version": "1.2", "entries": [entry]}}))
    counts = import_file(tmp_path / "a.har", tmp_path / "har")
    assert counts["not_imported"] == {"websocket_messages": 2} and counts["websockets"] == 1
    assert next(CaptureReader(tmp_path / "har").exchanges())["websocket_messages"] == 2


def test_info_says_what_an_import_did_not_import(tmp_path: Path) -> None:
    """The header's recorder.not_imported (a flow file's tcp flows...) was said once, on the import's
    stderr, and never again: info showed the capture as if the file held its exchanges alone."""
    from click.testing import CliRunner
    from mitmproxy import io
    from mitmproxy.test import tflow

    from infertap.cli import cli

    http = tflow.tflow(resp=True)
    http.request.path, http.request.method = "/v1/chat/completions", "POST"
    with open(tmp_path / "a.flows", "wb") as fh:
        writer = io.FlowWriter(fh)
        for f in (http, tflow.ttcpflow(), tflow.tdnsflow()):
            writer.add(f)
    for _ in range(2):  # a second import appended to the capture: its counts add
        imported = CliRunner().invoke(cli, ["import", str(tmp_path / "a.flows"), "--out", str(tmp_path / "cap")])
        assert imported.exit_code == 0, imported.output
    as_json = CliRunner().invoke(cli, ["info", str(tmp_path / "cap"), "--json"])
    assert as_json.exit_code == 0, as_json.output
    summary = json.loads(as_json.stdout)
    assert summary["exchanges"] == 2 and summary["not_imported"] == {"dns": 2, "tcp": 2}
    text = CliRunner().invoke(cli, ["info", str(tmp_path / "cap")], env={"COLUMNS": "200"})
    assert text.exit_code == 0, text.output
    row = " ".join(next(line for line in text.stdout.splitlines() if line.startswith("not imported")).split())
    assert row == "not imported 2 dns, 2 tcp (only HTTP requests and responses are imported)", text.stdout

    http.request.path = "/v1/completions"
    with open(tmp_path / "b.flows", "wb") as fh:
        io.FlowWriter(fh).add(http)
    import_file(tmp_path / "b.flows", tmp_path / "whole")
    assert json.loads(CliRunner().invoke(cli, ["info", str(tmp_path / "whole"), "--json"]).stdout)["not_imported"] == {}
    rows = [line.split() for line in CliRunner().invoke(cli, ["info", str(tmp_path / "whole")]).stdout.splitlines()]
    assert ["not", "imported", "nothing"] in rows


def test_a_missing_engine_snapshot_is_said_as_the_run_was_made(tmp_path: Path, fake, record) -> None:
    """info and compare said an import had "recorded with --no-probe, or the probe failed": an
    import probes nothing; a record --no-probe run keeps that reason."""
    import httpx
    from click.testing import CliRunner
    from mitmproxy import io
    from mitmproxy.test import tflow

    from infertap.cli import cli

    _, url = fake
    rec = record(url, "--no-probe")
    body = {"model": "fake", "messages": [{"role": "user", "content": "hi"}], "tag": "x"}
    httpx.post(f"{rec.url}/v1/chat/completions", json=body, timeout=30).raise_for_status()
    assert rec.stop() == 0
    flow = tflow.tflow(resp=True)
    flow.request.path = "/v1/chat/completions"
    flow.request.method, flow.request.content = "POST", rec.exchanges()[0]["request_body"]  # the same: compare pairs them
    with open(tmp_path / "a.flows", "wb") as fh:
        io.FlowWriter(fh).add(flow)
    assert CliRunner().invoke(cli, ["import", str(tmp_path / "a.flows"), "--out", str(tmp_path / "imp")]).exit_code == 0
    imported, probed = "imported from a file: an import probes no engine", "recorded with --no-probe, or the probe failed"

    def said(*args: str) -> str:
        result = CliRunner().invoke(cli, list(args))
        assert result.exit_code == 0, result.output
        return " ".join(result.stdout.split())  # the table's folding undone

    assert f"no snapshot ({imported})" in said("info", str(tmp_path / "imp"))
    assert f"no snapshot ({probed})" in said("info", str(rec.out))
    assert f"no engine snapshot in A and B: {imported}" in said("compare", str(tmp_path / "imp"), str(tmp_path / "imp"))
    assert f"no engine snapshot in A and B: {probed}" in said("compare", str(rec.out), str(rec.out))
    assert f"no engine snapshot in A: {imported}; in B: {probed}" in said("compare", str(tmp_path / "imp"), str(rec.out))


def test_credentials_in_headers_of_any_case_never_reach_the_capture_and_names_are_stored_as_record_stores_them(
    tmp_path: Path,
) -> None:
    """A HAR (Firefox keeps the names as sent) and an HTTP/1 flow file carry names in mixed case:
    every credential header is redacted whatever its case, its value looked for in the response, and
    the request's names are stored lowercase, as ``infertap record`` stores them (its server hands
    it lowercased names), so a capture's headers read alike whichever recorder wrote them; the
    response's keep the file's case, as record keeps the upstream's."""
    from click.testing import CliRunner
    from mitmproxy import io
    from mitmproxy.test import tflow

    from infertap.cli import cli

    secrets = {
        "AUTHORIZATION": "Bearer sk-MIXEDCASE-AUTH-111111",
        "X-Api-Key": "MIXEDCASE-XAPIKEY-222222",
        "API-KEY": "MIXEDCASE-APIKEY-333333",
        "Cookie": "session=MIXEDCASE-COOKIE-444444",
    }
    sent = [*secrets.items(), ("X-Title", "My App"), ("Content-Type", "application/json")]
    echo = json.dumps({"error": {"message": "Incorrect API key provided: MIXEDCASE-XAPIKEY-222222"}})
    answer = [("Content-Type", "application/json"), ("SET-COOKIE", "id=MIXEDCASE-SETCOOKIE-555555"), ("X-Request-Id", "r1")]
    entry = {
        "startedDateTime": "2026-01-01T00:00:00.000Z",
        "time": 100,
        "request": {
            "method": "POST",
            "url": "https://api.example.com/v1/chat/completions",
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": n, "value": v} for n, v in sent],
            "postData": {"mimeType": "application/json", "text": '{"model":"m","messages":[]}'},
        },
        "response": {
            "status": 401,
            "headers": [{"name": n, "value": v} for n, v in answer],
            "content": {"mimeType": "application/json", "text": echo},
        },
        "timings": {"send": 1, "wait": 50, "receive": 5},
    }
    (tmp_path / "a.har").write_text(json.dumps({"log": {"version": "1.2", "entries": [entry]}}))
    with open(tmp_path / "a.flows", "wb") as fh:
        f = tflow.tflow(resp=True)
        f.request.path = "/v1/chat/completions"
        f.request.headers.clear()
        for n, v in sent:
            f.request.headers.add(n, v)
        f.response.status_code, f.response.content = 401, echo.encode()
        f.response.headers.clear()
        for n, v in answer:
            f.response.headers.add(n, v)
        io.FlowWriter(fh).add(f)
    for name in ("a.har", "a.flows"):
        out = tmp_path / f"cap-{name}"
        result = CliRunner().invoke(cli, ["import", str(tmp_path / name), "--out", str(out)])
        assert result.exit_code == 0, result.output
        data = decompressed_bytes(out)
        for value in [*secrets.values(), "MIXEDCASE-SETCOOKIE-555555"]:
            assert value.split("=")[-1].split(" ")[-1].encode() not in data, (name, value)
        (x,) = CaptureReader(out).exchanges()
        got = dict(x["request_headers"])
        # Must match: the request's names as record stores them, the credentials redacted, the scheme kept.
        assert [n for n, _ in x["request_headers"]] == [n.lower() for n, _ in sent], name
        assert got["authorization"] == f"Bearer {REDACTED}" and got["x-api-key"] == got["api-key"] == REDACTED
        assert got["cookie"] == REDACTED
        # Must differ: what holds no credential is kept as the file has it, the response's names in its case.
        assert got["x-title"] == "My App"
        assert x["response_headers"][1:] == [["SET-COOKIE", REDACTED], ["X-Request-Id", "r1"]]
        assert b"Incorrect API key provided: " + REDACTED.encode() in b"".join(x["chunks"])
