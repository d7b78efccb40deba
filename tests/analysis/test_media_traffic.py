"""Image, video and speech generation requests are in no speed figure and no (text) workload
identity, and compare called two runs of the same text traffic "identical" whatever media requests
they sent beside it: a different number of images, other image prompts, speech on one side only.
They now have their own identity (``media``), computed by the capture package and by analysis alike,
and traffic is identical only where both the text workload and the media identity are equal."""

from __future__ import annotations

import json

from click.testing import CliRunner

from infertap.analysis.claim import claim
from infertap.analysis.compare import compare
from infertap.analysis.compare_traffic import traffic_line
from infertap.analysis.report_claims import claim_cards
from infertap.analysis.store import Analysis
from infertap.analysis.workload_identity import capture_identity
from infertap.capture.identity import describe, workload_identity
from infertap.cli import cli
from tests.helpers import image_request, write_capture

WALL = 1_800_000_000.0


SPEECH = {  # audio.speech.create(model="tts-1", voice="alloy", input=...)
    "path": "/v1/audio/speech",
    "body": {"model": "tts-1", "voice": "alloy", "input": "hello"},
    "chunks": [b"ID3\x03\x00"],
    "content_type": "audio/mpeg",
    "offset_s": 3,
}
TEXT = [{}, {"offset_s": 5}]  # two chat requests (q0, q1), the same on every side


def _write(path, media: list[dict]) -> None:
    write_capture(path, [*TEXT, *media], run_wall=WALL)


def test_the_media_identity_is_the_same_from_the_records_and_from_the_tables(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    _write(tmp_path / "fox", [image_request("a fox", 1), image_request("a cat", 2)])
    _write(tmp_path / "owl", [image_request("a fox", 1), image_request("an owl", 2)])
    _write(tmp_path / "text", [])
    fox, owl, text = (workload_identity(tmp_path / n) for n in ("fox", "owl", "text"))
    assert fox.workload == owl.workload == text.workload  # the text workload alone
    assert fox.media != owl.media and fox.media_requests == owl.media_requests == 2  # must differ: another prompt
    assert text.media == "" and text.media_requests == 0
    for name, expected in (("fox", fox), ("owl", owl), ("text", text)):
        with Analysis([tmp_path / name]) as a:
            capture = a.query("SELECT capture FROM captures").rows[0][0]
            found = capture_identity(a, capture)
        assert (found.media, found.media_requests) == (expected.media, expected.media_requests)  # must match
    assert f"2 image, video or speech generation requests beside them (media {fox.media_short})" in describe(fox.as_dict())
    assert "beside them" not in describe(text.as_dict())


def test_compare_tells_the_same_text_traffic_beside_other_media_requests_apart(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    _write(tmp_path / "two", [image_request("a fox", 1), image_request("a cat", 2)])
    _write(tmp_path / "again", [image_request("a fox", 1), image_request("a cat", 2)])
    _write(tmp_path / "one", [image_request("a fox", 1)])
    _write(tmp_path / "owl", [image_request("a fox", 1), image_request("an owl", 2)])
    _write(tmp_path / "swapped", [image_request("a cat", 1), image_request("a fox", 2)])
    _write(tmp_path / "speech", [image_request("a fox", 1), image_request("a cat", 2), SPEECH])
    _write(tmp_path / "text", [])
    _write(tmp_path / "text2", [])
    # Must differ: the same text requests, another number of images.
    t = compare(tmp_path / "two", tmp_path / "one")["traffic"]
    assert not t["identical"] and t["text_identical"]
    assert t["how"].startswith("the text generation requests are identical in the same order")
    assert "the image generation requests differ: A's 2, B's 1, 1 of A's not in B, 0 of B's not in A" in t["how"]
    line = traffic_line(t)
    assert line.startswith("traffic: NOT identical") and "speed ratios below compare the same text workload" in line
    # Must differ: as many images, one of another prompt.
    t = compare(tmp_path / "two", tmp_path / "owl")["traffic"]
    assert not t["identical"] and t["media"] == {"image": {"a": 2, "b": 2, "only_a": 1, "only_b": 1}}
    assert "A's 2, B's 2, 1 of A's not in B, 1 of B's not in A" in traffic_line(t)
    # Must differ: the same images sent in another order.
    t = compare(tmp_path / "two", tmp_path / "swapped")["traffic"]
    assert not t["identical"] and "the same (2 image) sent in another order" in t["how"]
    # Must differ: speech on B's side alone.
    t = compare(tmp_path / "two", tmp_path / "speech")["traffic"]
    assert not t["identical"] and list(t["media"]) == ["speech"]
    assert "the speech generation requests differ: A's none, B's 1, 0 of A's not in B, 1 of B's not in A" in t["how"]
    # Must match: the same text and the same images.
    t = compare(tmp_path / "two", tmp_path / "again")["traffic"]
    assert t["identical"] and t["media"] == {}
    assert traffic_line(t) == (
        f"traffic: identical (A {t['a']['short']}, B {t['b']['short']}; same schedule; "
        "the same 2 image generation requests beside them)"
    )
    # Must match: no media on either side, the line as it always was.
    t = compare(tmp_path / "text", tmp_path / "text2")["traffic"]
    assert t["identical"] and traffic_line(t) == f"traffic: identical (A {t['a']['short']}, B {t['b']['short']}; same schedule)"


def test_compare_json_and_its_note_say_the_text_workload_apart_from_the_traffic(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    _write(tmp_path / "two", [image_request("a fox", 1), image_request("a cat", 2)])
    _write(tmp_path / "owl", [image_request("a fox", 1), image_request("an owl", 2)])
    _write(tmp_path / "again", [image_request("a fox", 1), image_request("a cat", 2)])
    runner = CliRunner()
    out = runner.invoke(cli, ["compare", str(tmp_path / "two"), str(tmp_path / "owl"), "--json"], env={"COLUMNS": "300"})
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["speed"] and data["traffic"]["identical"] is False and data["traffic"]["text_identical"] is True
    assert all(row["same_workload"] is False and row["same_text_workload"] is True for row in data["speed"])
    out = runner.invoke(cli, ["compare", str(tmp_path / "two"), str(tmp_path / "again"), "--json"], env={"COLUMNS": "300"})
    same = json.loads(out.output)
    assert all(row["same_workload"] is True and row["same_text_workload"] is True for row in same["speed"])
    printed = runner.invoke(cli, ["compare", str(tmp_path / "two"), str(tmp_path / "owl")], env={"COLUMNS": "300"}).output
    assert "traffic: NOT identical" in printed and "traffic: identical" not in printed
    assert "B/A compares the same text requests, sent beside different image, video or speech requests" in printed


def test_the_report_highlights_cards_whose_media_requests_differ(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    _write(tmp_path / "two", [image_request("a fox", 1), image_request("a cat", 2)])
    _write(tmp_path / "again", [image_request("a fox", 1), image_request("a cat", 2)])
    _write(tmp_path / "one", [image_request("a fox", 1)])
    _write(tmp_path / "owl", [image_request("a fox", 1), image_request("an owl", 2)])
    cards = {n: claim(tmp_path / n, cache_dir=tmp_path / "cache") for n in ("two", "again", "one", "owl")}
    assert cards["two"]["workload"]["value"]["media_identity"] != cards["owl"]["workload"]["value"]["media_identity"]

    def highlighted(a: str, b: str) -> bool:
        html = "".join(claim_cards([("A", tmp_path / a), ("B", tmp_path / b)], [cards[a], cards[b]]))
        start = html.rindex("<tr", 0, html.index("<td>workload</td>"))
        return html[start:].startswith("<tr class=diff>")

    assert highlighted("two", "one")  # must differ: another count
    assert highlighted("two", "owl")  # must differ: as many, another prompt
    assert not highlighted("two", "again")  # must match


def test_a_listing_of_videos_is_no_video_generation_request(tmp_path, monkeypatch):
    """``GET /v1/videos`` lists the user's videos (the route ends as ``POST /v1/videos``, which makes
    one): polled more often on one side, it was counted and hashed as video generation, and two runs
    of the same traffic were "NOT identical"."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))

    def listing(at: float) -> dict:
        return {
            "method": "GET",
            "path": "/v1/videos",
            "body": None,
            "offset_s": at,
            "chunks": [json.dumps({"object": "list", "data": []}).encode()],
        }

    video = {
        "path": "/v1/videos",
        "body": {"model": "sora-2", "prompt": "a fox"},
        "offset_s": 3,
        "chunks": [json.dumps({"id": "video_1", "object": "video", "status": "queued"}).encode()],
    }
    write_capture(tmp_path / "once", [*TEXT, listing(1)], run_wall=WALL)
    write_capture(tmp_path / "twice", [*TEXT, listing(1), listing(2)], run_wall=WALL)
    write_capture(tmp_path / "made", [*TEXT, listing(1), video], run_wall=WALL)
    # Must match: the same generation traffic, the listings apart.
    t = compare(tmp_path / "once", tmp_path / "twice")["traffic"]
    assert t["identical"] and t["media"] == {} and t["a"]["not_text"] == t["b"]["not_text"] == {}
    assert workload_identity(tmp_path / "twice").media_requests == 0
    # Must differ: a video made (a POST to the same route) on one side.
    t = compare(tmp_path / "once", tmp_path / "made")["traffic"]
    assert not t["identical"] and t["b"]["not_text"] == {"video": 1}
    made = workload_identity(tmp_path / "made")
    with Analysis([tmp_path / "made"]) as analysis:
        capture = analysis.query("SELECT capture FROM captures").rows[0][0]
        found = capture_identity(analysis, capture)
    assert made.media_requests == found.media_requests == 1 and made.media == found.media


def _edit(image: bytes, boundary: str, at: float) -> dict:
    """What images.edit(model=..., image=..., prompt=...) sends: multipart, with the boundary httpx drew for it."""
    parts = [
        (b'Content-Disposition: form-data; name="model"', b"gpt-image-1"),
        (b'Content-Disposition: form-data; name="prompt"', b"add a hat"),
        (b'Content-Disposition: form-data; name="image"; filename="fox.png"\r\nContent-Type: image/png', image),
    ]
    body = b"".join(b"--" + boundary.encode() + b"\r\n" + head + b"\r\n\r\n" + value + b"\r\n" for head, value in parts)
    return {
        "path": "/v1/images/edits",
        "body": body + b"--" + boundary.encode() + b"--\r\n",
        "headers": [["content-type", f"multipart/form-data; boundary={boundary}"]],
        "chunks": [json.dumps({"created": 1, "data": [{"b64_json": "iVBORw0KGgo="}]}).encode()],
        "offset_s": at,
    }


def test_an_upload_is_the_same_request_whatever_boundary_its_client_drew(tmp_path, monkeypatch):
    """A multipart body (an image to edit) carries a boundary its client draws anew for every request (httpx's is
    random): the same edit recorded twice was two different requests, and two runs of it "NOT identical"."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
    write_capture(tmp_path / "first", [*TEXT, _edit(png, "4f1c2a9e8b7d6c5a", 1)], run_wall=WALL)
    write_capture(tmp_path / "second", [*TEXT, _edit(png, "0d9e8f7a6b5c4d3e", 1)], run_wall=WALL)
    write_capture(tmp_path / "other", [*TEXT, _edit(png[:-1] + b"\x00", "0d9e8f7a6b5c4d3e", 1)], run_wall=WALL)
    # Must match: the same upload under another boundary, in both computations of the identity.
    t = compare(tmp_path / "first", tmp_path / "second")["traffic"]
    assert t["identical"], t["how"]
    assert workload_identity(tmp_path / "first").media == workload_identity(tmp_path / "second").media
    # Must differ: another image under the same boundary.
    t = compare(tmp_path / "second", tmp_path / "other")["traffic"]
    assert not t["identical"] and t["media"] == {"image": {"a": 1, "b": 1, "only_a": 1, "only_b": 1}}
