"""The benchmarks' fast local upstream (bench/upstream.py) ends its streams as an engine does."""

from __future__ import annotations

from pathlib import Path

from bench.replay_lag import _capture
from bench.upstream import make_app
from infertap.capture.reader import CaptureReader
from infertap.replay import ReplayConfig, Schedule, run_replay
from tests.fake_upstream import ServerThread


def test_a_benchmark_replay_of_the_bench_upstream_counts_its_answers_ok_not_unfinished(tmp_path: Path) -> None:
    # Each answer ends with a finish reason, then [DONE]: the replay counts them whole, where a
    # stream without one is an answer the engine cut (unfinished), as every benchmark's was.
    n = _capture(tmp_path / "src", 100, 0.05, n_chunks=3)
    with ServerThread(make_app(chunks=4, size=4, pace_ms=0)) as server:
        summary = run_replay(
            ReplayConfig(tmp_path / "src", server.url, tmp_path / "out", schedule=Schedule("original"), probe=False)
        )
    assert n == 5 and (summary["ok"], summary["unfinished"], summary["failed"]) == (n, 0, 0), summary
    for x in CaptureReader(tmp_path / "out").exchanges():
        body = b"".join(x["chunks"])
        assert body.endswith(b'"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n') and body.count(b"data: ") == 3 + 2
