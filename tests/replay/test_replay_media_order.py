"""The media identity hashed image, video and speech requests in send order alone: the same images
sent in another order (a closed loop's) were "other image, video or speech requests", where the same
text requests in another order are "the same requests, sent in another order" (``request_set``). And
the schedule identity held the text requests' times alone, so a replay that sent its source's images
at other times was "identical to its source". Media now have an order-free ``media_set`` and their
own ``media_schedule``, and the schedule facts cover both."""

from __future__ import annotations

import json

from click.testing import CliRunner

from infertap.analysis.claim import claim, field_text
from infertap.analysis.compare import compare
from infertap.capture.identity import describe, request_digest, workload_identity
from infertap.capture.info import summarize
from infertap.cli import cli
from infertap.replay import ReplayConfig, Schedule, run_replay
from tests.helpers import image_request, write_capture


def _chat(tag: str, at: float) -> dict:
    return {"body": {"model": "m", "messages": [{"role": "user", "content": tag}], "stream": False}, "offset_s": at}


def _digest(x: dict) -> bytes:
    return request_digest("POST", x["path"], None, json.dumps(x["body"]).encode())


def _traffic_line(tmp_path, a: str, b: str) -> str:
    env = {"COLUMNS": "400", "INFERTAP_CACHE": str(tmp_path / "cache")}
    out = CliRunner().invoke(cli, ["compare", str(tmp_path / a), str(tmp_path / b)], env=env).output
    return next(line for line in out.splitlines() if line.startswith("traffic:"))


def test_a_closed_loop_that_sends_the_sources_images_in_another_order_sends_the_same_requests(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    _app, url = fake
    # Two images at one time, written in the reverse of digest order (the identity's tie-break): the
    # closed loop sends them in record order, the other way round.
    images = sorted((image_request("a fox", 0.1), image_request("a cat", 0.1)), key=_digest)
    write_capture(tmp_path / "src", [_chat("q0", 0), images[1], images[0], _chat("q1", 0.3)])
    owl = image_request("an owl", 0.1)
    write_capture(tmp_path / "owl", [_chat("q0", 0), images[1], owl, _chat("q1", 0.3)])
    loop = Schedule("concurrency", concurrency=1)
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "closed", probe=False, schedule=loop))
    source = workload_identity(tmp_path / "src")

    # Must match: the same text requests in the same order, the same images in another order.
    closed = summarize(tmp_path / "closed")["workload"]
    assert closed["workload"] == source.workload and closed["media"] != source.media
    assert closed["media_set"] == source.media_set != "" and closed["same_media_requests_as_source"] is True
    assert closed["same_requests_as_source"] is True and closed["same_as_source"] is False
    said = f"the same requests as its source {source.short}, sent in another order on another schedule (--concurrency 1)"
    assert describe(closed).endswith(f"; {said}"), describe(closed)
    assert said.replace("its source", "source") in field_text("workload", claim(tmp_path / "closed")["workload"])
    line = _traffic_line(tmp_path, "src", "closed")
    assert line.startswith("traffic: NOT identical") and "the same (2 image) sent in another order" in line, line
    assert "beside the same image, video or speech requests sent in another order" in line, line
    assert compare(tmp_path / "src", tmp_path / "closed")["traffic"]["same_media_requests"] is True

    # Must differ: another image among them is another media request set, whatever the order.
    other = workload_identity(tmp_path / "owl")
    assert other.workload == source.workload and other.media_set != source.media_set
    line = _traffic_line(tmp_path, "owl", "closed")
    assert "the image generation requests differ: A's 2, B's 2, 1 of A's not in B, 1 of B's not in A" in line, line
    assert "beside different image, video or speech requests" in line, line
    assert compare(tmp_path / "owl", tmp_path / "closed")["traffic"]["same_media_requests"] is False


def test_a_replay_whose_images_left_at_other_times_is_on_another_schedule(tmp_path, monkeypatch):
    """One text request and an image: the text schedule (one time, 0) can't move, the image's can."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    write_capture(tmp_path / "src", [_chat("q0", 0), image_request("a fox", 0.5)])
    source = workload_identity(tmp_path / "src")
    replay = {"kind": "replay", "workload_source": source.as_dict(), "schedule": {"kind": "original", "speed": 0.5}}
    write_capture(tmp_path / "slow", [_chat("q0", 0), image_request("a fox", 1.0)], recorder=replay)
    as_sent = {**replay, "schedule": {"kind": "original"}}
    write_capture(tmp_path / "same", [_chat("q0", 0), image_request("a fox", 0.5)], recorder=as_sent)

    # Must differ: the same requests, the image a half second later.
    slow = summarize(tmp_path / "slow")["workload"]
    assert slow["schedule"] == source.schedule and slow["media_schedule"] != source.media_schedule
    assert slow["same_as_source"] is True and slow["same_schedule_as_source"] is False
    said = f"the same requests as its source {source.short} on another schedule (original timing --speed 0.5)"
    assert describe(slow).endswith(f"; {said}"), describe(slow)
    assert said.replace("its source", "source") in field_text("workload", claim(tmp_path / "slow")["workload"])
    t = compare(tmp_path / "src", tmp_path / "slow")["traffic"]
    assert t["identical"] and not t["same_schedule"]
    assert "a different schedule (send times)" in _traffic_line(tmp_path, "src", "slow")

    # Must match: sent when its source sent it.
    same = summarize(tmp_path / "same")["workload"]
    assert same["media_schedule"] == source.media_schedule != "" and same["same_schedule_as_source"] is True
    assert describe(same).endswith(f"; identical to its source {source.short}")
    t = compare(tmp_path / "src", tmp_path / "same")["traffic"]
    assert t["identical"] and t["same_schedule"]
    assert "same schedule" in _traffic_line(tmp_path, "src", "same")


def test_the_capture_package_and_analysis_hash_media_alike(tmp_path):
    """``info`` (the capture package, one pass) and analysis (DuckDB) give the same media set and schedule."""
    write_capture(tmp_path / "src", [image_request("a cat", 0.2), _chat("q0", 0.1), image_request("a fox", 0.2)])
    mine = workload_identity(tmp_path / "src")
    theirs = compare(tmp_path / "src", tmp_path / "src")["traffic"]["a"]
    assert (theirs["media_set"], theirs["media_schedule"]) == (mine.media_set, mine.media_schedule)
    assert mine.media_set and mine.media_schedule and mine.media_requests == 2
