"""The addon's options as a user sets them on mitmproxy's own command line (`mitmdump -s addon.py --set`)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from infertap.capture.reader import CaptureReader
from infertap.mitm.addon import InfertapCapture

ADDON = Path(__file__).resolve().parents[2] / "infertap" / "mitm" / "addon.py"


def test_every_addon_option_is_of_a_type_mitmproxy_can_set():
    """mitmproxy's --set parses str, bool, int and lists of str, nothing else (a float raised
    NotImplementedError at start): each option the addon declares is of one of them."""
    from mitmproxy import options

    opts = options.Options()
    InfertapCapture().load(opts)
    names = [name for name in opts.keys() if name.startswith("infertap_")]
    assert "infertap_telemetry_interval" in names
    for name in names:
        current = opts.default(name)
        if isinstance(current, (list, tuple)):
            opts.set(f"{name}=x")
        else:
            opts.set(f"{name}={str(current).lower()}")  # its default, as --set gives it
            assert getattr(opts, name) == current, name


@pytest.mark.parametrize(
    ("mitmdump", "option"),
    [(True, ["--set", "infertap_telemetry_interval=900.5"]), (False, ["--telemetry-interval", "900.5"])],
    ids=["mitmdump", "infertap-mitm"],
)
def test_mitmdump_sets_the_telemetry_interval(start_mitm, fake, mitmdump, option):
    """`--set infertap_telemetry_interval=...` ended mitmdump at its start (mitmproxy parses no float
    option): it is taken, as seconds, and `infertap mitm --telemetry-interval` still sets it. With
    900.5 s the host is sampled once at the start and once at the close, however long the run; at
    the default 0.25 s it would be sampled more often."""
    app, url = fake
    mitm = start_mitm("--mode", f"reverse:{url}", *option, mitmdump=mitmdump)
    assert httpx.post(f"{mitm.url}/v1/chat/completions", json={"messages": []}, timeout=10).status_code == 200
    time.sleep(0.6)  # beyond two default intervals
    mitm.stop()
    host = [r for r in CaptureReader(mitm.out).records() if r["type"] == "telemetry" and r["source"] == "host"]
    assert len(host) == 2, host
    assert len(mitm.exchanges()) == 1


@pytest.mark.parametrize("value", ["fast", "0"])
def test_a_bad_telemetry_interval_ends_mitmdump_with_a_clear_error(tmp_path, value):
    argv = [str(Path(sys.executable).with_name("mitmdump")), "-s", str(ADDON), "--listen-host", "127.0.0.1"]
    argv += ["--listen-port", "0", "--set", f"confdir={tmp_path / 'conf'}", "--set", f"infertap_out={tmp_path / 'out'}"]
    argv += ["--set", f"infertap_telemetry_interval={value}"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    output = done.stdout + done.stderr
    assert f"infertap_telemetry_interval: expected a number of seconds > 0, e.g. 0.5, got '{value}'" in output, output
    assert "exiting" in output and "NotImplementedError" not in output
