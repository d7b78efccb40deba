"""A replay's sampling settings on SGLang's and TGI's native ``/generate``: each server reads them
in an object of its own (``sampling_params``, ``parameters``) under its own names, and ignores a
top-level ``temperature``. ``--set``, ``--unset`` and ``--pin-defaults`` write them there; one the
API has no name for is refused before anything is sent, and compare's configuration sees the
settings the replay sent."""

from __future__ import annotations

import json

import pytest

from infertap.analysis.compare import compare
from infertap.apis import read_request
from infertap.capture.reader import CaptureReader
from infertap.replay import ReplayConfig, ReplayError, Transforms, run_replay
from tests.helpers import write_capture

_SGLANG = {"text": "The capital of France is", "sampling_params": {"temperature": 0.7, "max_new_tokens": 8, "top_k": 5}}
_TGI = {"inputs": "The capital of France is", "parameters": {"temperature": 0.7, "max_new_tokens": 8, "top_k": 5}}


def _sent(app) -> dict[str, list[dict]]:
    """The bodies the fake target got, by path."""
    out: dict[str, list[dict]] = {}
    for r in app.requests:
        out.setdefault(r["path"], []).append(json.loads(r["body"]))
    return out


def _capture(path, *, enrich: dict | None = None) -> None:
    exchanges = [
        {"path": "/generate", "body": _SGLANG, "chunks": [b"{}"]},
        {"path": "/generate", "body": _TGI, "chunks": [b"{}"]},
        {"path": "/generate_stream", "body": _TGI, "chunks": [b"{}"]},
    ]
    enrichments = [{"exchange_id": f"src-{i}", "settings": enrich} for i in range(3)] if enrich else None
    write_capture(path, exchanges, enrichments=enrichments)


def test_set_and_unset_go_where_sglang_and_tgi_read_them_under_their_names(fake, tmp_path):
    app, url = fake
    _capture(tmp_path / "src")
    given = [("temperature", 0.2), ("max_tokens", 4), ("repeat_penalty", 1.1), ("seed", 3)]
    transforms = Transforms(set_values=given, unset=["top_k"])
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False, transforms=transforms))
    sent = _sent(app)
    (sglang, tgi), (stream,) = sent["/generate"], sent["/generate_stream"]
    assert sglang == {
        "text": _SGLANG["text"],
        "sampling_params": {"temperature": 0.2, "max_new_tokens": 4, "repetition_penalty": 1.1, "sampling_seed": 3},
    }
    assert (
        tgi
        == stream
        == {
            "inputs": _TGI["inputs"],
            "parameters": {"temperature": 0.2, "max_new_tokens": 4, "repetition_penalty": 1.1, "seed": 3},
        }
    )
    # What the replay recorded reads as the settings sent: the analysis reads each API's own object.
    replayed = [read_request(x) for x in sorted(CaptureReader(tmp_path / "out").exchanges(), key=lambda x: x["seq"])]
    assert [(r.api, r.sampling) for r in replayed] == [
        (api, {"temperature": 0.2, "max_tokens": 4, "repeat_penalty": 1.1, "seed": 3})
        for api in ("sglang-generate", "tgi-generate", "tgi-generate-stream")
    ]


def test_replayed_as_recorded_without_transforms(fake, tmp_path):
    """No transform: the bodies sent are those recorded, the settings where they were."""
    app, url = fake
    _capture(tmp_path / "src")
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False))
    sent = _sent(app)
    assert sent["/generate"] == [_SGLANG, _TGI] and sent["/generate_stream"] == [_TGI]


@pytest.mark.parametrize(
    ("transforms", "why"),
    [
        (Transforms(set_values=[("min_p", 0.1)]), r"--set min_p: tgi-generate reads no setting 'min_p'"),
        (Transforms(set_values=[("logprobs", True)]), r"--set logprobs: sglang-generate reads no setting 'logprobs'"),
    ],
)
def test_a_setting_the_api_has_no_place_for_is_refused_before_sending(fake, tmp_path, transforms, why):
    app, url = fake
    _capture(tmp_path / "src")
    with pytest.raises(ReplayError, match=why):
        run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False, transforms=transforms))
    assert not app.requests


def test_a_setting_both_apis_read_is_sent_to_both(fake, tmp_path):
    """The match for the refusals: ``top_p`` has a place in both APIs, ``min_p`` in SGLang's alone."""
    app, url = fake
    write_capture(tmp_path / "src", [{"path": "/generate", "body": _SGLANG, "chunks": [b"{}"]}])
    transforms = Transforms(set_values=[("top_p", 0.9), ("min_p", 0.1)])
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False, transforms=transforms))
    (sent,) = _sent(app)["/generate"]
    assert sent["sampling_params"] == {**_SGLANG["sampling_params"], "top_p": 0.9, "min_p": 0.1}


def test_pinned_defaults_go_in_the_apis_object_and_one_without_a_place_is_left_out(fake, tmp_path):
    app, url = fake
    pins = {"repeat_penalty": {"value": 1.05, "source": "engine_default"}, "top_k": {"value": 40, "source": "engine_default"}}
    _capture(tmp_path / "src", enrich=pins)
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False, transforms=Transforms(pin_defaults=True)))
    sent = _sent(app)
    (sglang, tgi), (stream,) = sent["/generate"], sent["/generate_stream"]
    assert sglang["sampling_params"] == {**_SGLANG["sampling_params"], "repetition_penalty": 1.05}  # top_k sent: kept
    assert tgi["parameters"] == stream["parameters"] == {**_TGI["parameters"], "repetition_penalty": 1.05}
    assert "repetition_penalty" not in sglang and "repeat_penalty" not in tgi

    app.requests.clear()
    # min_p, which TGI reads nowhere: left out of TGI's requests and said, SGLang's get it.
    _capture(tmp_path / "minp", enrich={"min_p": {"value": 0.05, "source": "engine_default"}})
    transforms = Transforms(pin_defaults=True)
    summary = run_replay(ReplayConfig(tmp_path / "minp", url, tmp_path / "out2", probe=False, transforms=transforms))
    sent = _sent(app)
    (sglang, tgi), (stream,) = sent["/generate"], sent["/generate_stream"]
    assert sglang["sampling_params"] == {**_SGLANG["sampling_params"], "min_p": 0.05}
    assert tgi == stream == _TGI
    assert summary["pins_without_place"] == {"min_p": {"tgi-generate": 1, "tgi-generate-stream": 1}}


def test_compare_sees_the_settings_a_replay_set(fake, tmp_path):
    """The replay's own enrichment reads the settings it sent: compare's configuration shows the
    temperature it set as a difference; a replay that set none shows none."""
    app, url = fake
    _capture(tmp_path / "src")
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "plain", probe=True, telemetry=False))
    transforms = Transforms(set_values=[("temperature", 0.2)])
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "cold", probe=True, telemetry=False, transforms=transforms))
    differ = compare(tmp_path / "plain", tmp_path / "cold")["config"]["settings"]
    assert [(s["setting"], s["a"], s["b"], s["exchanges"]) for s in differ] == [
        ("temperature", "0.7 (request)", "0.2 (request)", 3)
    ]
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "again", probe=True, telemetry=False))
    assert compare(tmp_path / "plain", tmp_path / "again")["config"]["settings"] == []


def test_bedrock_converse_settings_go_in_its_inference_config(fake, tmp_path):
    """Converse reads ``inferenceConfig`` in its own names (``maxTokens``); a ``top_k`` it has no
    place for there (a model's own field, ``additionalModelRequestFields``) is refused."""
    app, url = fake
    path = "/model/m/converse"
    body = {"messages": [{"role": "user", "content": [{"text": "hi"}]}], "inferenceConfig": {"temperature": 0.5}}
    write_capture(tmp_path / "src", [{"path": path, "body": body, "chunks": [b"{}"]}])
    transforms = Transforms(set_values=[("temperature", 0), ("max_tokens", 8)])
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False, transforms=transforms))
    (sent,) = _sent(app)[path]
    assert sent == {**body, "inferenceConfig": {"temperature": 0, "maxTokens": 8}}
    app.requests.clear()
    with pytest.raises(ReplayError, match=r"--set top_k: bedrock-converse reads no setting 'top_k'"):
        refused = Transforms(set_values=[("top_k", 5)])
        run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out2", probe=False, transforms=refused))
    assert not app.requests


def test_a_batch_with_settings_per_prompt_gets_the_setting_in_each(fake, tmp_path):
    """SGLang's batch may give each prompt its own ``sampling_params``: a setting goes in every one,
    and the replay's request then reads it as the request's (every prompt shares it)."""
    app, url = fake
    body = {"text": ["a", "b"], "sampling_params": [{"temperature": 0.7}, {"temperature": 0.9, "top_k": 3}]}
    write_capture(tmp_path / "src", [{"path": "/generate", "body": body, "chunks": [b"[]"]}])
    transforms = Transforms(set_values=[("temperature", 0)])
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False, transforms=transforms))
    (sent,) = _sent(app)["/generate"]
    assert sent["sampling_params"] == [{"temperature": 0}, {"temperature": 0, "top_k": 3}]
    (x,) = CaptureReader(tmp_path / "out").exchanges()
    assert read_request(x).sampling == {"temperature": 0}
    assert read_request(next(CaptureReader(tmp_path / "src").exchanges())).sampling == {}  # the prompts differed


def test_a_setting_for_a_generate_body_of_both_shapes_is_refused_not_put_where_neither_server_reads():
    """A /generate body of SGLang's ``text`` and TGI's ``inputs``: which server reads it, so where a
    ``--set`` goes, is unknown; it was set at the top level, read by neither. Refused now; a body of one
    shape is still set in its own place (must match), and with no setting the body goes as recorded."""
    from infertap.replay.transforms import TransformError

    both = {"text": "a", "sampling_params": {}, "inputs": "a", "parameters": {}}
    setting = Transforms(set_values=[("temperature", 0.2)])
    with pytest.raises(TransformError, match="holds both SGLang's text/input_ids and TGI's inputs"):
        setting.body(json.dumps(both).encode(), path="/generate")
    sglang = json.loads(setting.body(json.dumps({"text": "a", "sampling_params": {}}).encode(), path="/generate"))
    assert sglang["sampling_params"] == {"temperature": 0.2} and "temperature" not in sglang
    raw = json.dumps(both).encode()
    assert Transforms(model_map={"m": "n"}).body(raw, path="/generate") == raw
