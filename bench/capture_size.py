"""Capture size on a real engine's traffic: bytes per exchange and the ratio to the raw bytes.

A real session, not a synthetic one: ``infertap record`` in front of llama.cpp's ``llama-server``
on the embedded SmolLM2 model, streamed chat requests with varied prompts at a few concurrent
clients, so exchanges end at an engine's pace (mostly one per capture frame). Reported side by
side from the same records: the capture as written (frames gathered for 5 ms, the run's
dictionary after its first MiB), and each exchange compressed alone without a dictionary (what a
frame holding one exchange costs without the dictionary).

    python -m bench.capture_size [--requests 300] [--concurrency 4] [--max-tokens 48] [--json bench-capture.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import msgpack
import zstandard

from infertap.capture.framing import HEAD_SIZE
from infertap.capture.info import summarize
from infertap.capture.reader import CaptureReader
from infertap.launch import llama_server, recorder
from infertap.proxy.upstream import UpstreamClient

_TOPICS = ["the sea", "a library", "rain", "trains", "bread", "a city at night", "mountains", "a garden", "winter", "music"]
_ASKS = [
    "Write two sentences about {}.",
    "List three facts about {}.",
    "Describe {} to a child.",
    "Give a short poem on {}.",
    "What is {} like in the morning?",
    "Name four words linked to {}.",
]


async def _drive(url: str, n: int, concurrency: int, max_tokens: int) -> int:
    client = UpstreamClient(url, read_timeout=120)
    next_i = 0
    done = 0

    async def worker() -> None:
        nonlocal next_i, done
        while next_i < n:
            i = next_i
            next_i += 1
            prompt = _ASKS[i % len(_ASKS)].format(_TOPICS[(i // len(_ASKS)) % len(_TOPICS)]) + f" (#{i})"
            body = json.dumps(
                {
                    "model": "smollm2",
                    "messages": [{"role": "user", "content": prompt}],
                    "stream": True,
                    "max_tokens": max_tokens,
                    "temperature": 0.8,
                    "seed": i,
                }
            ).encode()
            r = await client.send("POST", b"/v1/chat/completions", [(b"content-type", b"application/json")], body)
            async for _ in r.aiter_raw():
                pass
            await r.aclose()
            done += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    await client.aclose()
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--json", default="bench-capture.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "session"
        with llama_server(log_dir=Path(tmp)) as engine, recorder(engine.url, out, extra_args=["--no-probe"]) as rec:
            t0 = time.perf_counter()
            sent = asyncio.run(_drive(rec.url, args.requests, args.concurrency, args.max_tokens))
            wall = time.perf_counter() - t0
        info = summarize(out)
        exchanges = [r for r in CaptureReader(out).records() if r["type"] == "exchange"]
        raw = sum(len(r["request_body"]) + sum(len(c) for c in r["chunks"]) for r in exchanges)
        compressor = zstandard.ZstdCompressor(level=3, write_checksum=True)
        alone = sum(HEAD_SIZE + len(compressor.compress(msgpack.packb(r, use_bin_type=True))) for r in exchanges)
    result = {
        "requests": sent,
        "wall_s": wall,
        "exchanges": len(exchanges),
        "raw_bytes": raw,
        "records": info["records"],
        "capture_bytes": info["bytes_on_disk"],
        "capture_ratio": raw / info["bytes_on_disk"],
        "capture_bytes_per_exchange": info["bytes_on_disk"] / len(exchanges),
        "alone_bytes": alone,
        "alone_ratio": raw / alone,
        "alone_bytes_per_exchange": alone / len(exchanges),
    }
    Path(args.json).write_text(json.dumps(result, indent=2))
    print(
        f"{sent} streamed requests to llama-server through infertap record in {wall:.0f} s ({sent / wall:.1f}/s, concurrency "
        f"{args.concurrency}); request + response bytes {raw:,}"
    )
    print(
        f"  capture as written:                 {info['bytes_on_disk']:>10,} bytes, {result['capture_bytes_per_exchange']:6.0f} "
        f"B/exchange, {result['capture_ratio']:.1f}x smaller than the raw bytes (records: {info['records']})"
    )
    print(
        f"  each exchange alone, no dictionary: {alone:>10,} bytes, {result['alone_bytes_per_exchange']:6.0f} B/exchange, "
        f"{result['alone_ratio']:.1f}x"
    )


if __name__ == "__main__":
    main()
