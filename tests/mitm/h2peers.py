"""A real HTTP/2 upstream and a real HTTP/2 client (hyper-h2 over TLS sockets), each of which can
end a stream the ways that matter to a recorder: reset it (RST_STREAM) or close its connection."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import h2.config
import h2.connection
import h2.errors
import h2.events

from tests.tls import self_signed


class H2Upstream:
    """Streams ``n`` SSE events 50 ms apart, then as the query's ``then`` says: ``done`` ([DONE],
    end of stream), ``reset`` (RST_STREAM INTERNAL_ERROR), ``done-reset`` ([DONE], then
    RST_STREAM), ``cancel`` (RST_STREAM CANCEL, the connection kept), ``close`` (the connection closed), ``hold`` (nothing more until the client goes)."""

    def __init__(self, folder: Path) -> None:
        certfile, keyfile = self_signed(folder)
        self.ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.ctx.load_cert_chain(certfile, keyfile)
        self.ctx.set_alpn_protocols(["h2"])
        self.loop = asyncio.new_event_loop()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"https://127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> H2Upstream:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self.loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    async def _stop(self) -> None:
        self.server.close()
        for task in asyncio.all_tasks() - {asyncio.current_task()}:
            task.cancel()

    async def _serve(self) -> None:
        self.server = await asyncio.start_server(self._handle, sock=self.sock, ssl=self.ctx)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        conn.initiate_connection()
        writer.write(conn.data_to_send())
        paths: dict[int, str] = {}
        tasks = set()
        try:
            while data := await reader.read(65536):
                for event in conn.receive_data(data):
                    if isinstance(event, h2.events.RequestReceived):
                        paths[event.stream_id] = dict(event.headers)[":path"]
                    elif isinstance(event, h2.events.DataReceived):
                        conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                    elif isinstance(event, h2.events.StreamEnded):
                        task = asyncio.create_task(self._respond(conn, writer, event.stream_id, paths[event.stream_id]))
                        tasks.add(task)
                        task.add_done_callback(tasks.discard)
                writer.write(conn.data_to_send())
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            for task in tasks:
                task.cancel()
            writer.close()

    async def _respond(self, conn: h2.connection.H2Connection, writer: asyncio.StreamWriter, sid: int, path: str) -> None:
        query = parse_qs(urlsplit(path).query)
        n, then = int(query.get("n", ["3"])[0]), query.get("then", ["done"])[0]
        try:
            conn.send_headers(sid, [(":status", "200"), ("content-type", "text/event-stream")])
            writer.write(conn.data_to_send())
            for i in range(n):
                await asyncio.sleep(0.05)
                conn.send_data(sid, f"data: {json.dumps({'i': i})}\n\n".encode())
                writer.write(conn.data_to_send())
            await asyncio.sleep(0.05)
            if then.startswith("done"):
                conn.send_data(sid, b"data: [DONE]\n\n", end_stream=then == "done")
                writer.write(conn.data_to_send())
                await asyncio.sleep(0.05)
            if then.endswith("reset") or then == "cancel":
                code = h2.errors.ErrorCodes.CANCEL if then == "cancel" else h2.errors.ErrorCodes.INTERNAL_ERROR
                conn.reset_stream(sid, code)
                writer.write(conn.data_to_send())
            elif then == "close":
                writer.close()
            elif then == "hold":
                await asyncio.sleep(10)
        except Exception:  # the stream or the connection is gone: the client left
            return


def h2_stream(port: int, path: str, *, events: int | None = None, how: str = "read", connect: str | None = None) -> bytes:
    """POST ``path`` over HTTP/2 (TLS, no verification) and read the response body; with ``events``,
    stop once that many ``data:`` events have arrived and ``close`` the connection or ``cancel``
    the stream (RST_STREAM CANCEL, the connection kept open a while). ``connect``: a host:port to
    reach through a CONNECT tunnel first (a regular proxy)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    if connect is not None:
        raw.sendall(f"CONNECT {connect} HTTP/1.1\r\nHost: {connect}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += raw.recv(4096)
        assert head.split(b"\r\n")[0].split()[1] == b"200", head
    sock = ctx.wrap_socket(raw, server_hostname="localhost")
    assert sock.selected_alpn_protocol() == "h2"
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    body = b'{"model": "m", "stream": true, "messages": []}'
    headers = [(":method", "POST"), (":scheme", "https"), (":authority", "localhost"), (":path", path)]
    conn.send_headers(1, [*headers, ("content-type", "application/json"), ("content-length", str(len(body)))])
    conn.send_data(1, body, end_stream=True)
    sock.sendall(conn.data_to_send())
    got = b""
    try:
        while data := sock.recv(65536):
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.DataReceived):
                    conn.acknowledge_received_data(event.flow_controlled_length, 1)
                    got += event.data
                elif isinstance(event, (h2.events.StreamEnded, h2.events.StreamReset)):
                    return got
            sock.sendall(conn.data_to_send())
            if events is not None and got.count(b"data:") >= events:
                if how == "cancel":
                    conn.reset_stream(1, h2.errors.ErrorCodes.CANCEL)
                    sock.sendall(conn.data_to_send())
                    time.sleep(0.5)  # the connection stays open: only the stream was given up
                return got
        return got
    finally:
        sock.close()
