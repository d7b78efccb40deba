"""What `infertap export --parquet DIR` may replace in DIR: only what earlier exports wrote there.

Exported into the folder that holds `captures/` (record's default --out), the `captures` table's
folder replaced every recording, and a user's own `metrics/` went with the `metrics` table, exit 0.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner, Result

from infertap.analysis import EXPORTED, MANIFEST, Analysis, AnalysisError
from infertap.analysis.store import LEDGER
from infertap.capture.segments import segment_paths
from infertap.cli import cli
from tests.helpers import write_capture


def export(tmp_path: Path, capture: Path, folder: Path, *extra: str) -> Result:
    env = {"INFERTAP_CACHE": str(tmp_path / "cache")}
    return CliRunner().invoke(cli, ["export", str(capture), "--parquet", str(folder), *extra], env=env)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A user's folder: recordings in captures/ (record's default), notes in their own metrics/."""
    folder = tmp_path / "project"
    write_capture(folder / "captures" / "run1", [{}, {}])
    write_capture(folder / "captures" / "run2", [{}])
    (folder / "metrics").mkdir()
    (folder / "metrics" / "notes.txt").write_text("my notes\n")
    return folder


@pytest.mark.parametrize("partition", ["recorder", "none"])
def test_an_export_into_the_folder_holding_the_captures_is_refused_and_changes_nothing(
    tmp_path: Path, project: Path, partition: str
) -> None:
    before = snapshot(project)
    result = export(tmp_path, project / "captures" / "run1", project, "--partition-by", partition)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output and "nothing was changed" in result.output, result.output
    assert f"{project / 'captures'} (it holds captures)" in result.output
    assert f"{project / 'metrics'} (not written by an infertap export)" in result.output
    assert snapshot(project) == before and sorted(p.name for p in project.iterdir()) == ["captures", "metrics"]


def test_the_library_refuses_too_before_writing_anything(tmp_path: Path, project: Path) -> None:
    before = snapshot(project)
    with Analysis([project / "captures" / "run1"], cache_dir=tmp_path / "cache") as a:
        for partition_by in ("recorder_id", None):
            with pytest.raises(AnalysisError, match="nothing was changed"):
                a.export_parquet(project, partition_by=partition_by)
    assert snapshot(project) == before and sorted(p.name for p in project.iterdir()) == ["captures", "metrics"]


def test_a_users_own_file_named_like_a_flat_table_is_kept(tmp_path: Path, project: Path) -> None:
    out = tmp_path / "warehouse"
    out.mkdir()
    (out / "metrics.parquet").write_bytes(b"mine")
    result = export(tmp_path, project / "captures", out)
    assert result.exit_code == 1 and f"{out / 'metrics.parquet'} (not written" in result.output, result.output
    assert [p.name for p in out.iterdir()] == ["metrics.parquet"] and (out / "metrics.parquet").read_bytes() == b"mine"


def test_an_export_replaces_what_an_earlier_export_wrote_in_either_form(tmp_path: Path, project: Path) -> None:
    out = tmp_path / "warehouse"
    (out / "mine").mkdir(parents=True)  # the folder's other entries are left alone
    (out / "mine" / "keep.txt").write_text("x")
    count = "SELECT count(*) FROM read_parquet('{}')"
    for capture, partition, rows in (("captures", "recorder", 3), ("captures/run1", "recorder", 2), ("captures/run2", "none", 1)):
        result = export(tmp_path, project / capture, out, "--partition-by", partition)
        assert result.exit_code == 0, result.output
        files = out / "exchanges" / "*" / "*.parquet" if partition == "recorder" else out / "exchanges.parquet"
        assert duckdb.sql(count.format(files)).fetchall() == [(rows,)]
    assert not (out / "exchanges").exists() and (out / "mine" / "keep.txt").read_text() == "x"
    assert sorted(p.name for p in out.iterdir()) == sorted([LEDGER, "mine", *(f"{name}.parquet" for name in EXPORTED)])
    assert export(tmp_path, project / "captures", out).exit_code == 0  # and back: no flat file left beside the folders
    assert not list(out.glob("*.parquet")) and not list(out.glob(".infertap-export-*"))


def test_a_recording_made_inside_an_exported_table_is_never_replaced(tmp_path: Path, project: Path) -> None:
    """An export into a folder a recorder later wrote into (record --out DIR/captures/run3): the
    `captures` table's folder is the export's, but the capture in it is not."""
    out = tmp_path / "warehouse"
    assert export(tmp_path, project / "captures", out).exit_code == 0
    write_capture(out / "captures" / "run3", [{}])
    (segment,) = segment_paths(out / "captures" / "run3")
    result = export(tmp_path, project / "captures", out)
    assert result.exit_code == 1 and f"{out / 'captures'} (it holds captures)" in result.output, result.output
    assert segment_paths(out / "captures" / "run3") == [segment]


def test_an_export_replaces_a_ray_exports_tables(tmp_path: Path, project: Path) -> None:
    """An `export --ray` names its tables in its manifest: a local export into its folder replaces them."""
    out = tmp_path / "warehouse"
    assert export(tmp_path, project / "captures", out).exit_code == 0
    (out / LEDGER).unlink()  # as `export --ray` leaves it: a manifest, its tables named
    (out / MANIFEST).write_text(json.dumps({"tables": dict.fromkeys(EXPORTED, 0)}))
    result = export(tmp_path, project / "captures" / "run2", out)
    assert result.exit_code == 0, result.output
    assert not (out / MANIFEST).exists() and (out / LEDGER).exists()


@pytest.mark.parametrize("partition", ["recorder", "none"])
def test_an_export_made_before_the_ledger_is_still_replaced(tmp_path: Path, project: Path, partition: str) -> None:
    """Exports before 2026-12-05 wrote no ledger: a new export into their folder was refused for
    every table. A folder of Parquet tables that holds `captures` and `exchanges` is one of them."""
    out = tmp_path / "warehouse"
    assert export(tmp_path, project / "captures", out, "--partition-by", partition).exit_code == 0
    (out / LEDGER).unlink()  # as the earlier version left it
    result = export(tmp_path, project / "captures" / "run1", out, "--partition-by", partition)
    assert result.exit_code == 0, result.output
    files = out / "exchanges" / "*" / "*.parquet" if partition == "recorder" else out / "exchanges.parquet"
    assert duckdb.sql(f"SELECT count(*) FROM read_parquet('{files}')").fetchall() == [(2,)]


def test_parquet_of_ones_own_beside_no_export_is_not_taken_for_one(tmp_path: Path, project: Path) -> None:
    """Without a ledger, Parquet named like one table (a user's own metrics) is still not an export's."""
    out = tmp_path / "warehouse"
    (out / "metrics").mkdir(parents=True)
    duckdb.sql(f"COPY (SELECT 1 AS x) TO '{out / 'metrics' / 'mine.parquet'}' (FORMAT parquet)")
    before = snapshot(out)
    result = export(tmp_path, project / "captures", out)
    assert result.exit_code == 1 and f"{out / 'metrics'} (not written by an infertap export)" in result.output
    assert snapshot(out) == before


def test_an_export_that_fails_partway_leaves_the_earlier_one_whole(
    tmp_path: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tables were swapped in one at a time: a disk that filled up on the fifth left four tables of
    the new export beside the rest of the old one, and a ledger that said nothing of it."""
    out = tmp_path / "warehouse"
    assert export(tmp_path, project / "captures" / "run1", out).exit_code == 0
    before = snapshot(out)
    write = Analysis._export_table

    def full_disk(self: Analysis, name: str, into: Path, partition_by: str | None) -> None:
        if name == EXPORTED[4]:
            raise OSError(28, "No space left on device")
        write(self, name, into, partition_by)

    monkeypatch.setattr(Analysis, "_export_table", full_disk)
    result = export(tmp_path, project / "captures", out)
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert f"export to {out} failed writing the {EXPORTED[4]} table" in result.output
    assert "No space left on device" in result.output
    assert snapshot(out) == before and not list(out.glob(".infertap-export-*"))
