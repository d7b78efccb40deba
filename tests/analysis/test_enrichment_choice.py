"""Which enrichment an exchange takes: the same one in the ``enrichment_latest`` view (stats, sql), in
compare's choice and in replay's ``--pin-defaults``.

Two enrichments of one exchange at one ``wall`` were broken arbitrarily by the view (the decoded
table had no record order) while compare and replay took the later record; the view now orders by
the record's place (``enrichments.ord``) too. And an enrichment names its exchange by id alone: of an
id two exchanges carry (named apart ``<id>~2``), the view and compare attached it to the first, a
guess; it is now attached to none, and counted in the warning."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infertap.analysis import Analysis
from infertap.analysis.compare import Run, Workspace, compare
from infertap.analysis.summaries import load_enrichment
from infertap.replay.workload import load_workload
from tests.analysis_builders import body, enrichment, event, exchange, sse, write_capture

WALL = 1.8e9 + 5


def _enriched(penalty: float, count: int, ids: list[int]) -> dict[str, Any]:
    """An enrichment of exchange "x" at ``WALL``, by an engine whose probe succeeded."""
    return enrichment(
        "x",
        prompt_ids=ids,
        output_count=count,
        wall=WALL,
        settings={"repeat_penalty": {"value": penalty, "source": "engine_default"}},
    )


def _choices(path: Path, cache: Path) -> dict[str, Any]:
    """What the view, compare and --pin-defaults each take of exchange "x": (output count, prompt ids, repeat_penalty)."""
    with Analysis([path], cache_dir=cache) as a:
        [(count, ids, settings)] = a.sql("SELECT output_tokens, prompt_ids, settings FROM enrichment_latest").fetchall()
        [(metric,)] = a.sql("SELECT output_tokens FROM metrics WHERE exchange_id = 'x'").fetchall()
        assert metric == count  # stats' output count is the view's
        view = (count, list(ids), json.loads(settings)["repeat_penalty"]["value"])
    with Workspace() as ws:
        Run(path, ws, "a", metrics=False)
        [(blobs,)] = ws.con.execute("SELECT enrichment FROM a_e").fetchall()
        chosen = load_enrichment(blobs)
        by_compare = (
            chosen["output_tokens"]["count"],
            chosen["prompt_tokens"]["ids"],
            chosen["settings"]["repeat_penalty"]["value"],
        )
    [item] = load_workload(path).items
    return {"view": view, "compare": by_compare, "pin": item.settings["repeat_penalty"]["value"]}


def test_of_two_enrichments_at_one_wall_all_take_the_later_record(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    first, second = _enriched(1.1, 7, [1, 2, 3]), _enriched(1.0, 9, [1, 2, 4])
    answer = exchange("x", request=body("q"), chunks=[(5, sse(event("a"), event("b")))])
    for name, order, later in (("fwd", [first, second], (9, [1, 2, 4], 1.0)), ("rev", [second, first], (7, [1, 2, 3], 1.1))):
        path = write_capture(tmp_path / name, [answer, *order])
        got = _choices(path, tmp_path / "cache")
        # Must match: all three take the later record; must differ: reversing the records flips all three.
        assert got == {"view": later, "compare": later, "pin": later[2]}, (name, got)


def test_an_enrichment_of_an_id_two_exchanges_carry_is_attached_to_none(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    records = [
        exchange("dup", sent_ms=0, request=body("q0"), chunks=[(5, sse(event("a")))]),
        exchange("dup", sent_ms=10, request=body("q1"), chunks=[(5, sse(event("b")))]),  # a copy's id, another request
        exchange("one", sent_ms=20, request=body("q2"), chunks=[(5, sse(event("c")))]),
        enrichment("dup", prompt_ids=[1, 2], output_count=7),  # written for one of the two: which is unknown
        enrichment("one", prompt_ids=[3, 4], output_count=8),
    ]
    a, b = write_capture(tmp_path / "a", records), write_capture(tmp_path / "b", records)
    with Analysis([a], cache_dir=tmp_path / "cache") as an:
        got = dict(an.sql("SELECT exchange_id, output_tokens_source FROM metrics").fetchall())
        assert got == {"dup": "chunks", "dup~2": "chunks", "one": "tokenize"}  # must match: "one" takes its own
        kept = dict(an.sql("SELECT exchange_id, attached FROM enrichments").fetchall())
        assert kept == {"dup": False, "one": True}  # the row is kept, said unattached
        assert an.sql("SELECT exchange_id FROM enrichment_latest").fetchall() == [("one",)]
        [warning] = an.warnings
        assert (
            "1 enrichment names no exchange the capture holds (an id several exchanges carry with no occurrence, "
            "or an occurrence past the id's exchanges): attached to none" in warning
        )
    with Workspace() as ws:
        Run(a, ws, "a", metrics=False)
        assert ws.con.execute("SELECT exchange_id FROM a_e").fetchall() == [("one",)]
    r = compare(a, b)
    assert r["pairing"]["pairs"] == 3 and r["config"]["prompts"]["compared"] == 1, r["config"]["prompts"]
    assert "attached to none" in r["a"]["repeated_ids"]
