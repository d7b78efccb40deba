"""vLLM's OpenAI-compatible server: /version, /v1/models (max_model_len), /tokenize with messages.

Follows vLLM's docs and protocol for v0.18 (``vllm/entrypoints/serve/tokenize/protocol.py``).
vLLM doesn't publish its default sampling settings; with ``--generation-config auto`` (the
default) they come from the model's generation_config.json, which the API does not show.
"""

from __future__ import annotations

from typing import Any

from .base import Endpoint, Engine, Tokens, fact

_CHAT_PATHS = ("/v1/chat/completions",)
_PROMPT_PATHS = ("/v1/completions",)


class VLLM(Engine):
    kind = "vllm"

    @classmethod
    def matches(cls, found: dict[str, Endpoint]) -> bool:
        models = found.get("/v1/models")
        owned = (
            models
            and models.ok
            and any(isinstance(m, dict) and m.get("owned_by") == "vllm" for m in models.json.get("data") or ())
        )
        version = found.get("/version")
        return bool(owned and version and version.ok and "version" in version.json)

    def facts(self) -> dict[str, dict[str, Any]]:
        version = (self.get("/version").json or {}).get("version")
        data = (self.get("/v1/models").json or {}).get("data") or []
        first = data[0] if data else {}
        root = first.get("root")
        not_exposed = "not exposed by vLLM's API"
        return {
            "version": fact(version, "/version") if version else fact(None, not_exposed),
            "models": fact([m.get("id") for m in data], "/v1/models") if data else fact(None, "/v1/models did not answer"),
            "model_path": fact(root, "/v1/models root") if root else fact(None, not_exposed),
            "model_sha256": fact(None, not_exposed),
            "quantization": fact(None, not_exposed),
            "context_size": fact(first.get("max_model_len"), "/v1/models max_model_len")
            if first.get("max_model_len")
            else fact(None, not_exposed),
            "parallel_slots": fact(None, f"{not_exposed} (--max-num-seqs)"),
            "defaults": fact(
                None, "not exposed by vLLM's API (--generation-config may apply the model's generation_config.json)"
            ),
            "chat_template": fact(None, not_exposed),
            "bos_token": fact(None, not_exposed),
            "eos_token": fact(None, not_exposed),
        }

    def _tokenize(self, body: dict[str, Any]) -> list[int] | None:
        ep = self.post("/tokenize", body)
        if ep.ok and isinstance(ep.json.get("tokens"), list):
            return ep.json["tokens"]
        return None

    def prompt_tokens(self, path: str, request: dict[str, Any]) -> Tokens:
        model = request.get("model")
        if path in _CHAT_PATHS:
            body = {"model": model, "messages": request.get("messages") or [], "add_generation_prompt": True}
            for key in ("tools", "chat_template_kwargs", "add_generation_prompt", "continue_final_message"):
                if key in request:
                    body[key] = request[key]
            ids = self._tokenize(body)
            return Tokens(ids, "vLLM /tokenize with messages" if ids is not None else "vLLM /tokenize failed")
        if path in _PROMPT_PATHS and isinstance(request.get("prompt"), str):
            ids = self._tokenize({"model": model, "prompt": request["prompt"]})
            return Tokens(ids, "vLLM /tokenize with prompt" if ids is not None else "vLLM /tokenize failed")
        return Tokens(None, f"no prompt to tokenize for {path}")

    def output_tokens(self, text: str) -> Tokens:
        ids = self._tokenize({"prompt": text, "add_special_tokens": False})
        if ids is None:
            return Tokens(None, "vLLM /tokenize failed")
        return Tokens(ids, "re-tokenized from the output text by vLLM /tokenize (may differ from the ids generated)")
