"""Engine snapshots: what an engine is and how it is configured, each fact with its source."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping

import httpx

from infertap.capture.hostfacts import engine_is_local, host_facts, list_gpus
from infertap.capture.records import EngineSnapshot
from infertap.capture.redact import Redactor
from infertap.errors import check_headers, check_seconds, check_url

from .base import Engine, canonical_json, sha256_text
from .kinds import ProbeError, detect
from .launch_args import read_launch_facts
from .runtime_digest import runtime_digest, snapshot_facts

__all__ = ["ProbeError", "open_engine", "probe", "snapshot"]

_REDACTOR = Redactor()  # the engine's URL and answers, as recorded


def open_engine(
    url: str, *, model_file: str | None = None, timeout: float = 10.0, headers: Mapping[str, str] | None = None
) -> Engine:
    """Detect the engine at ``url``; the returned adapter owns an httpx.Client (close ``engine.http``).

    ``headers`` (e.g. the engine's API key) go with every probe request and are never stored.
    """
    check_url("the engine's URL", url)
    check_seconds("--timeout", timeout)
    check_headers("--probe-header", headers or {})
    http = httpx.Client(timeout=timeout, trust_env=False, headers=dict(headers or {}))
    try:
        engine = detect(http, url)
    except Exception:
        http.close()
        raise
    engine.model_file = model_file
    return engine


def snapshot(engine: Engine, labels: Mapping[str, str] | None = None) -> EngineSnapshot:
    """An ``engine`` record: normalised facts with sources, notes, raw answers, host facts, labels."""
    facts = engine.facts()
    if engine.model_file and facts["model_sha256"]["value"] is None:
        from .gguf_meta import read_gguf

        facts["model_sha256"] = {
            "value": read_gguf(engine.model_file).sha256,
            "source": f"sha256 of --model-file {engine.model_file}",
        }
    template = facts["chat_template"]["value"]
    tool_use = facts.get("chat_template_tool_use", {}).get("value")
    facts["chat_template_sha256"] = (
        {"value": sha256_text(template), "source": "sha256 of chat_template"}
        if template and not tool_use
        # llama-server's second template renders requests with tools: a change there is a change too.
        else {"value": sha256_text(f"{template}\0{tool_use}"), "source": "sha256 of chat_template, NUL, chat_template_tool_use"}
        if template
        else {"value": None, "source": facts["chat_template"]["source"]}
    )
    # The binary behind the port, when the engine runs here: hashed once per file (probes run off the event loop).
    facts.update(snapshot_facts(runtime_digest(engine.base, engine.kind)))
    for name, launched in read_launch_facts(engine.base, engine.kind).items():  # threads, batch sizes: no API says them
        known = facts.get(name)
        if launched["value"] is None and known is not None:
            # What the API said stays: a value it gave (vLLM's resolved prefix caching) whole, an
            # unknown (vLLM's parallel_slots) beside why the command line doesn't say it either.
            if known["value"] is None:
                launched = {"value": None, "source": f"{known['source']}; {launched['source']}"}
            else:
                launched = known
        elif known is not None and known["value"] is None:
            # The command line settles what the API left unknown, and what the API said of it stays
            # (vLLM's KV cache: how many requests of max_model_len it holds beside --max-num-seqs).
            launched = {**launched, "source": f"{launched['source']}; {known['source']}"}
        facts[name] = launched
    _without_credentials(facts, engine.base)
    local = engine_is_local(engine.base)
    # A recorder's first probe holds its start: nvidia-smi is waited for 2 s at most, a list it
    # did not give in time said unknown (not "no nvidia-smi", which no GPU would be).
    host = {**host_facts(), **list_gpus().facts()}
    identity = {k: v["value"] for k, v in facts.items()}
    identity["kind"] = engine.kind
    return {
        "type": "engine",
        "url": _REDACTOR.url(engine.base),
        "wall": time.time(),
        "kind": engine.kind,
        "facts": facts,
        "unknown": sorted(k for k, v in facts.items() if v["value"] is None),
        "notes": engine.notes(),
        "raw": _REDACTOR.json_value(engine.raw()),  # an engine's answers may hold its own api_key
        "host": host,
        "host_is_engine_host": local,
        "labels": dict(labels or {}),
        # What changes when the engine's configuration does (not the time it was asked).
        "fingerprint": hashlib.sha256(canonical_json(identity).encode()).hexdigest()[:16],
    }


def _without_credentials(facts: dict[str, dict[str, object]], url: str) -> None:
    """Each fact's source without ``url``'s password or token user: a source that quotes the URL
    (an adapter's message, the runtime digest's) must not carry them into the capture."""
    for fact in facts.values():
        if isinstance(fact.get("source"), str):
            fact["source"] = _REDACTOR.text(str(fact["source"]), url)


def probe(
    url: str,
    *,
    labels: Mapping[str, str] | None = None,
    model_file: str | None = None,
    timeout: float = 10.0,
    headers: Mapping[str, str] | None = None,
) -> EngineSnapshot:
    engine = open_engine(url, model_file=model_file, timeout=timeout, headers=headers)
    try:
        return snapshot(engine, labels)
    finally:
        engine.http.close()
