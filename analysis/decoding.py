"""A whole capture decoded (``decode_capture``): in one process, or in parts by several, with
exchanges that repeat an id named apart.

A large capture is decoded by ``workers`` processes at once: each reads every record (the floor,
zstd and msgpack, is a small share of a decode) and decodes the exchanges of its part (runs of
``PART_EXCHANGES``, dealt in turn), writing its own Parquet files (``part-<p>/<table>.parquet``).
What needs every generation request in order, prefix reuse and session linking, is one pass in
the calling process: while the parts decode, it reads the capture once more for the request bodies
(kept as prefixes, not handed over) and the enrichments' prompt token ids; after them, with each
generation request's times, id and links that the parts hand over, it finds prefix reuse and links
the sessions. The tables hold the same rows as a decode in one
process; rows of different parts are not in record order (queries that care say ORDER BY).
"""

from __future__ import annotations

import os
import pickle
import shutil
from array import array
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from infertap.capture.errors import CaptureCorruptError
from infertap.capture.segments import snapshot
from infertap.collector import no_cyclic_gc
from infertap.errors import InfertapError
from infertap.spawning import exit_with_parent, worker_context, workers_can_start

from .prefix import PrefixIndex
from .schema import TABLES

if TYPE_CHECKING:  # imported where parts are merged: reading the cache needs no numpy
    import numpy as np

    # Imported where a capture is read: a warm `stats` lists its segments (the cache's key) without
    # the reader's zstandard and msgpack.
    from infertap.capture.reader import CaptureReader

    # Imported where a decode runs: a warm `stats` reads the cache's tables without the decoder.
    from .decode import Decoder, Generations

#: What the decode's workers import, imported once by the server they are forked from: the decoder,
#: and Arrow's Parquet writer (with numpy: 0.2 s CPU that each worker paid again at its first batch).
DECODER = (f"{__package__}.decode", "pyarrow.parquet")

#: Exchanges dealt to a part at a time: part p of k decodes the p-th, (p+k)-th ... run of this many.
PART_EXCHANGES = 4_096
#: A capture of at least this many bytes (its segments on disk) is decoded in parts when more than
#: one worker is allowed (one part per half of it, up to the workers and ``MAX_PARTS``): below it,
#: starting the processes costs more than they save. Agent traffic has the most bytes per unit of
#: decode work (long requests, few events); measured on 2 cores with it, 5 MiB in two parts was
#: 2.8-3.1 s of wall time against 3.0-3.2 s in one, 9 MiB 3.7-4.0 s against 5.1-6.4 s.
PARALLEL_BYTES = 8 << 20
#: Each part reads every record (about a twentieth of a decode's work): more parts than this would
#: spend more on reading than they save.
MAX_PARTS = 16
_GENERATIONS = "generations.pickle"  # a part's generation requests, for the pass over the whole
_ROWS = 65_536  # generation requests pickled at a time


def decode_capture(path: Path, out: Path, capture: str | None = None, workers: int = 1) -> dict[str, Any]:
    """Decode the capture at ``path`` into ``out`` (``table_files`` lists each table's files); returns
    what the cache keeps about it. ``workers`` > 1: in that many processes when the capture is large.

    Every table keys an exchange's rows on (capture, exchange id), so two exchanges of one capture
    with the same id (a segment copied in twice, a capture put together by hand) would be joined
    with each other's rows and counted over and over. When the first pass finds such ids, the
    capture is decoded again, in one process, with each later exchange of a repeated id named
    ``<id>~2``, ``<id>~3`` (an enrichment naming the id is attached to none: which of them it was
    written for is unknown), and the meta says so (``repeated_ids``).
    """
    from .decode import decode_records

    capture = capture or str(path)
    # Every reader below reads the segments as they are now, up to these sizes: a recorder still
    # writing to the capture adds records that the parts and the pass over the whole would not agree on.
    try:
        sizes: dict[str, int] | None = snapshot(path)
    except (OSError, InfertapError):
        sizes = None  # decode_records says what is wrong with it
    size = sum(sizes.values()) if sizes else 0
    large = size >= PARALLEL_BYTES and workers > 1 and workers_can_start()
    parts = min(workers, os.cpu_count() or 1, MAX_PARTS, size // max(1, PARALLEL_BYTES // 2)) if large else 1
    whole: Decoder | None = None  # the decoder that saw every exchange's id
    meta: dict[str, Any] | None = None
    if parts > 1:
        try:
            meta, whole = _in_parts(path, out, capture, parts, sizes)
        except BrokenProcessPool:  # a worker could not start or was killed
            _empty(out)
    if meta is None or whole is None:
        meta, whole = decode_records(path, out, capture, sizes=sizes)
    twice = whole.twice
    repeated = (
        {x: whole.ids[x] for x in twice} if twice is not None else repeated_ids(table_files(out, "exchanges"), "exchange_id")
    )
    if not repeated:
        return meta
    _empty(out)
    meta, decoder = decode_records(path, out, capture, repeated, sizes=sizes)
    meta["repeated_ids"] = repeats(repeated, sum(k - 1 for k in decoder.seen.values()), decoder.unattached)
    return meta


def decode_pool(workers: int, module: str) -> ProcessPoolExecutor:
    """Processes for a decode's work (the functions of ``module``), forked from a server that
    imported the decoder and Arrow once, each ending with its caller (see ``worker_context``)."""
    return ProcessPoolExecutor(workers, mp_context=worker_context(module, *DECODER), initializer=exit_with_parent)


def _empty(folder: Path) -> None:
    for item in folder.iterdir():
        shutil.rmtree(item) if item.is_dir() else item.unlink()


def table_files(folder: Path, name: str) -> list[Path]:
    """The Parquet files of table ``name`` in a decoded capture's folder: one, or one per part."""
    whole = folder / f"{name}.parquet"
    if whole.exists():
        return [whole]
    return sorted(folder.glob(f"part-*/{name}.parquet"), key=lambda f: int(f.parent.name.split("-")[1]))


def repeats(repeated: Mapping[str, int], renamed: int, unattached: int = 0) -> dict[str, Any]:
    """What is kept of the ids named apart: how many, how many exchanges were renamed, one of them,
    and how many enrichments name no exchange the capture holds, attached to none (no occurrence of a
    repeated id, or one past the id's exchanges: ``decode.enrichment_attached``)."""
    return {"ids": len(repeated), "exchanges": renamed, "example": min(repeated), "enrichments": unattached}


def repeats_warning(capture: str | os.PathLike[str], r: dict[str, Any]) -> str:
    said = (
        f"{capture}: {r['exchanges']} exchanges carry the id of an earlier one ({r['ids']} ids, e.g. "
        f"{r['example']!r}: a segment copied in twice?); in the tables they are named <id>~2, <id>~3, ..."
    )
    if n := r.get("enrichments"):
        said += f"; {unattached_words(n)}"
    return said


def unattached_warning(capture: str | os.PathLike[str], n: int) -> str:
    """Said where enrichments are attached to none in a capture whose exchange ids are each its own."""
    return f"{capture}: {unattached_words(n)}"


def cut_requests_warning(capture: str | os.PathLike[str], n: int) -> str:
    """Said where compressed request bodies were recorded cut short inside their stream (``requests.body_cut``)."""
    return (
        f"{capture}: {n} compressed request bod{'ies were' if n != 1 else 'y was'} recorded cut short inside "
        f"{'their' if n != 1 else 'its'} Content-Encoding (a gzip trailer or the JSON's end missing): read as far as "
        "the bytes go, never the body the client sent (requests.body_cut marks them); replay refuses to edit them"
    )


def mislabelled_warning(capture: str | os.PathLike[str], n: int) -> str:
    """Said where request bodies are plain JSON under a content-encoding they aren't in (``apis.body.mislabelled``)."""
    return (
        f"{capture}: {n} request bod{'ies are' if n != 1 else 'y is'} plain JSON sent under a Content-Encoding "
        f"{'they are' if n != 1 else 'it is'} not in: read as JSON here, though a server that undoes the encoding "
        "refuses such a body; replay sends it as recorded, and refuses to edit it (--set, --pin-defaults)"
    )


def unattached_words(n: int) -> str:
    return (
        f"{n} enrichment{'s' if n != 1 else ''} name{'' if n != 1 else 's'} no exchange the capture holds "
        "(an id several exchanges carry with no occurrence, or an occurrence past the id's exchanges): attached to none"
    )


def repeated_ids(files: list[Path], column: str) -> dict[str, int]:
    """The ids more than one row of the Parquet ``files`` carries in ``column``, each with its count
    (DuckDB, spilling next to them)."""
    spill = files[0].parent / ".repeated-spill"
    con = duckdb.connect(config={"temp_directory": str(spill), "memory_limit": "512MB"})
    try:
        rows = con.execute(
            f"SELECT {column}, count(*) FROM read_parquet(?, hive_partitioning = false) WHERE {column} IS NOT NULL GROUP BY {column} HAVING count(*) > 1",
            [[str(f) for f in files]],
        ).fetchall()
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)
    return {r[0]: r[1] for r in rows}


def _in_parts(path: Path, out: Path, capture: str, k: int, sizes: dict[str, int] | None) -> tuple[dict[str, Any], Decoder]:
    """The capture decoded by ``k`` processes, then the pass over the whole (see the module's docstring);
    its meta and the decoder of that pass (every exchange's id seen)."""
    import numpy as np

    from .decode import SEQUENTIAL_TABLES, Decoder, table_sink

    out.mkdir(parents=True, exist_ok=True)
    decoder = Decoder(capture, {name: table_sink(out, name, capture) for name in SEQUENTIAL_TABLES})
    try:
        # not fork: the calling process may have threads (DuckDB's, a writer's); see worker_context
        with decode_pool(k, __name__) as pool:
            futures = [
                pool.submit(_part, str(path), str(out / f"part-{p}"), capture, (p, k, PART_EXCHANGES), sizes) for p in range(k)
            ]
            try:
                reader, bodies, items = _whole(path, decoder, sizes)  # while the parts decode
                results = [unwrap(f.result()) for f in futures]
            except BaseException:
                pool.shutdown(cancel_futures=True)
                raise
        with no_cyclic_gc():
            generations, numbers = _merged(out, k)
            generations.bodies = bodies
            generations.items = array("q", np.frombuffer(items, np.int64)[numbers].tobytes())
            decoder.generations = generations
            torn = [str(t) for t in reader.torn]
            decoder.prefixes()
            decoder.turns()
            decoder.capture_row(reader, torn)
    finally:
        rows = {name: sink.close() for name, sink in decoder.sinks.items()}
    for result in results:
        for name, n in result["rows"].items():
            rows[name] = rows.get(name, 0) + n
    meta = {**results[0], "torn": torn, "closed_cleanly": reader.closed_cleanly, "rows": {n: rows[n] for n in TABLES}}
    meta["mislabelled_requests"] = sum(int(r.get("mislabelled_requests") or 0) for r in results)
    meta["cut_requests"] = sum(int(r.get("cut_requests") or 0) for r in results)
    return meta, decoder


def _whole(path: Path, decoder: Decoder, sizes: dict[str, int] | None) -> tuple[CaptureReader, PrefixIndex, array[int]]:
    """What the pass over the whole reads of every record, in this process while the parts decode:
    every exchange's request body into the prefix index (which of them are generation requests the
    parts tell later; the others' items are never asked for), numbered by exchange; the enrichments'
    prompt token ids; the capture's id, record count and exchange ids (into ``decoder``)."""
    from infertap.capture.identity import plain_body
    from infertap.capture.reader import CaptureReader

    from .decode import enrichment_attached

    reader = CaptureReader(path, sizes)
    bodies, items = PrefixIndex(), array("q")
    with no_cyclic_gc():
        for record in reader.records():
            decoder.records += 1
            kind = record["type"]
            if kind == "exchange":
                items.append(bodies.add(plain_body(record)))  # as the serial decode keeps it: decoded
                decoder.id_seen(record.get("id"))
            elif kind == "header":
                decoder.capture_id = decoder.capture_id or record.get("capture_id")
            elif kind == "enrichment" and enrichment_attached(record, {}):  # no repeated id: else decoded again
                decoder.prompt_tokens(record)
    return reader, bodies, items


def _part(
    path: str, folder: str, capture: str, part: tuple[int, int, int], sizes: dict[str, int] | None
) -> dict[str, Any] | tuple[Any, ...]:
    """One part of the capture (``Decoder``'s ``part``), in a worker process; errors travel back as plain data."""
    from .decode import decode_records

    try:
        meta, decoder = decode_records(Path(path), Path(folder), capture, part=part, sizes=sizes)
        g = decoder.generations
        with open(Path(folder) / _GENERATIONS, "wb") as f:
            for start in range(0, len(g.ids), _ROWS):
                end = start + _ROWS
                pickle.dump(
                    (
                        g.sent[start:end],
                        g.seq[start:end],
                        g.end[start:end],
                        g.ids[start:end],
                        g.links[start:end],
                        decoder.numbers[start:end],
                    ),
                    f,
                    protocol=pickle.HIGHEST_PROTOCOL,
                )
        return meta
    except InfertapError as exc:
        return carried(exc)


def carried(exc: InfertapError) -> tuple[Any, ...]:
    """A decode's error as plain data, to come back from a worker process (a CaptureCorruptError
    can't be unpickled: its constructor takes other arguments than it passes up); ``unwrap`` raises it."""
    if isinstance(exc, CaptureCorruptError):
        return ("corrupt", exc.path, exc.offset, exc.reason)
    return ("error", type(exc), str(exc))


def unwrap[T](result: T | tuple[Any, ...]) -> T:
    """A worker's result, or its error (``carried``) raised here."""
    if not isinstance(result, tuple):
        return result
    if result[0] == "corrupt":
        raise CaptureCorruptError(*result[1:])
    raise result[1](result[2])


def _merged(out: Path, k: int) -> tuple[Generations, np.ndarray[Any, Any]]:
    """Every part's generation requests in record order (by exchange number), and those numbers."""
    import numpy as np

    from .decode import Generations

    sent, seq, end, numbers = array("q"), array("q"), array("q"), array("q")
    ids: list[str] = []
    links: list[Any] = []
    for p in range(k):
        file = out / f"part-{p}" / _GENERATIONS
        with open(file, "rb") as f:
            while True:
                try:
                    s, q, e, i, lk, n = pickle.load(f)
                except EOFError:
                    break
                for column, values in ((sent, s), (seq, q), (end, e), (ids, i), (links, lk), (numbers, n)):
                    column.extend(values)
        file.unlink()
    order = np.argsort(np.frombuffer(numbers, np.int64), kind="stable")
    g = Generations()
    g.sent = array("q", np.frombuffer(sent, np.int64)[order].tobytes())
    g.seq = array("q", np.frombuffer(seq, np.int64)[order].tobytes())
    g.end = array("q", np.frombuffer(end, np.int64)[order].tobytes())
    places = order.tolist()
    g.ids = [ids[i] for i in places]
    g.links = [links[i] for i in places]
    return g, np.frombuffer(numbers, np.int64)[order]
