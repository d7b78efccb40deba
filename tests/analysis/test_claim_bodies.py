"""Requests sent with a body not kept (a HAR saved without it, mitmproxy's streamed bodies, a body
over the recorder's limit) are in no workload identity: the identity can't hash what it doesn't
have. Two runs that differ only in such requests had equal identities, and `compare` said "traffic:
identical", the card "N generation requests" with nothing unknown, and a replay that left them out
"identical to its source". Now each says the identity is of the other requests only."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner

from infertap.analysis.claim import claim, field_text, unknown_fields
from infertap.analysis.compare import compare
from infertap.analysis.report_claims import claim_cards
from infertap.capture.identity import describe, workload_identity
from infertap.capture.info import summarize
from infertap.cli import cli
from infertap.replay import ReplayConfig, run_replay
from tests.helpers import write_capture
from tests.mitm.test_import_machine import ANSWER, invoke

LOCAL = "http://127.0.0.1:8080"


def _entry(i: int, content: str | None, size: int = 0) -> dict:
    """A HAR entry of a chat request; ``content`` None: its body left out of the file, ``size`` bytes sent."""
    request = {"method": "POST", "url": f"{LOCAL}/v1/chat/completions", "httpVersion": "HTTP/1.1", "headers": []}
    if content is None:
        request["bodySize"] = size
    else:
        request["postData"] = {
            "mimeType": "application/json",
            "text": json.dumps({"model": "m", "messages": [{"role": "user", "content": content}]}),
        }
    return {
        "startedDateTime": datetime.fromtimestamp(1_800_000_000 + i, UTC).isoformat().replace("+00:00", "Z"),
        "time": 500,
        "request": request,
        "response": {"status": 200, "headers": [], "content": {"mimeType": "application/json", "text": json.dumps(ANSWER)}},
    }


def _imported(tmp_path: Path, name: str, unknown_size: int | None) -> Path:
    """Two chat requests kept in the file, and, with ``unknown_size``, a third whose body it lacks."""
    entries = [_entry(0, "one"), _entry(1, "two")] + ([_entry(2, None, unknown_size)] if unknown_size else [])
    (tmp_path / f"{name}.har").write_text(json.dumps({"log": {"version": "1.2", "entries": entries}}))
    invoke("import", str(tmp_path / f"{name}.har"), "--out", str(tmp_path / name))
    return tmp_path / name


def test_requests_of_unknown_body_make_no_identity_proof_of_the_same_traffic(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    a, b = _imported(tmp_path, "a", 500), _imported(tmp_path, "b", 9000)  # different third requests
    kept, again = _imported(tmp_path, "kept", None), _imported(tmp_path, "again", None)
    # The capture package and the tables count them alike; the kept requests' hashes are equal.
    assert workload_identity(a).bodies_unknown == workload_identity(b).bodies_unknown == 1
    assert workload_identity(kept).bodies_unknown == 0
    assert workload_identity(a).workload == workload_identity(b).workload == workload_identity(kept).workload
    card = claim(a, cache_dir=tmp_path / "cache")
    assert card["workload"]["value"]["bodies_unknown"] == 1 and card["workload"]["value"]["requests"] == 2
    text = field_text("workload", card["workload"])
    assert "2 generation requests (and 1 sent with a body not kept)" in text
    assert "so an equal identity does not prove the same traffic" in text
    assert "workload" in unknown_fields(card)
    assert "bodies_unknown" not in (claim(kept, cache_dir=tmp_path / "cache")["workload"]["unknown"] or "")
    # Must differ: two runs whose unknown requests may differ are not declared identical.
    t = compare(a, b)["traffic"]
    assert not t["identical"] and t["bodies_unknown"] == 2
    assert "A's 1 and B's 1 requests sent with a body not kept" in t["how"]
    out = CliRunner().invoke(cli, ["compare", str(a), str(b)]).output
    assert "traffic: NOT known to be identical" in out and "traffic: identical" not in out
    assert not compare(a, kept)["traffic"]["identical"]  # one side's unknown request alone
    assert "A's 1 request sent with a body not kept" in compare(a, kept)["traffic"]["how"]
    # Must match: the same requests, all kept, imported twice.
    same = compare(kept, again)["traffic"]
    assert same["identical"] and same["bodies_unknown"] == 0
    # The report's cards highlight the workload row of runs with unknown requests, not of equal ones.
    rows = "".join(claim_cards([("A", a), ("B", b)]))
    equal = "".join(claim_cards([("A", kept), ("B", again)]))
    assert _workload_row(rows).startswith("<tr class=diff>") and not _workload_row(equal).startswith("<tr class=diff>")
    assert "1 request sent with a body not kept" in describe(summarize(a)["workload"])
    assert "body not kept" not in describe(summarize(kept)["workload"])


def _workload_row(html: str) -> str:
    start = html.rindex("<tr", 0, html.index("<td>workload</td>"))
    return html[start : html.index("</tr>", start)]


def test_a_replay_that_left_out_requests_of_unknown_body_is_not_its_sources_workload(fake, tmp_path):
    """The replay can't send a body it doesn't have: it leaves the request out. Its identity and its
    source's then hash the same requests, and it was "identical to its source"."""
    app, url = fake
    chat = [{"offset_s": t, "body": {"model": "m", "messages": [{"role": "user", "content": f"t{t}"}]}} for t in (0, 0.1)]
    # As infertap mitm records a body over infertap_max_body: relayed, recorded without it.
    write_capture(
        tmp_path / "src", [*chat, {"offset_s": 0.2, "id": "big", "body": b"", "fields": {"request_body_size": 70_000_000}}]
    )
    write_capture(tmp_path / "whole", chat)
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "left", probe=False))
    run_replay(ReplayConfig(tmp_path / "whole", url, tmp_path / "same", probe=False))
    left, same = summarize(tmp_path / "left")["workload"], summarize(tmp_path / "same")["workload"]
    assert left["workload"] == left["source"]["workload"] and left["source"]["bodies_unknown"] == 1
    assert left["same_as_source"] is False and left["same_requests_as_source"] is False
    assert "1 request of the source left out (sent with a body not kept)" in left["derived_by"]
    assert "derived from" in describe(left) and "identical to its source" not in describe(left)
    card = field_text("workload", claim(tmp_path / "left", cache_dir=tmp_path / "c")["workload"])
    assert "derived from source" in card and "1 request of the source left out" in card
    # Must match: a source with every body kept, replayed unchanged.
    assert same["same_as_source"] is True and same["derived_by"] == [] and "identical to its source" in describe(same)
