"""The workload identity's version tag says which rule hashed it. This infertap hashes generation
requests an older one left out (a body sent compressed, llama.cpp's ``/infill`` with no ``prompt``,
SGLang's ``/generate``, ``/v1/responses/compact``), yet tagged them ``wl1`` as before: a replay header
an older infertap wrote for such a capture read "derived from its source by no transform recorded",
as if its text differed. Such a capture is now tagged ``wl3``, every other keeps its tag and hash,
and a replay whose source was hashed under another tag says so."""

from __future__ import annotations

import gzip
import json

import pytest

from infertap.analysis.store import Analysis
from infertap.analysis.workload_identity import capture_identity
from infertap.capture.identity import OrderedHashes, describe, exchange_digest, workload_identity, workload_summary
from infertap.capture.reader import CaptureReader
from tests.helpers import write_capture

WALL = 1_800_000_000.0
CHAT = {"model": "m", "messages": [{"role": "user", "content": "q"}]}
JSON = [["content-type", "application/json"]]


def _exchange(kind: str) -> dict:
    """One generation request of ``kind``: those only this infertap hashes, and their older-rule twins."""
    if kind == "gzip":
        return {"body": gzip.compress(json.dumps(CHAT).encode()), "headers": [*JSON, ["content-encoding", "gzip"]]}
    if kind == "infill":
        return {"path": "/infill", "body": {"input_prefix": "def f(", "input_suffix": "):"}}
    if kind == "infill_prompt":
        return {"path": "/infill", "body": {"prompt": "x", "input_prefix": "def f(", "input_suffix": "):"}}
    if kind == "generate":
        return {"path": "/generate", "body": {"text": "q", "sampling_params": {"max_new_tokens": 4}}}
    if kind == "compact":
        return {"path": "/v1/responses/compact", "body": {"model": "m", "input": "q"}}
    return {"body": {**CHAT, "messages": [{"role": "user", "content": kind}]}}


def _write(path, kinds: list[str], recorder: dict | None = None):
    write_capture(path, [{**_exchange(k), "offset_s": i} for i, k in enumerate(kinds)], run_wall=WALL, recorder=recorder)
    return path


def _tables(path):
    with Analysis([path]) as analysis:
        return capture_identity(analysis, analysis.query("SELECT capture FROM captures").rows[0][0])


@pytest.mark.parametrize(
    ("kind", "tag"),
    [("gzip", "wl3"), ("infill", "wl3"), ("generate", "wl3"), ("compact", "wl3"), ("infill_prompt", "wl1"), ("plain", "wl1")],
)
def test_a_capture_of_requests_an_older_infertap_left_out_is_tagged_wl3(tmp_path, monkeypatch, kind: str, tag: str) -> None:
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    path = _write(tmp_path / kind, ["a", kind])
    found = workload_identity(path)
    assert found.requests == 2, found  # the request is hashed, as a generation request
    # Must differ (wl3) for the requests an older rule left out, match (wl1) for the others.
    assert found.version == tag and found.short.startswith(f"{tag}:")
    # The tables tag and hash alike.
    tables = _tables(path)
    assert (tables.version, tables.workload, tables.schedule) == (found.version, found.workload, found.schedule)
    # The hash is the rule's hash of the requests' digests whatever the tag: a wl1 capture keeps the hash it had.
    hashes = OrderedHashes()
    for record in CaptureReader(path).exchanges():
        hashes.add([round(WALL * 1e9) + record["start_ns"]], [exchange_digest(record)])
    assert found.workload == hashes.workload.hexdigest()


def _replay(tmp_path, name: str, source: dict) -> str:
    """``describe`` of a replay of ["a", "gzip"] whose header recorded ``source`` as its source's identity."""
    recorder = {"kind": "replay", "source": "src", "target": "http://127.0.0.1:9", "workload_source": source}
    path = _write(tmp_path / name, ["a", "gzip"], recorder)
    recorders = [r["recorder"] for r in CaptureReader(path) if r.get("type") == "header"]
    return describe(workload_summary(workload_identity(path), recorders))


def test_a_replay_whose_source_was_hashed_by_another_rule_says_so(tmp_path) -> None:
    # What an older infertap recorded for the source: the compressed request left out, tagged wl1.
    older = workload_identity(_write(tmp_path / "older", ["a"])).as_dict()
    said = _replay(tmp_path, "r1", older)
    # Must differ from another text: hashed by another rule, not derived by no transform.
    assert (
        f"not known to be the same requests as its source {older['short']}: hashed by another rule (wl1, this capture's wl3"
        in said
    )
    assert "no transform recorded" not in said
    # Must match: a source of the same tag and another hash is other text, as it always was.
    other = workload_identity(_write(tmp_path / "other", ["b", "gzip"])).as_dict()
    said = _replay(tmp_path, "r2", other)
    assert f"derived from {other['short']} by no transform recorded" in said and "another rule" not in said
    # Must match: the source's identity hashed by this rule is the same requests.
    same = workload_identity(_write(tmp_path / "same", ["a", "gzip"])).as_dict()
    assert f"identical to its source {same['short']}" in _replay(tmp_path, "r3", same)


def test_an_asked_header_on_a_media_or_embeddings_request_tells_two_runs_apart(tmp_path, monkeypatch) -> None:
    """A media or embeddings request's asked header is hashed into its identity, not its tag (the tag
    is the generation requests'): compare's traffic line and the claim card still tell such runs apart."""
    from infertap.analysis.claim import claim
    from infertap.analysis.compare import compare
    from infertap.analysis.compare_traffic import traffic_line
    from tests.helpers import embeddings_request, image_request

    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    guard = [*JSON, ["X-Amzn-Bedrock-GuardrailIdentifier", "gr-1"]]
    beta = [*JSON, ["OpenAI-Beta", "assistants=v2"]]
    for name, (image, embed) in {"plain": (JSON, JSON), "asked": (guard, beta), "again": (guard, beta)}.items():
        write_capture(
            tmp_path / name,
            [
                {**_exchange("a"), "offset_s": 0},
                {**image_request("a fox", 1), "headers": image},
                {**embeddings_request("a cat", 2), "headers": embed},
            ],
            run_wall=WALL,
        )
    ids = {name: workload_identity(tmp_path / name) for name in ("plain", "asked", "again")}
    assert {i.version for i in ids.values()} == {"wl1"} and len({i.workload for i in ids.values()}) == 1  # the text's tag
    # Must differ: the header is in the media and embeddings identities, and compare and the card see it.
    assert ids["plain"].media != ids["asked"].media and ids["plain"].embeddings != ids["asked"].embeddings
    t = compare(tmp_path / "plain", tmp_path / "asked")["traffic"]
    assert not t["identical"] and traffic_line(t).startswith("traffic: NOT identical")
    assert "the image generation requests differ" in t["how"] and "the embeddings requests differ" in t["how"]
    cards = {n: claim(tmp_path / n, cache_dir=tmp_path / "cache")["workload"]["value"] for n in ids}
    for field in ("media_identity", "embeddings_identity"):
        assert cards["plain"][field] != cards["asked"][field], field
        # Must match: the same headers sent, the same traffic.
        assert cards["asked"][field] == cards["again"][field], field
    assert compare(tmp_path / "asked", tmp_path / "again")["traffic"]["identical"]
