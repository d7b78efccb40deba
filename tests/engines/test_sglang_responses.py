"""What SGLang runs for a Responses request (ResponsesRequest.to_sampling_params, SGLang main at
004c82e): temperature 0.7 where it gives none, top_p and both penalties set over
--preferred-sampling-params, and max_output_tokens less 2, capped by what the prompt leaves of the
context; its chat requests keep the preferred params and the budget they ask for."""

from __future__ import annotations

import json
from typing import Any

from infertap.engines.enrich import enrichment
from infertap.engines.probe import open_engine
from tests.fake_engines import sglang_app
from tests.fake_upstream import ServerThread

_MODEL = "qwen/qwen2.5-0.5b-instruct"  # the fake's: /v1/models max_model_len 32768


def _settings(path: str, body: dict[str, Any], input_tokens: int | None = 20, preferred: dict | None = None) -> dict:
    """The enrichment's effective settings of ``body`` sent to the fake SGLang on ``path``, its
    answer's usage counting ``input_tokens`` (None: no usage)."""
    app = sglang_app()
    if preferred is not None:
        key = ("GET", "/get_model_info")
        app.routes[key] = {**app.routes[key], "preferred_sampling_params": json.dumps(preferred)}
    if path == "/v1/responses":
        answer: dict[str, Any] = {"object": "response", "model": _MODEL, "status": "completed", "output": []}
        usage = {"input_tokens": input_tokens, "output_tokens": 3, "total_tokens": (input_tokens or 0) + 3}
    else:
        answer = {"object": "chat.completion", "model": _MODEL, "choices": []}
        usage = {"prompt_tokens": input_tokens, "completion_tokens": 3, "total_tokens": (input_tokens or 0) + 3}
    if input_tokens is not None:
        answer["usage"] = usage
    record = {
        "id": "x1",
        "method": "POST",
        "path": path,
        "status": 200,
        "end": "complete",
        "response_headers": [["content-type", "application/json"]],
        "chunks": [json.dumps(answer).encode()],
        "request_body": json.dumps({"model": _MODEL, **body}).encode(),
    }
    with ServerThread(app) as server:
        engine = open_engine(server.url)
        try:
            out = enrichment(engine, None, record)
        finally:
            engine.http.close()
    assert out is not None
    return out["settings"]


_INPUT = {"input": "hi"}
_CHAT = {"messages": [{"role": "user", "content": "hi"}]}


def test_a_responses_request_without_temperature_runs_0_7_where_a_chat_request_keeps_the_preferred():
    responses = _settings("/v1/responses", _INPUT, preferred={"temperature": 0.3, "top_k": 20})
    chat = _settings("/v1/chat/completions", _CHAT, preferred={"temperature": 0.3, "top_k": 20})
    assert responses["temperature"] == {"value": 0.7, "source": "engine_default"}
    assert chat["temperature"] == {"value": 0.3, "source": "engine_default"}
    assert responses["top_p"]["value"] == 1.0 and responses["presence_penalty"]["value"] == 0.0
    # What a Responses request leaves out (top_k) still falls through to the preferred params, as chat's.
    assert responses["top_k"] == chat["top_k"] == {"value": 20, "source": "engine_default"}
    # Without preferred params the chat default stays unknown; the Responses one is SGLang's own.
    assert _settings("/v1/chat/completions", _CHAT)["temperature"]["source"] == "unknown"
    assert _settings("/v1/responses", _INPUT)["temperature"] == {"value": 0.7, "source": "engine_default"}


def test_a_temperature_sent_is_the_one_run_on_either_path():
    responses = _settings("/v1/responses", {**_INPUT, "temperature": 0.0})
    chat = _settings("/v1/chat/completions", {**_CHAT, "temperature": 0.0})
    assert responses["temperature"] == chat["temperature"] == {"value": 0.0, "source": "request"}


def test_a_responses_budget_is_max_output_tokens_less_2_where_a_chat_budget_is_as_sent():
    responses = _settings("/v1/responses", {**_INPUT, "max_output_tokens": 100})
    chat = _settings("/v1/chat/completions", {**_CHAT, "max_tokens": 100})
    assert chat["max_tokens"] == {"value": 100, "source": "request"}
    assert responses["max_tokens"]["value"] == 98 and responses["max_tokens"]["source"] == "engine_adjusted"
    assert responses["max_tokens"]["requested"] == 100 and "less 2" in responses["max_tokens"]["why"]
    # Capped by the room the prompt leaves of the 32768-token context, then less 2.
    near_full = _settings("/v1/responses", {**_INPUT, "max_output_tokens": 4000}, input_tokens=30000)
    assert near_full["max_tokens"]["value"] == 2768 - 2
    # At least 512 of room, whatever the prompt leaves.
    full = _settings("/v1/responses", {**_INPUT, "max_output_tokens": 4000}, input_tokens=32700)
    assert full["max_tokens"]["value"] == 510
    # No usage: the room is unknown, and the value assumes the budget fits, saying so.
    blind = _settings("/v1/responses", {**_INPUT, "max_output_tokens": 100}, input_tokens=None)
    assert blind["max_tokens"]["value"] == 98 and "assumes" in blind["max_tokens"]["why"]


def test_a_responses_request_without_a_budget_runs_the_room_its_prompt_leaves_less_2():
    settings = _settings("/v1/responses", _INPUT, input_tokens=20)
    assert settings["max_tokens"]["value"] == 32768 - 20 - 2 and settings["max_tokens"]["source"] == "engine_default"
    assert _settings("/v1/responses", _INPUT, input_tokens=None)["max_tokens"]["source"] == "unknown"
    # A max_tokens sent there is ignored, and stays beside the budget run.
    ignored = _settings("/v1/responses", {**_INPUT, "max_tokens": 9}, input_tokens=20)
    assert ignored["max_tokens"]["value"] == 32746 and ignored["max_tokens"]["ignored"] == {"max_tokens": 9}
