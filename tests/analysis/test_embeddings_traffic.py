"""Embeddings requests (``/v1/embeddings``, Ollama's ``/api/embed``, llama-server's ``/embedding``) are
no generation requests, so in no speed figure and no workload identity, and compare called two runs
"traffic: identical" whatever texts they embedded, with whichever model, dimensions or
encoding_format. They now have their own identity (``embeddings``, as the media requests' ``media``),
computed by the capture package and by analysis alike; traffic is identical only where it matches too."""

from __future__ import annotations

import json

from click.testing import CliRunner

from infertap.analysis.claim import claim, field_text
from infertap.analysis.compare import compare
from infertap.analysis.compare_traffic import traffic_line
from infertap.analysis.report_claims import claim_cards
from infertap.analysis.store import Analysis
from infertap.analysis.workload_identity import capture_identity
from infertap.capture.identity import OrderedHashes, describe, exchange_digest, workload_identity
from infertap.capture.reader import CaptureReader
from infertap.cli import cli
from tests.helpers import embeddings_request as embed
from tests.helpers import image_request, write_capture

WALL = 1_800_000_000.0
TEXT = [{}, {"offset_s": 5}]  # two chat requests (q0, q1), the same on every side


def _write(path, apart: list[dict]) -> None:
    write_capture(path, [*TEXT, *apart], run_wall=WALL)


def _tables(path):
    with Analysis([path]) as analysis:
        return capture_identity(analysis, analysis.query("SELECT capture FROM captures").rows[0][0])


def test_the_embeddings_identity_is_the_same_from_the_records_and_from_the_tables(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    _write(tmp_path / "fox", [embed("a fox", 1), embed("a cat", 2)])
    _write(tmp_path / "owl", [embed("a fox", 1), embed("an owl", 2)])
    _write(tmp_path / "ollama", [embed("a fox", 1, path="/api/embed"), embed("a cat", 2, path="/api/embed")])
    _write(tmp_path / "text", [])
    fox, owl, ollama, text = (workload_identity(tmp_path / n) for n in ("fox", "owl", "ollama", "text"))
    assert fox.workload == owl.workload == text.workload  # the text workload alone
    assert fox.embeddings != owl.embeddings and fox.embeddings_requests == owl.embeddings_requests == 2  # another text
    assert ollama.embeddings not in ("", fox.embeddings) and ollama.embeddings_requests == 2  # another route
    assert text.embeddings == text.embeddings_set == text.embeddings_schedule == "" and text.embeddings_requests == 0
    for name, expected in (("fox", fox), ("owl", owl), ("ollama", ollama), ("text", text)):
        found = _tables(tmp_path / name)
        for field in ("embeddings", "embeddings_requests", "embeddings_set", "embeddings_schedule"):
            assert getattr(found, field) == getattr(expected, field), (name, field)  # must match
    assert f"2 embeddings requests beside them (embeddings {fox.embeddings_short})" in describe(fox.as_dict())
    assert "embeddings" not in describe(text.as_dict())


def test_traffic_without_embeddings_hashes_as_before(tmp_path, monkeypatch):
    """Embeddings beside the text and the media change none of their hashes; the text workload's hash
    is the one its requests' digests give (``OrderedHashes``, the rule that predates embeddings)."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    _write(tmp_path / "plain", [image_request("a fox", 1)])
    _write(tmp_path / "beside", [image_request("a fox", 1), embed("a fox", 0.5), embed("a cat", 6)])
    plain, beside = workload_identity(tmp_path / "plain"), workload_identity(tmp_path / "beside")
    for field in ("workload", "schedule", "request_set", "media", "media_set", "media_schedule", "version"):
        assert getattr(plain, field) == getattr(beside, field), field
    assert beside.embeddings and not plain.embeddings
    hashes = OrderedHashes()
    for record in CaptureReader(tmp_path / "plain").exchanges():
        if record["path"] == "/v1/chat/completions":
            hashes.add([round(WALL * 1e9) + record["start_ns"]], [exchange_digest(record)])
    assert plain.workload == hashes.workload.hexdigest() and plain.schedule == hashes.schedule.hexdigest()
    assert _tables(tmp_path / "plain").workload == plain.workload


def test_compare_tells_the_same_text_traffic_beside_other_embeddings_apart(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    _write(tmp_path / "two", [embed("a fox", 1), embed("a cat", 2)])
    _write(tmp_path / "again", [embed("a fox", 1), embed("a cat", 2)])
    _write(tmp_path / "owl", [embed("a fox", 1), embed("an owl", 2)])
    _write(tmp_path / "model", [embed("a fox", 1), embed("a cat", 2, model="e5-large")])
    _write(tmp_path / "dims", [embed("a fox", 1), embed("a cat", 2, dimensions=8)])
    _write(tmp_path / "swapped", [embed("a cat", 1), embed("a fox", 2)])
    _write(tmp_path / "text", [])
    _write(tmp_path / "text2", [])
    for other in ("owl", "model", "dims"):  # must differ: another text, another model, other dimensions
        t = compare(tmp_path / "two", tmp_path / other)["traffic"]
        assert not t["identical"] and t["text_identical"], other
        assert t["embeddings"] == {"a": 2, "b": 2, "only_a": 1, "only_b": 1} and t["media"] == {}, other
        assert "the embeddings requests differ: A's 2, B's 2, 1 of A's not in B, 1 of B's not in A" in t["how"]
        line = traffic_line(t)
        assert line.startswith("traffic: NOT identical") and "beside different embeddings requests" in line
    # Must differ in order alone: the same embeddings requests, sent in another order.
    t = compare(tmp_path / "two", tmp_path / "swapped")["traffic"]
    assert not t["identical"] and t["same_embeddings_requests"] and t["a"]["embeddings"] != t["b"]["embeddings"]
    assert "the embeddings requests are the same (2 embeddings) sent in another order" in t["how"]
    assert traffic_line(t).endswith("beside the same embeddings requests sent in another order")
    # Must differ: embeddings on A's side alone.
    t = compare(tmp_path / "two", tmp_path / "text")["traffic"]
    assert not t["identical"] and t["embeddings"] == {"a": 2, "b": 0, "only_a": 2, "only_b": 0}
    # Must match: the same text and the same embeddings requests.
    t = compare(tmp_path / "two", tmp_path / "again")["traffic"]
    assert t["identical"] and t["embeddings"] == {} and t["same_schedule"]
    assert traffic_line(t) == (
        f"traffic: identical (A {t['a']['short']}, B {t['b']['short']}; same schedule; the same 2 embeddings requests beside them)"
    )
    # Must match: no embeddings on either side, the line as it always was.
    t = compare(tmp_path / "text", tmp_path / "text2")["traffic"]
    assert t["identical"] and traffic_line(t) == f"traffic: identical (A {t['a']['short']}, B {t['b']['short']}; same schedule)"


def test_embeddings_sent_at_other_times_are_another_schedule(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    _write(tmp_path / "early", [embed("a fox", 1)])
    _write(tmp_path / "late", [embed("a fox", 3)])
    _write(tmp_path / "again", [embed("a fox", 1)])
    early, late = workload_identity(tmp_path / "early"), workload_identity(tmp_path / "late")
    assert early.embeddings == late.embeddings and early.embeddings_schedule != late.embeddings_schedule
    assert _tables(tmp_path / "late").embeddings_schedule == late.embeddings_schedule
    t = compare(tmp_path / "early", tmp_path / "late")["traffic"]
    assert t["identical"] and not t["same_schedule"]  # must differ: the schedule
    assert compare(tmp_path / "early", tmp_path / "again")["traffic"]["same_schedule"]  # must match


def test_compare_json_info_and_the_claim_card_say_the_embeddings_identity(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    _write(tmp_path / "two", [embed("a fox", 1), embed("a cat", 2)])
    _write(tmp_path / "again", [embed("a fox", 1), embed("a cat", 2)])
    _write(tmp_path / "dims", [embed("a fox", 1), embed("a cat", 2, dimensions=8)])
    runner = CliRunner()
    out = runner.invoke(cli, ["compare", str(tmp_path / "two"), str(tmp_path / "dims"), "--json"], env={"COLUMNS": "300"})
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)["traffic"]
    assert data["identical"] is False and data["text_identical"] is True and data["embeddings"]["only_b"] == 1
    out = runner.invoke(cli, ["compare", str(tmp_path / "two"), str(tmp_path / "again"), "--json"], env={"COLUMNS": "300"})
    assert json.loads(out.output)["traffic"]["identical"] is True
    info = runner.invoke(cli, ["info", str(tmp_path / "two")], env={"COLUMNS": "300"})
    short = workload_identity(tmp_path / "two").embeddings_short
    assert info.exit_code == 0 and f"2 embeddings requests beside them (embeddings {short})" in info.output
    cards = {n: claim(tmp_path / n, cache_dir=tmp_path / "cache") for n in ("two", "again", "dims")}
    value = cards["two"]["workload"]["value"]
    assert value["embeddings_identity"] != cards["dims"]["workload"]["value"]["embeddings_identity"]
    assert value["embeddings_identity"] == cards["again"]["workload"]["value"]["embeddings_identity"]
    assert f"embeddings {short}" in field_text("workload", cards["two"]["workload"])

    def highlighted(a: str, b: str) -> bool:
        html = "".join(claim_cards([("A", tmp_path / a), ("B", tmp_path / b)], [cards[a], cards[b]]))
        start = html.rindex("<tr", 0, html.index("<td>workload</td>"))
        return html[start:].startswith("<tr class=diff>")

    assert highlighted("two", "dims")  # must differ
    assert not highlighted("two", "again")  # must match


def test_compare_notes_that_speed_ratios_sit_beside_other_embeddings(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    _write(tmp_path / "two", [embed("a fox", 1), embed("a cat", 2)])
    _write(tmp_path / "owl", [embed("a fox", 1), embed("an owl", 2)])
    printed = CliRunner().invoke(cli, ["compare", str(tmp_path / "two"), str(tmp_path / "owl")], env={"COLUMNS": "300"}).output
    assert "traffic: NOT identical" in printed and "traffic: identical" not in printed
    assert "B/A compares the same text requests, sent beside different embeddings requests" in printed


def test_stats_says_the_embeddings_requests_it_leaves_out(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    _write(tmp_path / "two", [embed("a fox", 1), embed("a cat", 2, path="/api/embed")])
    _write(tmp_path / "text", [])
    runner = CliRunner()
    for name, n in (("two", 2), ("text", 0)):  # must differ, must match none
        out = runner.invoke(cli, ["stats", str(tmp_path / name), "--json"], env={"COLUMNS": "300"})
        assert out.exit_code == 0, out.output
        assert json.loads(out.output)["embeddings_requests"] == n
    printed = runner.invoke(cli, ["stats", str(tmp_path / "two")], env={"COLUMNS": "300"}).output
    assert "not in these figures: 2 embeddings requests (no text tokens to time" in printed
    assert "not in these figures" not in runner.invoke(cli, ["stats", str(tmp_path / "text")], env={"COLUMNS": "300"}).output


def test_compare_of_embeddings_alone_says_no_text_request_was_sent(tmp_path, monkeypatch):
    """Two runs that sent embeddings requests alone (compare pairs them): their text identities hash
    no request, and the traffic line called "the text generation requests identical" - true of none."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    for name, texts in (("two", ["a fox", "a cat"]), ("again", ["a fox", "a cat"]), ("owl", ["a fox", "an owl"])):
        write_capture(tmp_path / name, [embed(text, i + 1) for i, text in enumerate(texts)], run_wall=WALL)
    write_capture(tmp_path / "images", [embed("a fox", 1), embed("a cat", 2), image_request("a fox", 3)], run_wall=WALL)
    write_capture(tmp_path / "chat", [{}, embed("a fox", 1), embed("a cat", 2)], run_wall=WALL)
    # Must differ: other embeddings requests, no text request on either side.
    t = compare(tmp_path / "two", tmp_path / "owl")["traffic"]
    ids = f"A {t['a']['short']}, B {t['b']['short']}"
    assert traffic_line(t) == (
        f"traffic: NOT identical ({ids}): no text generation request on either side; the embeddings requests differ: "
        "A's 2, B's 2, 1 of A's not in B, 1 of B's not in A; no speed table below "
        "(it is over text generation alone; their answers and e2e are said under Speed)"
    )
    assert not t["identical"] and t["text_identical"] and t["no_text"]
    assert "text generation requests are identical" not in t["how"]
    t = compare(tmp_path / "two", tmp_path / "images")["traffic"]
    assert t["no_text"] and "no text generation request on either side; the image generation requests differ" in t["how"]
    # Must match: the same embeddings requests, and nothing "beside them" where there is no text request.
    t = compare(tmp_path / "two", tmp_path / "again")["traffic"]
    assert t["identical"] and t["no_text"]
    assert traffic_line(t) == (
        f"traffic: identical (A {t['a']['short']}, B {t['b']['short']}; same schedule; "
        "no text generation request on either side; the same 2 embeddings requests)"
    )
    # One side sent a text request: counted as sent, not as "0 of A's 0", and no asked headers "none" against "none".
    t = compare(tmp_path / "two", tmp_path / "chat")["traffic"]
    assert not t["text_identical"] and not t["no_text"]
    assert t["how"].startswith("A sent no text generation request, B 1") and "headers that change" not in t["how"]
    out = CliRunner().invoke(cli, ["compare", str(tmp_path / "two"), str(tmp_path / "owl")], env={"COLUMNS": "400"})
    assert out.exit_code == 0, out.output
    assert "no text generation request on either side" in out.output and "B/A compares the same text" not in out.output
    assert "answers A:" not in out.output and "times in ms" not in out.output  # no text speed table timing none
    # Must keep it: one side sent a text request, whose speed the table is of.
    out = CliRunner().invoke(cli, ["compare", str(tmp_path / "two"), str(tmp_path / "chat")], env={"COLUMNS": "400"})
    assert out.exit_code == 0, out.output
    assert "answers A: 0 requests" in " ".join(out.output.split()) and "times in ms" in out.output
