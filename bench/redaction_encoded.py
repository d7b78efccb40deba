"""What recording an exchange whose redaction's cost its size doesn't show costs the recorder's
event loop: a small compressed request body that decodes to many MiB, and a large plain response
that repeats a credential of its request.

    python -m bench.redaction_encoded [--mib 48] [--json bench-redaction-encoded.json]

Each exchange is handed to ``Scrubbed`` with the real ``Redactor`` as the proxy hands it
(``request=True``, the credentials its headers held in ``found``) while a ticker on the same loop
sleeps 1 ms at a time; it reports the ticker's lateness (worst and median), the thread the request
body was redacted on, and that the key is gone from what was written.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import random
import statistics
import threading
import time
from typing import Any

from bench.loop_ticker import ticking
from infertap.capture.records import Exchange, new_exchange
from infertap.capture.redact import Redactor
from infertap.capture.scrubbing import Scrubbed

MIB = 1 << 20
KEY = "sk-abcdefgh12345678"


def chat(mib: float, repeat: int) -> bytes:
    """A chat body of about ``mib`` MiB with an ``api_key``: messages of ``repeat`` words and a
    random tag each, so that gzip shrinks it by about ``repeat`` / 2 (300: to about 300 KiB at 48 MiB)."""
    rnd, messages, size = random.Random(1), [], 0
    while size < mib * MIB:
        content = "word " * repeat + f"{rnd.getrandbits(32):08x}"
        messages.append({"role": "user", "content": content})
        size += len(content) + 36
    return json.dumps({"model": "m", "messages": messages, "api_key": KEY}).encode()


def gzip_request(mib: float, repeat: int) -> tuple[Exchange, set[str]]:
    raw = gzip.compress(chat(mib, repeat), 6)
    headers = [["content-type", "application/json"], ["content-encoding", "gzip"]]
    record = new_exchange(method="POST", path="/v1/chat/completions", upstream="u", wall=0.0, start_ns=0)
    record.update({"request_headers": headers, "request_body": raw, "status": 200, "chunks": [b"{}"], "chunk_ns": [1]})
    return record, set()


def echoed_response(mib: float) -> tuple[Exchange, set[str]]:
    """A small request whose Authorization held ``KEY``, answered by an error quoting a huge body with it."""
    record = new_exchange(method="POST", path="/v1/chat/completions", upstream="u", wall=0.0, start_ns=0)
    quoted = chat(mib, 300).replace(KEY.encode(), b"x") + KEY.encode()
    record.update(
        {
            "request_headers": [["content-type", "application/json"], ["authorization", "Bearer [REDACTED]"]],
            "request_body": b'{"model": "m"}',
            "status": 400,
            "chunks": [b"bad request: " + quoted[i : i + MIB] for i in range(0, len(quoted), MIB)],
            "chunk_ns": list(range(1, len(quoted) // MIB + 2)),
        }
    )
    return record, {KEY}


async def lag_while_recorded(record: Exchange, found: set[str]) -> dict[str, Any]:
    """The loop's lateness waking from 1 ms sleeps while ``record`` is scrubbed and written."""
    threads: list[threading.Thread] = []

    class Watched(Redactor):
        def request(self, record: Any, found: set[str] | None = None) -> None:
            threads.append(threading.current_thread())
            super().request(record, found)

    written: list[Exchange] = []
    scrubbed = Scrubbed(Watched(), written.append)
    lags: list[float] = []
    async with ticking(lags, settle_s=0.02):
        t = time.perf_counter()
        scrubbed.record(record, found, request=True)
        await scrubbed.drained()
        took = time.perf_counter() - t
        await asyncio.sleep(0.01)
    text = (written[0]["request_body"] + b"".join(written[0]["chunks"])) if written else b""
    return {
        "loop_lag_max_ms": round(max(lags), 2),
        "loop_lag_p50_ms": round(statistics.median(lags), 3),
        "scrub_ms": round(took * 1000, 1),
        "redacted_on": "loop" if threads and threads[0] is threading.current_thread() else "worker thread",
        "key_gone": bool(written) and KEY.encode() not in text,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, default=48.0)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    rows = []
    cases = [
        ("gzip request, repeat 300", lambda: gzip_request(args.mib, 300)),
        ("gzip request, repeat 1000", lambda: gzip_request(args.mib, 1000)),
        ("plain response repeating the key", lambda: echoed_response(args.mib)),
    ]
    for name, make in cases:
        record, found = make()
        sizes = {
            "request_kib": round(len(record["request_body"]) / 1024),
            "response_mib": round(sum(map(len, record["chunks"])) / MIB, 1),
        }
        row = {"case": name, **sizes, **asyncio.run(lag_while_recorded(record, found))}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
