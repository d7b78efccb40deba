"""What vLLM's /tokenize can't tell about the prompt it ran: said unknown with why, never exact."""

from __future__ import annotations

from infertap.engines.probe import open_engine
from tests.fake_engines import vllm_app
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
