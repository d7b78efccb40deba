"""A capture whose runs ran on two machines (a replay appended from another box, two recordings copied
into one folder) of one engine configuration: the engine's fingerprint is the same on both, so the
card showed the last run's GPU and `--label gpu=` as every figure's device, with nothing unknown."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from infertap.analysis.claim import claim, field_text, unknown_fields
from infertap.capture.records import new_exchange
from infertap.capture.writer import CaptureWriter
from infertap.cli import cli
from tests.analysis.test_claim import _answer, _snapshot


def _run(path: Path, host: str, gpu: str, wall: float, url: str = "http://127.0.0.1:8080", labelled: bool = True) -> None:
    """One recording run appended to ``path``: a probe of ``url`` on machine ``host`` (its GPU ``gpu``,
    labelled so where ``labelled``), then two answered chat requests."""
    snapshot = _snapshot("fp1", url=url, wall=wall)  # one engine configuration on every machine
    snapshot["host"] = {
        **snapshot["host"],
        "hostname": host,
        "gpus": [{"index": 0, "name": gpu, "driver": "550", "vbios": "v", "cuda": "12.4"}],
    }
    with CaptureWriter(
        path, recorder={"kind": "proxy", "upstream": url}, labels={"gpu": gpu.split()[-1]} if labelled else {}, wall=wall
    ) as w:
        w.write(snapshot)
        for i in range(2):
            body = json.dumps({"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]}).encode()
            w.write(
                new_exchange(
                    id=f"{host}-{i}", seq=i + 1, session=None, wall=wall + i, start_ns=i * 10**9, sent_ns=i * 10**9 + 1000,
                    client="127.0.0.1:1", method="POST", path="/v1/chat/completions", query="", http_version="1.1",
                    request_headers=[], request_body=body, status=200, response_headers=[["content-type", "application/json"]],
                    headers_ns=10**6, chunk_ns=[2 * 10**6], chunks=[_answer(3, 10)], end_ns=3 * 10**6, end="complete",
                    error=None, upstream=url,
                )
            )  # fmt: skip


def test_runs_on_two_machines_of_one_engine_configuration_are_said(tmp_path):
    two, one = tmp_path / "two", tmp_path / "one"
    _run(two, "box-a", "NVIDIA H100", 1.8e9)
    _run(two, "box-b", "NVIDIA H200", 1.8e9 + 3600)
    _run(one, "box-a", "NVIDIA H100", 1.8e9)
    _run(one, "box-a", "NVIDIA H100", 1.8e9 + 3600)  # the same box again: one machine (must match)
    card = claim(two, cache_dir=tmp_path / "cache")
    why = card["device"]["unknown"]
    assert "the capture's engines ran on 2 machines (box-a: NVIDIA H100; box-b: NVIDIA H200)" in why
    assert "labelled gpu=H100, gpu=H200" in why and "device" in unknown_fields(card)
    assert "engine configurations" not in json.dumps(card)  # one configuration: the machines are what differ
    same = claim(one, cache_dir=tmp_path / "cache")
    assert not same["device"].get("unknown") and "device" not in unknown_fields(same)
    assert same["device"]["value"]["gpus"][0]["name"] == "NVIDIA H100"
    out = CliRunner().invoke(cli, ["claim", str(two), "--strict", "--cache-dir", str(tmp_path / "cache")])
    assert out.exit_code != 0 and "2 machines" in out.output


def test_remote_engines_on_two_hosts_are_two_machines(tmp_path):
    """An engine not on the recording machine is told by its URL's host; only labels describe its device."""
    two, one = tmp_path / "two", tmp_path / "one"
    _run(two, "box-a", "NVIDIA H100", 1.8e9, url="http://10.0.0.5:8080")
    _run(two, "box-a", "NVIDIA H200", 1.8e9 + 3600, url="http://10.0.0.6:8080")
    _run(one, "box-a", "NVIDIA H100", 1.8e9, url="http://10.0.0.5:8080")
    _run(one, "box-b", "NVIDIA H100", 1.8e9 + 3600, url="http://10.0.0.5:8080")  # two recorders, one engine
    text = field_text("device", claim(two, cache_dir=tmp_path / "cache")["device"])
    assert "2 machines (10.0.0.5; 10.0.0.6)" in text and "gpu=H100, gpu=H200" in text
    assert "machines" not in field_text("device", claim(one, cache_dir=tmp_path / "cache")["device"])


def test_a_label_one_run_lacks_is_not_given_for_that_run(tmp_path):
    """`--label gpu=H100` on one run and none on the other: the card showed H100 as both runs' device
    and flagged nothing, as if the unlabelled run had been given it."""
    half, both = tmp_path / "half", tmp_path / "both"
    _run(half, "box-a", "NVIDIA H100", 1.8e9, url="http://10.0.0.5:8080")
    _run(half, "box-a", "NVIDIA H100", 1.8e9 + 3600, url="http://10.0.0.5:8080", labelled=False)
    _run(both, "box-a", "NVIDIA H100", 1.8e9, url="http://10.0.0.5:8080")
    _run(both, "box-a", "NVIDIA H100", 1.8e9 + 3600, url="http://10.0.0.5:8080")  # the same label on both (must match)
    card = claim(half, cache_dir=tmp_path / "cache")
    assert card["device"]["value"]["labels"] == {"gpu": "run 1: H100; run 2: not given"}
    assert "labelled gpu=H100, gpu not given" in card["device"]["unknown"] and "device" in unknown_fields(card)
    same = claim(both, cache_dir=tmp_path / "cache")
    assert same["device"]["value"]["labels"] == {"gpu": "H100"} and "labelled" not in (same["device"].get("unknown") or "")
