"""A replay's workload undoes a compressed request body's encoding once as it loads (the Codex CLI's
zstd ``/responses``): what the request asks, its identity digest and the transforms' check each
decompressed it again before, as the analysis's decode did (tests/analysis/test_decode_compressed_once.py).
What it loads is what it was: the same identity and the same refusals, with each reader decoding alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import zstandard

from infertap.apis import body as body_module
from infertap.capture import identity
from infertap.replay import Transforms
from infertap.replay import transforms as transforms_module
from infertap.replay.workload import load_workload
from tests.helpers import write_capture

_ZSTD = [["content-type", "application/json"], ["content-encoding", "zstd"]]


def _codex(i: int) -> dict[str, Any]:
    return {"model": "gpt-5-codex", "input": [{"role": "user", "content": f"fix test {i}"}], "stream": False}


def _capture(path: Path, cut: bool = False) -> None:
    """Three zstd /v1/responses requests; ``cut``: the last recorded stopping inside its stream."""
    bodies = [zstandard.ZstdCompressor(level=3).compress(json.dumps(_codex(i)).encode()) for i in range(3)]
    if cut:
        bodies[-1] = bodies[-1][:-12]
    write_capture(path, [{"path": "/v1/responses", "body": b, "headers": _ZSTD, "chunks": [b"{}"]} for b in bodies])


def _undone(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The calls that undo a body's encoding, counted (``apis.body._undo``, under every reader)."""
    calls: list[int] = []
    undo = body_module._undo

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return undo(*args, **kwargs)

    monkeypatch.setattr(body_module, "_undo", counted)
    return calls


@pytest.mark.parametrize("transforms", [None, Transforms(set_values=[("temperature", 0.5)])], ids=["none", "set"])
def test_a_compressed_body_is_undone_once_as_the_workload_loads(tmp_path, monkeypatch, transforms):
    _capture(tmp_path / "src")
    calls = _undone(monkeypatch)
    workload = load_workload(tmp_path / "src", transforms=transforms)
    assert len(calls) == 3  # one for each body: what it asks, its digest and the --set check share it
    assert workload.refused is None and [i.model for i in workload.items] == ["gpt-5-codex"] * 3
    assert workload.identity.requests == 3  # read as generation requests: their JSON was read

    # The match: each reader decoding the body itself (nothing handed on) loads the same workload.
    calls.clear()
    monkeypatch.setattr(identity.IdentityTally, "add", _without(identity.IdentityTally.add, "plain"))
    monkeypatch.setattr(transforms_module.Transforms, "body", _without(transforms_module.Transforms.body, "decoded"))
    alone = load_workload(tmp_path / "src", transforms=transforms)
    assert len(calls) == (9 if transforms else 6)
    assert alone.identity == workload.identity and alone.refused is None


def test_a_compressed_body_cut_short_is_refused_by_a_set_as_before(tmp_path, monkeypatch):
    """The refusal the check hands on is the one it gave decoding alone: a body recorded cut short."""
    _capture(tmp_path / "src", cut=True)
    calls = _undone(monkeypatch)
    workload = load_workload(tmp_path / "src", transforms=Transforms(set_values=[("temperature", 0.5)]))
    assert len(calls) == 3
    assert workload.refused is not None and workload.refused[0].index == 2
    monkeypatch.setattr(transforms_module.Transforms, "body", _without(transforms_module.Transforms.body, "decoded"))
    alone = load_workload(tmp_path / "src", transforms=Transforms(set_values=[("temperature", 0.5)]))
    assert alone.refused is not None and alone.refused[1] == workload.refused[1]


def _without(method: Any, name: str) -> Any:
    """``method`` with its ``name`` argument dropped: the reader undoes the body itself, as before."""

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if name == "plain" and len(args) > 3:
            args = args[:3]
        kwargs.pop(name, None)
        return method(self, *args, **kwargs)

    return call
