"""What vLLM's /tokenize can't tell about the prompt it ran: said unknown with why, never exact."""

from __future__ import annotations

from infertap.engines.probe import open_engine
from tests.fake_engines import enriched, vllm_app
from tests.fake_upstream import ServerThread

_TOOLS = [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}]
_CHAT = {"model": "Qwen/Qwen3-8B", "messages": [{"role": "user", "content": "hi"}]}


def _prompt(app, request: dict):
    with ServerThread(app) as server:
        engine = open_engine(server.url)
        try:
            return engine.prompt_tokens("/v1/chat/completions", request)
        finally:
            engine.http.close()


def test_tools_with_tool_choice_none_are_unknown_since_a_server_flag_may_leave_them_out():
    """--exclude-tools-when-tool-choice-none drops the tools from the prompt, and no endpoint says
    whether vLLM runs with it: /tokenize's ids (tools rendered) may not be the prompt it ran."""
    none = _prompt(vllm_app(), {**_CHAT, "tools": _TOOLS, "tool_choice": "none"})
    assert none.ids is None and "--exclude-tools-when-tool-choice-none" in none.source
    # Another tool_choice, or "none" without tools: the flag changes nothing, the ids stand.
    for request in (
        {**_CHAT, "tools": _TOOLS, "tool_choice": "required"},
        {**_CHAT, "tools": _TOOLS},
        {**_CHAT, "tool_choice": "none"},
    ):
        tokens = _prompt(vllm_app(), request)
        assert tokens.ids == list(range(100, 112)) and tokens.source == "vLLM /tokenize with messages"


def _harmony_app():
    """A vLLM serving gpt-oss, whose tokenizer has harmony's special tokens as one token each."""
    app = vllm_app(model="openai/gpt-oss-20b", root="/models/gpt-oss-20b")
    plain = app.routes[("POST", "/tokenize")]

    def tokenize(req: dict) -> tuple[int, dict]:
        if req.get("prompt") == "<|start|><|channel|><|message|>":
            return 200, {"count": 3, "max_model_len": 32768, "tokens": [200006, 200005, 200008]}
        return plain(req)

    app.routes[("POST", "/tokenize")] = tokenize
    return app


def test_a_gpt_oss_chat_prompt_is_unknown_since_vllm_renders_it_with_harmony_not_tokenize_s_template(tmp_path):
    """vLLM renders gpt-oss chat requests with openai-harmony; /tokenize applies the HF chat
    template: its ids are not the prompt the engine ran. Told by config.json's model_type where the
    model folder is readable, else by the tokenizer's harmony tokens; another model's ids stand."""
    remote = _prompt(_harmony_app(), _CHAT)
    assert remote.ids is None and "openai-harmony" in remote.source and "tokenizer" in remote.source
    (tmp_path / "config.json").write_text('{"model_type": "gpt_oss"}')
    local = _prompt(vllm_app(root=str(tmp_path)), _CHAT)
    assert local.ids is None and "model_type gpt_oss" in local.source
    (tmp_path / "config.json").write_text('{"model_type": "qwen3"}')
    for app in (vllm_app(root=str(tmp_path)), vllm_app()):
        tokens = _prompt(app, _CHAT)
        assert tokens.ids == list(range(100, 112)) and tokens.source == "vLLM /tokenize with messages"
    # A completion's prompt is no chat template's: /tokenize with prompt is what harmony's vLLM runs too.
    with ServerThread(_harmony_app()) as server:
        engine = open_engine(server.url)
        completion = engine.prompt_tokens("/v1/completions", {"model": "openai/gpt-oss-20b", "prompt": "a b"})
        engine.http.close()
    assert completion.ids == [100, 101]


def test_facts_from_vllm_0_32s_code_say_they_assume_it_on_another_version(tmp_path):
    """Defaults, field precedence and prompt rendering are read from 0.32's code: on another
    version they say so (prompt, defaults, a snapshot note); on a 0.32 build they stand plain."""
    from infertap.engines.probe import probe

    (tmp_path / "generation_config.json").write_text('{"temperature": 0.6}')
    seen = {}
    for version in ("0.32.0", "0.32.1rc1", "0.33.0", "0.3.2"):
        with ServerThread(vllm_app(root=str(tmp_path), version=version)) as server:
            snap = probe(server.url)
            seen[version] = (snap, _prompt(vllm_app(version=version), _CHAT))
    for version in ("0.32.0", "0.32.1rc1"):
        snap, tokens = seen[version]
        assert tokens.source == "vLLM /tokenize with messages"
        assert "assumes vLLM 0.32" not in snap["facts"]["defaults"]["source"]
        assert not any("0.32's code" in note for note in snap["notes"])
    for version in ("0.33.0", "0.3.2"):
        snap, tokens = seen[version]
        told = f"assumes vLLM 0.32's behaviour; /version says {version}"
        assert tokens.ids == list(range(100, 112)) and told in tokens.source
        assert snap["facts"]["defaults"]["value"]["temperature"] == 0.6 and told in snap["facts"]["defaults"]["source"]
        assert any(told in note for note in snap["notes"])


def _tools_app(per_tool: int = 30):
    """vLLM's fake, whose template renders each tool as ``per_tool`` tokens more (0: a template
    that renders no tools)."""
    app = vllm_app()
    plain = app.routes[("POST", "/tokenize")]

    def tokenize(req: dict) -> tuple[int, dict]:
        status, out = plain(req)
        extra = per_tool * len(req.get("tools") or ())
        return status, {**out, "count": out["count"] + extra, "tokens": out["tokens"] + list(range(500, 500 + extra))}

    app.routes[("POST", "/tokenize")] = tokenize
    return app


def _prompt_with_usage(app, request: dict, usage: int | None):
    with ServerThread(app) as server:
        engine = open_engine(server.url)
        try:
            return engine.prompt_tokens("/v1/chat/completions", request, usage)
        finally:
            engine.http.close()


def test_a_tool_choice_none_prompt_is_the_rendering_whose_count_alone_is_the_answers_usage():
    """The answer's usage.prompt_tokens tells whether vLLM ran the tools (12 tokens without them, 42
    with, in the fake): the one rendering it matches is the prompt; neither, or both (a template
    that renders no tools), or no usage, leaves it unknown."""
    request = {**_CHAT, "tools": _TOOLS, "tool_choice": "none"}
    with_tools = _prompt_with_usage(_tools_app(), request, 42)
    assert with_tools.ids == [*range(100, 112), *range(500, 530)]
    assert "rendered with the tools" in with_tools.source and "runs without --exclude-tools" in with_tools.source
    without = _prompt_with_usage(_tools_app(), request, 12)
    assert without.ids == list(range(100, 112))
    assert "rendered without the tools" in without.source and "runs with --exclude-tools" in without.source
    neither = _prompt_with_usage(_tools_app(), request, 20)
    assert neither.ids is None and "matches neither (42 with them, 12 without)" in neither.source
    both = _prompt_with_usage(_tools_app(per_tool=0), request, 12)
    assert both.ids is None and "matches both" in both.source
    blind = _prompt_with_usage(_tools_app(), request, None)
    assert blind.ids is None and "no usage.prompt_tokens" in blind.source


def test_the_enrichment_hands_the_answers_usage_to_the_prompt_it_settles():
    request = {**_CHAT, "tools": _TOOLS, "tool_choice": "none"}
    answer = {"object": "chat.completion", "model": _CHAT["model"], "choices": [], "usage": {"prompt_tokens": 12}}
    out = enriched(_tools_app(), "/v1/chat/completions", request, answer)
    assert out["prompt_tokens"]["ids"] == list(range(100, 112)) and out["prompt_tokens"]["agrees_with_usage"] is True
