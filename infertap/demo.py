"""The demo: one workload, two engines on the same weights, and what differs between them.

Starts llama-cpp-python's server (A) and llama.cpp's own llama-server (B) on the SmolLM2 GGUF,
each with its own defaults; records the bundled workload (infertap/data/demo_workload.json)
through ``infertap record`` in front of A; replays it on B at the original timing; compares the
two and writes the HTML report. Reports progress through ``say``; the CLI prints the results.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import httpx

from .launch import SMOLLM2_ALIAS, llama_cpp_python_server, llama_server, recorder, smollm2_gguf


def load_workload(*, quick: bool = False) -> dict[str, Any]:
    doc = json.loads(resources.files("infertap").joinpath("data/demo_workload.json").read_text(encoding="utf-8"))
    if quick:
        doc["steps"] = [s for s in doc["steps"] if s.get("quick", True)]
    return doc


def references(workload: dict[str, Any]) -> dict[str, str]:
    """Known answers, keyed by the question as compare looks them up (the last user message)."""
    return {s["body"]["messages"][-1]["content"]: s["answer"] for s in workload["steps"] if "answer" in s}


async def _send(client: httpx.AsyncClient, base: str, step: dict[str, Any], body: dict[str, Any]) -> tuple[int, str]:
    path = step.get("path", "/v1/chat/completions")
    if not step.get("stream"):
        r = await client.post(base + path, json=body)
        try:
            choice = r.json()["choices"][0]
        except (ValueError, KeyError, IndexError, TypeError):
            return r.status_code, r.text[:80]
        return r.status_code, (choice.get("message") or {}).get("content") or choice.get("text") or ""
    text = []
    async with client.stream("POST", base + path, json={**body, "stream": True}) as r:
        async for line in r.aiter_lines():
            if line.startswith("data: {"):
                for choice in json.loads(line[6:]).get("choices") or ():
                    text.append((choice.get("delta") or {}).get("content") or choice.get("text") or "")
        return r.status_code, "".join(text)


async def run_workload(base: str, workload: dict[str, Any], say: Callable[[str], None]) -> None:
    """Send each step at its offset; a step that continues a conversation waits for its turn."""
    replies: dict[str, tuple[list[dict[str, Any]], str]] = {}
    done: dict[str, asyncio.Event] = {s["id"]: asyncio.Event() for s in workload["steps"]}
    start = time.monotonic()

    async def one(client: httpx.AsyncClient, step: dict[str, Any]) -> None:
        await asyncio.sleep(max(0.0, start + step["at"] - time.monotonic()))
        body = {"model": SMOLLM2_ALIAS, "temperature": workload["temperature"], **step["body"]}
        if step.get("continues"):
            await done[step["continues"]].wait()
            earlier, reply = replies[step["continues"]]
            body["messages"] = [*earlier, {"role": "assistant", "content": reply}, *step["body"]["messages"]]
        t0 = time.monotonic()
        try:
            status, text = await _send(client, base, step, body)
        except httpx.HTTPError as exc:
            status, text = 0, f"failed: {exc!r}"
        replies[step["id"]] = (body.get("messages") or [], text)
        done[step["id"]].set()
        say(f"  {step['id']:<13} {status}  {time.monotonic() - t0:5.1f} s  {text[:70]!r}")

    async with httpx.AsyncClient(timeout=300, trust_env=False) as client:
        await asyncio.gather(*(one(client, s) for s in workload["steps"]))


@contextlib.contextmanager
def _engines(engine_a: str | None, engine_b: str | None, logs: Path, say: Callable[[str], None]) -> Iterator[tuple[str, str]]:
    with contextlib.ExitStack() as stack:
        if engine_a is None:
            say("starting engine A: llama-cpp-python's server on SmolLM2-135M-Instruct (Q4_1 GGUF), its own defaults")
            engine_a = stack.enter_context(llama_cpp_python_server(log_dir=logs)).url
        if engine_b is None:
            say("starting engine B: llama.cpp's llama-server on the same GGUF, its own defaults")
            engine_b = stack.enter_context(llama_server(log_dir=logs)).url
        yield engine_a, engine_b


def run_demo(
    out: Path,
    say: Callable[[str], None],
    *,
    engine_a: str | None = None,
    engine_b: str | None = None,
    quick: bool = False,
    keep: Callable[[str, str, dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Record on A, replay on B, compare; returns the paths, the comparison and how to repeat each step."""
    from .analysis.compare import compare
    from .analysis.report import write_report
    from .engines.probe import probe
    from .replay import ReplayConfig, run_replay

    out.mkdir(parents=True, exist_ok=True)
    workload = load_workload(quick=quick)
    gguf = smollm2_gguf()
    cap_a, cap_b, report = out / "a-llama-cpp-python", out / "b-llama-server", out / "report.html"
    with _engines(engine_a, engine_b, out, say) as (url_a, url_b):
        for name, url in (("A", url_a), ("B", url_b)):
            snap = probe(url, model_file=str(gguf))
            facts = snap["facts"]
            say(
                f"  {name}: {snap['kind']} {facts['version']['value'] or '(version unknown)'} at {url}, "
                f"{facts['parallel_slots']['value'] or '?'} slot(s), repeat_penalty default {(facts['defaults']['value'] or {}).get('repeat_penalty', 'unknown')}"
            )
        say(f"recording {len(workload['steps'])} requests through `infertap record` in front of A")
        with recorder(url_a, cap_a, extra_args=["--model-file", str(gguf)]) as rec:
            asyncio.run(run_workload(rec.url, workload, say))
            rec.stop()
        say("replaying the capture on B at the original timing")
        summary = run_replay(ReplayConfig(cap_a, url_b, cap_b, model_file=str(gguf)))
        say(f"  sent {summary['sent']}, endings {summary['ends']}, schedule lag p99 {summary['lag_ms']['p99']:.2f} ms")
        refs = references(workload)
        result = compare(cap_a, cap_b, extract="number", references=refs)
        write_report(report, cap_a, cap_b, extract="number")
        refs_file = out / "answers.json"
        refs_file.write_text(json.dumps(refs, indent=1, ensure_ascii=False))
        outcome = _outcome(cap_a, cap_b, report, refs_file, gguf, result)
        if keep is not None:
            keep(url_a, url_b, outcome)  # the engines stay up until it returns
    return outcome


def _outcome(cap_a: Path, cap_b: Path, report: Path, refs_file: Path, gguf: Path, result: dict[str, Any]) -> dict[str, Any]:
    return {
        "captures": [str(cap_a), str(cap_b)],
        "report": str(report),
        "comparison": result,
        "commands": [
            f"infertap record --upstream URL_OF_A --model-file {gguf} --out {cap_a}   # then send your traffic to it",
            f"infertap replay {cap_a} --target URL_OF_B --out {cap_b}",
            f"infertap compare {cap_a} {cap_b} --extract number --reference {refs_file}",
            f"infertap report {cap_a} {cap_b} -o {report} --extract number",
            f"infertap stats {cap_a} {cap_b}",
            f'infertap sql "SELECT path, count(*), median(ttft_ns)/1e6 AS ttft_ms FROM metrics GROUP BY path" {cap_a} {cap_b}',
        ],
    }
