"""The mitm tests' shared parts: `infertap mitm` run as a user runs it, in a subprocess."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infertap.capture.reader import CaptureReader
from infertap.launch import free_port

ADDON = Path(__file__).resolve().parents[2] / "infertap" / "mitm" / "addon.py"


class Mitm:
    """`infertap mitm *args`, or with ``mitmdump=True`` mitmproxy's own `mitmdump` loading the addon
    as a script (``-s infertap/mitm/addon.py``, or ``script``, a copy of it; first: other ``-s`` scripts
    in args come after it)."""

    def __init__(self, tmp: Path, *args: str, mitmdump: bool = False, script: Path | None = None) -> None:
        self.port = free_port()
        self.out = tmp / f"mitm-{self.port}"
        self.confdir = tmp / "mitmconf"
        self.log = tmp / f"mitm-{self.port}.log"
        if mitmdump:
            addon = script or ADDON
            mitmdump_bin = Path(sys.executable).with_name("mitmdump")
            argv = [str(mitmdump_bin), "-s", str(addon), "--listen-host", "127.0.0.1", "--listen-port", str(self.port)]
            argv += ["--set", f"confdir={self.confdir}", "--set", f"infertap_out={self.out}", *args]
            ready = "listening at"
        else:
            argv = [
                sys.executable,
                "-m",
                "infertap",
                "mitm",
                "--listen",
                f"127.0.0.1:{self.port}",
                "--out",
                str(self.out),
                "--confdir",
                str(self.confdir),
                *args,
            ]
            ready = "listening on"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
        deadline = time.monotonic() + 60
        while ready not in self.log.read_text():
            assert self.proc.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.1)
        self.url = f"http://127.0.0.1:{self.port}"
        self.ca = self.confdir / "mitmproxy-ca-cert.pem"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(30)

    def exchanges(self) -> list[dict]:
        return list(CaptureReader(self.out).exchanges())


@pytest.fixture
def start_mitm(tmp_path):
    """Factory: start_mitm(*args) runs `infertap mitm` (or `mitmdump -s addon.py`, mitmdump=True) as a
    user would; all are stopped at the end."""
    started: list[Mitm] = []

    def start(*args: str, mitmdump: bool = False, script: Path | None = None) -> Mitm:
        started.append(Mitm(tmp_path, *args, mitmdump=mitmdump, script=script))
        return started[-1]

    yield start
    for m in started:
        m.stop()
