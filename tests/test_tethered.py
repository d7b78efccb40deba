"""An engine that infertap.launch starts ends with the process that started it, even SIGKILLed, and
only then: not when the thread that started it ends (the kernel's death signal follows the
forking thread, not the process)."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import textwrap
import time

import httpx
import psutil
import pytest

pytestmark = pytest.mark.engine

LAUNCHER = textwrap.dedent(
    """
    import sys, time
    from concurrent.futures import ThreadPoolExecutor
    from contextlib import ExitStack
    from pathlib import Path
    from infertap.launch import llama_server

    with ExitStack() as stack:
        with ThreadPoolExecutor(1) as pool:  # the thread that starts the engine ends here
            engine = pool.submit(stack.enter_context, llama_server(log_dir=Path(sys.argv[1]))).result()
        print(engine.url, engine.popen.pid, flush=True)
        time.sleep(3600)
    """
)


def test_an_engine_outlives_the_thread_that_started_it_and_not_its_sigkilled_launcher(tmp_path):
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    engine: psutil.Process | None = None
    try:
        url, pid = launcher.stdout.readline().split()  # type: ignore[union-attr]
        engine = psutil.Process(int(pid))
        assert httpx.get(url + "/health", timeout=10, trust_env=False).status_code == 200
        launcher.send_signal(signal.SIGKILL)
        launcher.communicate(timeout=60)
        deadline = time.monotonic() + 120
        while engine.is_running() and engine.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not engine.is_running() or engine.status() == psutil.STATUS_ZOMBIE
        assert "cleaning up before exit" in (tmp_path / "llama-server.log").read_text()  # told by SIGTERM: a clean stop
    finally:
        launcher.kill()
        launcher.communicate()
        if engine is not None:
            with contextlib.suppress(psutil.NoSuchProcess):
                engine.kill()
