"""What SGLang runs for its OpenAI requests (SGLang main at 004c82e): a Responses request
(ResponsesRequest.to_sampling_params) temperature 0.7 where it gives none, top_p and both penalties
set over --preferred-sampling-params, and max_output_tokens less 2, capped by what the prompt leaves
of the context; a chat request (ChatCompletionRequest.to_sampling_params) the model's
generation_config.json or 1.0, and a completions request its field defaults, both over the
preferred params, which fill only the keys a path leaves out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fake_engines import enriched, sglang_app

_MODEL = "qwen/qwen2.5-0.5b-instruct"  # the fake's: /v1/models max_model_len 32768


@pytest.fixture(autouse=True)
def _empty_hub_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake's hub id is in no Hugging Face cache unless a test puts it there: this host's own
    cache is no part of a test."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path_factory.mktemp("empty-hub")))


def _settings(
    path: str,
    body: dict[str, Any],
    input_tokens: int | None = 20,
    preferred: dict | None = None,
    server: dict | None = None,
    folder: Path | None = None,
) -> dict:
    """The enrichment's effective settings of ``body`` sent to the fake SGLang on ``path``, its
    answer's usage counting ``input_tokens`` (None: no usage); ``server``: server arguments
    /get_server_info shows over the fake's (None: left out); ``folder``: the model_path it serves (a hub id else)."""
    app = sglang_app()
    if folder is not None:
        for key in (("GET", "/get_model_info"), ("GET", "/get_server_info")):
            app.routes[key] = {**app.routes[key], "model_path": str(folder)}
    if server is not None:  # a None value: the argument left out, as an SGLang before it shows
        key = ("GET", "/get_server_info")
        merged = {**app.routes[key], **server}
        app.routes[key] = {k: v for k, v in merged.items() if v is not None}
    if preferred is not None:
        key = ("GET", "/get_model_info")
        app.routes[key] = {**app.routes[key], "preferred_sampling_params": json.dumps(preferred)}
    if path == "/v1/responses":
        answer: dict[str, Any] = {"object": "response", "model": _MODEL, "status": "completed", "output": []}
        usage = {"input_tokens": input_tokens, "output_tokens": 3, "total_tokens": (input_tokens or 0) + 3}
    else:
        kind = "text_completion" if path == "/v1/completions" else "chat.completion"
        answer = {"object": kind, "model": _MODEL, "choices": []}
        usage = {"prompt_tokens": input_tokens, "completion_tokens": 3, "total_tokens": (input_tokens or 0) + 3}
    if input_tokens is not None:
        answer["usage"] = usage
    return enriched(app, path, {"model": _MODEL, **body}, answer)["settings"]


_INPUT = {"input": "hi"}
_CHAT = {"messages": [{"role": "user", "content": "hi"}]}


def test_a_responses_request_without_temperature_runs_0_7_where_a_chat_request_never_runs_the_preferred(tmp_path):
    # A model folder without generation_config.json: SGLang's own defaults on both paths.
    responses = _settings("/v1/responses", _INPUT, preferred={"temperature": 0.3, "top_k": 20}, folder=tmp_path)
    chat = _settings("/v1/chat/completions", _CHAT, preferred={"temperature": 0.3, "top_k": 20})
    assert responses["temperature"] == {"value": 0.7, "source": "engine_default"}
    assert responses["top_p"]["value"] == 1.0 and responses["presence_penalty"]["value"] == 0.0
    # What a Responses request leaves out (top_k) still falls through to the preferred params.
    assert responses["top_k"] == {"value": 20, "source": "engine_default"}
    # A chat request sets both itself: the model's generation_config.json, unread from here.
    assert chat["temperature"]["source"] == chat["top_k"]["source"] == "unknown"
    assert "hub id" in chat["temperature"]["why"]


def test_a_chat_request_runs_the_generation_config_of_a_model_folder_on_this_host(tmp_path):
    """SGLang's default --sampling-defaults model: a chat request runs the five settings of the
    model's generation_config.json (ModelConfig.get_default_sampling_params), else its own."""
    bare = _settings("/v1/chat/completions", _CHAT, folder=tmp_path)
    assert bare["temperature"] == {"value": 1.0, "source": "engine_default"}
    assert bare["top_k"] == {"value": -1, "source": "engine_default"}
    (tmp_path / "generation_config.json").write_text('{"temperature": 0.6, "top_k": 20, "do_sample": true}')
    model = _settings("/v1/chat/completions", _CHAT, folder=tmp_path)
    assert model["temperature"]["value"] == 0.6 and model["temperature"]["source"] == "engine_default"
    assert str(tmp_path / "generation_config.json") in model["temperature"]["why"]
    assert model["top_k"]["value"] == 20 and model["top_p"] == {"value": 1.0, "source": "engine_default"}
    # Sent, it is the request's; --sampling-defaults openai reads no file.
    assert _settings("/v1/chat/completions", {**_CHAT, "temperature": 0.2}, folder=tmp_path)["temperature"] == {
        "value": 0.2,
        "source": "request",
    }
    openai = _settings("/v1/chat/completions", _CHAT, folder=tmp_path, server={"sampling_defaults": "openai"})
    assert openai["temperature"] == {"value": 1.0, "source": "engine_default"}
    # A file without top_k: transformers 4 fills in its 50, 5 nothing (-1); unknown which.
    (tmp_path / "generation_config.json").write_text('{"temperature": 0.6}')
    unset = _settings("/v1/chat/completions", _CHAT, folder=tmp_path)
    assert unset["top_k"]["source"] == "unknown" and "transformers" in unset["top_k"]["why"]
    # A file it can't read: unknown, with the reason.
    (tmp_path / "generation_config.json").write_text("{not json")
    unread = _settings("/v1/chat/completions", _CHAT, folder=tmp_path)
    assert unread["temperature"]["source"] == "unknown" and "unreadable" in unread["temperature"]["why"]


_PREFERRED = {"temperature": 0.3, "top_k": 20, "presence_penalty": 0.5, "max_new_tokens": 64, "typical_p": 0.9}


def test_a_chat_request_runs_its_own_defaults_over_the_preferred_params():
    chat = _settings("/v1/chat/completions", _CHAT, preferred=_PREFERRED)
    # SGLang's default --sampling-defaults model: the model's generation_config.json, else 1.0.
    assert chat["temperature"]["value"] is None and chat["temperature"]["source"] == "unknown"
    assert chat["presence_penalty"] == {"value": 0.0, "source": "engine_default"}
    # No budget sent: no cap but the context's, never the preferred 64.
    assert chat["max_tokens"] == {"value": None, "source": "unknown"}
    # --sampling-defaults openai: SGLang's own, 1.0 and -1, whatever the preferred params say.
    openai = _settings("/v1/chat/completions", _CHAT, preferred=_PREFERRED, server={"sampling_defaults": "openai"})
    assert openai["temperature"] == {"value": 1.0, "source": "engine_default"}
    assert openai["top_k"] == {"value": -1, "source": "engine_default"}
    # A key the chat path leaves out the preferred params still fill.
    assert chat["typical_p"] == openai["typical_p"] == {"value": 0.9, "source": "engine_default"}
    sent = _settings("/v1/chat/completions", {**_CHAT, "temperature": 0.3}, preferred=_PREFERRED)
    assert sent["temperature"] == {"value": 0.3, "source": "request"}


def test_a_completions_request_runs_its_field_defaults_over_the_preferred_params():
    done = _settings("/v1/completions", {"prompt": "hi"}, preferred=_PREFERRED)
    assert done["temperature"] == {"value": 1.0, "source": "engine_default"}
    assert done["top_k"] == {"value": -1, "source": "engine_default"}
    assert done["max_tokens"] == {"value": 16, "source": "engine_default"}
    assert done["presence_penalty"] == {"value": 0.0, "source": "engine_default"}
    assert done["typical_p"] == {"value": 0.9, "source": "engine_default"}
    sent = _settings("/v1/completions", {"prompt": "hi", "max_tokens": 100, "top_k": 5}, preferred=_PREFERRED)
    assert sent["max_tokens"] == {"value": 100, "source": "request"} and sent["top_k"]["value"] == 5


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


def test_a_responses_request_runs_the_generation_config_before_its_own_and_the_preferred(tmp_path):
    """Under --sampling-defaults model the Responses API takes the model's temperature and top_p
    before 0.7 and 1.0, and its top_k, min_p and repetition_penalty before the preferred params;
    older SGLang dropped them, which the value's why says."""
    (tmp_path / "generation_config.json").write_text('{"temperature": 0.6, "top_k": 20, "min_p": 0.05}')
    model = _settings("/v1/responses", _INPUT, preferred={"top_k": 5, "min_p": 0.1}, folder=tmp_path)
    assert model["temperature"]["value"] == 0.6 and "drops the model's generation config" in model["temperature"]["why"]
    assert model["top_k"]["value"] == 20 and model["min_p"]["value"] == 0.05
    # What the file leaves out: SGLang's own, and the preferred params' where they set it.
    assert model["top_p"] == {"value": 1.0, "source": "engine_default"}
    assert model["repeat_penalty"] == {"value": 1.0, "source": "engine_default"}
    openai = _settings("/v1/responses", _INPUT, preferred={"top_k": 5}, folder=tmp_path, server={"sampling_defaults": "openai"})
    assert openai["temperature"] == {"value": 0.7, "source": "engine_default"}
    assert openai["top_k"] == {"value": 5, "source": "engine_default"}
    # The model folder unread: the five may be the model's.
    unread = _settings("/v1/responses", _INPUT, preferred={"top_k": 5})
    assert unread["temperature"]["source"] == unread["top_k"]["source"] == "unknown"
    assert unread["presence_penalty"] == {"value": 0.0, "source": "engine_default"}


def _snapshot(cache: Path, commit: str, config: str | None) -> Path:
    """The fake model's snapshot ``commit`` in a Hugging Face cache, as huggingface_hub lays it
    out, its generation_config.json ``config`` (None: not downloaded)."""
    snapshot = cache / "models--qwen--qwen2.5-0.5b-instruct" / "snapshots" / commit
    snapshot.mkdir(parents=True)
    if config is not None:
        (snapshot / "generation_config.json").write_text(config)
    return snapshot


def test_a_chat_request_served_from_a_hub_id_runs_the_generation_config_in_the_hugging_face_cache(tmp_path, monkeypatch):
    """SGLang serving a hub id reads generation_config.json from the Hugging Face cache: the
    snapshot refs/main names, or the --revision it was given."""
    cache = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    old, new = "a" * 40, "b" * 40
    _snapshot(cache, old, '{"temperature": 0.9}')
    current = _snapshot(cache, new, '{"temperature": 0.6, "top_k": 20}')
    # No refs/main yet: which snapshot SGLang runs is unknown.
    assert _settings("/v1/chat/completions", _CHAT)["temperature"]["source"] == "unknown"
    (cache / "models--qwen--qwen2.5-0.5b-instruct" / "refs").mkdir()
    (cache / "models--qwen--qwen2.5-0.5b-instruct" / "refs" / "main").write_text(new)
    chat = _settings("/v1/chat/completions", _CHAT)
    assert chat["temperature"]["value"] == 0.6 and chat["temperature"]["source"] == "engine_default"
    assert chat["top_k"]["value"] == 20
    assert str(current / "generation_config.json") in chat["temperature"]["why"]
    assert "Hugging Face cache" in chat["temperature"]["why"]
    # --revision: that snapshot's file, not main's.
    pinned = _settings("/v1/chat/completions", _CHAT, server={"revision": old})
    assert pinned["temperature"]["value"] == 0.9 and pinned["top_k"]["source"] == "unknown"
    (current / "generation_config.json").unlink()
    # Not downloaded is no proof the model has none: unknown; the hub's "none" (.no_exist) is.
    assert _settings("/v1/chat/completions", _CHAT)["temperature"]["source"] == "unknown"
    lacks = cache / "models--qwen--qwen2.5-0.5b-instruct" / ".no_exist" / new
    lacks.mkdir(parents=True)
    (lacks / "generation_config.json").touch()
    assert _settings("/v1/chat/completions", _CHAT)["temperature"] == {"value": 1.0, "source": "engine_default"}


def test_a_chat_request_to_an_sglang_before_sampling_defaults_runs_0_7_and_no_generation_config(tmp_path):
    """Before --sampling-defaults (PR #11304), ChatCompletionRequest defaulted temperature to 0.7
    and read no generation_config.json; its /get_server_info lists no sampling_defaults."""
    (tmp_path / "generation_config.json").write_text('{"temperature": 0.6, "top_k": 20}')
    older = _settings("/v1/chat/completions", _CHAT, folder=tmp_path, server={"sampling_defaults": None, "version": "0.5.3"})
    assert older["temperature"]["value"] == 0.7 and older["temperature"]["source"] == "engine_default"
    assert "sampling_defaults" in older["temperature"]["why"]
    assert older["top_k"] == {"value": -1, "source": "engine_default"}
    # The same folder under an SGLang with the flag: the model's file.
    newer = _settings("/v1/chat/completions", _CHAT, folder=tmp_path)
    assert newer["temperature"]["value"] == 0.6 and newer["top_k"]["value"] == 20
    # Sent, it is the request's on either.
    sent = _settings("/v1/chat/completions", {**_CHAT, "temperature": 0.2}, server={"sampling_defaults": None})
    assert sent["temperature"] == {"value": 0.2, "source": "request"}


def test_an_sglang_without_its_deprecated_get_endpoints_is_probed_on_server_info_and_model_info(tmp_path):
    """SGLang deprecates /get_server_info and /get_model_info for /server_info and /model_info
    (same answers; "Endpoint '/get_model_info' is deprecated ... use '/model_info'"): an SGLang
    that has dropped the old names is still one, its model folder and server arguments read."""
    from infertap.engines.probe import open_engine
    from tests.fake_upstream import ServerThread

    (tmp_path / "generation_config.json").write_text('{"temperature": 0.6}')
    app = sglang_app()
    for old in ("/get_server_info", "/get_model_info"):
        answer = {**app.routes.pop(("GET", old)), "model_path": str(tmp_path)}
        app.routes[("GET", old.replace("/get_", "/"))] = answer
    with ServerThread(app) as server:
        engine = open_engine(server.url)
        try:
            facts = engine.facts()
        finally:
            engine.http.close()
    assert engine.kind == "sglang"
    assert facts["model_path"] == {"value": str(tmp_path), "source": "/model_info model_path"}
    assert facts["version"] == {"value": "0.5.9", "source": "/server_info version"}
    chat = enriched(app, "/v1/chat/completions", {"model": _MODEL, **_CHAT}, {"object": "chat.completion", "choices": []})
    assert chat["settings"]["temperature"]["value"] == 0.6
    # Where the old names answer, they are read (asked at detection already).
    assert _settings("/v1/chat/completions", _CHAT, folder=tmp_path)["temperature"]["value"] == 0.6
