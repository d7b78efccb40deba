"""SGLang: /get_server_info (its server arguments and version) and /get_model_info.

Follows SGLang's native API docs (docs/basic_usage/native_api.md, 2026-02; server arguments as in
docs/backend/server_arguments.md).
"""

from __future__ import annotations

import json
from typing import Any

from .base import Endpoint, Engine, fact


class SGLang(Engine):
    # Its OpenAI requests: repetition_penalty; max_completion_tokens before max_tokens, as vLLM.
    READS = {"repeat_penalty": ("repetition_penalty",), "max_tokens": ("max_completion_tokens", "max_tokens")}
    # ResponsesRequest has max_output_tokens only, as vLLM's (SGLang main, 2026-12: protocol.py).
    PATH_READS = {"/v1/responses": {"max_tokens": ("max_output_tokens",)}}

    kind = "sglang"

    @classmethod
    def matches(cls, found: dict[str, Endpoint]) -> bool:
        info = found.get("/get_server_info")
        model = found.get("/get_model_info")
        return bool((info and info.ok and isinstance(info.json, dict)) or (model and model.ok and "model_path" in model.json))

    def facts(self) -> dict[str, dict[str, Any]]:
        info: dict[str, Any] = self.get("/get_server_info").json or {}
        model: dict[str, Any] = self.get("/get_model_info").json or {}
        models = self.model_ids()
        not_exposed = "not exposed by SGLang's API"
        preferred = model.get("preferred_sampling_params") or info.get("preferred_sampling_params")
        if isinstance(preferred, str):  # SGLang keeps --preferred-sampling-params as the JSON text given
            try:
                preferred = json.loads(preferred)
            except ValueError:
                preferred = None
        path = model.get("model_path") or info.get("model_path")
        slots = info.get("max_running_requests")
        return {
            "version": fact(info.get("version"), "/get_server_info version") if info.get("version") else fact(None, not_exposed),
            "models": fact(models, "/v1/models") if models else fact(None, "/v1/models did not answer"),
            "model_path": fact(path, "/get_model_info model_path") if path else fact(None, not_exposed),
            "model_sha256": fact(None, not_exposed),
            "quantization": fact(info.get("quantization"), "/get_server_info quantization")
            if info.get("quantization")
            else fact(None, "none set in /get_server_info"),
            "dtype": fact(info.get("dtype"), "/get_server_info dtype (the --dtype flag; auto: the checkpoint's)")
            if info.get("dtype")
            else fact(None, not_exposed),
            "context_size": fact(info.get("context_length"), "/get_server_info context_length")
            if info.get("context_length")
            else fact(None, "/get_server_info context_length is unset (the model's own)"),
            "parallel_slots": fact(slots, "/get_server_info max_running_requests") if slots else fact(None, not_exposed),
            "defaults": fact(preferred, "/get_model_info preferred_sampling_params")
            if isinstance(preferred, dict)
            else fact(None, "no --preferred-sampling-params set; SGLang's defaults apply, not published"),
            "chat_template": fact(info.get("chat_template"), "/get_server_info chat_template (a name or path)")
            if info.get("chat_template")
            else fact(None, not_exposed),
            "bos_token": fact(None, not_exposed),
            "eos_token": fact(None, not_exposed),
        }
