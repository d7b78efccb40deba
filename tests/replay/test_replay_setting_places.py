"""A replay's sampling settings on OpenAI's Responses and Anthropic's Messages, which read them at
the top level under names of their own (``max_output_tokens``, ``stop_sequences``): ``--set`` and
``--unset`` write those names, a setting Messages reads nowhere is refused before anything is sent,
set or unset, and TGI's refusal of a temperature of 0 is said up front with its greedy spelling."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from infertap.apis import read_request
from infertap.capture.reader import CaptureReader
from infertap.cli import cli
from infertap.replay import ReplayConfig, ReplayError, Transforms, run_replay
from tests.helpers import write_capture

_RESPONSES = {"model": "m", "input": "Count to fifty.", "max_output_tokens": 40, "temperature": 0.5}
_MESSAGES = {
    "model": "m",
    "messages": [{"role": "user", "content": "Count to fifty."}],
    "max_tokens": 40,
    "stop_sequences": ["fifty"],
}


def _capture(path) -> None:
    write_capture(
        path,
        [
            {"path": "/v1/responses", "body": _RESPONSES, "chunks": [b"{}"]},
            {"path": "/v1/messages", "body": _MESSAGES, "chunks": [b"{}"]},
        ],
    )


def _replay(fake, tmp_path, name: str, transforms: Transforms) -> dict[str, dict]:
    """The bodies the fake target got, by path, and what the replay's own capture reads in them."""
    app, url = fake
    app.requests.clear()
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / name, probe=False, transforms=transforms))
    sent = {r["path"]: json.loads(r["body"]) for r in app.requests}
    read = {x["path"]: read_request(x).sampling for x in CaptureReader(tmp_path / name).exchanges()}
    assert read == {
        path: read_request({"path": path, "request_body": json.dumps(b).encode()}).sampling for path, b in sent.items()
    }
    return sent


def test_common_names_go_under_the_names_responses_and_messages_read(fake, tmp_path):
    _capture(tmp_path / "src")
    sent = _replay(fake, tmp_path, "out", Transforms(set_values=[("max_tokens", 8), ("stop", ["ten"]), ("top_k", 5)]))
    # Responses: the limit as max_output_tokens (a max_tokens beside it would be read by no server);
    # top_k and stop, which vLLM's Responses reads and OpenAI's has no name for, as given.
    assert sent["/v1/responses"] == {**_RESPONSES, "max_output_tokens": 8, "stop": ["ten"], "top_k": 5}
    # Messages: max_tokens is its own name; stop as stop_sequences.
    assert sent["/v1/messages"] == {**_MESSAGES, "max_tokens": 8, "stop_sequences": ["ten"], "top_k": 5}

    # The same names under any spelling infertap knows; unset by them too.
    spelled = Transforms(set_values=[("max_completion_tokens", 8)], unset=["temperature", "stop"])
    sent = _replay(fake, tmp_path, "spelled", spelled)
    responses = {k: v for k, v in _RESPONSES.items() if k != "temperature"}
    assert sent["/v1/responses"] == {**responses, "max_output_tokens": 8}
    assert sent["/v1/messages"] == {k: v for k, v in _MESSAGES.items() if k != "stop_sequences"} | {"max_tokens": 8}

    # The match: no transform, each body as recorded.
    assert _replay(fake, tmp_path, "plain", Transforms()) == {"/v1/responses": _RESPONSES, "/v1/messages": _MESSAGES}


@pytest.mark.parametrize(
    ("transforms", "why"),
    [
        (Transforms(set_values=[("seed", 3)]), r"--set seed: messages reads no setting 'seed'"),
        (Transforms(set_values=[("repetition_penalty", 1.1)]), r"--set repetition_penalty: messages reads no setting"),
        (Transforms(unset=["min_p"]), r"--unset min_p: messages reads no setting 'min_p'"),
    ],
)
def test_a_setting_messages_reads_nowhere_is_refused_before_sending(fake, tmp_path, transforms, why):
    app, url = fake
    _capture(tmp_path / "src")
    with pytest.raises(ReplayError, match=r"exchange src-1 \(POST /v1/messages\): " + why):
        run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False, transforms=transforms))
    assert not app.requests and not (tmp_path / "out").exists()


def test_an_unset_of_a_setting_tgi_reads_nowhere_is_refused_and_one_it_reads_removed(fake, tmp_path):
    app, url = fake
    body = {"inputs": "The capital of France is", "parameters": {"top_k": 5, "max_new_tokens": 8}}
    write_capture(tmp_path / "src", [{"path": "/generate", "body": body, "chunks": [b"{}"]}])
    with pytest.raises(ReplayError, match=r"--unset min_p: tgi-generate reads no setting 'min_p'"):
        run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False, transforms=Transforms(unset=["min_p"])))
    assert not app.requests
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "ok", probe=False, transforms=Transforms(unset=["top_k"])))
    (sent,) = app.requests
    assert json.loads(sent["body"]) == {**body, "parameters": {"max_new_tokens": 8}}


def test_a_temperature_of_0_on_tgi_is_refused_with_its_greedy_spelling(fake, tmp_path):
    """TGI's router refuses a temperature of 0 or below (validation.rs): said before sending, with
    how TGI asks for greedy decoding; SGLang's ``/generate`` takes 0, and TGI a temperature above it."""
    app, url = fake
    tgi = {"inputs": "The capital of France is", "parameters": {"temperature": 0.7}}
    sglang = {"text": "The capital of France is", "sampling_params": {"temperature": 0.7}}
    write_capture(tmp_path / "src", [{"path": "/generate", "body": b, "chunks": [b"{}"]} for b in (sglang, tgi)])
    with pytest.raises(ReplayError, match=r"--set temperature: tgi-generate refuses a temperature of 0 .*do_sample=false"):
        run_replay(
            ReplayConfig(
                tmp_path / "src", url, tmp_path / "out", probe=False, transforms=Transforms(set_values=[("temperature", 0)])
            )
        )
    assert not app.requests
    transforms = Transforms(set_values=[("temperature", 0.1)])
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "ok", probe=False, transforms=transforms))
    sent = sorted((json.loads(r["body"]) for r in app.requests), key=json.dumps)
    assert sent == sorted(
        [{**sglang, "sampling_params": {"temperature": 0.1}}, {**tgi, "parameters": {"temperature": 0.1}}], key=json.dumps
    )


def test_the_header_and_a_note_say_under_which_name_each_api_got_a_setting(fake, tmp_path):
    """``--set max_tokens`` and ``--unset stop`` over Responses, Messages, TGI's ``/generate`` and chat:
    the replay's header (``transforms.placed``) and its note on stderr name what each API got them as
    where it differs from the name given; chat, which reads them as given, is named in neither."""
    app, url = fake
    tgi = {"inputs": "The capital of France is", "parameters": {"max_new_tokens": 8}}
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    exchanges = [
        {"path": "/v1/responses", "body": _RESPONSES, "chunks": [b"{}"]},
        {"path": "/v1/messages", "body": _MESSAGES, "chunks": [b"{}"]},
        {"path": "/generate", "body": tgi, "chunks": [b"{}"]},
        {"path": "/v1/chat/completions", "body": chat, "chunks": [b"{}"]},
    ]
    write_capture(tmp_path / "src", exchanges)
    args = ["replay", str(tmp_path / "src"), "--target", url, "--no-probe", "--no-telemetry", "--json"]
    done = CliRunner().invoke(cli, [*args, "--set", "max_tokens=4", "--unset", "stop", "--out", str(tmp_path / "out")])
    assert done.exit_code == 0, done.output
    placed = {
        "max_tokens": {"responses": "max_output_tokens", "tgi-generate": "parameters.max_new_tokens"},
        "stop": {"messages": "stop_sequences", "tgi-generate": "parameters.stop"},
    }
    header = next(CaptureReader(tmp_path / "out").records())
    assert header["recorder"]["transforms"]["placed"] == placed
    assert header["recorder"]["transforms"]["set"] == ["max_tokens"] and header["recorder"]["transforms"]["unset"] == ["stop"]
    notes = [line for line in done.stderr.splitlines() if "goes where each API reads it" in line]
    assert notes == [
        "note: max_tokens goes where each API reads it: max_output_tokens on responses, parameters.max_new_tokens on tgi-generate requests",
        "note: stop goes where each API reads it: stop_sequences on messages, parameters.stop on tgi-generate requests",
    ]
    sent = {r["path"]: json.loads(r["body"]) for r in app.requests}
    assert sent["/v1/chat/completions"] == {**chat, "max_tokens": 4}  # chat reads it as given: no note of it

    # The match: temperature, which Responses, Messages and chat read as given, is placed in TGI's parameters alone.
    done = CliRunner().invoke(cli, [*args, "--set", "temperature=0.5", "--out", str(tmp_path / "same")])
    assert done.exit_code == 0, done.output
    assert next(CaptureReader(tmp_path / "same").records())["recorder"]["transforms"]["placed"] == {
        "temperature": {"tgi-generate": "parameters.temperature"}
    }
    assert "note: temperature goes where each API reads it: parameters.temperature on tgi-generate requests" in done.stderr
