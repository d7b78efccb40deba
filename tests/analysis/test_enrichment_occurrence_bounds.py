"""An enrichment of an id several exchanges carry attaches to the exchange its ``occurrence`` names.

One naming an occurrence past the id's exchanges was renamed to ``<id>~k``, an exchange the capture
doesn't hold, and counted attached; it is now attached to none and said, as one with no occurrence
is, and ``--pin-defaults`` pins none of the id's exchanges from it. And an exchange of a repeated id
with no enrichment of its own, another of its id's being enriched, was counted ``unpinned`` by the
replay while the analysis counted nothing: both now count nothing there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb

from infertap.analysis import Analysis, decoding
from infertap.analysis.decoding import decode_capture
from infertap.analysis.summaries import summarize_capture
from infertap.replay.workload import load_workload
from tests.analysis_builders import body, enrichment, event, exchange, sse, write_capture


def _capture(path: Path, occurrences: list[tuple[int, float]], one: int = 1) -> Path:
    """Two exchanges of "dup" and one of "one", enriched: "dup" once per (occurrence, repeat_penalty), "one"
    at 1.2 (as its occurrence ``one``)."""
    records = [
        exchange("dup", sent_ms=0, request=body("q0"), chunks=[(5, sse(event("a")))]),
        exchange("dup", sent_ms=10, request=body("q1"), chunks=[(5, sse(event("b")))]),
        exchange("one", sent_ms=20, request=body("q2"), chunks=[(5, sse(event("c")))]),
        *(
            enrichment("dup", prompt_ids=[1, 2], output_count=7, occurrence=k, settings={"repeat_penalty": {"value": v}})
            for k, v in occurrences
        ),
        enrichment("one", prompt_ids=[3], output_count=8, occurrence=one, settings={"repeat_penalty": {"value": 1.2}}),
    ]
    return write_capture(path, records)


def _both(path: Path, cache: Path) -> dict[str, Any]:
    """What the analysis attaches (each exchange's repeat_penalty, the enrichments left unattached) and
    what --pin-defaults pins (each exchange's, and how many it counts unpinned)."""
    with Analysis([path], cache_dir=cache) as an:
        rows = an.sql("SELECT exchange_id, settings FROM enrichment_latest").fetchall()
        attached = {x: json.loads(s)["repeat_penalty"]["value"] for x, s in rows}
        [(loose,)] = an.sql("SELECT count(*) FROM enrichments WHERE NOT attached").fetchall()
        said = [w for w in an.warnings if "attached to none" in w]
    workload = load_workload(path)
    names = ["dup", "dup~2", "one"]  # the items in record order, named as the analysis names them
    pinned = {
        n: (item.settings or {}).get("repeat_penalty", {}).get("value") for n, item in zip(names, workload.items, strict=True)
    }
    side = summarize_capture(path, cache.parent / f"summaries-{path.name}")  # compare's reading of it
    summarized = {x for (x,) in duckdb.sql(f"SELECT exchange_id FROM '{side.enrichments_file}'").fetchall()}
    return {
        "attached": attached,
        "loose": loose,
        "said": len(said),
        "pinned": pinned,
        "unpinned": workload.unpinned,
        "summarized": summarized,
        "summary_said": side.repeated,
    }


def test_an_occurrence_past_the_ids_exchanges_is_attached_to_none(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    # Must differ: occurrence 3 of an id two exchanges carry attaches to none, is said, and pins nothing.
    past = _both(_capture(tmp_path / "past", [(3, 1.1)]), tmp_path / "cache")
    assert past["attached"] == {"one": 1.2}
    assert past["loose"] == 1 and past["said"] == 1
    assert past["pinned"] == {"dup": None, "dup~2": None, "one": 1.2}
    assert past["unpinned"] == 2  # both of "dup"'s exchanges: the enrichment naming their id is attached to none
    # Must match: occurrence 2 attaches to the second, as the replay pins it.
    second = _both(_capture(tmp_path / "second", [(2, 1.1)]), tmp_path / "cache")
    assert second["attached"] == {"dup~2": 1.1, "one": 1.2}
    assert second["loose"] == 0 and second["said"] == 0


def test_replay_and_analysis_agree_on_an_exchange_with_no_enrichment_of_its_own(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    for name, occurrences in (
        ("first", [(1, 1.1)]),
        ("second", [(2, 1.1)]),
        ("both", [(1, 1.1), (2, 1.3)]),
        ("past", [(1, 1.1), (3, 1.3)]),
    ):
        got = _both(_capture(tmp_path / name, occurrences), tmp_path / "cache")
        # Must match: each exchange is pinned what the analysis attaches to it, none more, none less.
        assert got["pinned"] == {n: got["attached"].get(n) for n in ("dup", "dup~2", "one")}, (name, got)
        # An exchange of "dup" with none of its own is counted unpinned where, and only where, the
        # analysis leaves an enrichment of "dup" attached to none.
        bare = sum(got["pinned"][n] is None for n in ("dup", "dup~2"))
        assert got["unpinned"] == (bare if got["loose"] else 0), (name, got)
        assert bool(got["loose"]) == bool(got["said"]), (name, got)
    # Must differ: past the id's exchanges, the second exchange is pinned nothing and counted.
    assert got["unpinned"] == 1 and got["loose"] == 1


def test_an_occurrence_past_the_first_of_an_id_one_exchange_carries_is_attached_to_none(tmp_path: Path, monkeypatch) -> None:
    """An enrichment written for the second exchange of "one" (enriched where a copy of it was, say)
    while this capture holds one: it attached to that one, as the analysis, compare and the replay read it."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    # Must differ: occurrence 2 of "one" attaches to none, is said, and pins nothing.
    past = _both(_capture(tmp_path / "past", [(1, 1.1), (2, 1.3)], one=2), tmp_path / "cache")
    assert past["attached"] == {"dup": 1.1, "dup~2": 1.3}
    assert past["loose"] == 1 and past["said"] == 1
    assert past["summarized"] == {"dup", "dup~2"} and "1 enrichment names no exchange the capture holds" in past["summary_said"]
    assert past["pinned"] == {"dup": 1.1, "dup~2": 1.3, "one": None} and past["unpinned"] == 1
    # The same where no id repeats (the decode's first pass is its last).
    alone = write_capture(
        tmp_path / "alone",
        [
            exchange("one", sent_ms=0, request=body("q0"), chunks=[(5, sse(event("a")))]),
            exchange("two", sent_ms=10, request=body("q1"), chunks=[(5, sse(event("b")))]),
            enrichment("one", prompt_ids=[3], output_count=8, occurrence=2, settings={"repeat_penalty": {"value": 1.2}}),
            enrichment("two", prompt_ids=[3, 4], output_count=8, occurrence=1, settings={}),
        ],
    )
    with Analysis([alone], cache_dir=tmp_path / "cache") as an:
        assert an.sql("SELECT exchange_id, attached FROM enrichments").fetchall() == [("one", False), ("two", True)]
        assert an.sql("SELECT exchange_id FROM enrichment_latest").fetchall() == [("two",)]
        [warning] = an.warnings
        assert warning.startswith(f"{alone}: 1 enrichment names no exchange the capture holds") and "attached to none" in warning
    workload = load_workload(alone)
    assert workload.items[0].settings is None and workload.unpinned == 1
    # Decoded in parts, it reads as in one process: counted, and its prompt ids no prefix of the exchange's.
    serial = decode_capture(alone, tmp_path / "serial", str(alone))
    monkeypatch.setattr(decoding, "PARALLEL_BYTES", 0)
    monkeypatch.setattr(decoding, "PART_EXCHANGES", 1)
    parts = decode_capture(alone, tmp_path / "parts", str(alone), workers=2)
    assert parts == serial and serial["unattached_enrichments"] == 1
    prefixes = [duckdb.sql(f"SELECT * FROM '{d}/prefixes.parquet'").fetchall() for d in (tmp_path / "serial", tmp_path / "parts")]
    assert prefixes[0] == prefixes[1]
    # Must match: occurrence 1 of "one" attaches to it, nothing said.
    first = _both(_capture(tmp_path / "first", [(1, 1.1), (2, 1.3)], one=1), tmp_path / "cache")
    assert first["attached"] == {"dup": 1.1, "dup~2": 1.3, "one": 1.2}
    assert first["loose"] == 0 and first["said"] == 0 and "attached to none" not in first["summary_said"]
    assert first["summarized"] == {"dup", "dup~2", "one"}
    assert first["pinned"] == {"dup": 1.1, "dup~2": 1.3, "one": 1.2} and first["unpinned"] == 0
