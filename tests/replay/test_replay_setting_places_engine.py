"""``--set`` on Responses and Messages against the real llama-server, recorded with their own SDKs:
a limit set as ``max_tokens`` is the one the engine applies on ``/v1/responses`` (which reads
``max_output_tokens``), and a ``stop`` the one it applies on ``/v1/messages`` (``stop_sequences``);
the same replay without them runs past both. ``--pin-defaults`` of its defaults leaves the ones
Messages reads nowhere (``min_p``) out of the Messages requests alone."""

from __future__ import annotations

import json

import pytest
from anthropic import Anthropic
from openai import OpenAI

from infertap.apis import read_response
from infertap.capture.reader import CaptureReader
from infertap.launch import SMOLLM2_ALIAS, recorder
from infertap.replay import ReplayConfig, Transforms, run_replay
from infertap.replay.transforms import pinned_settings

pytestmark = pytest.mark.engine

PROMPT = "Count from one to twenty in words, separated by commas."
RECORDED = 32  # the recorded requests' limit
LIMIT = 3  # the replay's


def _answers(capture) -> dict[str, tuple[int | None, str | None, str]]:
    """Each replayed exchange's (output tokens, finish reason, text), by path."""
    out = {}
    for x in CaptureReader(capture).exchanges():
        read = read_response(x)
        assert x["status"] == 200 and read.error is None, (x["path"], read.error)
        out[x["path"]] = (read.output_tokens, read.finish_reason, read.text or "")
    return out


def test_a_set_limit_and_stop_are_the_ones_llama_server_applies_on_responses_and_messages(llama_server_engine, tmp_path):
    with recorder(llama_server_engine.url, tmp_path / "src") as rec:
        OpenAI(base_url=f"{rec.url}/v1", api_key="sk-test", max_retries=0, timeout=300).responses.create(
            model=SMOLLM2_ALIAS, input=PROMPT, max_output_tokens=RECORDED, temperature=0
        )
        Anthropic(base_url=rec.url, api_key="sk-ant-test", max_retries=0, timeout=300).messages.create(
            model=SMOLLM2_ALIAS,
            max_tokens=RECORDED,
            messages=[{"role": "user", "content": PROMPT}],
            extra_body={"temperature": 0},
        )
        assert rec.stop() == 0

    def replay(name: str, transforms: Transforms) -> dict[str, tuple[int | None, str | None, str]]:
        config = ReplayConfig(tmp_path / "src", llama_server_engine.url, tmp_path / name, probe=False, transforms=transforms)
        run_replay(config)
        return _answers(tmp_path / name)

    plain = replay("plain", Transforms())
    assert all(tokens is not None and tokens > LIMIT for tokens, _, _ in plain.values()), plain

    limited = replay("limited", Transforms(set_values=[("max_tokens", LIMIT)]))
    # (llama-server's Responses says "completed" of an answer cut at its limit: the count is what says it.)
    assert {path: tokens for path, (tokens, _, _) in limited.items()} == dict.fromkeys(plain, LIMIT)
    assert limited["/v1/messages"][1] == "length"

    # Stops that any answer of words or numbers holds within its first tokens: the stopped answer ends
    # at one, as the engine says. (Not a piece of the unstopped answer: llama-server's answers to the
    # same request at temperature 0 differ from one request to the next on a server that has served
    # others, its prompt cache reused, so the next answer need not hold it.)
    stops = [" ", ",", ".", "\n", "e", "o", "1", "2"]
    assert any(s in plain["/v1/messages"][2] for s in stops), plain  # without them, the answer runs past them
    stopped = replay("stopped", Transforms(set_values=[("stop", stops)]))
    tokens, finish, text = stopped["/v1/messages"]
    assert finish == "stop" and not any(s in text for s in stops), (stops, plain["/v1/messages"], text)
    assert tokens is not None and tokens < RECORDED


def test_pin_defaults_of_a_llama_server_source_leave_min_p_out_of_messages_alone(llama_server_engine, tmp_path):
    """Messages and chat recorded against llama-server (with their SDKs), whose defaults include a
    ``min_p`` Messages reads nowhere: the pinned replay (to llama-server again) sends the Messages
    request the pins it reads and no ``min_p``, the chat request all of them, and says what it left out."""
    with recorder(llama_server_engine.url, tmp_path / "src") as rec:
        Anthropic(base_url=rec.url, api_key="sk-ant-test", max_retries=0, timeout=300).messages.create(
            model=SMOLLM2_ALIAS, max_tokens=LIMIT, messages=[{"role": "user", "content": PROMPT}]
        )
        OpenAI(base_url=f"{rec.url}/v1", api_key="sk-test", max_retries=0, timeout=300).chat.completions.create(
            model=SMOLLM2_ALIAS, max_tokens=LIMIT, messages=[{"role": "user", "content": PROMPT}]
        )
        assert rec.stop() == 0
    records = list(CaptureReader(tmp_path / "src").records())
    paths = {r["id"]: r["path"] for r in records if r.get("type") == "exchange"}
    pins = {paths[r["exchange_id"]]: pinned_settings(r["settings"]) for r in records if r.get("type") == "enrichment"}
    messages, chat = pins["/v1/messages"], pins["/v1/chat/completions"]
    assert {"min_p", "temperature", "top_k", "top_p"} <= set(messages) and messages == chat, pins

    config = ReplayConfig(
        tmp_path / "src", llama_server_engine.url, tmp_path / "out", probe=False, transforms=Transforms(pin_defaults=True)
    )
    summary = run_replay(config)
    sent = {x["path"]: json.loads(x["request_body"]) for x in CaptureReader(tmp_path / "out").exchanges()}
    assert all(x["status"] == 200 for x in CaptureReader(tmp_path / "out").exchanges())
    assert "min_p" not in sent["/v1/messages"]
    assert {k: sent["/v1/messages"][k] for k in ("temperature", "top_k", "top_p")} == {
        k: messages[k].value for k in ("temperature", "top_k", "top_p")
    }
    assert {k: sent["/v1/chat/completions"][k] for k in chat} == {k: pin.value for k, pin in chat.items()}
    left_out = summary["pins_without_place"]
    assert left_out["min_p"] == {"messages": 1}
    assert all(apis == {"messages": 1} for apis in left_out.values())  # the chat request went without none
    assert set(left_out) == set(messages) - set(sent["/v1/messages"])  # each pin Messages went without, and only those
    header = next(CaptureReader(tmp_path / "out").records())
    assert header["recorder"]["transforms"]["pins_without_place"] == left_out
