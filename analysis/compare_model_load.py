"""A model load on either side of ``compare``, said beside its speed ratios.

Ollama reports ``load_duration``: a few ms for a model already in memory, seconds for a cold load.
A cold load sits inside the client's ttft and e2e, so a B/A ratio over a run whose first request
waited 2 s for the model holds a cold start on one side, not the engines' speed. ``stats`` says which
requests waited (server_figures.py's rule, ``LOADED``); compare says it of each side over the pairs
its speed table is over, and nothing where neither side waited.
"""

from __future__ import annotations

from typing import Any

from infertap.wording import counted

from .server_figures import LISTED, LOADED, SOURCE, duration_text

#: Exchange ids named in a side's line (``--json`` lists up to ``LISTED``).
NAMED = 5


def model_load(con: Any, a: str, b: str, pairs: str) -> dict[str, Any]:
    """Each side's model load over the pairs of the speed table (generation requests ok on both
    sides): ``None`` where none of its answers reported a load time (no engine but Ollama does), else
    ``reported`` (answers with a load time), ``waited`` (of them, those the load made their ttft:
    ``LOADED``), ``waited_ms`` (their loads in all) and ``exchange_ids`` (the first of them, in pair order)."""
    out: dict[str, Any] = {}
    for side in ("a", "b"):
        me = "ma" if side == "a" else "mb"
        reported, waited, waited_ns, ids = con.execute(
            f"SELECT count({me}.server_load_ns), count(*) FILTER (WHERE {me}.loaded), "
            f"sum({me}.server_load_ns) FILTER (WHERE {me}.loaded), "
            f"(list({me}.exchange_id ORDER BY p.ord) FILTER (WHERE {me}.loaded))[1:{LISTED}] FROM {pairs} p "
            f"JOIN (SELECT *, coalesce({LOADED}, false) AS loaded FROM {a}_m) ma ON ma.exchange_id = p.a_id "
            f"JOIN (SELECT *, coalesce({LOADED}, false) AS loaded FROM {b}_m) mb ON mb.exchange_id = p.b_id "
            "WHERE ma.ok AND mb.ok AND ma.generation AND mb.generation"  # compare.speed's pairs
        ).fetchall()[0]
        out[side] = (
            {
                "source": SOURCE,
                "reported": reported,
                "waited": waited,
                "waited_ms": None if waited_ns is None else waited_ns / 1e6,
                "exchange_ids": list(ids or []),
            }
            if reported
            else None
        )
    return out


def model_load_lines(load: dict[str, Any] | None) -> list[tuple[str, bool]]:
    """A line per side where either side had a request wait for a model load (none where neither
    did, the speed section as it ever was), and which ratios it leans, each with whether it warns:
    said by ``compare`` under the speed table and by the HTML report alike."""
    if not load or not any((load.get(side) or {}).get("waited") for side in ("a", "b")):
        return []
    lines: list[tuple[str, bool]] = []
    for side in ("a", "b"):
        x, who = load.get(side), side.upper()
        if x is None:
            lines.append(
                (
                    f"{who}: no model load time reported (only Ollama reports one, its load_duration): a load there would not be seen",
                    False,
                )
            )
        elif not x["waited"]:
            lines.append(
                (
                    f"{who}: no request waited for a model load ({counted(x['reported'], 'answer')} reported a load time, {SOURCE})",
                    False,
                )
            )
        else:
            n = x["waited"]
            ids = x["exchange_ids"][:NAMED]
            named = ", ".join(ids) + (f" and {n - len(ids)} more" if n > len(ids) else "")
            lines.append(
                (
                    f"{who}: {counted(n, 'request')} waited for a model load ({duration_text(x['waited_ms'])}"
                    f"{' in all' if n > 1 else ''}, {SOURCE}, server-measured: {named}): "
                    f"{'its' if n == 1 else 'their'} ttft and e2e include it",
                    True,
                )
            )
    loaded = [side.upper() for side in ("a", "b") if (load.get(side) or {}).get("waited")]
    if len(loaded) == 1:
        lines.append(
            (
                f"B/A's ttft and e2e include a model load on {loaded[0]} only: a cold start on one side, not the engines' speed",
                True,
            )
        )
    return lines
