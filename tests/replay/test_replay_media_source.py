"""A replay's claim to be its source's traffic compared the text workload alone: one that left out
the source's image requests (``--filter path=...``, a failed or refused media request) was still
"identical to its source" in `info`, on the claim card and in compare's "B replays the other's
workload unchanged". It now needs the media identity to match too, and where the source's header
predates the media identity (an older infertap) that is not known, never "identical"."""

from __future__ import annotations

import json

from click.testing import CliRunner

import infertap.capture.identity as identity_module
from infertap.analysis.claim import claim, field_text
from infertap.analysis.compare import compare
from infertap.capture.identity import describe, request_digest, workload_identity
from infertap.capture.info import summarize
from infertap.cli import cli
from infertap.replay import ReplayConfig, Schedule, run_replay
from infertap.replay.workload import Filters
from tests.helpers import image_request, write_capture


def _chat(tag: str, at: float) -> dict:
    return {"body": {"model": "m", "messages": [{"role": "user", "content": tag}], "stream": False}, "offset_s": at}


def _card(path, cache) -> str:
    return field_text("workload", claim(path, cache_dir=cache)["workload"])


def test_a_replay_without_its_sources_images_is_not_identical_to_it(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    _app, url = fake
    write_capture(tmp_path / "src", [_chat("q0", 0), image_request("a fox", 0.1), image_request("a cat", 0.2), _chat("q1", 0.3)])
    write_capture(tmp_path / "text", [_chat("q0", 0), _chat("q1", 0.3)])
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "same", probe=False))
    text_only = Filters(paths=["/v1/chat/completions"])
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "filtered", probe=False, filters=text_only))
    run_replay(ReplayConfig(tmp_path / "text", url, tmp_path / "plain", probe=False))
    source = workload_identity(tmp_path / "src")

    # Must differ: the same text requests, the source's two images left out.
    filtered = summarize(tmp_path / "filtered")["workload"]
    assert filtered["workload"] == source.workload and filtered["media"] == "" and source.media_requests == 2
    assert filtered["same_text_as_source"] is True and filtered["same_media_as_source"] is False
    assert filtered["same_as_source"] is False and filtered["same_requests_as_source"] is False
    said = (
        f"the same text requests as its source {source.short}, but other image, video or speech requests "
        f"(0 against the source's 2; media none, the source's {source.media_short}) (by --filter path=/v1/chat/completions)"
    )
    assert describe(filtered).endswith(f"; {said}") and "identical" not in describe(filtered)
    card = _card(tmp_path / "filtered", tmp_path / "c")
    assert said.replace("its source", "source") in card and "identical" not in card
    t = compare(tmp_path / "src", tmp_path / "filtered")["traffic"]
    assert not t["identical"] and "B replays the other's workload with --filter path=/v1/chat/completions" in t["how"]

    # Must match: replayed unchanged, images and all.
    same = summarize(tmp_path / "same")["workload"]
    assert same["media"] == source.media and same["same_media_as_source"] is True
    assert same["same_as_source"] is True and same["same_requests_as_source"] is True and same["media_change"] is None
    assert describe(same).endswith(f"; identical to its source {source.short}")
    assert f"; identical to source {source.short}" in _card(tmp_path / "same", tmp_path / "c")
    assert compare(tmp_path / "src", tmp_path / "same")["traffic"]["identical"]

    # Must match: no media on either side, the wording as it was.
    plain = summarize(tmp_path / "plain")["workload"]
    assert plain["media"] == plain["source"]["media"] == "" and plain["same_as_source"] is True
    assert describe(plain).endswith(f"; identical to its source {plain['source']['short']}")
    assert "image" not in describe(plain)


def test_a_source_identity_without_media_is_not_known_to_be_the_same_traffic(fake, tmp_path, monkeypatch):
    """A replay recorded by an infertap older than the media identity: its header's source identity has
    no ``media``, so whether it sent the source's images is not known from it (compare, which reads both
    captures, knows)."""
    _app, url = fake
    write_capture(tmp_path / "src", [_chat("q0", 0), image_request("a fox", 0.1), _chat("q1", 0.2)])
    older = identity_module.WorkloadIdentity.as_dict

    def without_media(self):
        return {k: v for k, v in older(self).items() if not k.startswith("media")}

    monkeypatch.setattr(identity_module.WorkloadIdentity, "as_dict", without_media)
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "old", probe=False))
    monkeypatch.undo()
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    old = summarize(tmp_path / "old")["workload"]
    assert "media" not in old["source"] and old["same_text_as_source"] is True
    assert old["same_media_as_source"] is None and not old["same_as_source"]
    short = old["source"]["short"]
    said = (
        f"the same text requests as its source {short}, but its image, video or speech requests not known to be "
        "the source's (an older infertap recorded its identity without them)"
    )
    assert describe(old).endswith(f"; {said}") and "identical" not in describe(old)
    assert said.replace("its source", "source") in _card(tmp_path / "old", tmp_path / "c")
    assert compare(tmp_path / "src", tmp_path / "old")["traffic"]["identical"]  # both captures' media, read


def test_compare_says_a_closed_loop_replays_the_text_requests_alone_beside_other_images(fake, tmp_path):
    """compare's "B replays the other's workload unchanged" (and "the same requests in a different
    order") of a closed loop's reordered requests held whatever images either side sent beside them."""
    _app, url = fake
    bodies = sorted(
        (_chat(f"tie{i}", 0.1) for i in range(2)),
        key=lambda x: request_digest("POST", "/v1/chat/completions", None, json.dumps(x["body"]).encode()),
    )
    # Written at one time in the reverse of digest order: the closed loop sends them the other way round.
    write_capture(tmp_path / "src", [bodies[1], bodies[0], image_request("a fox", 0.2), _chat("after", 0.3)])
    write_capture(tmp_path / "owl", [bodies[1], bodies[0], image_request("an owl", 0.2), _chat("after", 0.3)])
    loop = Schedule("concurrency", concurrency=1)
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "closed", probe=False, schedule=loop))
    env = {"COLUMNS": "400", "INFERTAP_CACHE": str(tmp_path / "cache")}

    def line(a: str, b: str) -> str:
        out = CliRunner().invoke(cli, ["compare", str(tmp_path / a), str(tmp_path / b)], env=env).output
        return next(line for line in out.splitlines() if line.startswith("traffic:"))

    # Must match: its source, the same images sent.
    same = line("src", "closed")
    assert same.startswith("traffic: NOT identical") and "the same requests in a different order;" in same, same
    assert "B replays the other's workload unchanged on another schedule (--concurrency 1)" in same, same
    assert "image generation requests differ" not in same
    # Must differ: the same text workload as its source beside another image.
    other = line("owl", "closed")
    assert "the same text generation requests in a different order;" in other, other
    assert "B replays the other's text requests unchanged on another schedule (--concurrency 1)" in other, other
    assert "replays the other's workload unchanged" not in other
    assert "the image generation requests differ: A's 1, B's 1, 1 of A's not in B, 1 of B's not in A" in other
