"""Loopback by default; anything else works but says so loudly."""

from __future__ import annotations

import pytest

from infertap.capture.hostfacts import is_loopback
from infertap.launch import free_port, recorder


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.3.4.5", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("10.0.0.1", False),
        ("example.com", False),
    ],
)
def test_is_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_a_non_loopback_listen_address_warns(tmp_path, fake):
    app, url = fake
    port = free_port()
    # Bind all interfaces, but talk to it over loopback only.
    with recorder(url, tmp_path / "cap", port=port, extra_args=["--listen", f"0.0.0.0:{port}", "--no-probe"]) as proc:
        log = proc.log_tail()
    assert "WARNING: listening on 0.0.0.0" in log


def test_the_default_listen_address_is_loopback():
    from infertap.cli import cli

    (option,) = [p for p in cli.commands["record"].params if p.name == "listen"]
    assert option.default == "127.0.0.1:8787"
