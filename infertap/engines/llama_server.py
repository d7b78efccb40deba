"""llama.cpp's own server (``llama-server``): /props, /slots, /apply-template, /tokenize."""

from __future__ import annotations

import os
from typing import Any

from infertap.apis import one_prompt
from infertap.capture.hostfacts import engine_is_local

from .base import Endpoint, Engine, Tokens, fact
from .gguf_meta import GGUFFacts, dtype_fact, read_gguf

_CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
_PROMPT_PATHS = ("/v1/completions", "/completions", "/completion")


class LlamaServer(Engine):
    # params_from_json_cmpl: repeat_penalty only; n_predict, then max_completion_tokens, then max_tokens.
    READS = {"repeat_penalty": ("repeat_penalty",), "max_tokens": ("n_predict", "max_completion_tokens", "max_tokens")}
    # Its Responses API turns max_output_tokens into the chat request's max_tokens, over one sent
    # as max_tokens; the other paths ignore max_output_tokens.
    PATH_READS = {
        path: {"max_tokens": ("n_predict", "max_completion_tokens", "max_output_tokens", "max_tokens")}
        for path in ("/v1/responses", "/responses")
    }

    kind = "llama-server"

    @classmethod
    def matches(cls, found: dict[str, Endpoint]) -> bool:
        props = found.get("/props")
        return bool(props and props.ok and isinstance(props.json, dict) and "default_generation_settings" in props.json)

    def gguf(self, model_path: str | None) -> tuple[GGUFFacts | None, str]:
        """The model file, where it is readable here, and how it was found (or why not): /props
        publishes its path but neither its hash nor its tensor types, which the file holds."""
        if self.model_file:
            return read_gguf(self.model_file), f"--model-file {self.model_file}"
        if not model_path:
            return None, "not exposed (/props has no model_path)"
        if not engine_is_local(self.base) or not os.path.isfile(model_path):
            return None, f"not exposed; the GGUF ({model_path}) is on the engine's host (give --model-file)"
        try:
            return read_gguf(model_path), f"/props model_path {model_path}, read on this host"
        except ImportError:  # the gguf package comes with the engine extra
            return None, f"not exposed; reading {model_path} needs the gguf package"

    def facts(self) -> dict[str, dict[str, Any]]:
        props: dict[str, Any] = self.get("/props").json or {}
        settings = props.get("default_generation_settings") or {}
        params = settings.get("params") if isinstance(settings.get("params"), dict) else None
        build = props.get("build_info")
        if isinstance(build, str) and build.startswith("b0-"):
            version = fact(None, f"/props build_info is {build!r}: built without version metadata")
        else:
            version = fact(build, "/props build_info") if build else fact(None, "/props has no build_info")
        models = self.model_ids()
        meta: dict[str, Any] = {}
        ep = self.get("/v1/models")
        if ep.ok and ep.json.get("data") and isinstance(ep.json["data"][0].get("meta"), dict):
            meta = ep.json["data"][0]["meta"]
        slots = self.get("/slots")
        n_ctx = settings.get("n_ctx") or meta.get("n_ctx")
        gguf, how = self.gguf(props.get("model_path"))
        # A second template, used for requests with tools, where the GGUF has one: kept only then.
        tool_use = (
            {"chat_template_tool_use": fact(props["chat_template_tool_use"], "/props chat_template_tool_use")}
            if props.get("chat_template_tool_use")
            else {}
        )
        return {
            "version": version,
            "models": fact(models, "/v1/models") if models else fact(None, "/v1/models did not answer"),
            "model_path": fact(props.get("model_path"), "/props model_path")
            if props.get("model_path")
            else fact(None, "/props has no model_path"),
            "model_sha256": fact(gguf.sha256, f"sha256 of the GGUF, from {how}") if gguf else fact(None, how),
            "quantization": fact(props.get("model_ftype") or meta.get("ftype"), "/props model_ftype")
            if props.get("model_ftype") or meta.get("ftype")
            else fact(None, "not exposed"),
            "dtype": dtype_fact(gguf, how) if gguf else fact(None, how),
            "context_size": fact(n_ctx, "/props default_generation_settings.n_ctx (per slot)")
            if n_ctx
            else fact(None, "not exposed"),
            "parallel_slots": fact(props.get("total_slots"), "/props total_slots")
            if props.get("total_slots")
            else fact(len(slots.json), "/slots")
            if slots.ok and isinstance(slots.json, list)
            else fact(None, "not exposed"),
            "defaults": fact(params, "/props default_generation_settings.params")
            if params
            else fact(None, "/props has no params"),
            "chat_template": fact(props.get("chat_template"), "/props chat_template")
            if props.get("chat_template")
            else fact(None, "not exposed"),
            "bos_token": fact(props.get("bos_token"), "/props bos_token") if "bos_token" in props else fact(None, "not exposed"),
            "eos_token": fact(props.get("eos_token"), "/props eos_token") if "eos_token" in props else fact(None, "not exposed"),
            **tool_use,
        }

    def notes(self) -> list[str]:
        props = self.get("/props").json or {}
        out = []
        if props.get("endpoint_metrics") is False:
            out.append("/metrics is off (start llama-server with --metrics to expose it)")
        return out

    def _tokenize(self, text: str, *, add_special: bool, parse_special: bool) -> list[int] | None:
        ep = self.post("/tokenize", {"content": text, "add_special": add_special, "parse_special": parse_special})
        if ep.ok and isinstance(ep.json.get("tokens"), list):
            return [t if isinstance(t, int) else t.get("id") for t in ep.json["tokens"]]
        return None

    def prompt_tokens(self, path: str, request: dict[str, Any], usage: int | None = None) -> Tokens:
        if path in _CHAT_PATHS:
            # The server renders the request with its own template (/apply-template takes the chat
            # request as it is) and tokenizes the result with special tokens parsed.
            body = {k: v for k, v in request.items() if k not in ("stream", "stream_options")}
            ep = self.post("/apply-template", body)
            if not (ep.ok and isinstance(ep.json.get("prompt"), str)):
                return Tokens(None, f"llama-server /apply-template failed ({ep.status or ep.error})")
            ids = self._tokenize(ep.json["prompt"], add_special=True, parse_special=True)
            source = "llama-server /apply-template + /tokenize (add_special, parse_special)"
            return Tokens(ids, source if ids is not None else "llama-server /tokenize failed", ep.json["prompt"])
        if path in _PROMPT_PATHS:
            prompt = one_prompt(request.get("prompt"))  # a list of one is that prompt, as llama-server runs it
            if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
                return Tokens(list(prompt), "request (token ids sent by the client)")
            if isinstance(prompt, str):
                ids = self._tokenize(prompt, add_special=True, parse_special=True)
                return Tokens(
                    ids,
                    "llama-server /tokenize (add_special, parse_special)" if ids is not None else "llama-server /tokenize failed",
                )
        return Tokens(None, f"no prompt to tokenize for {path}")

    def output_tokens(self, text: str) -> Tokens:
        ids = self._tokenize(text, add_special=False, parse_special=False)
        if ids is None:
            return Tokens(None, "llama-server /tokenize failed")
        return Tokens(ids, "re-tokenized from the output text by llama-server /tokenize (may differ from the ids generated)")
