"""The recording proxy served in-process, on uvicorn and a real socket: its own protocol, app and
capture writer, its server saying each read it takes, so that a test can send a request's next
bytes only once the ones before were read (the reads apart, as a client writing them apart makes
them), and can compare the capture's times with its own (one monotonic clock)."""

from __future__ import annotations

import queue
import socket
from pathlib import Path
from typing import Any

from infertap.capture.reader import CaptureReader
from infertap.capture.writer import CaptureWriter
from infertap.proxy.app import RecordingProxy, build_app
from infertap.proxy.wire import protocol
from tests.fake_upstream import ServerThread


class InProcessRecorder:
    """The recording proxy served from a thread; ``reads`` gets each read its server takes, whole."""

    def __init__(self, upstream: str, out: Path, **limits: Any) -> None:
        self.out = out
        self.writer = CaptureWriter(out, recorder={"kind": "proxy"}).open()
        proxy = RecordingProxy(upstream, self.writer)
        self.reads: queue.Queue[bytes] = queue.Queue()
        reads = self.reads

        class Reading(protocol(proxy.refused, **limits)):  # type: ignore[misc]
            def data_received(self, data: bytes) -> None:
                super().data_received(data)
                reads.put(bytes(data))

        self.server = ServerThread(build_app(proxy), http=Reading, ws="none")  # as `infertap record` serves
        self.port = int(self.server.url.rsplit(":", 1)[1])

    def read(self) -> bytes:
        return self.reads.get(timeout=10)

    def connect(self) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # each sendall its own segment
        return s

    def stop(self) -> list[dict[str, Any]]:
        """Stops as `infertap record` does on SIGTERM (what is in flight ends and is recorded), and
        gives the capture's exchanges."""
        self.server.server.should_exit = True
        self.server.thread.join(30)
        self.server.__exit__(None, None, None)
        self.writer.close()
        return list(CaptureReader(self.out).exchanges())


def read_all(s: socket.socket) -> bytes:
    """Every byte the proxy sends, to its close."""
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    return out
