"""Whether a mitm run sampled telemetry, as its header says (``recorder.telemetry``) and stats reads
it: `infertap mitm --no-telemetry` and mitmdump's `--set infertap_telemetry=false` sample nothing
and say so; left on, both sample and say that. Real `infertap mitm` and real mitmdump with the addon."""

from __future__ import annotations

import httpx
import pytest
from click.testing import CliRunner

from infertap.capture.reader import CaptureReader
from infertap.cli import cli

OFF = {True: ["--set", "infertap_telemetry=false"], False: ["--no-telemetry"]}


@pytest.mark.parametrize("mitmdump", [True, False], ids=["mitmdump", "infertap-mitm"])
@pytest.mark.parametrize("telemetry", [False, True], ids=["off", "on"])
def test_a_mitm_run_says_whether_it_sampled_telemetry(start_mitm, fake, tmp_path, monkeypatch, mitmdump, telemetry):
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    _, url = fake
    mitm = start_mitm("--mode", f"reverse:{url}", *([] if telemetry else OFF[mitmdump]), mitmdump=mitmdump)
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert httpx.post(f"{mitm.url}/v1/chat/completions", json=body, timeout=10).status_code == 200
    mitm.stop()
    records = list(CaptureReader(mitm.out).records())
    [header] = [r for r in records if r["type"] == "header"]
    assert header["recorder"]["kind"] == "mitm"
    assert header["recorder"]["telemetry"] is telemetry
    # Must match what it did: samples only where it says it sampled (the host is always sampled).
    assert any(r["type"] == "telemetry" for r in records) is telemetry
    result = CliRunner().invoke(cli, ["stats", str(mitm.out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert ("energy: not sampled (recorded with --no-telemetry)" in result.output) is not telemetry
