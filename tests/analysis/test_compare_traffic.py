"""compare's traffic line: whether the two runs saw the same requests on the same schedule."""

from __future__ import annotations

from click.testing import CliRunner

from infertap.cli import cli
from infertap.replay import ReplayConfig, Schedule, run_replay
from tests.helpers import write_capture


def test_a_replay_that_waited_for_its_cap_is_not_on_the_same_schedule(fake, tmp_path):
    """Its schedule hash is its source's (the times it was given), but it didn't keep them."""
    app, url = fake
    body = {"model": "m", "stream": False, "pace_ms": 150}
    write_capture(
        tmp_path / "src",
        [{"offset_s": i * 0.02, "body": {**body, "messages": [{"role": "user", "content": f"q{i}"}]}} for i in range(3)],
    )
    for name, cap in (("free", None), ("capped", 1)):
        run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / name, probe=False, schedule=Schedule(max_concurrency=cap)))
    free = CliRunner().invoke(cli, ["compare", str(tmp_path / "src"), str(tmp_path / "free")], env={"COLUMNS": "250"})
    assert "same schedule)" in free.output, free.output
    capped = CliRunner().invoke(cli, ["compare", str(tmp_path / "src"), str(tmp_path / "capped")], env={"COLUMNS": "250"})
    line = next(line for line in capped.output.splitlines() if line.startswith("traffic:"))
    assert "same schedule" not in line
    assert "a different schedule (send times); B's schedule not kept: 2 requests waited for --max-concurrency 1" in line
    # the claim card's workload says so too (its identity is read from the tables, not the capture package's pass)
    card = CliRunner().invoke(cli, ["claim", str(tmp_path / "capped")], env={"COLUMNS": "250"})
    assert card.exit_code == 0, card.output
    assert "schedule not kept: 2 requests waited for --max-concurrency 1" in card.output, card.output
    free_card = CliRunner().invoke(cli, ["claim", str(tmp_path / "free")], env={"COLUMNS": "250"})
    assert "schedule not kept" not in free_card.output
