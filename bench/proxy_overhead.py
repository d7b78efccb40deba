"""What recording costs: direct vs ``infertap record`` (with and without telemetry) vs mitmdump (with and without infertap's addon) vs LiteLLM.

Side by side in one run, against a fast local upstream that streams OpenAI-format SSE (its own
process). Every row is measured from the same client (infertap's lean one, so the load generator
takes little of the CPU the rows compete for); results are given as added time and as ratios to
direct and to mitmdump, since these machines are noisy.

    python -m bench.proxy_overhead [--quick] [--json bench-proxy.json] [--litellm PATH] [--no-mitm]

Measures: time to first byte and to first token at concurrency 1 and 64 (p50/p99), inter-chunk
delay on 64 streams paced at 50 chunks/s, requests/s and chunks/s at saturation with the proxy's
CPU time per request and per chunk, its resident memory before and after saturation, infertap's
capture size per exchange and compression ratio, and the recorder's own event-loop lag over the
run (from its capture's footer). LiteLLM's proxy is a row when a ``litellm`` executable is found
(or given: ``python3.12 -m venv /opt/litellm && /opt/litellm/bin/pip install 'litellm[proxy]'``).
Memory over 100,000 requests is bench/soak.py's job.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from infertap.launch import free_port
from infertap.proxy.upstream import UpstreamClient

CLK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _wait(url: str, ready: str = "/v1/models") -> None:
    for _ in range(600):
        try:
            if httpx.get(url + ready, timeout=1, trust_env=False).status_code < 500:
                return
        except httpx.HTTPError:
            time.sleep(0.05)
    raise RuntimeError(f"{url} never answered")


class Target:
    def __init__(
        self,
        name: str,
        argv: list[str] | None,
        url: str,
        capture: Path | None = None,
        env: dict[str, str] | None = None,
        headers: list | None = None,
        ready: str = "/v1/models",
    ) -> None:
        self.name, self.url, self.capture, self.headers = name, url, capture, headers or _HEADERS
        env = {**os.environ, **(env or {})}
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env) if argv else None
        _wait(url, ready)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def stop(self) -> None:
        if self.proc:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


_PATH = b"/v1/chat/completions"
_HEADERS = [(b"content-type", b"application/json")]


def _body(**params: object) -> bytes:
    return json.dumps({"model": "bench", "messages": [{"role": "user", "content": "hi"}], "stream": True, **params}).encode()


async def _one(
    client: UpstreamClient, body: bytes, gaps: list[float] | None = None, headers: list = _HEADERS
) -> tuple[float, float, int]:
    t0 = time.perf_counter()
    ttft = None
    chunks = 0
    last = None
    r = await client.send("POST", _PATH, headers, body)
    ttfb = time.perf_counter() - t0
    try:
        async for chunk in r.aiter_raw():
            now = time.perf_counter()
            if ttft is None and b'"content"' in chunk:
                ttft = now - t0
            if gaps is not None and last is not None:
                gaps.append(now - last)
            last = now
            chunks += 1
    finally:
        await r.aclose()
    return ttfb * 1e3, (ttft or ttfb) * 1e3, chunks


# The load comes from infertap's own lean client (proxy/upstream.py), the same for every row: a
# heavier client (httpx) would take the CPU the rows compete for on a small machine.


async def latency(url: str, concurrency: int, n: int, headers: list = _HEADERS) -> dict[str, float]:
    body = _body(n_chunks=8)
    ttfb, ttft = [], []
    client = UpstreamClient(url, read_timeout=60)

    async def worker(k: int) -> None:
        for _ in range(k):
            b, t, _ = await _one(client, body, headers=headers)
            ttfb.append(b)
            ttft.append(t)

    await worker(5)  # warm the connections
    ttfb.clear(), ttft.clear()
    await asyncio.gather(*(worker(n // concurrency) for _ in range(concurrency)))
    await client.aclose()
    return {"ttfb_p50": _pct(ttfb, 0.5), "ttfb_p99": _pct(ttfb, 0.99), "ttft_p50": _pct(ttft, 0.5), "ttft_p99": _pct(ttft, 0.99)}


async def paced(url: str, streams: int, chunks: int, pace_ms: float, headers: list = _HEADERS) -> dict[str, float]:
    body = _body(n_chunks=chunks, pace_ms=pace_ms)
    gaps: list[float] = []
    client = UpstreamClient(url, read_timeout=120)
    results = await asyncio.gather(*(_one(client, body, gaps, headers) for _ in range(streams)))
    await client.aclose()
    held = sum(1 for _, _, c in results if c < chunks)  # a stream that got fewer chunk reads than sent may have had them merged
    return {"gap_p50_ms": _pct(gaps, 0.5) * 1e3, "gap_p99_ms": _pct(gaps, 0.99) * 1e3, "streams_with_merged_chunks": held}


async def saturate(
    url: str, pid: int | None, seconds: float, concurrency: int = 64, headers: list = _HEADERS
) -> dict[str, float]:
    body = _body(n_chunks=20)
    done = chunks_sent = 0
    stop = time.perf_counter() + seconds
    cpu0 = _cpu_s(pid) if pid else 0.0
    t0 = time.perf_counter()
    client = UpstreamClient(url, read_timeout=60)

    async def worker() -> None:
        nonlocal done, chunks_sent
        while time.perf_counter() < stop:
            await _one(client, body, headers=headers)
            done += 1
            chunks_sent += 21  # 20 events and [DONE]

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    await client.aclose()
    wall = time.perf_counter() - t0
    cpu = (_cpu_s(pid) - cpu0) if pid else float("nan")
    return {
        "requests_per_s": done / wall,
        "chunks_per_s": chunks_sent / wall,
        "requests": done,
        "cpu_us_per_request": cpu / done * 1e6 if pid else float("nan"),
        "cpu_us_per_chunk": cpu / chunks_sent * 1e6 if pid else float("nan"),
        "rss_mb": _rss_mb(pid) if pid else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer requests (a smoke run)")
    parser.add_argument("--json", default="bench-proxy.json")
    parser.add_argument("--no-mitm", action="store_true")
    parser.add_argument(
        "--litellm", default=shutil.which("litellm"), help="a litellm executable (its own venv: pip install 'litellm[proxy]')"
    )
    args = parser.parse_args()
    n1, n64, sat_s = (100, 640, 3.0) if args.quick else (400, 2560, 10.0)
    tmp = Path(tempfile.mkdtemp(prefix="infertap-bench-"))
    up_port = free_port()
    upstream = subprocess.Popen([sys.executable, "-m", "bench.upstream", "--port", str(up_port), "--chunks", "8", "--size", "8"])
    up = f"http://127.0.0.1:{up_port}"
    _wait(up)
    configs: list[dict[str, Any]] = [{"name": "direct", "argv": None}]
    # The recorder as users run it (telemetry sampled: the upstream's /metrics, GPUs, the host),
    # and without telemetry: the pair shows what sampling adds to the recorder's own cost.
    for name, extra, folder in (
        ("infertap record", [], "record"),
        ("infertap record --no-telemetry", ["--no-telemetry"], "record-no-telemetry"),
    ):
        p = free_port()
        configs.append(
            {
                "name": name,
                "capture": tmp / folder,
                "port": p,
                "argv": [
                    sys.executable,
                    "-m",
                    "infertap",
                    "record",
                    "--upstream",
                    up,
                    "--listen",
                    f"127.0.0.1:{p}",
                    "--out",
                    str(tmp / folder),
                    "--no-probe",
                    *extra,
                ],
            }
        )
    mitmdump = shutil.which("mitmdump") or str(Path(sys.executable).with_name("mitmdump"))
    if not args.no_mitm and Path(mitmdump).exists():
        base = [mitmdump, "-q", "--mode", f"reverse:{up}", "--set", "stream_large_bodies=1", "--set", "connection_strategy=lazy"]
        configs.append({"name": "mitmdump", "argv": [*base, "--listen-port", "{port}"]})
        addon = str(Path(__file__).resolve().parent.parent / "proxy" / "mitm_addon.py")
        configs.append(
            {
                "name": "mitmdump + infertap addon",
                "capture": tmp / "mitm",
                "argv": [*base, "--listen-port", "{port}", "-s", addon, "--set", f"infertap_out={tmp / 'mitm'}"],
            }
        )
    if args.litellm:
        # LiteLLM's proxy: an OpenAI-compatible gateway (re-parses and re-serializes each chunk).
        config = tmp / "litellm.yaml"
        config.write_text(
            f"model_list:\n  - model_name: bench\n    litellm_params:\n      model: openai/bench\n"
            f"      api_base: {up}/v1\n      api_key: none\n"
        )
        key = "sk-bench-0123456789abcdef"
        configs.append(
            {
                "name": "litellm proxy",
                "argv": [args.litellm, "--config", str(config), "--port", "{port}", "--num_workers", "1"],
                "env": {"LITELLM_MASTER_KEY": key, "LITELLM_LOG": "ERROR"},
                "ready": "/health/liveliness",
                "headers": [*_HEADERS, (b"authorization", f"Bearer {key}".encode())],
            }
        )
    rows = []
    try:
        for config in configs:
            name, argv, capture = config["name"], config["argv"], config.get("capture")
            if argv is None:
                target = Target(name, None, up)
            else:
                port = config.get("port") or free_port()
                argv = [a.replace("{port}", str(port)) for a in argv]
                target = Target(
                    name,
                    argv,
                    f"http://127.0.0.1:{port}",
                    capture,
                    config.get("env"),
                    config.get("headers"),
                    config.get("ready", "/v1/models"),
                )
            h = target.headers
            try:
                row = {"config": name}
                row.update({f"c1_{k}": v for k, v in asyncio.run(latency(target.url, 1, n1, h)).items()})
                row.update({f"c64_{k}": v for k, v in asyncio.run(latency(target.url, 64, n64, h)).items()})
                row.update({f"paced_{k}": v for k, v in asyncio.run(paced(target.url, 64, 50, 20.0, h)).items()})
                rss_before = _rss_mb(target.pid) if target.pid else float("nan")
                row.update(asyncio.run(saturate(target.url, target.pid, sat_s, headers=h)))
                row["rss_mb_before_saturation"] = rss_before
            finally:
                target.stop()
            if capture is not None and capture.exists():
                from infertap.capture.info import summarize

                s = summarize(capture)
                row["capture_bytes_per_exchange"] = s["bytes_on_disk"] / max(1, s["exchanges"])
                row["compression_ratio"] = s["body_bytes"] / max(1, s["bytes_on_disk"])
                lag = next(iter(s["loop_lag"].values()), None)  # the recorder's own event-loop lag, whole run
                if lag:
                    row["loop_lag_p99_at_most_ms"], row["loop_lag_max_ms"] = lag["p99_at_most_ms"], lag["max_ms"]
            rows.append(row)
            print(
                f"{name:30s} c1 ttft p50 {row['c1_ttft_p50']:.2f} p99 {row['c1_ttft_p99']:.2f} ms | c64 ttft p50 {row['c64_ttft_p50']:.2f} "
                f"p99 {row['c64_ttft_p99']:.2f} ms | paced gap p99 {row['paced_gap_p99_ms']:.2f} ms | {row['requests_per_s']:.0f} req/s "
                f"{row['chunks_per_s']:.0f} chunks/s | cpu {row['cpu_us_per_chunk']:.1f} us/chunk",
                flush=True,
            )
    finally:
        upstream.terminate()
        upstream.wait()
    direct = rows[0]
    for row in rows[1:]:
        for key in ("c1_ttft_p50", "c1_ttft_p99", "c64_ttft_p50", "c64_ttft_p99", "c1_ttfb_p50", "c1_ttfb_p99"):
            row[f"added_{key}_ms"] = row[key] - direct[key]
        row["added_paced_gap_p99_ms"] = row["paced_gap_p99_ms"] - direct["paced_gap_p99_ms"]
        row["throughput_ratio_to_direct"] = row["requests_per_s"] / direct["requests_per_s"]
    mitm = next((r for r in rows if r["config"] == "mitmdump"), None)
    for row in rows[1:]:
        if mitm is not None:
            row["throughput_ratio_to_mitmdump"] = row["requests_per_s"] / mitm["requests_per_s"]
            row["cpu_per_chunk_ratio_to_mitmdump"] = row["cpu_us_per_chunk"] / mitm["cpu_us_per_chunk"]
    on = next((r for r in rows if r["config"] == "infertap record"), None)
    off = next((r for r in rows if r["config"] == "infertap record --no-telemetry"), None)
    if on is not None and off is not None:  # telemetry's share of the recorder's cost
        on["telemetry"] = {
            "added_c1_ttft_p50_ms": on["c1_ttft_p50"] - off["c1_ttft_p50"],
            "added_c64_ttft_p99_ms": on["c64_ttft_p99"] - off["c64_ttft_p99"],
            "added_paced_gap_p99_ms": on["paced_gap_p99_ms"] - off["paced_gap_p99_ms"],
            "throughput_ratio_to_no_telemetry": on["requests_per_s"] / off["requests_per_s"],
            "cpu_per_chunk_ratio_to_no_telemetry": on["cpu_us_per_chunk"] / off["cpu_us_per_chunk"],
            "rss_mb_added": on["rss_mb"] - off["rss_mb"],
        }
    print("\nadded to direct (ms): ttft c1 p50/p99, c64 p50/p99; paced gap p99; throughput ratio")
    for row in rows[1:]:
        print(
            f"  {row['config']:30s} {row['added_c1_ttft_p50_ms']:+.2f} / {row['added_c1_ttft_p99_ms']:+.2f}   "
            f"{row['added_c64_ttft_p50_ms']:+.2f} / {row['added_c64_ttft_p99_ms']:+.2f}   {row['added_paced_gap_p99_ms']:+.2f}   "
            f"{row['throughput_ratio_to_direct']:.2f}x"
            + (
                f" ({row['throughput_ratio_to_mitmdump']:.2f}x mitmdump, CPU/chunk {row['cpu_per_chunk_ratio_to_mitmdump']:.2f}x)"
                if "throughput_ratio_to_mitmdump" in row
                else ""
            ),
            flush=True,
        )
    if on is not None and "telemetry" in on:
        t = on["telemetry"]
        print(
            f"\ntelemetry on vs --no-telemetry: ttft c1 p50 {t['added_c1_ttft_p50_ms']:+.2f} ms, c64 p99 {t['added_c64_ttft_p99_ms']:+.2f} ms, "
            f"paced gap p99 {t['added_paced_gap_p99_ms']:+.2f} ms; throughput {t['throughput_ratio_to_no_telemetry']:.2f}x, "
            f"CPU/chunk {t['cpu_per_chunk_ratio_to_no_telemetry']:.2f}x, RSS {t['rss_mb_added']:+.0f} MiB",
            flush=True,
        )
    for row in rows:
        if "compression_ratio" in row:
            lag = (
                f", recorder loop lag p99 <= {row['loop_lag_p99_at_most_ms']} ms, max {row['loop_lag_max_ms']:.1f} ms"
                if "loop_lag_max_ms" in row
                else ""
            )
            print(
                f"  {row['config']:30s} capture {row['capture_bytes_per_exchange']:.0f} B/exchange, {row['compression_ratio']:.1f}x smaller "
                f"than the bodies; RSS {row['rss_mb_before_saturation']:.0f} -> {row['rss_mb']:.0f} MiB{lag}"
            )
    result = {
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "os": f"{platform.system()} {platform.release()}",
        },
        "quick": args.quick,
        "rows": rows,
    }
    Path(args.json).write_text(json.dumps(result, indent=2))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
