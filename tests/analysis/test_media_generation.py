"""`POST /v1/images/generations` (the openai SDK's `images.generate`) carries a `prompt`, so it was read
as a text completion: it entered the workload identity, stats' token-speed figures and compare as if
it generated text. It makes an image: no text tokens to time. It is now no generation request, and
stats counts it apart, by kind, rather than dropping it silently."""

from __future__ import annotations

import json

from click.testing import CliRunner

from infertap.analysis.stats import speed_stats
from infertap.analysis.store import Analysis
from infertap.apis import is_generation, media_kind
from infertap.capture.identity import workload_identity
from infertap.cli import cli
from tests.helpers import write_capture

IMAGE = {  # what images.generate(model="gpt-image-1", prompt=..., size=...) sends
    "path": "/v1/images/generations",
    "body": {"model": "gpt-image-1", "prompt": "a red fox in snow", "size": "1024x1024"},
    "chunks": [json.dumps({"created": 1, "data": [{"b64_json": "iVBORw0KGgo="}]}).encode()],
}
TEXT = {"path": "/v1/completions", "body": {"model": "m", "prompt": "a red fox in snow"}}


def test_an_image_generation_is_no_text_generation_request():
    def record(x: dict) -> dict:
        return {"path": x["path"], "request_body": json.dumps(x["body"]).encode()}

    assert not is_generation(record(IMAGE)) and media_kind("/openai/v1/images/generations/") == "image"
    assert is_generation(record(TEXT)) and media_kind(TEXT["path"]) is None  # must differ: the same prompt, text
    assert media_kind("/v1/audio/speech") == "speech" and media_kind("/v1/videos") == "video"


def test_image_requests_are_counted_apart_from_the_speed_figures_and_the_identity(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    write_capture(tmp_path / "mixed", [{}, IMAGE, {**IMAGE, "offset_s": 2}], run_wall=1_800_000_000.0)
    write_capture(tmp_path / "chat", [{}], run_wall=1_800_000_000.0)
    write_capture(tmp_path / "texts", [{}, TEXT], run_wall=1_800_000_000.0)
    # Must match: the same chat request, the images in no identity; must differ: a text prompt is in it.
    assert workload_identity(tmp_path / "mixed").workload == workload_identity(tmp_path / "chat").workload
    assert workload_identity(tmp_path / "texts").workload != workload_identity(tmp_path / "chat").workload
    with Analysis([tmp_path / "mixed"]) as a:
        result = speed_stats(a)
    [group] = result["groups"]
    assert group["workload"]["identity"]["requests"] == 1 and result["not_text"] == {"image": 2}
    with Analysis([tmp_path / "texts"]) as a:
        assert speed_stats(a)["not_text"] == {}
    out = CliRunner().invoke(cli, ["stats", str(tmp_path / "mixed")])
    assert out.exit_code == 0, out.output
    assert "not in these figures: 2 image generation requests (no text tokens to time" in out.output
    assert "not in these figures" not in CliRunner().invoke(cli, ["stats", str(tmp_path / "texts")]).output


def test_compare_and_the_card_name_the_image_requests_their_identity_leaves_out(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    from infertap.analysis.claim import claim, field_text
    from infertap.analysis.compare import compare

    write_capture(tmp_path / "mixed", [{}, IMAGE, {**IMAGE, "offset_s": 2}], run_wall=1_800_000_000.0)
    write_capture(tmp_path / "again", [{}, IMAGE, {**IMAGE, "offset_s": 2}], run_wall=1_800_000_000.0)
    write_capture(tmp_path / "chat", [{}], run_wall=1_800_000_000.0)
    t = compare(tmp_path / "mixed", tmp_path / "chat")["traffic"]
    # Must differ: the same text traffic, images on one side only: not identical traffic (test_media_traffic.py).
    assert not t["identical"] and t["text_identical"]
    assert "the image generation requests differ: A's 2, B's none, 2 of A's not in B, 0 of B's not in A" in t["how"]
    same = compare(tmp_path / "mixed", tmp_path / "again")["traffic"]  # must match: the same images
    assert same["identical"] and "differ" not in same["how"]
    text = field_text("workload", claim(tmp_path / "mixed", cache_dir=tmp_path / "cache")["workload"])
    assert "1 generation requests" in text and "apart: 2 image generation requests (no text tokens to time" in text
    # The media hash as `infertap info` shows it, with its version tag (it was bare on the card).
    info = CliRunner().invoke(cli, ["info", str(tmp_path / "mixed")])
    assert info.exit_code == 0, info.output
    tagged = workload_identity(tmp_path / "mixed").media_short
    assert tagged and tagged.startswith("wl") and f"(media {tagged})" in info.output, info.output
    assert f"in no figure nor the identity; media {tagged})" in text, text
    # Must differ: other images are another media hash on the card; must match: the same images, the same one.
    write_capture(tmp_path / "other", [{}, {**IMAGE, "body": {**IMAGE["body"], "prompt": "an owl"}}], run_wall=1_800_000_000.0)
    for name, same in (("again", True), ("other", False)):
        card = field_text("workload", claim(tmp_path / name, cache_dir=tmp_path / "cache")["workload"])
        assert (f"media {tagged})" in card) is same, card
        assert f"media {workload_identity(tmp_path / name).media_short})" in card, card
    assert "apart:" not in field_text("workload", claim(tmp_path / "chat", cache_dir=tmp_path / "cache")["workload"])
