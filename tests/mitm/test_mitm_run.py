"""`run_mitm` called in-process, as a program embedding infertap calls it."""

from __future__ import annotations

import os
import signal
from types import FrameType

import pytest

from infertap.capture.reader import CaptureReader
from infertap.launch import free_port
from infertap.mitm.run import MitmConfig, run_mitm


@pytest.mark.filterwarnings("ignore:tagMap is deprecated", "ignore:typeMap is deprecated")  # ldap3, by mitmproxy.addons
def test_run_mitm_gives_the_callers_signal_handlers_back(tmp_path, fake):
    """It served until SIGTERM, then left SIGINT, SIGTERM and SIGHUP at asyncio's defaults, not the
    caller's: a caller's later SIGTERM ended it at once, its own cleanup skipped (the demo and
    run_replay keep the caller's). Now the caller has its own handlers back, the capture closed."""
    _, url = fake

    def caller(signum: int, frame: FrameType | None) -> None:
        raise AssertionError(f"the caller's handler ran for {signum}")

    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = {sig: signal.signal(sig, caller) for sig in sigs}
    out = tmp_path / "cap"

    def ready(addresses: list[str], path: str, ca: object) -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # handled by run_mitm while it serves: its stop

    try:
        config = MitmConfig(out=out, port=free_port(), mode=f"reverse:{url}", confdir=str(tmp_path / "conf"), telemetry=False)
        run_mitm(config, on_ready=ready)
        after = {sig: signal.getsignal(sig) for sig in sigs}
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    assert after == {sig: caller for sig in sigs}
    reader = CaptureReader(out)
    assert [r["type"] for r in reader.records()][-1] == "footer" and reader.closed_cleanly is True
