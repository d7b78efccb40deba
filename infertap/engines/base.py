"""What every engine adapter shares: fetching what an engine exposes, and the shape of a snapshot.

An adapter reads facts from the places its engine publishes them. Each fact carries its source;
a fact the engine doesn't expose is ``None`` with the reason as its source, never a guess.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import httpx

from infertap.apis.sampling import ALIASES, SAMPLING, canonical, sampling_fields

__all__ = ["ALIASES", "SAMPLING", "canonical"]  # the canonical names live with the API adapters


@dataclass
class Endpoint:
    """One GET or POST an adapter made, as it answered."""

    status: int | None
    json: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.json is not None


def fetch(http: httpx.Client, method: str, url: str, body: Any = None) -> Endpoint:
    try:
        r = http.request(method, url, json=body) if body is not None else http.request(method, url)
    except httpx.HTTPError as exc:
        return Endpoint(None, error=f"{type(exc).__name__}: {exc}")
    try:
        payload = r.json()
    except ValueError:
        payload = None
    return Endpoint(r.status_code, payload, {k.lower(): v for k, v in r.headers.items()})


def fact(value: Any, source: str) -> dict[str, Any]:
    return {"value": value, "source": source}


def sha256_text(text: str | None) -> str | None:
    return hashlib.sha256(text.encode()).hexdigest() if text else None


@dataclass
class Tokens:
    """Token ids and exactly how they were obtained."""

    ids: list[int] | None
    source: str
    text: str | None = None  # the rendered prompt, where a template was applied

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ids": self.ids, "count": len(self.ids) if self.ids is not None else None, "source": self.source}
        if self.text is not None:
            out["rendered"] = self.text
        return out


class Engine:
    """A generic OpenAI-compatible server: models from /v1/models, nothing else assumed."""

    kind = "openai-compatible"
    #: Any request that takes the model lock ends an in-flight stream (llama-cpp-python's
    #: interrupt_requests): out-of-band calls must wait until no exchange is in flight.
    interrupts_streams = False
    #: A response names the model its request named, whatever it serves (llama-cpp-python; the
    #: llama-server tested answers with its alias): a new name there is the client's, no sign of
    #: another engine.
    echoes_model = False

    #: Paths that never take the model lock, asked without waiting (interrupts_streams engines).
    LOCK_FREE: frozenset[str] = frozenset()
    #: For a canonical setting, the request fields this engine reads for it, the one it obeys first;
    #: none for a setting it doesn't read at all. A field it doesn't read is no setting of the
    #: request (the engine used its default: llama-server ignores ``repetition_penalty``, vLLM
    #: ``repeat_penalty``, llama-cpp-python ``n``). Settings not listed are read under any of their
    #: names (``infertap.apis.sampling.ALIASES``), the one first in ``sampling.PRECEDENCE``.
    READS: dict[str, tuple[str, ...]] = {}
    #: Per request path, the settings read otherwise there (a Responses request's ``max_output_tokens``).
    PATH_READS: dict[str, dict[str, tuple[str, ...]]] = {}

    def __init__(self, http: httpx.Client, base: str, found: dict[str, Endpoint]) -> None:
        self.http = http
        self.base = base.rstrip("/")
        self.found = found
        self.model_file: str | None = None
        #: Entered around each request that could disturb traffic in flight; yielding False skips
        #: the request. The recorder sets it to hold its traffic while the call runs (trafficgate.py).
        self.gate: Callable[[], AbstractContextManager[bool]] = lambda: contextlib.nullcontext(True)

    # -- detection ----------------------------------------------------------------------------

    #: GET endpoints fetched once to decide the kind; every adapter may read them.
    DETECT = ("/props", "/openapi.json", "/get_server_info", "/get_model_info", "/api/version", "/version")

    @classmethod
    def matches(cls, found: dict[str, Endpoint]) -> bool:
        models = found.get("/v1/models")
        return bool(models and models.ok and isinstance(models.json.get("data"), list))

    # -- snapshot -----------------------------------------------------------------------------

    def _fetch(self, method: str, path: str, body: Any = None) -> Endpoint:
        if not self.interrupts_streams or path in self.LOCK_FREE:
            return fetch(self.http, method, self.base + path, body)
        with self.gate() as allowed:  # traffic held for the call's duration
            if not allowed:
                return Endpoint(None, error=f"skipped: exchanges in flight and {self.kind} would end them")
            return fetch(self.http, method, self.base + path, body)

    def get(self, path: str) -> Endpoint:
        if path not in self.found:
            endpoint = self._fetch("GET", path)
            if endpoint.error and endpoint.error.startswith("skipped:"):
                return endpoint  # not remembered: asked again when traffic allows
            self.found[path] = endpoint
        return self.found[path]

    def post(self, path: str, body: Any) -> Endpoint:
        return self._fetch("POST", path, body)

    def model_ids(self) -> list[str]:
        ep = self.get("/v1/models")
        if ep.ok and isinstance(ep.json.get("data"), list):
            return [str(m["id"]) for m in ep.json["data"] if isinstance(m, dict) and m.get("id")]
        return []

    def facts(self) -> dict[str, dict[str, Any]]:
        """Normalised facts; adapters override what their engine exposes."""
        unknown = "not exposed by a generic OpenAI-compatible server"
        models = self.model_ids()
        return {
            "version": fact(None, unknown),
            "models": fact(models, "/v1/models") if models else fact(None, unknown),
            "model_path": fact(None, unknown),
            "model_sha256": fact(None, unknown),
            "quantization": fact(None, unknown),
            "dtype": fact(None, unknown),
            "context_size": fact(None, unknown),
            "parallel_slots": fact(None, unknown),
            "defaults": fact(None, unknown),
            "chat_template": fact(None, unknown),
            "bos_token": fact(None, unknown),
            "eos_token": fact(None, unknown),
        }

    def notes(self) -> list[str]:
        return []

    def raw(self) -> dict[str, Any]:
        """What the engine answered, kept verbatim next to the normalised facts."""
        return {path: ep.json for path, ep in self.found.items() if ep.ok}

    def warm(self) -> None:
        """Load now what enrichment will need (imports, files, compiled templates), so the work is
        done before traffic, not on the first exchange while a stream is in flight."""

    def reads(self, path: str | None = None) -> dict[str, tuple[str, ...]]:
        """``READS`` for requests to ``path``."""
        return {**self.READS, **self.PATH_READS.get(path or "", {})}

    def requested(self, fields: Mapping[str, Any], path: str | None = None) -> dict[str, Any]:
        """The sampling settings a request's ``fields`` (as its API spells them) give this engine
        on ``path``, under canonical names: as it reads them (``READS``)."""
        reads = self.reads(path)
        out: dict[str, Any] = {}
        for name, names in reads.items():
            value = next((fields[n] for n in names if fields.get(n) is not None), None)
            if value is not None:
                out[name] = value
        rest = {k: v for k, v in fields.items() if canonical(k) not in reads}
        return {**sampling_fields(rest), **out}

    def ignored(self, fields: Mapping[str, Any], path: str | None = None) -> dict[str, dict[str, Any]]:
        """The sampling fields of a request this engine doesn't read on ``path``, by canonical
        name, as the request spelt them: sent, but no setting of the request."""
        reads = self.reads(path)
        out: dict[str, dict[str, Any]] = {}
        for key, value in fields.items():
            name = canonical(key)
            if name in SAMPLING and value is not None and name in reads and key not in reads[name]:
                out.setdefault(name, {})[key] = value
        return out

    def defaults_for(self, path: str, model: str | None = None) -> dict[str, Any] | None:
        """The engine's own default sampling settings for requests to ``path`` naming ``model``,
        canonical names (an engine serving several models with settings of their own says per model)."""
        value = self.facts()["defaults"]["value"]
        return {canonical(k): v for k, v in value.items()} if isinstance(value, dict) else None

    def adjusted(
        self, path: str, settings: dict[str, dict[str, Any]], prompt_tokens: int | None = None
    ) -> dict[str, dict[str, Any]]:
        """``settings`` (``enrich.effective_settings``) as the engine changes them after reading the
        request on ``path`` (SGLang's Responses API cuts the output budget); ``prompt_tokens``:
        the answer's ``usage`` count, where a change depends on the prompt's length."""
        return settings

    # -- per-exchange ---------------------------------------------------------------------------

    def prompt_tokens(self, path: str, request: dict[str, Any], usage: int | None = None) -> Tokens:
        """The ids of the prompt the engine ran for ``request`` on ``path``; ``usage``: the count the
        engine's answer gave (``usage.prompt_tokens``), where a choice between renderings needs it."""
        return Tokens(None, f"{self.kind}: no tokenize endpoint known")

    def output_tokens(self, text: str) -> Tokens:
        return Tokens(None, f"{self.kind}: no tokenize endpoint known")


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
