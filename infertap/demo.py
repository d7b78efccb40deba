"""The demo: one workload, three engines on the same weights, and what differs between them.

Starts llama-cpp-python's server (A) and llama.cpp's own llama-server (B) on the SmolLM2 GGUF,
each with its own defaults, and vLLM (C) on the same weights converted to float32 (``make vllm``;
left out by ``--quick``, and where vLLM can't be built here); records the bundled workload
(infertap/data/demo_workload.json) through ``infertap record`` in front of A; replays it on B and
on C at the original timing; compares them pairwise and writes the HTML report of A against B.
Reports progress through ``say``; the CLI prints the results.
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

from .launch import (
    SMOLLM2_ALIAS,
    cache_dir,
    llama_cpp_python_server,
    llama_server,
    recorder,
    smollm2_gguf,
    vllm_python,
    vllm_server,
    vllm_unavailable,
)


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


def vllm_left_out(*, quick: bool) -> str | None:
    """Why the demo goes without the embedded vLLM (C), or None: it runs with it."""
    if quick:
        return "--quick"
    reason = vllm_unavailable()
    if reason:
        return f"vLLM can't be built on this machine ({reason})"
    if not vllm_python().exists():
        return "vLLM is not built here (make vllm builds it)"
    return None


@contextlib.contextmanager
def _engines(
    engine_a: str | None, engine_b: str | None, engine_c: str | None, logs: Path, say: Callable[[str], None]
) -> Iterator[tuple[str, str, str | None]]:
    """``engine_c`` "": no C."""
    with contextlib.ExitStack() as stack:
        if engine_a is None:
            say("starting engine A: llama-cpp-python's server on SmolLM2-135M-Instruct (Q4_1 GGUF), its own defaults")
            engine_a = stack.enter_context(llama_cpp_python_server(log_dir=logs)).url
        if engine_b is None:
            say("starting engine B: llama.cpp's llama-server on the same GGUF, its own defaults")
            engine_b = stack.enter_context(llama_server(log_dir=logs)).url
        if engine_c is None:
            say("starting engine C: vLLM (CPU) on the same weights converted to float32, its own defaults (about a minute)")
            engine_c = stack.enter_context(vllm_server(log_dir=logs)).url
        yield engine_a, engine_b, engine_c or None


def run_demo(
    out: Path,
    say: Callable[[str], None],
    *,
    engine_a: str | None = None,
    engine_b: str | None = None,
    engine_c: str | None = None,
    quick: bool = False,
    keep: Callable[[list[str], dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Record on A, replay on B and C, compare pairwise, then score A's known answers against the
    same traffic with ``repeat_penalty`` pinned to 1.0 and against a second unchanged run (the noise
    floor); returns the paths, the comparisons and how to repeat each step. ``engine_c`` is a URL,
    or None for the embedded vLLM (where it runs)."""
    from .engines.probe import probe
    from .replay import ReplayConfig, Transforms, run_replay

    cache_dir()  # refused here, not by the comparison after every engine ran: the analysis cache is the same folder
    out.mkdir(parents=True, exist_ok=True)
    workload = load_workload(quick=quick)
    gguf = smollm2_gguf()
    caps = {"A": out / "a-llama-cpp-python", "B": out / "b-llama-server", "C": out / "c-vllm"}
    if engine_c is None and (why := vllm_left_out(quick=quick)):
        say(f"engine C (vLLM) left out: {why}; going on with two engines")
        engine_c = ""
    with _engines(engine_a, engine_b, engine_c, out, say) as (url_a, url_b, url_c):
        engines = [("A", url_a), ("B", url_b)] + ([("C", url_c)] if url_c else [])
        for name, url in engines:
            # The GGUF describes A and B; C serves a converted copy, described by its own folder.
            snap = probe(url, model_file=str(gguf) if name != "C" else None)
            facts = snap["facts"]
            defaults = facts["defaults"]["value"] or {}
            penalty = defaults.get("repeat_penalty", defaults.get("repetition_penalty", "unknown"))
            say(
                f"  {name}: {snap['kind']} {facts['version']['value'] or '(version unknown)'} at {url}, "
                f"{facts['dtype']['value'] or 'dtype unknown'}, {facts['parallel_slots']['value'] or '?'} slot(s), "
                f"repeat_penalty default {penalty}"
            )
        say(f"recording {len(workload['steps'])} requests through `infertap record` in front of A")
        with recorder(url_a, caps["A"], extra_args=["--model-file", str(gguf)]) as rec:
            asyncio.run(run_workload(rec.url, workload, say))
            rec.stop()
        for name, url in engines[1:]:
            say(f"replaying the capture on {name} at the original timing")
            model_file = str(gguf) if name != "C" else None
            _said(say, run_replay(ReplayConfig(caps["A"], url, caps[name], model_file=model_file)))
        say("replaying it on A twice more: unchanged (the noise floor), and with --set repeat_penalty=1.0")
        _said(say, run_replay(ReplayConfig(caps["A"], url_a, out / AGAIN, model_file=str(gguf))))
        pinned = Transforms(set_values=[("repeat_penalty", 1.0)])
        _said(say, run_replay(ReplayConfig(caps["A"], url_a, out / PINNED, transforms=pinned, model_file=str(gguf))))
        outcome = _results(out, {name: caps[name] for name, _ in engines}, workload, gguf, say)
        if keep is not None:
            keep([url for _, url in engines], outcome)  # the engines stay up until it returns
    return outcome


AGAIN, PINNED = "a-again", "a-repeat-penalty-1.0"


def _said(say: Callable[[str], None], summary: dict[str, Any]) -> None:
    """A replay's line; one a stop signal cut short (it keeps its capture) stops the demo there too."""
    say(f"  sent {summary['sent']}, endings {summary['ends']}, schedule lag p99 {summary['lag_ms']['p99']:.2f} ms")
    if summary["stopped_early"]:
        raise KeyboardInterrupt("the replay was stopped")


def _results(
    out: Path, caps: dict[str, Path], workload: dict[str, Any], gguf: Path, say: Callable[[str], None]
) -> dict[str, Any]:
    """Every pair compared (and reported), then A's known answers with the default pinned, beside the noise floor."""
    from .analysis.compare import compare
    from .analysis.report import write_report

    refs = references(workload)
    refs_file = out / "answers.json"
    refs_file.write_text(json.dumps(refs, indent=1, ensure_ascii=False))
    names = list(caps)
    pairs = [(x, y) for i, x in enumerate(names) for y in names[i + 1 :]]
    say(f"comparing {', '.join(f'{x} vs {y}' for x, y in pairs)} and writing a report of each")
    comparisons, reports = [], []
    for x, y in pairs:
        comparisons.append({"pair": f"{x} vs {y}", "result": compare(caps[x], caps[y], extract="number", references=refs)})
        reports.append(out / f"report-{x}-vs-{y}.html".lower())
        write_report(reports[-1], caps[x], caps[y], extract="number", references=refs)
    study = compare(caps["A"], out / PINNED, baseline=out / AGAIN, extract="number", references=refs)
    commands = [
        f"infertap record --upstream URL_OF_A --model-file {gguf} --out {caps['A']}   # then send your traffic to it",
        *(f"infertap replay {caps['A']} --target URL_OF_{name} --out {caps[name]}" for name in names[1:]),
        f"infertap replay {caps['A']} --target URL_OF_A --out {out / AGAIN}",
        f"infertap replay {caps['A']} --target URL_OF_A --set repeat_penalty=1.0 --out {out / PINNED}",
        *(f"infertap compare {caps[x]} {caps[y]} --extract number --reference {refs_file}" for x, y in pairs),
        f"infertap compare {caps['A']} {out / PINNED} --baseline {out / AGAIN} --extract number --reference {refs_file}",
        f"infertap report {caps['A']} {caps['B']} -o {reports[0]} --extract number --reference {refs_file}",
        f"infertap stats {' '.join(map(str, caps.values()))}",
        f'infertap sql "SELECT path, count(*), median(ttft_ns)/1e6 AS ttft_ms FROM metrics GROUP BY path" {caps["A"]} {caps["B"]}',
    ]
    return {
        "captures": [str(p) for p in caps.values()] + [str(out / AGAIN), str(out / PINNED)],
        "report": str(reports[0]),
        "reports": [str(p) for p in reports],
        "comparison": comparisons[0]["result"],  # A against B
        "comparisons": comparisons,
        "repeat_penalty_study": study,
        "known_answers": known_answers(comparisons, study),
        "commands": commands,
    }


def known_answers(comparisons: list[dict[str, Any]], study: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per run: the known answers it got right, each other run against A with the difference's
    interval and McNemar's p, and how many answers a second unchanged run of A flipped (the noise floor)."""
    acc = study.get("accuracy")
    if acc is None:
        return []
    noise = acc.get("noise_floor") or {}
    rows: list[dict[str, Any]] = [
        {
            "run": "A, its own defaults (repeat_penalty 1.1)",
            "right": acc["a_right"],
            "of": acc["items"],
            "against_a": None,
            "left_out": acc.get("unanswered", 0),
            "unread": (acc.get("unread") or {}).get("a", 0),
        },
        {"run": "A again, unchanged: the noise floor", "right": None, "of": noise.get("items"), "flips": noise.get("flips")},
        {
            "run": "A with --set repeat_penalty=1.0",
            "right": acc["b_right"],
            "of": acc["items"],
            "against_a": acc,
            "left_out": acc.get("unanswered", 0),
            "unread": (acc.get("unread") or {}).get("b", 0),
        },
    ]
    for each in comparisons:
        x, y = each["pair"].split(" vs ")
        if x == "A" and (other := each["result"].get("accuracy")) is not None:
            rows.append(
                {
                    "run": y,
                    "right": other["b_right"],
                    "of": other["items"],
                    "against_a": other,
                    "left_out": other.get("unanswered", 0),
                    "unread": (other.get("unread") or {}).get("b", 0),
                }
            )
    return rows


def pair_summary(result: dict[str, Any]) -> str:
    """One line for a pair: what differs in the configuration, then what differs in the outputs."""
    differs = [row["fact"] for row in result["config"]["snapshots"] if row["differs"]]
    d = result["divergence"]
    counts = d["counts"]
    exact = round((d["exact_match_rate"] or 0) * d["pairs"])
    answers = ""
    if any(k in counts for k in ("right_to_wrong", "wrong_to_right", "right_both", "wrong_both")):
        answers = (
            f"; known answers right on both {counts.get('right_both', 0)}, wrong on both {counts.get('wrong_both', 0)}, "
            f"right->wrong {counts.get('right_to_wrong', 0)}, wrong->right {counts.get('wrong_to_right', 0)}"
        )
    status = f"; status or ending differs in {counts['status_or_end_differs']}" if counts.get("status_or_end_differs") else ""
    # A side that failed (an error, no response, a stream cut): counted apart from the outputs.
    if failed := (d.get("failed") or {}).get("pairs"):
        status += f"; a side failed in {failed} (not compared for output)"
    # A side that ran under several engine configurations: its last snapshot's sameness is not all of it.
    several = [f"{side} ran under {len(c)}" for side, c in (result["config"].get("configurations") or {}).items() if len(c) > 1]
    configs = f" ({' and '.join(several)} engine configurations)" if several else ""
    return (
        f"configuration differs in {', '.join(differs) or 'nothing known on both sides'}{configs}; "
        f"outputs identical in {exact} of {d['pairs']}{answers}{status}"
    )


def known_answers_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The known-answer rows as a small table: each run's score, and its difference from A with the noise beside it."""
    lines = []
    width = max((len(row["run"]) for row in rows), default=0)
    for row in rows:
        if row["right"] is None:
            lines.append(f"  {row['run']:<{width}}  {row['flips']:>3} of {row['of']} answers flipped between right and wrong")
            continue
        text = f"  {row['run']:<{width}}  {row['right']:>3} of {row['of']} right"
        # an answer a side didn't give (a failed request) is no wrong answer; one no number was read in is one, said
        if unanswered := row.get("left_out", 0):
            text += f" ({unanswered} left out: not answered on a side)"
        if unread := row.get("unread", 0):
            text += f" ({unread} wrong with no number read in them)"
        if (acc := row.get("against_a")) is not None:
            ci = acc["difference_ci95_points"]
            text += (
                f"  {acc['difference_points']:+.1f} points"
                + (f" (95% CI {ci[0]:+.1f} to {ci[1]:+.1f})" if ci else "")
                + f", {acc['wrong_to_right']} wrong->right, {acc['right_to_wrong']} right->wrong, McNemar p {acc['mcnemar_p']:.2g}"
            )
        lines.append(text)
    pinned = next((row["against_a"] for row in rows if row["run"].startswith("A with")), None)
    noise = next((row["flips"] for row in rows if row["right"] is None), None)
    if pinned is not None:
        flips = pinned["wrong_to_right"] + pinned["right_to_wrong"]
        chance = "beyond" if pinned["mcnemar_p"] < 0.05 else "within"
        lines.append(
            f"  the default nobody set turns {flips} of {pinned['items']} known answers from right to wrong or back, where a "
            f"second unchanged run of A turns {noise}; the net {pinned['difference_points']:+.1f} points is {chance} chance at this size "
            f"(McNemar p {pinned['mcnemar_p']:.2g})"
        )
    return lines
