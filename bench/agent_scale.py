"""Agent traffic at scale: the cold analysis load against its decode floor, and replay's preparation.

Builds one capture per size of agent-like traffic (sessions of up to 30 turns sharing one long
system prompt and tool list, each turn's request the whole conversation so far plus the last
reply and a tool result, streamed SSE answers with tool calls), then measures, each in a fresh
process so that peak memory (``VmHWM``, bench/peak.py) is the phase's own:

- ``floor``: zstd decompression and msgpack unpacking of every record (the capture reader, nothing
  else): what any decode has to pay;
- ``parse``: the floor plus every request body and streamed event payload parsed by msgspec (into
  Python objects, nothing kept): what any exact reader of the JSON pays, the floor of a decode
  written in Python that reads every event;
- ``stats``: ``infertap stats CAPTURE --json`` with an empty cache (decode, load, query), and its
  ratios to both floors; then the same command again, the cache now filled (``warm``: the process's
  start, imports, DuckDB and the queries), so that ``cold - warm`` is the decode's own share;
- ``store``: each table of the capture's cache entry read back and written again as the decode
  writes it (Arrow to zstd Parquet): what keeping the decoded tables costs alone; ``least`` is the
  warm command, the parse floor and the store added, what a cold ``stats`` costs at the least when
  every JSON value is parsed as msgspec parses it and the cache's tables are kept, however fast
  everything else were: its ratio to the floor is how far the 6x goal of issue #19 is from a decode
  that does nothing but parse and store;
- ``prepare``: what a replay does before its first send (the workload loaded in one pass, each
  request's ``--set temperature=0`` checked, the source's workload identity; the streamed replies
  read by a second process from 4 MiB of capture on, its CPU counted in ``cpu s``), with its peak
  memory, and apart from it what sending adds per request (a body read again from the capture and
  transformed, as the replay's read-ahead does). ``--prepare-only`` runs that phase alone.

Times grow with the capture: the per-size rows show whether they grow linearly.

    python -m bench.agent_scale [--sizes 10000,50000,100000] [--huge] [--json bench-agent-scale.json] [--workdir DIR]
    python -m bench.agent_scale --prepare-only --sizes 10000,100000 --huge
"""

from __future__ import annotations

import argparse
import heapq
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

from bench.peak import peak_rss_mib
from infertap.capture.records import new_exchange
from infertap.capture.writer import CaptureWriter

_VOCAB = [
    "the", "file", "function", "test", "error", "value", "return", "import", "class", "module", "path", "line",
    "check", "build", "config", "update", "fix", "add", "remove", "call", "result", "data", "list", "index",
]  # fmt: skip
_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name}: " + " ".join(_VOCAB[(i * 7 + k) % len(_VOCAB)] for k in range(60)),
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "command": {"type": "string"}}},
        },
    }
    for i, name in enumerate(("read_file", "write_file", "bash", "search", "list_dir", "apply_patch"))
]
SYSTEM = "You are a coding agent working in a repository. " + " ".join(_VOCAB[(k * 5) % len(_VOCAB)] for k in range(700))
_HEAD = b'data: {"id":"chatcmpl-%s","object":"chat.completion.chunk","created":1800000000,"model":"agent","choices":[{"index":0,'


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(_VOCAB, k=n))


def _chunk(xid: str, delta: str, finish: str | None = None) -> bytes:
    end = b"null" if finish is None else b'"%s"' % finish.encode()
    return _HEAD % xid.encode() + b'"delta":%s,"finish_reason":%s}]}\n\n' % (delta.encode(), end)


def _answer(rng: random.Random, xid: str, prompt_bytes: int) -> tuple[list[bytes], dict[str, Any]]:
    """A streamed reply (text, or a tool call in about half the turns) and the message it adds."""
    chunks = [_chunk(xid, '{"role":"assistant","content":""}')]
    text = _words(rng, rng.randrange(8, 40))
    pieces = text.split(" ")
    for k, word in enumerate(pieces):
        chunks.append(_chunk(xid, json.dumps({"content": word if k == 0 else " " + word})))
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if rng.random() < 0.5:
        tool = rng.choice(_TOOLS)["function"]["name"]
        arguments = json.dumps({"path": f"src/{_words(rng, 1)}_{rng.randrange(100)}.py", "command": _words(rng, 6)})
        call_id = f"call_{xid}"
        first = {"index": 0, "id": call_id, "type": "function", "function": {"name": tool, "arguments": ""}}
        chunks.append(_chunk(xid, json.dumps({"tool_calls": [first]})))
        for j in range(0, len(arguments), 12):
            part = {"index": 0, "function": {"arguments": arguments[j : j + 12]}}
            chunks.append(_chunk(xid, json.dumps({"tool_calls": [part]})))
        chunks.append(_chunk(xid, "{}", "tool_calls"))
        message["tool_calls"] = [{"id": call_id, "type": "function", "function": {"name": tool, "arguments": arguments}}]
    else:
        chunks.append(_chunk(xid, "{}", "stop"))
    usage = {
        "prompt_tokens": prompt_bytes // 4,
        "completion_tokens": len(pieces),
        "total_tokens": prompt_bytes // 4 + len(pieces),
    }
    chunks.append(
        b'data: {"id":"chatcmpl-%s","object":"chat.completion.chunk","choices":[],"usage":%s}\n\n'
        % (xid.encode(), json.dumps(usage).encode())
    )
    chunks.append(b"data: [DONE]\n\n")
    return chunks, message


def build(path: Path, n: int, seed: int = 0, active: int = 32) -> None:
    """One capture of ``n`` exchanges: ``active`` sessions at a time, each turn after its parent's end."""
    rng = random.Random(seed)
    heap: list[tuple[int, int]] = []  # (next send ns, session)
    sessions: dict[int, dict[str, Any]] = {}
    next_session = 0

    def start(t_ns: int) -> None:
        nonlocal next_session
        sid = next_session
        next_session += 1
        task = f"Task {sid}: " + _words(rng, rng.randrange(20, 60))
        sessions[sid] = {
            "turns": rng.randrange(1, 31),
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}],
        }
        heapq.heappush(heap, (t_ns, sid))

    for k in range(active):
        start(k * 150_000_000)
    with CaptureWriter(path, recorder={"kind": "bench"}) as writer:
        for i in range(n):
            t_ns, sid = heapq.heappop(heap)
            s = sessions[sid]
            xid = f"x{seed}-{i}"
            body = json.dumps({"model": "agent", "stream": True, "messages": s["messages"], "tools": _TOOLS}).encode()
            chunks, message = _answer(rng, xid, len(body))
            first = rng.randrange(50, 400) * 1_000_000
            chunk_ns = [first + k * rng.randrange(15, 30) * 1_000_000 for k in range(len(chunks))]
            writer.write(
                new_exchange(
                    id=xid,
                    seq=i,
                    session=None,
                    wall=1.8e9 + t_ns / 1e9,
                    start_ns=t_ns,
                    sent_ns=t_ns,
                    client=None,
                    method="POST",
                    path="/v1/chat/completions",
                    query="",
                    http_version="1.1",
                    request_headers=[["content-type", "application/json"], ["authorization", "Bearer [REDACTED]"]],
                    request_body=body,
                    status=200,
                    response_headers=[["content-type", "text/event-stream"]],
                    headers_ns=first - 1_000_000,
                    chunk_ns=chunk_ns,
                    chunks=chunks,
                    end_ns=chunk_ns[-1] + 100_000,
                    end="complete",
                    error=None,
                    upstream="bench",
                )
            )
            s["turns"] -= 1
            end_ns = t_ns + chunk_ns[-1]
            if s["turns"] > 0:
                s["messages"].append(message)
                if "tool_calls" in message:
                    call_id = message["tool_calls"][0]["id"]
                    s["messages"].append(
                        {"role": "tool", "tool_call_id": call_id, "content": _words(rng, rng.randrange(30, 250))}
                    )
                else:
                    s["messages"].append({"role": "user", "content": _words(rng, rng.randrange(5, 30))})
                heapq.heappush(heap, (end_ns + rng.randrange(50, 2000) * 1_000_000, sid))
            else:
                del sessions[sid]
                start(end_ns + rng.randrange(0, 500) * 1_000_000)
            while i + 1 - writer.records > 5_000:  # keep the writer's queue bounded
                time.sleep(0.005)


# -- phases, each run in a fresh process -----------------------------------------------------------


def _floor(capture: str) -> dict[str, Any]:
    """Every record decompressed and unpacked by the capture reader, and nothing else."""
    from infertap.capture.reader import CaptureReader

    t0, c0 = time.perf_counter(), time.process_time()
    reader = CaptureReader(capture)
    records = sum(1 for _ in reader.records())
    return {"s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0, "records": records}


def _parse_floor(capture: str) -> dict[str, Any]:
    """The floor, plus what any exact reader of the JSON pays: every request body and every streamed
    event's payload (an SSE ``data:`` line) parsed by msgspec into Python objects, nothing kept."""
    import msgspec

    from infertap.capture.reader import CaptureReader

    decode = msgspec.json.Decoder().decode
    t0, c0 = time.perf_counter(), time.process_time()
    records = parsed = 0
    for record in CaptureReader(capture).records():
        records += 1
        if record["type"] != "exchange":
            continue
        for payload in [record.get("request_body") or b""] + [
            block[6:] for block in b"".join(record.get("chunks") or ()).split(b"\n\n") if block.startswith(b"data: {")
        ]:
            try:
                decode(payload)
                parsed += 1
            except msgspec.DecodeError:
                pass
    return {"s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0, "records": records, "parsed": parsed}


def _store(cache: str) -> dict[str, Any]:
    """What keeping the decoded tables costs alone: each table of the capture's cache entry read
    back and written again as the decode writes it (Arrow arrays to zstd Parquet), nothing parsed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from infertap.analysis.decode import parquet_writer

    cpu = 0.0
    rows = 0
    with tempfile.TemporaryDirectory() as out:
        for f in sorted(Path(cache).rglob("*.parquet")):
            table = pq.read_table(f)
            c0 = time.process_time()
            with parquet_writer(Path(out) / "t.parquet", table.schema) as writer:
                for batch in table.to_batches(max_chunksize=10_000):
                    writer.write_table(pa.Table.from_batches([batch]))
            cpu += time.process_time() - c0
            rows += table.num_rows
    return {"cpu_s": cpu, "rows": rows}


def _prepare(capture: str, out: str) -> dict[str, Any]:
    """What ``run_replay`` does before sending: the workload (one pass: links, transforms checked,
    the source's identity), the recorder's facts. Then, apart, what sending adds per request: a
    sample of bodies read again from the capture and transformed, as the replay's read-ahead does."""
    from infertap.replay import ReplayConfig
    from infertap.replay.api import _prepare, _recorder
    from infertap.replay.transforms import Transforms

    config = ReplayConfig(capture, "http://127.0.0.1:9", out, probe=False, transforms=Transforms(set_values=[("temperature", 0)]))
    t0, c0 = time.perf_counter(), time.process_time()
    prepared = _prepare(config, config.target)
    t1 = time.perf_counter()
    _recorder(config, prepared)
    t2, c2 = time.perf_counter(), time.process_time()
    worker = resource.getrusage(resource.RUSAGE_CHILDREN)  # the replies' worker (replay/replies.py), joined by now
    peak = peak_rss_mib()  # before the bodies below
    middle = len(prepared.items) // 2  # in sending order, as the read-ahead reads them (a block read once for many)
    sample = range(middle, min(len(prepared.items), middle + _BODY_SAMPLE))
    sent = sum(len(prepared.bodies[i]) for i in sample)
    c3 = time.process_time()
    return {
        "s": t2 - t0,
        "cpu_s": c2 - c0 + worker.ru_utime + worker.ru_stime,  # both processes
        "worker_cpu_s": worker.ru_utime + worker.ru_stime,
        "prepare_s": t1 - t0,
        "identity_s": t2 - t1,
        "items": len(prepared.items),
        "linked": sum(item.parent is not None for item in prepared.items),
        "peak_rss_mib": peak,
        "body_us": (c3 - c2) / len(sample) * 1e6,  # CPU per body read again and transformed, at send time
        "body_bytes": sent / len(sample),
    }


_BODY_SAMPLE = 2000  # bodies read again to time the send side


def prepare_table(sizes: list[int], work: Path) -> list[dict[str, Any]]:
    """``--prepare-only``: replay's preparation alone, per size, side by side (no analysis phases)."""
    print(
        f"{'exchanges':>10} {'MiB':>7} {'prepare s':>9} {'cpu s':>7} {'cpu µs/exch':>11} {'peak MiB':>9} "
        f"{'linked':>9} {'send µs/body':>12}"
    )
    rows = []
    for n in sizes:
        capture = work / f"agent-{n}"
        if not capture.exists():
            build(capture, n)
        size = sum(f.stat().st_size for f in capture.iterdir())
        p = _run("prepare", str(capture), str(work / "replay-out"))
        rows.append({"exchanges": n, "capture_bytes": size, "prepare": p})
        print(
            f"{n:>10,} {size / 2**20:>7.1f} {p['s']:>9.1f} {p['cpu_s']:>7.1f} {p['cpu_s'] / n * 1e6:>11.0f} "
            f"{p['peak_rss_mib']:>9.0f} {p['linked']:>9,} {p['body_us']:>12.0f}",
            flush=True,
        )
    return rows


def _run(phase: str, *args: str) -> dict[str, Any]:
    """``phase`` in a fresh process: its result, wall time and peak memory."""
    cmd = [sys.executable, "-m", "bench.agent_scale", "--phase", phase, *args]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return {**json.loads(out.splitlines()[-1]), "wall_s": time.perf_counter() - t0}


def _adopt_orphans() -> None:
    """Become the parent of the command's orphans (Linux): its decode's workers are forked by a
    ``forkserver`` that outlives it, and their CPU would otherwise be counted by no one."""
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _reap_orphans() -> None:
    """Wait for every orphan adopted (the forkserver ends with the command), so that
    ``RUSAGE_CHILDREN`` holds their CPU and their workers'."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _phase_main(phase: str, args: list[str]) -> None:
    if phase == "floor":
        result = _floor(args[0])
    elif phase == "parse":
        result = _parse_floor(args[0])
    elif phase == "store":
        result = _store(args[0])
    elif phase == "prepare":
        result = _prepare(args[0], args[1])
    elif phase == "stats":
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "infertap", "stats", args[0], "--cache-dir", args[1], "--json"]
        _adopt_orphans()
        stats = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        _reap_orphans()
        child = resource.getrusage(resource.RUSAGE_CHILDREN)
        result = {
            "s": time.perf_counter() - t0,
            "cpu_s": child.ru_utime + child.ru_stime,  # the command's own, its decode included (one capture: in process)
            "workload": (stats.get("groups") or [{}])[0].get("workload", {}).get("identity"),
            "peak_rss_mib_child": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        }
    else:
        raise SystemExit(f"unknown phase {phase}")
    result.setdefault("peak_rss_mib", peak_rss_mib())
    print(json.dumps(result))


def measure(capture: Path, work: Path) -> dict[str, Any]:
    cache = work / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    floor = _run("floor", str(capture))
    parse = _run("parse", str(capture))
    stats = _run("stats", str(capture), str(cache))
    stats["warm"] = _run("stats", str(capture), str(cache))  # the same, decoded tables cached
    store = _run("store", str(cache))
    shutil.rmtree(cache, ignore_errors=True)
    prepare = _run("prepare", str(capture), str(work / "replay-out"))
    return {"floor": floor, "parse": parse, "stats": stats, "store": store, "prepare": prepare}


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--phase":
        _phase_main(sys.argv[2], sys.argv[3:])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,50000,100000", help="exchanges per capture, comma-separated")
    parser.add_argument("--huge", action="store_true", help="add a 1,000,000-exchange capture (minutes, GiBs)")
    parser.add_argument("--json", default="bench-agent-scale.json")
    parser.add_argument("--workdir", default=None, help="keep the captures here (reused when present)")
    parser.add_argument("--prepare-only", action="store_true", help="only replay's preparation (time, CPU, peak memory)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s] + ([1_000_000] if args.huge else [])
    work = Path(args.workdir or tempfile.mkdtemp(prefix="infertap-bench-"))
    if args.prepare_only:
        Path(args.json).write_text(json.dumps({"rows": prepare_table(sizes, work)}, indent=2))
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
        return
    rows = []
    # CPU seconds beside wall seconds: on a shared machine the CPU time is the steadier number, and
    # the ratio to the floor is taken on it.
    print(
        f"{'exchanges':>10} {'MiB':>6} {'floor s (cpu)':>14} {'parse cpu':>9} {'stats s (cpu)':>14} {'ratio':>6} "
        f"{'/parse':>6} {'warm cpu':>8} {'decode cpu':>10} {'ratio':>6} {'store cpu':>9} {'least':>6} {'ratio':>6} {'stats MiB':>10} "
        f"{'prepare s (cpu)':>16} {'load+transform':>15} {'identity':>9} {'prepare MiB':>12} {'linked':>8}"
    )
    for n in sizes:
        capture = work / f"agent-{n}"
        t0 = time.perf_counter()
        if not capture.exists():
            build(capture, n)
        build_s = time.perf_counter() - t0
        size = sum(f.stat().st_size for f in capture.iterdir())
        r = measure(capture, work)
        f, st, p = r["floor"], r["stats"], r["prepare"]
        row = {"exchanges": n, "capture_bytes": size, "build_s": build_s, **r, "ratio_cpu": st["cpu_s"] / f["cpu_s"]}
        row["parse_ratio_cpu"] = st["cpu_s"] / r["parse"]["cpu_s"]
        decode = st["cpu_s"] - st["warm"]["cpu_s"]
        row["decode_ratio_cpu"] = decode / f["cpu_s"]
        least = st["warm"]["cpu_s"] + r["parse"]["cpu_s"] + r["store"]["cpu_s"]
        row["least_cpu_s"], row["least_ratio_cpu"] = least, least / f["cpu_s"]
        rows.append(row)
        print(
            f"{n:>10,} {size / 2**20:>6.1f} {f['s']:>6.2f} ({f['cpu_s']:>5.2f}) {r['parse']['cpu_s']:>9.2f} "
            f"{st['s']:>6.1f} ({st['cpu_s']:>5.1f}) {row['ratio_cpu']:>5.1f}x {row['parse_ratio_cpu']:>5.1f}x "
            f"{st['warm']['cpu_s']:>8.2f} {decode:>10.2f} {row['decode_ratio_cpu']:>5.1f}x "
            f"{r['store']['cpu_s']:>9.2f} {least:>6.2f} {row['least_ratio_cpu']:>5.1f}x "
            f"{st['peak_rss_mib_child']:>10.0f} {p['s']:>7.1f} ({p['cpu_s']:>6.1f}) "
            f"{p['prepare_s']:>15.1f} {p['identity_s']:>9.1f} {p['peak_rss_mib']:>12.0f} {p['linked']:>8,}",
            flush=True,
        )
    per = [
        (row["exchanges"], row["stats"]["cpu_s"] / row["exchanges"] * 1e6, row["prepare"]["cpu_s"] / row["exchanges"] * 1e6)
        for row in rows
    ]
    print("CPU µs per exchange (stats, prepare): " + "; ".join(f"{n:,}: {a:.0f}, {b:.0f}" for n, a, b in per))
    result = {
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "python": platform.python_version(),
        },
        "rows": rows,
    }
    Path(args.json).write_text(json.dumps(result, indent=2))
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
