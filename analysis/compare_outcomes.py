"""How each side of a comparison answered, said before its speed: requests, ok, failures by kind.

Speed is compared over the pairs ok on both sides only. A B that failed a quarter of its answers
(llama-cpp-python's streams of a role chunk and ``[DONE]`` under concurrency) times only the
answers it gave: its ratios read as faster with the failures left unsaid but for the n column.
So compare says per side how many answers failed and how (by status, unfinished, cut short), and
over how many of the pairs its speed figures are ("speed over 15 of 20 pairs: B failed 5 (unfinished)").
"""

from __future__ import annotations

from typing import Any

from .active import COUNTED


def failure(m: str) -> str:
    """Why a row ``m`` of a run's metrics (compare's ``<name>_m``) is not ok, in words; null where ok.
    Unfinished apart: a 200 whose stream said no finish reason (views.UNFINISHED), cut by the engine."""
    return f"""CASE WHEN coalesce({m}.ok, false) THEN NULL
    WHEN {m}.unfinished THEN 'unfinished'
    WHEN {m}.status IS NULL THEN 'no response (' || coalesce({m}."end", 'unknown') || ')'
    WHEN {m}.status NOT BETWEEN 200 AND 299 THEN 'status ' || {m}.status
    WHEN {m}."end" IS DISTINCT FROM 'complete' THEN 'cut short (' || coalesce({m}."end", 'unknown') || ')'
    WHEN {m}.readable THEN 'an error in a ' || {m}.status || ' body'
    ELSE 'a ' || {m}.status || ' body not read' END"""


def outcomes(con: Any, a: str, b: str, pairs: str) -> dict[str, Any]:
    """Each side's requests (``<name>_m`` of runs ``a``, ``b``) by outcome, and the pairs of
    ``pairs`` that speed compares (both ok) or leaves out (a side failed), with each side's reasons."""
    out: dict[str, Any] = {side: _side(con, f"{name}_m") for side, name in (("a", a), ("b", b))}
    joined = (
        f"SELECT {failure('ma')} AS fa, {failure('mb')} AS fb FROM {pairs} p "
        f"JOIN {a}_m ma ON ma.exchange_id = p.a_id JOIN {b}_m mb ON mb.exchange_id = p.b_id "
        "WHERE ma.generation AND mb.generation"  # as speed reads them
    )
    counted = dict.fromkeys(("pairs", "ok_both"), 0)
    failed: dict[str, dict[str, int]] = {"a": {}, "b": {}}
    for fa, fb, n in con.execute(f"SELECT fa, fb, count(*) FROM ({joined}) GROUP BY ALL ORDER BY 3 DESC, 1, 2").fetchall():
        counted["pairs"] += n
        counted["ok_both"] += n if fa is None and fb is None else 0
        for side, why in (("a", fa), ("b", fb)):
            if why is not None:
                failed[side][why] = failed[side].get(why, 0) + n
    out["pairs"] = {**counted, "failed_a": _by_count(failed["a"]), "failed_b": _by_count(failed["b"])}
    out["note"] = speed_over(out["pairs"])
    return out


def _side(con: Any, metrics: str) -> dict[str, Any]:
    """One run's generation requests sent to the engine (``COUNTED``): how many, ok, and each failure's kind."""
    (requests, ok, unfinished) = con.execute(
        f"SELECT count(*), count(*) FILTER (WHERE coalesce(ok, false)), count(*) FILTER (WHERE unfinished) FROM {metrics} WHERE {COUNTED}"
    ).fetchall()[0]
    errors = con.execute(
        f"SELECT {failure('m')} AS why, count(*) FROM {metrics} m WHERE {COUNTED} AND NOT coalesce(ok, false) AND NOT unfinished "
        "GROUP BY why ORDER BY 2 DESC, 1"
    ).fetchall()
    return {"requests": requests, "ok": ok, "failed": requests - ok, "unfinished": unfinished, "errors": dict(errors)}


def _by_count(reasons: dict[str, int]) -> dict[str, int]:
    return dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))


def _reasons(reasons: dict[str, int]) -> str:
    """``unfinished`` where one reason, ``3 unfinished, 2 status 500`` where several."""
    if len(reasons) == 1:
        return next(iter(reasons))
    return ", ".join(f"{n} {why}" for why, n in reasons.items())


def side_line(name: str, side: dict[str, Any]) -> str:
    """``B: 20 requests, 15 ok, 5 failed (5 unfinished)``: a run's answers, as compare and the report say them."""
    line = f"{name}: {side['requests']} requests, {side['ok']} ok"
    if side["failed"]:
        kinds = {**({"unfinished": side["unfinished"]} if side["unfinished"] else {}), **side["errors"]}
        line += f", {side['failed']} failed ({', '.join(f'{n} {why}' for why, n in _by_count(kinds).items())})"
    return line


def speed_over(pairs: dict[str, Any]) -> str | None:
    """What the speed figures leave out, where a side failed any paired answer: ``speed over 15 of 20
    pairs: B failed 5 (unfinished)``; None where every pair was ok on both sides."""
    failed = [
        f"{side} failed {sum(reasons.values())} ({_reasons(reasons)})"
        for side, reasons in (("A", pairs["failed_a"]), ("B", pairs["failed_b"]))
        if reasons
    ]
    if not failed:
        return None
    return (
        f"speed over {pairs['ok_both']} of {pairs['pairs']} pairs, those ok on both sides: {', '.join(failed)}; "
        "a side's failed answers are in none of its speed figures"
    )
