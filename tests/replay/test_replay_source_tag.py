"""A replay's capture header records its source's workload identity (``recorder.workload_source``),
version tag and all: ``wl2`` where the source's requests sent a header that changes what they ask
(the Anthropic SDK sends ``anthropic-version`` with every request), ``wl1`` where none did. The
source here is recorded from the real anthropic and openai SDKs through ``infertap record``."""

from __future__ import annotations

import anthropic
import openai
import pytest
from click.testing import CliRunner

from infertap.capture.identity import workload_identity
from infertap.capture.reader import CaptureReader
from infertap.cli import cli


def _send(kind: str, url: str) -> None:
    if kind == "anthropic":
        client = anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=0)
        with client.messages.stream(model="m", max_tokens=8, messages=[{"role": "user", "content": "hi"}]) as stream:
            stream.until_done()
    else:
        oa = openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0)
        oa.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])


@pytest.mark.parametrize(("kind", "tag"), [("anthropic", "wl2"), ("openai", "wl1")])
def test_a_replay_header_records_its_sources_tag(fake, record, tmp_path, monkeypatch, kind: str, tag: str) -> None:
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    _app, url = fake
    rec = record(url, "--no-probe", "--no-telemetry")
    _send(kind, rec.url)
    assert rec.stop() == 0
    source = workload_identity(rec.out)
    # Must differ between the two SDKs: the Anthropic SDK's requests sent anthropic-version.
    assert source.version == tag and source.short.startswith(f"{tag}:")
    run = CliRunner().invoke(
        cli, ["replay", str(rec.out), "--target", url, "--out", str(tmp_path / "r"), "--no-probe", "--no-telemetry"]
    )
    assert run.exit_code == 0, run.output
    header = next(r for r in CaptureReader(tmp_path / "r") if r.get("type") == "header")
    # Must match: the source's identity as recorded, its tag the source's own.
    recorded = header["recorder"]["workload_source"]
    assert (recorded["version"], recorded["short"], recorded["workload"]) == (tag, source.short, source.workload)
    info = CliRunner().invoke(cli, ["info", str(tmp_path / "r")], env={"COLUMNS": "400"})
    assert info.exit_code == 0, info.output
    assert f"identical to its source {source.short}" in info.output, info.output
