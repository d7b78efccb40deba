"""Which engine a URL serves: each adapter asked, by what the engine answers (most specific first)."""

from __future__ import annotations

import httpx

from infertap.capture.redact import Redactor
from infertap.errors import InfertapError

from .base import Endpoint, Engine, fetch
from .llama_cpp_python import LlamaCppPython
from .llama_server import LlamaServer
from .ollama import Ollama
from .sglang import SGLang
from .vllm import VLLM

_REDACTOR = Redactor()  # an engine's URL in messages: its credentials left out
KINDS: tuple[type[Engine], ...] = (LlamaServer, LlamaCppPython, SGLang, Ollama, VLLM, Engine)


class ProbeError(InfertapError):
    pass


def detect(http: httpx.Client, base: str) -> Engine:
    """Ask the engine what it is, from its endpoints; raise ProbeError when it is no LLM server."""
    base = base.rstrip("/")
    found: dict[str, Endpoint] = {path: fetch(http, "GET", base + path) for path in Engine.DETECT}
    if all(ep.status is None for ep in found.values()):
        error = next(iter(found.values())).error
        raise ProbeError(_REDACTOR.text(f"cannot reach {_REDACTOR.url(base)}: {error}", base))
    # /v1/models takes llama-cpp-python's model lock; ask it only once that kind is ruled out.
    if not LlamaCppPython.matches(found):
        found["/v1/models"] = fetch(http, "GET", base + "/v1/models")
    for kind in KINDS:
        if kind.matches(found):
            return kind(http, base, found)
    answered = ", ".join(f"{p} -> {ep.status}" for p, ep in found.items())
    hint = ""
    if any(ep.status in (401, 403) for ep in found.values()):
        hint = "; it asks for credentials: pass them with --probe-header 'Authorization=Bearer ...'"
    raise ProbeError(f"{_REDACTOR.url(base)} does not look like an LLM engine (no known endpoint answered: {answered}){hint}")


__all__ = ["KINDS", "ProbeError", "detect"]
