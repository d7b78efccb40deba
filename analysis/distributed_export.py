"""``export --ray``: the captures of a fleet decoded on a Ray cluster into one Parquet export.

One task per capture: a worker decodes it (through its cache, as a local load does) and exports it
with ``Analysis.export_parquet`` into a folder of its own under the export's, so every file is what
a local export writes for that capture. The driver only waits for the tasks, then moves their
partition files into place, ``<table>/<key>=<value>/data_<n>.parquet`` (``n`` counts the captures
that share a partition, in the order given), merges the one-row-per-capture ``captures`` table
and writes a manifest. Rows come out as a local export's, partition by partition: sessions of
recordings exported together are linked as one after the parts are done (distributed_sessions.py).

Nothing of an earlier export is replaced until every capture is done: a capture that fails
(corrupt, not found on a worker) removes what the others wrote, and the error names it. Workers
read the captures and write under the export folder by the driver's paths: every node must mount
them at the same place (NFS, a shared volume).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import duckdb

from infertap.errors import InfertapError
from infertap.ray_cluster import ray_cluster
from infertap.version import installed_version

from .cache import cache_root
from .distributed_sessions import join_parts, keep_links
from .errors import AnalysisError
from .sources import locate_captures, refuse_inside_capture
from .stats import live_warnings, liveness, unclosed_runs
from .store import EXPORTED, MANIFEST, Analysis, check_export_folder, claim_export_folder

_STAGING = ".infertap-export-"  # the workers' folders, inside the export's so that a rename moves them


class DistributedExportError(AnalysisError):
    pass


def export_on_ray(
    captures: Iterable[str | os.PathLike[str]],
    folder: str | os.PathLike[str],
    *,
    ray: str = "",
    partition_by: str = "recorder_id",
    cache_dir: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Export ``captures`` as ``Analysis.export_parquet`` does, one Ray task per capture, on the
    cluster at ``ray`` ("": ``RAY_ADDRESS``, else a new local cluster); returns the manifest.

    ``cache_dir``: where workers keep decoded captures (default: each worker's ``$INFERTAP_CACHE``
    or ``~/.cache/infertap``). A glob's matches left out (no capture in them), torn tails and
    captures still being written are in the ``warnings`` returned, as a local export warns of them.
    """
    if partition_by not in ("recorder_id", "run_id"):
        raise AnalysisError(f"a distributed export partitions by recorder_id or run_id, not {partition_by!r}")
    refuse_inside_capture(Path(folder), "the export")
    found = locate_captures(captures)
    paths = [p.resolve() for p in found.captures]  # absolute: a worker's working folder is its own
    check_export_folder(Path(folder))  # it replaces only what exports wrote: checked before the cluster starts
    cache_root(cache_dir)  # one inside a capture is refused here too (a local cluster's workers share this one)
    cache = None if cache_dir is None else str(Path(cache_dir).resolve())
    with ray_cluster(ray, command="export --ray", untouched="nothing was written", error=DistributedExportError) as r:
        left_out = [str(x) for x in found.left_out]  # a glob's matches left out, as a local export warns of them
        return run_export(r, paths, Path(folder).resolve(), partition_by=partition_by, cache_dir=cache, left_out=left_out)


def run_export(
    ray: Any, paths: list[Path], out: Path, *, partition_by: str, cache_dir: str | None, left_out: Sequence[str] = ()
) -> dict[str, Any]:
    """The export of ``paths`` into ``out`` on the connected cluster (``ray``: the module); ``left_out``:
    what the arguments matched but held no capture, the manifest's first warnings."""
    started = time.perf_counter()
    claim_export_folder(out, partition_by)
    staging = out / f"{_STAGING}{uuid.uuid4().hex[:12]}"
    staging.mkdir()
    try:
        task = ray.remote(export_capture).options(num_cpus=1)
        refs = {task.remote(str(p), str(staging / str(k)), partition_by, cache_dir): k for k, p in enumerate(paths)}
        parts = _gather(ray, refs, paths)
        # Whether a capture is still being written is judged here, as a local export judges it: a
        # worker on another machine can't see the recorder's process.
        captures = [{"capture": part["capture"], **liveness(part.pop("open_runs"))} for part in parts]
        live = live_warnings(captures, of="the tables exported")
        tables = {name: sum(part["rows"][name] for part in parts) for name in EXPORTED}
        try:  # all in the staging folder: a failure leaves the export already in ``out`` as it was
            joined = join_parts([staging / str(k) for k in range(len(paths))], partition_by)
            _assemble(staging, [part["rows"] for part in parts], tables)
        except (duckdb.Error, OSError) as exc:  # a full disk, an unreadable part
            raise DistributedExportError(
                f"the parts exported on the cluster can't be put together in {out} ({exc}); {out} is left as it was"
            ) from exc
        _replace(out, staging)
        manifest = {
            "infertap": installed_version(),
            "partition_by": partition_by,
            "tables": tables,
            "captures": parts,
            "hosts": dict(Counter(part["host"] for part in parts)),
            "sessions_joined": joined,  # the recordings whose sessions were linked as one (as stats reads them)
            "warnings": [*left_out, *(w for part in parts for w in part["warnings"]), *live],
            "seconds": round(time.perf_counter() - started, 3),
        }
        _write_json(out / MANIFEST, manifest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest


def export_capture(capture: str, part: str, partition_by: str, cache_dir: str | None) -> dict[str, Any]:
    """One capture exported into the folder ``part``: a Ray task's body (plain Python, callable here)."""
    started = time.perf_counter()
    host = socket.gethostname()
    folder = Path(part)
    if not folder.parent.is_dir():
        raise DistributedExportError(
            f"{folder.parent.parent} is not visible on {host}: export --ray needs the output folder on a "
            "filesystem every node mounts at the same path"
        )
    if not os.path.exists(capture):
        raise DistributedExportError(
            f"{capture}: no such capture on {host}: export --ray needs the captures on a filesystem every "
            "node mounts at the same path"
        )
    shutil.rmtree(folder, ignore_errors=True)  # a task retried after its worker died starts clean
    with Analysis([capture], cache_dir=cache_dir, workers=1) as analysis:
        analysis.con.execute("SET threads = 1")  # the task holds one CPU; its neighbours hold the others
        rows = analysis.export_parquet(folder, partition_by=partition_by)
        keep_links(analysis.con, folder)  # what the driver's join of sessions across captures reads
        return {
            "capture": capture,
            "host": host,
            "pid": os.getpid(),
            "decoded": bool(analysis.decoded),  # False: from the worker's cache
            "warnings": analysis.warnings,
            "open_runs": [run for runs in unclosed_runs(analysis).values() for run in runs],
            "rows": rows,
            "seconds": round(time.perf_counter() - started, 3),
        }


def _gather(ray: Any, refs: dict[Any, int], paths: list[Path]) -> list[dict[str, Any]]:
    """Every task's result, in the order of ``paths``; the first failure cancels the rest and is raised."""
    results: dict[int, dict[str, Any]] = {}
    pending = list(refs)
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                try:
                    results[refs[ref]] = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    raise _failure(exc, paths[refs[ref]]) from exc
    except BaseException:  # a failed capture, Ctrl-C: no task goes on writing into the staging folder
        for ref in pending:
            ray.cancel(ref, force=True)
        if pending:
            ray.wait(pending, num_returns=len(pending), timeout=30)
        raise
    return [results[k] for k in range(len(paths))]


def _failure(exc: BaseException, capture: Path) -> InfertapError:
    """The task's own error as a local export raises it (a corrupt capture: the same message), or
    why its worker was lost."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, InfertapError):
        return cause
    why = f"{type(cause).__name__}: {cause}" if cause is not None else f"{type(exc).__name__}: {exc}"
    return DistributedExportError(f"exporting {capture} failed on a Ray worker, nothing was written: {why}")


def _assemble(staging: Path, parts: list[dict[str, int]], rows: dict[str, int]) -> None:
    """The workers' files as one export in ``staging/final``: partitions side by side, numbered in
    capture order; the unpartitioned ``captures`` table merged. A capture's table with no rows is
    one empty file (its schema) in the partition of an unknown key: left out where another capture
    has rows, as a local export writes no file for no rows; one kept where none has (``parts``: the
    rows of each capture's tables)."""
    final = staging / "final"
    for name in EXPORTED:
        table = final / name
        table.mkdir(parents=True)
        numbered: Counter[str] = Counter()
        loose: list[Path] = []  # unpartitioned: the captures table
        for k, part in enumerate(parts):
            source = staging / str(k) / name
            if rows[name] and not part[name]:
                continue
            for partition in sorted(p for p in source.iterdir() if p.is_dir()):
                (table / partition.name).mkdir(exist_ok=True)
                for file in sorted(partition.glob("*.parquet")):
                    file.rename(table / partition.name / f"data_{numbered[partition.name]}.parquet")
                    numbered[partition.name] += 1
            loose.extend(sorted(source.glob("*.parquet")))
            if not rows[name]:
                break  # a table empty everywhere: the first capture's empty file holds its schema
        if len(loose) > 1:
            import duckdb

            con = duckdb.connect()
            try:
                files = [str(f) for f in loose]
                con.read_parquet(files, hive_partitioning=False).write_parquet(str(table / "data_0.parquet"), compression="zstd")
            finally:
                con.close()
        elif loose:
            loose[0].rename(table / "data_0.parquet")


def _replace(out: Path, staging: Path) -> None:
    """Each table of ``staging/final`` in place of ``out``'s, the old one moved into ``staging`` (removed
    with it), and an earlier unpartitioned export's ``<table>.parquet`` with it: the local export's rule."""
    for name in EXPORTED:
        target = out / name
        if target.exists():
            target.rename(staging / f"old-{name}")
        (out / f"{name}.parquet").unlink(missing_ok=True)
        (staging / "final" / name).rename(target)


def _write_json(path: Path, value: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(value, indent=1, default=str) + "\n")
    tmp.replace(path)
