"""A cold decode of Codex-like traffic, whose request bodies are zstd-compressed: what undoing each
body's encoding once per exchange (instead of once for each of its readers) saves.

Builds one capture of ``--exchanges`` Codex-like /v1/responses exchanges (sessions of up to 30 turns,
each request the instructions, the tools and the whole conversation so far as input items,
zstd-compressed at level 3 with ``Content-Encoding: zstd`` as codex-rs sends it; streamed SSE
answers), then measures, each in a fresh process:

- ``floor``: the capture reader alone (zstd + msgpack of every record): what any decode pays;
- ``bodies``: the floor plus every request body decompressed once: what reading them costs at least;
- ``stats``: a cold ``infertap stats`` (``speed_stats`` over an empty cache, decoded in this one
  process so that CPU is counted alike) as the decode is now, each body undone once;
- ``warm``: ``stats`` again, its cache now filled (the process's start, imports, DuckDB, the
  queries): ``cold - warm`` is the decode's own share;
- ``before``: the cold ``stats`` with each reader undoing the body itself, as before (the request reading,
  the identity digest and the newer-request check: ``capture.identity.plain_body`` handing on
  nothing, which tests/analysis/test_decode_compressed_once.py shows is that old path, tables alike).

- ``replay``: a replay's workload loaded with a transform (``--set temperature=0.5``: the check that
  every body takes it, before anything is sent), each body undone once as it loads; ``replay-before``:
  the same with the identity and the transforms' check each undoing it again, as before (nothing
  handed on: tests/replay/test_replay_compressed_once.py shows it loads the same workload).

``before`` and ``stats`` run alternated ``--rounds`` times, ``replay-before`` and ``replay`` likewise
(``--only stats`` or ``--only replay`` runs one pair); every run must give the same workload
identity (the bench stops where they don't). Each counts the calls that undo a body's encoding and
their CPU (``apis.body._undo``, timed): the saving, apart from the noise of a shared machine. CPU
seconds are the steadier number there; the ratios are taken on them.

    python -m bench.compressed_requests [--exchanges 20000] [--rounds 2] [--only stats|replay] [--json FILE] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import zstandard

from infertap.capture.records import new_exchange
from infertap.capture.writer import CaptureWriter

_VOCAB = ["the", "file", "test", "error", "value", "return", "fix", "build", "path", "line", "check", "call", "diff"]
INSTRUCTIONS = "You are Codex, a coding agent. " + " ".join(_VOCAB[i % len(_VOCAB)] for i in range(1200))
TOOLS = [
    {"type": "function", "name": f"tool_{k}", "description": " ".join(_VOCAB[: 5 + k]), "strict": False,
     "parameters": {"type": "object", "properties": {"arg": {"type": "string"}}, "required": ["arg"]}}
    for k in range(8)
]  # fmt: skip
HEADERS = [
    ["content-type", "application/json"],
    ["authorization", "Bearer [REDACTED]"],
    ["content-encoding", "zstd"],
    ["originator", "codex_cli_rs"],
]


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_VOCAB) for _ in range(n))


def _output(rng: random.Random) -> str:
    """A tool's output: lines of a file or a test run, with numbers that don't repeat."""
    return "\n".join(
        f"{rng.randrange(1, 9999):>5}: {_words(rng, 8)} {rng.getrandbits(32):08x}" for _ in range(rng.randrange(5, 40))
    )


def _sse(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


def _answer(rng: random.Random, rid: str) -> tuple[list[bytes], str]:
    """A streamed Responses answer of a few deltas, and its text."""
    deltas = [_words(rng, rng.randrange(2, 6)) + " " for _ in range(rng.randrange(4, 16))]
    text = "".join(deltas)
    item = {"type": "message", "id": f"msg_{rid}", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}  # fmt: skip
    usage = {"input_tokens": 1000, "output_tokens": len(deltas), "total_tokens": 1000 + len(deltas)}
    chunks = [_sse("response.created", {"response": {"id": rid, "object": "response", "status": "in_progress", "output": []}})]
    chunks += [
        _sse("response.output_text.delta", {"item_id": item["id"], "output_index": 0, "content_index": 0, "delta": d})
        for d in deltas
    ]
    done = {"id": rid, "object": "response", "status": "completed", "output": [item], "usage": usage}
    chunks.append(_sse("response.completed", {"response": done}))
    return chunks, text


def build(path: Path, n: int, seed: int = 0) -> None:
    """One capture of ``n`` exchanges: sessions one after another, each turn the conversation so far."""
    rng = random.Random(seed)
    compress = zstandard.ZstdCompressor(level=3).compress
    items: list[dict[str, Any]] = []
    turns_left = 0
    t_ns = 0
    with CaptureWriter(path, recorder={"kind": "bench"}) as writer:
        for i in range(n):
            if turns_left == 0:
                items, turns_left = [], rng.randrange(1, 31)
            items.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": _words(rng, 20)}]})
            body = {"model": "gpt-5-codex", "instructions": INSTRUCTIONS, "input": items, "tools": TOOLS,
                    "tool_choice": "auto", "parallel_tool_calls": False, "store": False, "stream": True}  # fmt: skip
            rid = f"resp_{seed}_{i}"
            chunks, text = _answer(rng, rid)
            chunk_ns = [200_000_000 + k * 20_000_000 for k in range(len(chunks))]
            writer.write(
                new_exchange(
                    id=f"x{i}",
                    seq=i,
                    session=None,
                    wall=1.8e9 + t_ns / 1e9,
                    start_ns=t_ns,
                    sent_ns=t_ns,
                    client=None,
                    method="POST",
                    path="/v1/responses",
                    query="",
                    http_version="1.1",
                    request_headers=HEADERS,
                    request_body=compress(json.dumps(body).encode()),
                    status=200,
                    response_headers=[["content-type", "text/event-stream"]],
                    headers_ns=150_000_000,
                    chunk_ns=chunk_ns,
                    chunks=chunks,
                    end_ns=chunk_ns[-1] + 100_000,
                    end="complete",
                    error=None,
                    upstream="bench",
                )  # fmt: skip
            )
            items.append({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]})
            call = f"call_{i}"  # the tool it ran, and what that printed: the most of a Codex conversation
            items.append(
                {"type": "function_call", "name": rng.choice(TOOLS)["name"], "arguments": '{"arg": "x"}', "call_id": call}
            )
            items.append({"type": "function_call_output", "call_id": call, "output": _output(rng)})
            turns_left -= 1
            t_ns += chunk_ns[-1] + 50_000_000
            while i + 1 - writer.records > 5_000:  # keep the writer's queue bounded
                time.sleep(0.005)


# -- phases, each run in a fresh process -----------------------------------------------------------


def _floor(capture: str, bodies: bool) -> dict[str, Any]:
    """Every record read by the capture reader; ``bodies``: and every request body decompressed once."""
    from infertap.apis.body import unencoded
    from infertap.capture.reader import CaptureReader

    t0, c0 = time.perf_counter(), time.process_time()
    records = 0
    for record in CaptureReader(capture).records():
        records += 1
        if bodies and record.get("type") == "exchange":
            unencoded(record.get("request_body") or b"", record.get("request_headers"))
    return {"s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0, "records": records}


def _stats(capture: str, cache: str, before: bool) -> dict[str, Any]:
    """A cold ``infertap stats`` of ``capture`` in this process; ``before``: each reader undoing the body itself."""
    from infertap.analysis import Analysis, decode, speed_stats

    if before:  # the code before: its request reader, its digest and its newer check each undid the body
        from infertap.apis.body import unencoded

        once = decode.plain_request

        def thrice(body: bytes, headers: Any) -> tuple[bytes, bool]:
            unencoded(body, headers), unencoded(body, headers)
            return once(body, headers)

        decode.plain_request = thrice  # type: ignore[assignment]
    undoing = _timed_undo()  # what undoing the bodies' encoding takes, alone
    t0 = time.perf_counter()
    with Analysis([capture], cache_dir=cache, workers=1) as a:
        result = speed_stats(a)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    workload = (result.get("groups") or [{}])[0].get("workload") or {}
    return {
        "s": time.perf_counter() - t0,
        "cpu_s": usage.ru_utime + usage.ru_stime,  # the whole process's: imports, decode, DuckDB's threads
        "identity": workload.get("identity"),
        "requests": workload.get("requests"),
        "undone": undoing["calls"],
        "undo_cpu_s": undoing["cpu_s"],
    }


def _timed_undo() -> dict[str, Any]:
    """``apis.body._undo`` counted and timed from here on: the calls that undo a body's encoding."""
    from infertap.apis import body

    undo, undoing = body._undo, {"calls": 0, "cpu_s": 0.0}

    def timed(*args: Any, **kwargs: Any) -> Any:
        c0 = time.thread_time()
        try:
            return undo(*args, **kwargs)
        finally:
            undoing["calls"] += 1
            undoing["cpu_s"] += time.thread_time() - c0

    body._undo = timed  # type: ignore[assignment]
    return undoing


def _replay_load(capture: str, before: bool) -> dict[str, Any]:
    """A replay's workload of ``capture`` loaded with ``--set temperature=0.5`` in this process;
    ``before``: the identity and the transforms' check each undoing the body again (nothing handed on)."""
    from infertap.capture.identity import IdentityTally
    from infertap.replay import Transforms
    from infertap.replay.transforms import Transforms as Own
    from infertap.replay.workload import load_workload

    if before:
        add, body = IdentityTally.add, Own.body
        IdentityTally.add = lambda self, record, generation=None, digest=None, plain=None: add(self, record, generation, digest)  # type: ignore[method-assign]
        Own.body = lambda self, raw, decoded=None, **kw: body(self, raw, **kw)  # type: ignore[method-assign]
    undoing = _timed_undo()
    t0, c0 = time.perf_counter(), time.process_time()
    workload = load_workload(capture, transforms=Transforms(set_values=[("temperature", 0.5)]))
    return {
        "s": time.perf_counter() - t0,
        "cpu_s": time.process_time() - c0,  # the load's own: the imports are before it
        "identity": {"short": workload.identity.short, "workload": workload.identity.workload},
        "requests": workload.identity.requests,
        "refused": workload.refused is not None,
        "undone": undoing["calls"],
        "undo_cpu_s": undoing["cpu_s"],
    }


def _stats_rounds(result: dict[str, Any], run: Any, rounds: int) -> None:
    """The floor, the bodies, then cold ``stats`` before and now alternated, and a warm one."""
    result["floor"], result["bodies"] = run("floor"), run("bodies")
    result["before"], result["stats"] = [], []
    for _ in range(rounds):  # alternated: the machine's load moves both alike
        result["before"].append(run("before"))
        result["stats"].append(run("stats"))
    result["warm"] = run("stats", cold=False)
    identities = {json.dumps(r["identity"], sort_keys=True) for r in result["before"] + result["stats"]}
    if len(identities) != 1:
        raise SystemExit(f"the workload identity differs before and now: {sorted(identities)}")


def _print_stats(result: dict[str, Any], exchanges: int, size: int) -> None:
    """The stats phases' CPU seconds, against the floor."""
    floor, warm = result["floor"]["cpu_s"], result["warm"]["cpu_s"]
    print(f"{exchanges:,} Codex-like zstd /responses exchanges, {size / 2**20:.1f} MiB of capture (CPU seconds)")
    print(f"  floor (the capture reader)        {floor:6.2f}")
    print(f"  floor + each body undone once     {result['bodies']['cpu_s']:6.2f}  {result['bodies']['cpu_s'] / floor:5.1f}x")
    print(f"  warm stats (start, imports, DuckDB) {warm:6.2f}")
    for phase, words in (("before", "each reader undoing"), ("stats", "undone once (now)")):
        for r in result[phase]:
            r["decode_cpu_s"] = r["cpu_s"] - warm
            print(
                f"  cold stats, {words:<20} {r['cpu_s']:6.2f}  {r['cpu_s'] / floor:5.1f}x ({r['s']:.1f} s wall); "
                f"decode (cold - warm) {r['decode_cpu_s']:.2f}, {r['decode_cpu_s'] / floor:.1f}x; "
                f"bodies undone {r['undone']:,} times in {r['undo_cpu_s']:.2f}"
            )
    print(f"  workload {result['stats'][0]['identity']['short']}, {result['stats'][0]['requests']} requests, every run")


def _replay_rounds(result: dict[str, Any], run: Any, rounds: int) -> None:
    """A replay's workload loaded with a transform, before and now, alternated."""
    result["replay-before"], result["replay"] = [], []
    for _ in range(rounds):
        result["replay-before"].append(run("replay-before", cold=False))
        result["replay"].append(run("replay", cold=False))
    runs = result["replay-before"] + result["replay"]
    if len({json.dumps(r["identity"], sort_keys=True) for r in runs}) != 1 or any(r["refused"] for r in runs):
        raise SystemExit("the replay's workload differs before and now, or refused a body")
    print("replay's workload loaded with --set temperature=0.5 (CPU seconds of the load)")
    for phase, words in (("replay-before", "each reader undoing"), ("replay", "undone once (now)")):
        for r in result[phase]:
            print(
                f"  {words:<20} {r['cpu_s']:6.2f} ({r['s']:.1f} s wall); bodies undone {r['undone']:,} times in {r['undo_cpu_s']:.2f}"
            )
    print(f"  workload {result['replay'][0]['identity']['short']}, {result['replay'][0]['requests']} requests, every run")


def _run(phase: str, *args: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.compressed_requests", "--phase", phase, *args]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])


def _phase_main(phase: str, args: list[str]) -> None:
    if phase in ("floor", "bodies"):
        result = _floor(args[0], phase == "bodies")
    elif phase in ("stats", "before"):
        result = _stats(args[0], args[1], phase == "before")
    elif phase in ("replay", "replay-before"):
        result = _replay_load(args[0], phase == "replay-before")
    else:
        raise SystemExit(f"unknown phase {phase}")
    print(json.dumps(result))


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--phase":
        _phase_main(sys.argv[2], sys.argv[3:])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exchanges", type=int, default=20_000)
    parser.add_argument("--json", default="bench-compressed-requests.json")
    parser.add_argument("--workdir", default=None, help="keep the capture here (reused when present)")
    parser.add_argument("--rounds", type=int, default=2, help="cold stats before and now, alternated, this many times each")
    parser.add_argument("--only", choices=("stats", "replay"), default=None, help="run one pair of phases alone")
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="infertap-bench-"))
    capture = work / f"codex-{args.exchanges}"
    if not capture.exists():
        build(capture, args.exchanges)
    size = sum(f.stat().st_size for f in capture.rglob("*") if f.is_file())
    result: dict[str, Any] = {"exchanges": args.exchanges, "capture_bytes": size}
    cache = work / "cache"

    def run(phase: str, cold: bool = True) -> dict[str, Any]:
        if cold:
            shutil.rmtree(cache, ignore_errors=True)  # an empty cache; else the one the last ``stats`` filled
        return _run(phase, str(capture), str(cache))

    if args.only != "replay":
        _stats_rounds(result, run, args.rounds)
        _print_stats(result, args.exchanges, size)
    if args.only != "stats":
        _replay_rounds(result, run, args.rounds)
    result["machine"] = {
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
    }
    Path(args.json).write_text(json.dumps(result, indent=2))
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
