"""compare on runs of image and speech requests alone: it compared nothing of them. Two runs whose
requests paired nothing were refused as "nothing to compare: no generation requests"; runs that paired
showed an empty speed table and their answers as "not compared (no API's answer: a model list, ...)".
Now their traffic, their answers and e2e by kind, and whether what they made is byte-identical are said,
and a header that changes what an image or embeddings request asks is named where it kept two apart."""

from __future__ import annotations

import base64
import html
import json
import statistics

from click.testing import CliRunner

from infertap.analysis.compare import compare
from infertap.analysis.compare_apart import apart_lines
from infertap.analysis.compare_traffic import traffic_line
from infertap.analysis.divergence_notes import media_notes
from infertap.analysis.report import render
from infertap.analysis.store import Analysis
from infertap.cli import cli
from tests.helpers import embeddings_request, image_request, pair_captures, write_capture

WALL = 1_800_000_000.0
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(48))
GUARDRAIL = [["content-type", "application/json"], ["x-amzn-bedrock-guardrailidentifier", "gr-1"]]


def _image(prompt: str, at: float, png: bytes = PNG, *, created: int = 1, **more) -> dict:
    answer = {"created": created, "data": [{"b64_json": base64.b64encode(png).decode()}]}
    return {**image_request(prompt, at), "chunks": [json.dumps(answer).encode()], **more}


def _speech(text: str, at: float, audio: bytes, **more) -> dict:
    return {
        "path": "/v1/audio/speech",
        "body": {"model": "tts-1", "voice": "alloy", "input": text},
        "chunks": [audio[:5], audio[5:]],
        "content_type": "audio/mpeg",
        "offset_s": at,
        **more,
    }


def _run(path, exchanges: list[dict]) -> None:
    write_capture(path, exchanges, run_wall=WALL)


def _e2e_ms(path) -> dict[str, list[float]]:
    """Each kind's e2e (ms) of the capture, as its own metrics say: what compare's figures come from."""
    with Analysis([path]) as a:
        rows = a.query("SELECT path, e2e_ns FROM metrics ORDER BY exchange_id").rows
    out: dict[str, list[float]] = {}
    for where, ns in rows:
        out.setdefault("speech" if where.endswith("/speech") else "image", []).append(ns / 1e6)
    return out


def test_two_runs_of_media_requests_alone_compare_traffic_speed_and_outputs(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    audio = b"ID3\x03\x00" + bytes(range(40))
    source = [_image("a fox", 1), _image("a cat", 2), _speech("hello", 3, audio)]
    _run(tmp_path / "a", source)
    # Must match: the same requests, the same images (created at another time: the body's bytes differ) and audio.
    _run(tmp_path / "again", [_image("a fox", 1, created=7), _image("a cat", 2, created=8), _speech("hello", 3, audio)])
    # Must differ: a replay of A (its links) against another server, one image of another prompt and other
    # bytes, the other image the same, the audio other bytes; every answer slower.
    replay = [
        _image("a fox", 1, source_id="src-0", duration_ns=9_000_000),
        _image("an owl", 2, PNG[:-1] + b"\x00", source_id="src-1", duration_ns=9_000_000),
        _speech("hello", 3, audio[:-1] + b"\x01", source_id="src-2", duration_ns=9_000_000),
    ]
    _run(tmp_path / "b", replay)

    r = compare(tmp_path / "a", tmp_path / "again")
    assert r["traffic"]["identical"] and r["traffic"]["no_text"]
    m = r["divergence"]["media"]
    assert m["kinds"]["image"]["identical"] == 2 and m["kinds"]["speech"]["identical"] == 1
    assert m["differ"] == 0 and m["compared"] == m["pairs"] == 3
    assert r["divergence"]["counts"].get("not_compared", 0) == 0  # compared, not set aside as no API's answer
    assert r["divergence"]["exact_match_rate"] is None  # no text divergence for them

    r = compare(tmp_path / "a", tmp_path / "b")
    t = r["traffic"]
    assert not t["identical"] and t["media"] == {"image": {"a": 2, "b": 2, "only_a": 1, "only_b": 1}}
    assert "the image generation requests differ: A's 2, B's 2, 1 of A's not in B, 1 of B's not in A" in traffic_line(t)
    assert r["pairing"]["by"]["replay link"] == 3
    m = r["divergence"]["media"]
    assert m["kinds"]["image"] == {**m["kinds"]["image"], "compared": 2, "identical": 1, "differ": 1}
    assert m["kinds"]["speech"] == {**m["kinds"]["speech"], "compared": 1, "identical": 0, "differ": 1}
    assert [p["a_id"] for p in m["differing"]] == ["src-1", "src-2"]
    assert m["differing"][0]["bytes"] == [len(PNG), len(PNG)]
    # Their speed: each kind's e2e over its pairs, as each side's metrics have them.
    ea, eb = _e2e_ms(tmp_path / "a"), _e2e_ms(tmp_path / "b")
    for kind in ("image", "speech"):
        s = r["apart_speed"][kind]
        assert s["a"] == {"requests": len(ea[kind]), "ok": len(ea[kind]), "failed": 0, "unfinished": 0, "errors": {}}
        assert s["e2e"]["a"]["p50"] == statistics.median(ea[kind]) and s["e2e"]["b"]["p50"] == statistics.median(eb[kind])
        assert s["e2e"]["ratio_p50"] == statistics.median(eb[kind]) / statistics.median(ea[kind]) != 1

    out = CliRunner().invoke(cli, ["compare", str(tmp_path / "a"), str(tmp_path / "b")], env={"COLUMNS": "300"})
    assert out.exit_code == 0, out.output
    said = " ".join(out.output.split())
    assert "image outputs: 2 pairs of image answers, 2 compared: 1 byte-identical, 1 differ" in said
    assert "speech outputs: 1 pairs of speech answers, 1 compared: 0 byte-identical, 1 differ" in said
    assert "image generation requests (no text tokens: e2e only): A: 2 requests, 2 ok; B: 2 requests, 2 ok; e2e p50" in said
    assert "no API's answer" not in said
    # No text generation request on either side: no empty text speed table above their own lines.
    assert "answers A:" not in said and "times in ms" not in said and "2. Speed (no text generation request" in said
    # The report says what compare prints of them.
    page = render(tmp_path / "a", tmp_path / "b")
    lines = [text for text, _ in media_notes(r["divergence"]) + apart_lines(r["apart_speed"])]
    assert len(lines) >= 4 and all(html.escape(text) in page for text in lines)
    # ... and no empty text speed table above them either.
    assert "No text generation request on either side" in page
    assert "Answers A:" not in page and "A p50 ms" not in page and "Paired exchanges that succeeded" not in page


def test_a_failed_media_answer_is_counted_failed_not_compared(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    _run(tmp_path / "a", [_image("a fox", 1), _image("a cat", 2)])
    error = {"status": 500, "chunks": [b'{"error": {"message": "boom"}}']}
    _run(tmp_path / "b", [_image("a fox", 1), {**_image("a cat", 2), **error}])
    r = compare(tmp_path / "a", tmp_path / "b")
    m = r["divergence"]["media"]
    assert m["failed"] == 1 and m["compared"] == m["identical"] == 1 and m["differ"] == 0
    assert r["apart_speed"]["image"]["b"] == {"requests": 2, "ok": 1, "failed": 1, "unfinished": 0, "errors": {"status 500": 1}}
    assert r["apart_speed"]["image"]["e2e"]["a"]["n"] == 1  # over the pair ok on both sides


def test_media_runs_that_pair_nothing_are_refused_by_the_pairing_rules(tmp_path, monkeypatch):
    """They are something to compare: "nothing to compare: no generation requests" was untrue of them."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    _run(tmp_path / "a", [_image("a fox", 1)])
    _run(tmp_path / "b", [_image("an owl", 1)])
    _run(tmp_path / "asked", [_image("a fox", 1, headers=GUARDRAIL)])
    _run(tmp_path / "e", [embeddings_request("a fox", 1)])
    _run(tmp_path / "f", [embeddings_request("an owl", 1)])
    for a, b in (("a", "b"), ("e", "f")):
        out = CliRunner().invoke(cli, ["compare", str(tmp_path / a), str(tmp_path / b)])
        said = " ".join(out.output.split())
        assert out.exit_code == 1 and f"Error: no exchange of {tmp_path / b} matches one of {tmp_path / a}: 0 pairs" in said
        assert "nothing to compare" not in said
    out = CliRunner().invoke(cli, ["compare", str(tmp_path / "a"), str(tmp_path / "asked")])
    said = " ".join(out.output.split())
    assert out.exit_code == 1 and "1 pair would match but for the headers that change what a request asks" in said
    assert "(A sent none, B x-amzn-bedrock-guardrailidentifier: gr-1)" in said


def test_an_asked_header_alone_is_named_for_image_and_embeddings_requests(tmp_path, monkeypatch):
    """A guardrail header on one image (one embeddings) request of B: its identity differs, and the
    line said "1 of A's not in B" with no reason, where for text requests it names the headers."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    runs = {
        "image": [_image("a fox", 1), _image("a cat", 2)],
        "embeddings": [embeddings_request("a fox", 1), embeddings_request("a cat", 2)],
    }
    for kind, xs in runs.items():
        _run(tmp_path / f"{kind}-a", xs)
        _run(tmp_path / f"{kind}-b", [{**xs[0], "headers": GUARDRAIL}, xs[1]])
        _run(tmp_path / f"{kind}-c", [{**xs[0], "headers": GUARDRAIL}, xs[1]])
        what = "image, video or speech requests" if kind == "image" else "embeddings requests"
        # Must differ: B sent the header on one request, A none.
        t = compare(tmp_path / f"{kind}-a", tmp_path / f"{kind}-b")["traffic"]
        assert not t["identical"]
        assert (
            f"the headers that change what a request asks differ: A's {what} sent none, "
            "B's none or x-amzn-bedrock-guardrailidentifier: gr-1"
        ) in traffic_line(t)
        # Must match: both sent it alike.
        t = compare(tmp_path / f"{kind}-b", tmp_path / f"{kind}-c")["traffic"]
        assert t["identical"] and "headers" not in traffic_line(t)


def _streamed_speech(pieces: list[bytes]) -> list[bytes]:
    """What audio.speech.create(..., stream_format="sse") answers: the audio in base64 pieces, then its usage."""
    events = [{"type": "speech.audio.delta", "audio": base64.b64encode(p).decode()} for p in pieces]
    events.append({"type": "speech.audio.done", "usage": {"input_tokens": 3, "output_tokens": len(pieces), "total_tokens": 6}})
    return [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events]


def test_streamed_speech_is_compared_by_its_audio_whatever_pieces_carried_it(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    audio = bytes(range(90))
    request = ("/v1/audio/speech", {"model": "gpt-4o-mini-tts", "voice": "alloy", "input": "hi", "stream_format": "sse"})
    sse = "text/event-stream"
    a, b = pair_captures(
        tmp_path,
        {
            # Must match: the same audio, cut into other pieces.
            "same": ((*request, sse), _streamed_speech([audio[:30], audio[30:]]), _streamed_speech([audio[:50], audio[50:]])),
            # Must differ: one byte of the audio other.
            "other": ((*request, sse), _streamed_speech([audio]), _streamed_speech([audio[:-1] + b"\xff"])),
        },
    )
    m = compare(a, b)["divergence"]["media"]["kinds"]["speech"]
    assert m["pairs"] == m["compared"] == 2 and m["identical"] == 1 and m["differ"] == 1
    assert m["not_read_a"] == m["not_read_b"] == 0
