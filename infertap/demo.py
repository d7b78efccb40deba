"""The demo: a short scripted session, recorded through ``infertap record`` in front of the embedded engine.

Reports progress through ``say`` rather than printing, so the CLI decides how it is shown.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .engines import SMOLLM2_ALIAS, llama_cpp_python_server, recorder, smollm2_gguf

QUESTIONS = ["What is 17 + 25?", "Name three primary colours."]


def scripted_session(base_url: str, say: Callable[[str], None]) -> None:
    """What an agent harness does, with the official openai SDK pointed at the recorder."""
    from openai import OpenAI

    client = OpenAI(base_url=f"{base_url}/v1", api_key="sk-demo-not-a-real-key", max_retries=0, timeout=120)
    say(f"  GET /v1/models -> {[m.id for m in client.models.list().data]}")
    for question in QUESTIONS:
        reply = client.chat.completions.create(
            model=SMOLLM2_ALIAS,
            messages=[{"role": "user", "content": question}],
            max_tokens=48,
            temperature=0,
        )
        say(f"  chat {question!r} -> {reply.choices[0].message.content!r}")
    stream = client.chat.completions.create(
        model=SMOLLM2_ALIAS,
        messages=[
            {"role": "system", "content": "You answer in one short sentence."},
            {"role": "user", "content": "Why is the sky blue?"},
        ],
        max_tokens=48,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    pieces = [c.choices[0].delta.content or "" for c in stream if c.choices]
    say(f"  chat (streamed, {len(pieces)} chunks) -> {''.join(pieces)!r}")
    completion = client.completions.create(model=SMOLLM2_ALIAS, prompt="The capital of France is", max_tokens=12, temperature=0)
    say(f"  completion -> {completion.choices[0].text!r}")


def run_demo(out: Path, say: Callable[[str], None]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    say("starting the embedded engine: llama-cpp-python's server on SmolLM2-135M-Instruct (Q4_1 GGUF)")
    with llama_cpp_python_server(log_dir=out.parent) as engine:
        say(f"  engine at {engine.url}")
        gguf = smollm2_gguf()
        with recorder(engine.url, out, extra_args=["--model-file", str(gguf)]) as rec:
            say(f"recording through `infertap record --upstream {engine.url} --model-file {gguf.name} --out {out}` at {rec.url}")
            scripted_session(rec.url, say)
            rec.stop()
    say("")
    for line in what_the_engine_ran(out):
        say(line)
    say(f"capture written to {out}; inspect it with `infertap info {out}` and `infertap cat {out}`")


def what_the_engine_ran(capture: Path) -> list[str]:
    """The first chat exchange's enrichment, in words: the config a bare number would hide."""
    import json

    from proxy import CaptureReader

    exchanges: dict[str, dict] = {}
    for record in CaptureReader(capture).records():
        if record["type"] == "exchange":
            exchanges[record["id"]] = record
        elif record["type"] == "engine":
            facts = record["facts"]
            lines = [f"engine: {record['kind']} {facts['version']['value'] or '(version unknown)'}, "
                     f"{facts['parallel_slots']['value'] or '?'} slot(s), unknown: {', '.join(record['unknown']) or 'nothing'}"]  # fmt: skip
        elif record["type"] == "enrichment" and exchanges[record["exchange_id"]]["path"] == "/v1/chat/completions":
            request = json.loads(exchanges[record["exchange_id"]]["request_body"])
            tokens = record["prompt_tokens"]
            defaults = {k: v["value"] for k, v in record["settings"].items() if v["source"] == "engine_default"}
            lines.append(f"what it really ran for {request['messages'][-1]['content']!r}:")
            lines.append(f"  prompt: {tokens['count']} tokens ({tokens['source']}); equals the engine's usage.prompt_tokens: {tokens['agrees_with_usage']}")
            if tokens.get("rendered") and all(m["role"] != "system" for m in request["messages"]):
                lines.append(f"  text the template added that the user never wrote: {tokens['rendered'].split(chr(10))[1]!r}")
            lines.append("  settings nobody set, the engine's defaults: " + ", ".join(f"{k}={v}" for k, v in sorted(defaults.items())))
            return lines
    return []
