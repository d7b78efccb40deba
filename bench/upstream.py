"""A fast local upstream that streams OpenAI-format SSE, for benchmarks (not an engine).

``python -m bench.upstream --port 9100 --chunks 20 --size 16 --pace-ms 0``: every POST to a
``*/completions`` path streams ``chunks`` events of about ``size`` content characters, ``pace-ms``
apart, then a finish reason and ``[DONE]``, as an engine ends a whole answer; a request body may
override them with ``n_chunks``/``pace_ms``, and asks for a usage chunk before ``[DONE]`` with
``stream_options.include_usage`` (none otherwise, as llama.cpp's clients mostly get). Other paths answer a small JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import uvicorn

DONE = b"data: [DONE]\n\n"
#: How every engine ends a whole answer: a chunk with its finish reason, then [DONE] (sent together,
#: as one body part: a benchmark's chunk count and gaps are the content's). A stream without it is
#: an answer the engine cut, and a replay counts it unfinished.
FINISH = (
    b'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":0,"model":"bench",'
    b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n' + DONE
)


def make_app(chunks: int, size: int, pace_ms: float) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                await send({"type": message["type"] + ".complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        parts = []  # joined once: a body of many MiB, added to piece by piece, is copied quadratically
        while True:
            message = await receive()
            parts.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(parts)
        if scope["method"] != "POST" or not scope["path"].endswith("completions"):
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": b'{"object": "list", "data": [{"id": "bench"}]}'})
            return
        params = json.loads(body) if body[:1] == b"{" and len(body) < 1 << 20 else {}  # a large one: the defaults
        n = int(params.get("n_chunks", chunks))
        pace = float(params.get("pace_ms", pace_ms)) / 1000
        text = "x" * size
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
            }
        )
        for _ in range(n):
            event = {
                "id": "chatcmpl-bench",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "bench",
                "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
            }
            await send(
                {"type": "http.response.body", "body": b"data: " + json.dumps(event).encode() + b"\n\n", "more_body": True}
            )
            if pace:
                await asyncio.sleep(pace)
        usage = b""
        if (params.get("stream_options") or {}).get("include_usage"):  # as an engine asked for it: a usage chunk
            counts = {"prompt_tokens": 1, "completion_tokens": n, "total_tokens": n + 1}
            chunk = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0, "model": "bench", "choices": []}
            usage = b"data: " + json.dumps({**chunk, "usage": counts}).encode() + b"\n\n"
        await send({"type": "http.response.body", "body": FINISH[: -len(DONE)] + usage + DONE})

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9100)
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--size", type=int, default=16)
    parser.add_argument("--pace-ms", type=float, default=0.0)
    args = parser.parse_args()
    uvicorn.run(
        make_app(args.chunks, args.size, args.pace_ms),
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
        timeout_keep_alive=60,
        backlog=4096,
    )


if __name__ == "__main__":
    main()
