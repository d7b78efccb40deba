"""Ollama: /api/version, /api/tags (model digests), /api/show (parameters, template, details).

Follows Ollama's API docs (docs/api.md, v0.5+). Ollama has no tokenize endpoint.
"""

from __future__ import annotations

import ast
from typing import Any

from infertap.apis.sampling import canonical

from .base import Endpoint, Engine, fact, fetch

_NUMERIC = {"true": True, "false": False}


def _go_string(quoted: str) -> str:
    """A string as Ollama writes it (Go's ``%#v``: ``"\\n\\n"``, ``"say \\"hi\\""``), unquoted: Go's
    escapes are Python's (``\\n``, ``\\t``, ``\\"``, ``\\xNN``, ``\\uNNNN``)."""
    try:
        value = ast.literal_eval(quoted)
    except (ValueError, SyntaxError):
        return quoted[1:-1]
    return value if isinstance(value, str) else quoted[1:-1]


def parse_parameters(text: str) -> dict[str, Any]:
    """Ollama's ``parameters`` text ("temperature 0.7\\nstop \\"<|x|>\\"") into a dict; repeated keys become lists."""
    out: dict[str, Any] = {}
    for line in text.splitlines():
        key, _, raw = line.strip().partition(" ")
        if not key:
            continue
        raw = raw.strip()
        value: Any
        if raw.startswith('"') and raw.endswith('"') and len(raw) >= 2:
            value = _go_string(raw)
        elif raw.lower() in _NUMERIC:
            value = _NUMERIC[raw.lower()]
        else:
            try:
                value = int(raw)
            except ValueError:
                try:
                    value = float(raw)
                except ValueError:
                    value = raw
        if key in out:
            out[key] = out[key] if isinstance(out[key], list) else [out[key]]
            out[key].append(value)
        else:
            out[key] = value
    return out


class Ollama(Engine):
    kind = "ollama"

    @classmethod
    def matches(cls, found: dict[str, Endpoint]) -> bool:
        version = found.get("/api/version")
        return bool(version and version.ok and isinstance(version.json, dict) and "version" in version.json)

    def _models(self) -> list[dict[str, Any]]:
        return (self.get("/api/tags").json or {}).get("models") or []

    def _show(self, name: str) -> dict[str, Any]:
        key = f"/api/show {name}"
        if key not in self.found:
            self.found[key] = fetch(self.http, "POST", self.base + "/api/show", {"model": name})
        return self.found[key].json or {}

    def defaults_for(self, path: str, model: str | None = None) -> dict[str, Any] | None:
        """The requested model's Modelfile parameters (each model has its own; the snapshot's are
        the first listed model's), and on the OpenAI-compatible paths what Ollama sets itself where
        the request says nothing (openai/openai.go: temperature and top_p 1.0; on /v1/completions
        frequency and presence penalty 0), over them."""
        defaults = self._model_defaults(model) if model else super().defaults_for(path)
        if not path.startswith("/v1/"):
            return defaults
        openai: dict[str, Any] = {"temperature": 1.0, "top_p": 1.0}
        if path.startswith("/v1/completions"):
            openai |= {"frequency_penalty": 0.0, "presence_penalty": 0.0}
        return {**(defaults or {}), **openai}

    def _model_defaults(self, model: str) -> dict[str, Any] | None:
        """``model``'s Modelfile parameters (canonical names), {} where it sets none, None where
        /api/show doesn't answer for it (not pulled, or the server is gone): unknown."""
        show = self._show(model)
        if not self.found[f"/api/show {model}"].ok:
            return None
        params = parse_parameters(show.get("parameters") or "")
        return {canonical(k): v for k, v in params.items()}

    def facts(self) -> dict[str, dict[str, Any]]:
        version = (self.get("/api/version").json or {}).get("version")
        models = self._models()
        first = models[0] if models else {}
        name = first.get("name") or first.get("model")
        show = self._show(name) if name else {}
        details = show.get("details") or first.get("details") or {}
        params = parse_parameters(show.get("parameters") or "") if show.get("parameters") else None
        ctx = next((v for k, v in (show.get("model_info") or {}).items() if k.endswith(".context_length")), None)
        src = f"/api/show {name}"
        not_exposed = "not exposed by Ollama's API"
        return {
            "version": fact(version, "/api/version") if version else fact(None, not_exposed),
            "models": fact([m.get("name") for m in models], "/api/tags") if models else fact(None, "/api/tags lists none"),
            "model_path": fact(name, "/api/tags name") if name else fact(None, not_exposed),
            "model_sha256": fact(first.get("digest"), "/api/tags digest") if first.get("digest") else fact(None, not_exposed),
            "quantization": fact(details.get("quantization_level"), f"{src} details.quantization_level")
            if details.get("quantization_level")
            else fact(None, not_exposed),
            "dtype": fact(None, f"{not_exposed} (its quantization level names the weights' type)"),
            "context_size": fact(
                (params or {}).get("num_ctx") or ctx,
                f"{src} parameters num_ctx"
                if (params or {}).get("num_ctx")
                else f"{src} model_info context_length (the model's; Ollama's runtime num_ctx default may be lower)",
            )
            if ((params or {}).get("num_ctx") or ctx)
            else fact(None, not_exposed),
            "parallel_slots": fact(None, f"{not_exposed} (OLLAMA_NUM_PARALLEL)"),
            "defaults": fact(params, f"{src} parameters")
            if params
            else fact(None, f"{src} sets no parameters; Ollama's built-in defaults apply, not published"),
            "chat_template": fact(show.get("template"), f"{src} template") if show.get("template") else fact(None, not_exposed),
            "bos_token": fact(None, not_exposed),
            "eos_token": fact(None, not_exposed),
        }
