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


def test_the_bench_upstream_sends_a_usage_chunk_only_where_asked_and_replay_counts_the_same_either_way(
    tmp_path: Path,
) -> None:
    """``bench.replay_worker --usage`` measures replay on answers that report their usage, the default
    on answers that report none (counted by their token events, read whole): the upstream sends a
    usage chunk only where the request asks (``stream_options.include_usage``), and the replay's
    output tokens are the same either way."""
    counts = {}
    with ServerThread(make_app(chunks=4, size=4, pace_ms=0)) as server:
        for usage in (False, True):
            src, out = tmp_path / f"src-{usage}", tmp_path / f"out-{usage}"
            n = _capture(src, 100, 0.05, n_chunks=3, **({"stream_options": {"include_usage": True}} if usage else {}))
            summary = run_replay(ReplayConfig(src, server.url, out, schedule=Schedule("original"), probe=False))
            bodies = [b"".join(x["chunks"]) for x in CaptureReader(out).exchanges()]
            assert [b'"usage": {"prompt_tokens": 1, "completion_tokens": 3' in b for b in bodies] == [usage] * n
            assert all(b.endswith(b"data: [DONE]\n\n") and b.count(b"[DONE]") == 1 for b in bodies)
            counts[usage] = (summary["ok"], summary["output_tokens"])
    # the same figures, each labelled by its count: the engine's usage, or the stream's token events
    assert counts[True] == (5, {"total": 15, "counted": 5, "unknown": 0, "source": {"usage": 5}, "by_source": {"usage": 15}})
    assert counts[False] == (5, {"total": 15, "counted": 5, "unknown": 0, "source": {"chunks": 5}, "by_source": {"chunks": 15}})
