"""The decode writes its chunks and events tables in batches bounded by bytes as well as rows: an
embeddings answer is one chunk of hundreds of KiB, and batches of 10,000 such chunks held a decode
worker at gigabytes. Every chunk and event comes back whole and in order, however it is batched."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from infertap.analysis import decode
from tests.helpers import write_capture

#: The byte bound the test decodes under: a few answers a batch, so that batches are many and small.
BOUND = 120_000


def _exchanges(size: int) -> tuple[list[dict], list[bytes], list[str]]:
    """Embeddings answers (one chunk each) and non-streamed chat answers (one event each) of about
    ``size`` bytes; the chunks and the texts as written."""
    xs: list[dict] = []
    chunks: list[bytes] = []
    texts: list[str] = []
    for i in range(12):
        vector = [((i * 7 + k) % 97) / 97 for k in range(max(1, size // 20))]
        answer = json.dumps({"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": vector}]}).encode()
        xs.append({"path": "/v1/embeddings", "body": {"model": "m", "input": f"t{i}"}, "chunks": [answer]})
        text = f"answer {i} " + "word " * (size // 5)
        chat = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]})
        xs.append({"chunks": [chat.encode()]})
        chunks += [answer, chat.encode()]
        texts.append(text)
    return xs, chunks, texts


def _decoded(tmp_path, monkeypatch, size: int) -> tuple[pq.ParquetFile, pq.ParquetFile, list[bytes], list[str]]:
    monkeypatch.setattr(decode, "_BATCH_BYTES", BOUND)
    xs, chunks, texts = _exchanges(size)
    write_capture(tmp_path / "cap", xs)
    decode.decode_records(tmp_path / "cap", tmp_path / "out", "cap")
    return pq.ParquetFile(tmp_path / "out" / "chunks.parquet"), pq.ParquetFile(tmp_path / "out" / "events.parquet"), chunks, texts


def _group_bytes(file: pq.ParquetFile, column: str) -> list[int]:
    return [
        sum(len(v) for v in file.read_row_group(g, columns=[column]).column(column).to_pylist() if v)
        for g in range(file.num_row_groups)
    ]


def test_large_answers_are_written_in_batches_of_bounded_bytes(tmp_path, monkeypatch):
    chunks_file, events_file, chunks, texts = _decoded(tmp_path, monkeypatch, 50_000)
    largest = max(map(len, chunks))
    # each batch stops at the first exchange that takes it to the bound: at most the bound and one answer
    assert chunks_file.num_row_groups > 1
    assert all(b <= BOUND + largest for b in _group_bytes(chunks_file, "bytes"))
    assert events_file.num_row_groups > 1
    assert all(b <= BOUND + 2 * largest for b in _group_bytes(events_file, "content"))
    # nothing lost or reordered by the batching
    assert chunks_file.read(columns=["bytes"]).column("bytes").to_pylist() == chunks
    assert [t for t in events_file.read(columns=["content"]).column("content").to_pylist() if t] == texts


def test_small_answers_stay_in_one_batch(tmp_path, monkeypatch):
    chunks_file, events_file, chunks, texts = _decoded(tmp_path, monkeypatch, 100)
    assert sum(map(len, chunks)) < BOUND  # under both bounds: one batch, as before
    assert chunks_file.num_row_groups == 1
    assert events_file.num_row_groups == 1
    assert chunks_file.read(columns=["bytes"]).column("bytes").to_pylist() == chunks
    assert [t for t in events_file.read(columns=["content"]).column("content").to_pylist() if t] == texts
