"""Bedrock's Converse names its model in the path (``/model/{modelId}/converse``) and its body has
none: ``--model`` and ``--model-map`` rename it there, quoted as recorded, and write no ``model``
into the body (which Bedrock would ignore, running the recorded model while the replay said it
mapped it); ``--models`` selects by it."""

from __future__ import annotations

import json

import pytest

from infertap.apis import read_request
from infertap.capture.reader import CaptureReader
from infertap.replay import ReplayConfig, Transforms, run_replay
from infertap.replay.workload import Filters, WorkloadError
from tests.helpers import write_capture

HAIKU = "anthropic.claude-3-haiku-20240307-v1:0"
ARN = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-haiku"
ARN_PATH = "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.anthropic.claude-3-haiku/converse"
_BODY = {"messages": [{"role": "user", "content": [{"text": "Count to ten."}]}], "inferenceConfig": {"maxTokens": 20}}


def _capture(path) -> None:
    write_capture(
        path,
        [
            {"path": f"/model/{HAIKU}/converse", "body": _BODY, "chunks": [b"{}"]},
            {"path": ARN_PATH, "body": _BODY, "chunks": [b"{}"]},
        ],
    )


def _replay(fake, tmp_path, name: str, transforms: Transforms, models: tuple[str, ...] = ()) -> list[tuple[str, dict]]:
    app, url = fake
    app.requests.clear()
    filters = Filters(models=list(models)) if models else None
    config = ReplayConfig(tmp_path / "src", url, tmp_path / name, probe=False, transforms=transforms, filters=filters)
    run_replay(config)
    return [(r["raw_path"].decode(), json.loads(r["body"])) for r in app.requests]  # the path as sent


def test_model_map_renames_the_model_in_the_path(fake, tmp_path):
    _capture(tmp_path / "src")
    mapped = _replay(fake, tmp_path, "mapped", Transforms(model_map={HAIKU: "amazon.nova-lite-v1:0", ARN: "meta/llama"}))
    # Each path's model renamed, quoted as the recorded one was (its ':' sent as is; the ARN's escaped,
    # so the new name's '/' is escaped too), and no body given a model Bedrock would ignore.
    assert sorted(mapped) == sorted([("/model/amazon.nova-lite-v1:0/converse", _BODY), ("/model/meta%2Fllama/converse", _BODY)])
    # The replay's capture says the model it asked for.
    asked = sorted(read_request(x).model for x in CaptureReader(tmp_path / "mapped").exchanges())
    assert asked == ["amazon.nova-lite-v1:0", "meta/llama"]

    # --model renames every one; the match: no transform, each path as recorded.
    one = _replay(fake, tmp_path, "one", Transforms(model="amazon.nova-pro-v1:0"))
    assert {p for p, _ in one} == {"/model/amazon.nova-pro-v1:0/converse", "/model/amazon.nova-pro-v1%3A0/converse"}
    assert all(b == _BODY for _, b in one)
    plain = _replay(fake, tmp_path, "plain", Transforms())
    assert sorted(plain) == sorted([(f"/model/{HAIKU}/converse", _BODY), (ARN_PATH, _BODY)])
    # A map that names no recorded model changes nothing.
    assert sorted(_replay(fake, tmp_path, "other", Transforms(model_map={"x": "y"}))) == sorted(plain)


def test_models_selects_converse_requests_by_their_path(fake, tmp_path):
    _capture(tmp_path / "src")
    assert [p for p, _ in _replay(fake, tmp_path, "haiku", Transforms(), models=(HAIKU,))] == [f"/model/{HAIKU}/converse"]
    assert [p for p, _ in _replay(fake, tmp_path, "arn", Transforms(), models=(ARN,))] == [ARN_PATH]
    assert len(list(CaptureReader(tmp_path / "arn").exchanges())) == 1


RAW_ARN_PATH = f"/model/{ARN}/converse"  # the ARN's ':' and '/' as themselves: a hand-written client's, a decoding proxy's


def test_an_arn_sent_unencoded_is_read_selected_and_renamed_whole(fake, tmp_path):
    """An ARN whose ``/`` came unencoded is the whole ARN, not its last segment: ``--filter model=``
    selects it by it, ``--model-map`` renames it, written back as it came (``/`` and ``:`` as themselves)."""
    write_capture(
        tmp_path / "src",
        [
            {"path": RAW_ARN_PATH, "body": _BODY, "chunks": [b"{}"]},
            {"path": f"/model/{HAIKU}/converse", "body": _BODY, "chunks": [b"{}"]},
        ],
    )
    assert [p for p, _ in _replay(fake, tmp_path, "arn", Transforms(), models=(ARN,))] == [RAW_ARN_PATH]
    with pytest.raises(WorkloadError, match="no exchange is left to replay after the filters"):
        _replay(fake, tmp_path, "tail", Transforms(), models=("us.anthropic.claude-3-haiku",))  # its last segment: no model
    other = ARN.replace("haiku", "sonnet")
    mapped = _replay(fake, tmp_path, "mapped", Transforms(model_map={ARN: other}))
    assert sorted(mapped) == sorted([(f"/model/{other}/converse", _BODY), (f"/model/{HAIKU}/converse", _BODY)])
    asked = sorted(read_request(x).model for x in CaptureReader(tmp_path / "mapped").exchanges())
    assert asked == sorted([other, HAIKU])
    # The match: no transform sends each path as recorded; a map of the ARN's last segment alone renames nothing.
    plain = _replay(fake, tmp_path, "plain", Transforms())
    assert sorted(plain) == sorted([(RAW_ARN_PATH, _BODY), (f"/model/{HAIKU}/converse", _BODY)])
    assert sorted(_replay(fake, tmp_path, "segment", Transforms(model_map={"us.anthropic.claude-3-haiku": "x"}))) == sorted(plain)
