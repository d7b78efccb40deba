"""A small fake engine for what a real one can't be made to do on demand: fast load, resets, hangs.

It speaks just enough OpenAI-style SSE. Every behaviour is chosen by path, so a test reads as
what it exercises. Runs on uvicorn in a thread on a real socket (in-process test clients buffer).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import json
import socket
import threading
import time
import zlib
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import uvicorn

from infertap.proxy.server import bind
from tests import sdk_shapes


async def lifespan(receive: Any, send: Any) -> None:
    """Answer an ASGI lifespan: these apps hold nothing to start or stop."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


@contextlib.contextmanager
def raw_upstream(answer: Callable[[socket.socket, bytes], None]) -> Iterator[str]:
    """A raw HTTP/1.1 upstream of one connection, for what an ASGI server can't send (an interim
    response, an answer before the request's body is in): reads a request's head, then hands the
    connection and the bytes read so far to ``answer``. Yields its URL."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        with server.accept()[0] as conn:
            head = b""
            while b"\r\n\r\n" not in head:
                head += conn.recv(65536)
            answer(conn, head)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        thread.join(10)
        server.close()


def sse_upstream(chunks: list[bytes], before_end: Callable[[], Awaitable[None]] | None = None) -> Any:
    """An ASGI upstream answering every request with these event-stream chunks, each sent alone, its
    body ended after ``before_end`` returns (where a test holds the end back)."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await lifespan(receive, send)
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        for chunk in chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        if before_end is not None:
            await before_end()
        await send({"type": "http.response.body", "body": b""})

    return app


async def read_body(receive: Any) -> bytes:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


def sse_chunk(tag: str, i: int, text: str, choice: int = 0) -> bytes:
    return _chat_chunk(tag, [{"index": choice, "delta": {"content": text}, "finish_reason": None}])


def _chat_chunk(tag: str, choices: list[Any], **extra: Any) -> bytes:
    return _data(sdk_shapes.chat_chunk(_chunk_body(tag, choices, **extra)))


def _odd_chat_chunk(tag: str, choices: list[Any]) -> bytes:
    """A chunk the SDK refuses on purpose: vLLM's failed choice (``finish_reason: "error"`` and an ``error``),
    or a finish reason the test names (an engine's own)."""
    return _data(_chunk_body(tag, choices))


def _chunk_body(tag: str, choices: list[Any], **extra: Any) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{tag}",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "fake",
        "choices": choices,
        **extra,
    }


def _data(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def _event(kind: str, data: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + json.dumps(data).encode() + b"\n\n"


def _message_event(data: dict[str, Any]) -> bytes:
    return _event(data["type"], sdk_shapes.message_event(data))


def _response_event(data: dict[str, Any]) -> bytes:
    return _event(data["type"], sdk_shapes.response_event(data))


_CHAT_FINISHES = ("stop", "length", "tool_calls", "content_filter", "function_call")


def _texts(params: dict[str, Any], tag: str, n: int) -> list[str]:
    """An answer's pieces of text: ``texts`` where the request names them, else ``n`` of its own."""
    texts = params.get("texts")
    return [str(t) for t in texts] if isinstance(texts, list) else [f"{tag}:{i} " for i in range(n)]


def _error_data(tag: str) -> bytes:
    """vLLM's in-band error: an SSE event holding its error body (llama.cpp's is the same but for ``param``)."""
    error = {"message": f"fake engine error {tag}", "type": "InternalServerError", "param": None, "code": 500}
    return b"data: " + json.dumps(sdk_shapes.vllm_error({"error": error})).encode() + b"\n\n"


def _completion_chunk(tag: str, text: str, finish: str | None) -> bytes:
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
    payload = {"id": f"cmpl-{tag}", "object": "text_completion", "created": 0, "model": "fake", "choices": [choice]}
    return b"data: " + json.dumps(sdk_shapes.completion_chunk(payload)).encode() + b"\n\n"


def _ollama_line(path: str, text: str, extra: dict[str, Any]) -> bytes:
    said = {"message": {"role": "assistant", "content": text}} if path == "/api/chat" else {"response": text}
    return json.dumps({"model": "fake", "created_at": "2026-01-01T00:00:00Z", **said, **extra}).encode() + b"\n"


class FakeUpstream:
    def __init__(self) -> None:
        self.cancelled: list[str] = []  # tags of streams that saw their client go away
        self.requests: list[dict[str, Any]] = []
        self.completed: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.big_sent = 0
        self.metrics_asked = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await lifespan(receive, send)
        if scope["path"] == "/metrics":  # infertap's telemetry asking: no Prometheus here, as most engines
            self.metrics_asked += 1
            await send({"type": "http.response.start", "status": 404, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await self._handle(scope, receive, send)
        finally:
            self.in_flight -= 1

    async def _handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = await read_body(receive)
        path = scope["path"]
        self.requests.append(
            {
                "path": path,
                "raw_path": scope.get("raw_path"),
                "headers": scope["headers"],
                "query": scope["query_string"],
                "body": body,
                "at": time.monotonic(),
            }
        )
        try:
            params = json.loads(body) if body[:1] == b"{" else {}
        except ValueError:
            params = {}
        tag = str(params.get("tag", "x"))
        n = int(params.get("n_chunks", 20))
        pace = float(params.get("pace_ms", 0)) / 1000

        async def start(status: int = 200, ctype: bytes = b"text/event-stream", extra: list | None = None) -> None:
            headers = [(b"content-type", ctype), (b"cache-control", b"no-cache")] + (extra or [])
            if params.get("close"):  # the upstream ends its connection after this answer
                headers.append((b"connection", b"close"))
            await send({"type": "http.response.start", "status": status, "headers": headers})

        async def chunk(data: bytes, more: bool = True) -> None:
            await send({"type": "http.response.body", "body": data, "more_body": more})

        if path == "/echo-body":  # the request's body repeated as it came, as an error message may quote it
            await start(400, b"text/plain", [])
            await chunk(b"bad request: " + body, more=False)
        elif path == "/echo":
            out = {
                "headers": [[n.decode("latin-1"), v.decode("latin-1")] for n, v in scope["headers"]],
                "query": scope["query_string"].decode("latin-1"),
                "body_b64": base64.b64encode(body).decode(),
            }
            await start(200, b"application/json", [(b"set-cookie", b"session=upstream-secret-cookie")])
            await chunk(json.dumps(out).encode(), more=False)
        elif path == "/v1/chat/completions" and params.get("html"):  # a gateway's page, 200: no answer at all
            await start(200, b"text/html")
            await chunk(b"<html><body>Service temporarily overloaded</body></html>", more=False)
        elif path == "/v1/chat/completions" and not params.get("stream", True) and params.get("error_body"):
            await start(200, b"application/json")  # an error object answered 200, as an overloaded gateway may
            error = {"message": f"fake overloaded {tag}", "type": "server_error", "param": None, "code": None}
            await chunk(json.dumps(sdk_shapes.openai_error({"error": error})).encode(), more=False)
        elif path == "/v1/chat/completions" and not params.get("stream", True):
            await asyncio.sleep(pace)
            reply = {
                "id": f"chatcmpl-{tag}",
                "object": "chat.completion",
                "created": 0,
                "model": params.get("model", "fake"),
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": f"reply to {tag}"}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
            }
            await start(200, b"application/json")
            await chunk(json.dumps(sdk_shapes.chat_completion(reply)).encode(), more=False)
            self.completed.append(tag)
        elif path == "/v1/chat/completions":
            await start()
            answers = max(int(params.get("n", 1)), 1)  # n > 1: each choice's deltas in chunks of their own, in turn
            for i, text in enumerate(_texts(params, tag, n)):
                for k in range(answers):
                    await chunk(sse_chunk(tag, i, text, k))
                if i == params.get("error_at"):  # an error chunk mid-stream, the answer going on after it
                    await chunk(_error_data(tag))
                if pace:
                    await asyncio.sleep(pace)
            if (params.get("stream_options") or {}).get("include_usage"):  # OpenAI's last two chunks
                await chunk(_chat_chunk(tag, [{"index": 0, "delta": {}, "finish_reason": "length"}]))
                usage = {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": 5 + n}
                await chunk(_chat_chunk(tag, [], usage=usage))
            elif params.get("error_chunk"):  # vLLM's in-band error: an error object in place of the finish, then [DONE]
                await chunk(_error_data(tag))
            elif not params.get("no_finish"):  # every engine ends a whole answer with its finish reason
                for k in range(answers):
                    if k == params.get("error_choice"):  # that choice failed: its finish reason error, and why
                        error = {"message": f"fake choice error {tag}"}
                        await chunk(_odd_chat_chunk(tag, [{"index": k, "delta": {}, "finish_reason": "error", "error": error}]))
                    elif k != params.get("cut_choice"):  # that choice left with none: an engine that dropped it
                        finish = params.get("finish", "stop")
                        ends = _chat_chunk if finish in _CHAT_FINISHES else _odd_chat_chunk  # an engine's own reason
                        await chunk(ends(tag, [{"index": k, "delta": {}, "finish_reason": finish}]))
            # no_done: the body closed cleanly with no end marker (a server that dropped the request)
            await chunk(b"" if params.get("no_done") else b"data: [DONE]\n\n", more=False)
            self.completed.append(tag)
        elif path == "/v1/messages":  # the Messages API, streamed: the prompt's usage first, the output's last
            await start()
            usage = {"input_tokens": 5, "cache_read_input_tokens": 2, "cache_creation_input_tokens": 1, "output_tokens": 1}
            message = {"id": f"msg_{tag}", "type": "message", "role": "assistant", "model": params.get("model", "fake"),
                       "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}  # fmt: skip
            await chunk(_message_event({"type": "message_start", "message": message}))
            start_block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
            await chunk(_message_event(start_block))
            for i, text in enumerate(_texts(params, tag, n)):
                delta = {"type": "text_delta", "text": text}
                await chunk(_message_event({"type": "content_block_delta", "index": 0, "delta": delta}))
                if i == params.get("error_at"):  # an error event mid-stream, the answer going on after it
                    error = {"type": "error", "error": {"type": "overloaded_error", "message": f"Overloaded {tag}"}}
                    await chunk(_event("error", sdk_shapes.anthropic_error(error)))
            if params.get("error_event"):  # Anthropic's in-band error (overloaded mid-stream): the stream's last event
                error = {"type": "error", "error": {"type": "overloaded_error", "message": f"Overloaded {tag}"}}
                await chunk(_event("error", sdk_shapes.anthropic_error(error)), more=False)
                self.completed.append(tag)
                return
            await chunk(_message_event({"type": "content_block_stop", "index": 0}))
            end = {
                "type": "message_delta",
                "delta": {"stop_reason": "max_tokens", "stop_sequence": None},
                "usage": {"output_tokens": n},
            }
            await chunk(_message_event(end))
            await chunk(_message_event({"type": "message_stop"}), more=False)
            self.completed.append(tag)
        elif path == "/v1/completions":  # the completions API, streamed: text per choice, the finish, [DONE]
            await start()
            for i, text in enumerate(_texts(params, tag, n)):
                await chunk(_completion_chunk(tag, text, None))
                if i == params.get("error_at"):
                    await chunk(_error_data(tag))
            await chunk(_completion_chunk(tag, "", "stop"))
            await chunk(b"data: [DONE]\n\n", more=False)
            self.completed.append(tag)
        elif path in ("/api/chat", "/api/generate"):  # Ollama's own API: NDJSON lines, the last one done
            await start(200, b"application/x-ndjson")
            for i, text in enumerate(_texts(params, tag, n)):
                await chunk(_ollama_line(path, text, {"done": False}))
                if i == params.get("error_at"):  # Ollama's in-band error: a line of its own
                    await chunk(json.dumps(sdk_shapes.string_error({"error": f"fake ollama error {tag}"})).encode() + b"\n")
            end = {"done": True, "done_reason": "stop", "prompt_eval_count": 5, "eval_count": n}
            await chunk(_ollama_line(path, "", end), more=False)
            self.completed.append(tag)
        elif path == "/completion":  # llama.cpp's own route: content per event, the last one stop
            await start()
            for i, text in enumerate(_texts(params, tag, n)):
                await chunk(b"data: " + json.dumps({"content": text, "stop": False}).encode() + b"\n\n")
                if i == params.get("error_at"):
                    await chunk(_error_data(tag))
            end = {"content": "", "stop": True, "stop_type": "eos", "tokens_evaluated": 5, "tokens_predicted": n}
            await chunk(b"data: " + json.dumps(end).encode() + b"\n\n", more=False)
            self.completed.append(tag)
        elif path == "/v1/responses":  # the Responses API: the answer's id comes first, as OpenAI sends it
            await self._responses(params, tag, n, start, chunk)
        elif path == "/reset":
            await start()
            for i in range(3):
                await chunk(sse_chunk(tag, i, "partial "))
            raise ConnectionResetError("fake upstream: reset mid-stream")
        elif path == "/hang-headers":
            await asyncio.sleep(3600)
        elif path == "/hang-body":
            await start()
            await chunk(sse_chunk(tag, 0, "first "))
            await asyncio.sleep(3600)
        elif path == "/slow":
            await start()
            try:
                for i in range(10_000):
                    await chunk(sse_chunk(tag, i, "tick "))
                    await asyncio.sleep(0.02)
                    if await _disconnected(receive):
                        self.cancelled.append(tag)
                        return
            except asyncio.CancelledError:
                self.cancelled.append(tag)
                raise
        elif path == "/gzip":
            data = gzip.compress(json.dumps({"choices": [{"index": 0, "message": {"content": "zipped"}}]}).encode())
            await start(200, b"application/json", [(b"content-encoding", b"gzip"), (b"content-length", str(len(data)).encode())])
            await chunk(data, more=False)
        elif path == "/bomb":  # a compression bomb: a few KiB of zstd or gzip that inflate to ``mib`` MiB of zeros
            data = bomb(str(params.get("encoding", "zstd")), int(params.get("mib", 65)))
            await start(200, b"application/json", [(b"content-encoding", params.get("encoding", "zstd").encode())])
            await chunk(data, more=False)
        elif path == "/html500":
            await start(500, b"text/html")
            await chunk(b"<html><body><h1>500 Internal Server Error</h1></body></html>", more=False)
        elif path == "/malformed":
            await start()
            await chunk(b"data: {not json\n\n")
            await chunk(b"garbage line without a field\n\n")
            await chunk(b"data: \xff\xfe invalid utf-8 \xc3\x28\n\n")
            await chunk(b'data: {"choices": [{"index": 0, "delta": {"content": "ok"}}]}\n\n', more=False)
        elif path == "/big":
            block = b"x" * 65536
            await start(200, b"application/octet-stream")
            for _ in range(int(params.get("blocks", 160)) - 1):
                await chunk(block)
                self.big_sent += len(block)  # how far the server got: it waits while its client doesn't read
            await chunk(block, more=False)
            self.big_sent += len(block)
        elif path.startswith("/status/"):
            code = int(path.rsplit("/", 1)[1])
            await start(code, b"application/json", [(b"set-cookie", b"session=upstream-secret-cookie")])
            error = {"code": code, "message": f"fake {code}", "type": "server_error"}  # llama.cpp's
            await chunk(json.dumps(sdk_shapes.llamacpp_error({"error": error})).encode(), more=False)
        else:
            await start(404, b"application/json")
            await chunk(json.dumps(sdk_shapes.string_error({"error": "not found"})).encode(), more=False)

    async def _responses(self, params: dict[str, Any], tag: str, n: int, start: Any, chunk: Any) -> None:
        """A Responses API answer of ``n`` pieces of text, id ``resp_<tag>_<k>`` (the k-th request):
        streamed (``response.created`` first), or one JSON body sent in pieces of ``piece_bytes``."""
        rid = f"resp_{tag}_{len(self.requests)}"
        text = "".join(_texts(params, tag, n))
        output = [{"type": "message", "id": f"msg_{tag}", "role": "assistant", "status": "completed",
                   "content": [{"type": "output_text", "text": text, "annotations": []}]}]  # fmt: skip
        head = {"id": rid, "object": "response", "model": params.get("model", "fake"), **sdk_shapes.RESPONSE_REST}
        done = {**head, "status": "completed", "output": output}
        final = "response.completed"
        if params.get("status") == "failed":  # a failed response: streamed with why, sent whole with no error object
            done = {**head, "status": "failed", "output": []}
            final = "response.failed"
            if params.get("stream"):
                done["error"] = {"code": "server_error", "message": f"fake failure {tag}"}
        if params.get("stream"):
            await start()
            seq = iter(range(1_000_000))  # each event's sequence_number, as OpenAI numbers them
            created = {"type": "response.created", "response": {**head, "status": "in_progress", "output": []}}
            await chunk(_response_event({**created, "sequence_number": next(seq)}))
            for i, piece in enumerate(_texts(params, tag, n)):
                delta = {"type": "response.output_text.delta", "item_id": f"msg_{tag}", "output_index": 0,
                         "content_index": 0, "delta": piece, "logprobs": []}  # fmt: skip
                await chunk(_response_event({**delta, "sequence_number": next(seq)}))
                if i == params.get("error_at"):  # an error event mid-stream, the answer going on after it
                    error = {"type": "error", "code": "server_error", "message": f"fake error {tag}", "param": None}
                    await chunk(_response_event({**error, "sequence_number": next(seq)}))
                if i == params.get("failed_at"):  # a failed response mid-stream, a completed one after it
                    error = {"code": "server_error", "message": f"fake failure {tag}"}
                    failed = {**head, "status": "failed", "output": [], "error": error}
                    await chunk(_response_event({"type": "response.failed", "response": failed, "sequence_number": next(seq)}))
            ended = _response_event({"type": final, "response": sdk_shapes.response(done), "sequence_number": next(seq)})
            await chunk(ended, more=False)
        else:
            data = json.dumps(sdk_shapes.response(done)).encode()
            piece = int(params.get("piece_bytes", len(data)))
            await start(200, b"application/json")
            for k in range(0, len(data), piece):
                await chunk(data[k : k + piece], more=k + piece < len(data))
        self.completed.append(tag)


def bomb(encoding: str, mib: int) -> bytes:
    """``mib`` MiB of zeros compressed a MiB at a time (never held whole)."""
    zeros = b"\0" * (1 << 20)
    if encoding == "zstd":
        import zstandard

        z = zstandard.ZstdCompressor().compressobj()
        return b"".join(z.compress(zeros) for _ in range(mib)) + z.flush()
    g = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
    return b"".join(g.compress(zeros) for _ in range(mib)) + g.flush()


async def _disconnected(receive: Any) -> bool:
    # uvicorn's receive() blocks until disconnect once the body is read; poll it briefly.
    try:
        message = await asyncio.wait_for(receive(), timeout=0.001)
    except TimeoutError:
        return False
    return message["type"] == "http.disconnect"


class ServerThread:
    """uvicorn serving an ASGI app from a thread, on a real loopback socket."""

    def __init__(
        self, app: Any, *, certfile: str | None = None, keyfile: str | None = None, http: Any = "auto", ws: str = "auto"
    ) -> None:
        self.sock = bind("127.0.0.1", 0)
        scheme = "https" if certfile else "http"
        self.url = f"{scheme}://127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(
            app, log_level="critical", lifespan="on", ssl_certfile=certfile, ssl_keyfile=keyfile, http=http, ws=ws
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("fake upstream did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        # Without force_exit uvicorn waits for every handler, and /hang-* hang by design: 10 s a test.
        self.server.force_exit = True
        self.thread.join(10)
        self.sock.close()
