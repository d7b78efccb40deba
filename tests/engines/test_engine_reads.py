"""What each engine really reads of a request and reports of itself, against its documented fakes:
which alias wins, which field it ignores (its default applies), Ollama's OpenAI paths' own
defaults and native options, its Go-quoted parameters, a GGUF's file type by llama.cpp's names,
SGLang's preferred sampling params given as JSON text."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from infertap.engines import Engine
from infertap.engines.enrich import effective_settings
from infertap.engines.gguf_meta import _file_type
from infertap.engines.ollama import parse_parameters
from infertap.engines.probe import open_engine, probe
from tests.fake_engines import llama_server_app, ollama_app, sglang_app, vllm_app
from tests.fake_upstream import ServerThread


@contextlib.contextmanager
def _engine(app: Any) -> Iterator[Engine]:
    with ServerThread(app) as server:
        engine = open_engine(server.url)
        try:
            yield engine
        finally:
            engine.http.close()


@pytest.mark.parametrize(
    ("app", "fields", "expected"),
    [
        (vllm_app, {"max_tokens": 100, "max_completion_tokens": 20}, {"max_tokens": 20}),
        (vllm_app, {"repeat_penalty": 1.3}, {}),  # "present in the request but ignored"
        (vllm_app, {"repetition_penalty": 1.3}, {"repeat_penalty": 1.3}),
        (llama_server_app, {"max_tokens": 100, "n_predict": 20}, {"max_tokens": 20}),
        (llama_server_app, {"max_completion_tokens": 30, "max_tokens": 100}, {"max_tokens": 30}),
        (llama_server_app, {"repetition_penalty": 1.3}, {}),  # llama-server reads repeat_penalty only
        (llama_server_app, {"repeat_penalty": 1.3, "temperature": 0}, {"repeat_penalty": 1.3, "temperature": 0}),
    ],
)
def test_the_request_settings_are_the_ones_the_engine_reads(app: Any, fields: dict, expected: dict) -> None:
    with _engine(app()) as engine:
        assert engine.requested(fields) == expected
        settings = effective_settings(engine.requested(fields), engine.defaults_for("/v1/chat/completions"))
    for name in ("repeat_penalty", "max_tokens"):
        if name not in expected:  # not the request's: the engine's default, or unknown
            assert settings[name]["source"] != "request"


@pytest.mark.parametrize(
    ("app", "path", "fields", "expected", "ignored"),
    [
        # Responses requests spell it max_output_tokens; the chat path ignores that name.
        (vllm_app, "/v1/responses", {"max_output_tokens": 5}, {"max_tokens": 5}, {}),
        (vllm_app, "/v1/responses", {"max_tokens": 9}, {}, {"max_tokens": {"max_tokens": 9}}),
        (vllm_app, "/v1/chat/completions", {"max_output_tokens": 5}, {}, {"max_tokens": {"max_output_tokens": 5}}),
        (
            sglang_app,
            "/v1/responses",
            {"max_output_tokens": 5, "max_tokens": 9},
            {"max_tokens": 5},
            {"max_tokens": {"max_tokens": 9}},
        ),
        (sglang_app, "/v1/chat/completions", {"max_output_tokens": 5}, {}, {"max_tokens": {"max_output_tokens": 5}}),
        (llama_server_app, "/v1/responses", {"max_output_tokens": 5, "max_tokens": 9}, {"max_tokens": 5}, {}),
        (llama_server_app, "/v1/responses", {"max_output_tokens": 8, "n_predict": 3}, {"max_tokens": 3}, {}),
        (llama_server_app, "/v1/chat/completions", {"max_output_tokens": 5}, {}, {"max_tokens": {"max_output_tokens": 5}}),
    ],
)
def test_each_path_reads_its_own_spellings(app: Any, path: str, fields: dict, expected: dict, ignored: dict) -> None:
    with _engine(app()) as engine:
        assert engine.requested(fields, path) == expected
        assert engine.ignored(fields, path) == ignored
        settings = effective_settings(engine.requested(fields, path), engine.defaults_for(path), engine.ignored(fields, path))
    assert settings["max_tokens"].get("ignored") == ignored.get("max_tokens")
    if not expected:
        assert settings["max_tokens"]["source"] != "request"


def test_ollama_openai_paths_have_their_own_defaults_and_native_paths_read_options_only() -> None:
    from infertap.apis import api_for

    with _engine(ollama_app()) as engine:
        native = engine.defaults_for("/api/chat") or {}
        openai = engine.defaults_for("/v1/chat/completions") or {}
        completions = engine.defaults_for("/v1/completions") or {}
        body = {"model": "m", "temperature": 0.1, "options": {"top_k": 5}, "messages": []}
        requested = engine.requested(api_for("/api/chat", body).sampling(body))
    assert (openai["temperature"], openai["top_p"]) == (1.0, 1.0) and native.get("temperature") != 1.0
    assert completions["presence_penalty"] == 0.0 and requested == {"top_k": 5}


def test_ollama_defaults_are_the_requested_models() -> None:
    """Two models pulled, each with a Modelfile of its own: a request's defaults are its model's,
    not the first listed one's (the snapshot's); a model Ollama doesn't know has unknown defaults."""
    with _engine(ollama_app(second=True)) as engine:
        first = engine.defaults_for("/api/chat", "llama3.2:latest") or {}
        second = engine.defaults_for("/api/chat", "qwen2.5:latest") or {}
        unknown = engine.defaults_for("/api/chat", "not-pulled")
        snapshot = engine.defaults_for("/api/chat") or {}
        settings = effective_settings({}, engine.defaults_for("/api/chat", "qwen2.5:latest"))
    assert first["temperature"] == 0.6 and first["repeat_penalty"] == 1.1 and snapshot == first
    assert second["temperature"] == 0.2 and second["top_k"] == 20 and "repeat_penalty" not in second
    assert unknown is None
    assert settings["temperature"]["value"] == 0.2 and settings["temperature"]["source"] != "request"


def test_ollama_parameters_are_unquoted_as_go_quoted_them() -> None:
    text = 'stop "\\n\\n"\nstop "say \\"hi\\""\nstop "tab\\there"\ntemperature 0.6'
    assert parse_parameters(text) == {"stop": ["\n\n", 'say "hi"', "tab\there"], "temperature": 0.6}


def test_a_gguf_file_type_is_named_as_llama_cpp_names_it() -> None:
    assert [_file_type(t) for t in (0, 1, 7, 15, 30, 32)] == ["F32", "F16", "Q8_0", "Q4_K_M", "IQ4_XS", "BF16"]
    assert _file_type(9999) == "9999"


def test_sglang_preferred_sampling_params_given_as_json_text_are_its_defaults() -> None:
    app = sglang_app()
    key = ("GET", "/get_model_info")
    app.routes[key] = {**app.routes[key], "preferred_sampling_params": json.dumps({"temperature": 0.6, "top_p": 0.95})}
    with ServerThread(app) as server:
        snap = probe(server.url)
    assert snap["facts"]["defaults"]["value"] == {"temperature": 0.6, "top_p": 0.95}
