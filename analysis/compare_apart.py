"""The speed of the requests with no text tokens to time (image, video, speech generation; embeddings), by kind.

compare's speed table is over text generation requests: ttft and tpot mean nothing for an image or a
vector, so those requests were in no figure, and two runs of an image workload compared nothing of
their speed at all. What they have is per request: how each side answered (ok, failed and how, as
compare_outcomes says it) and e2e, request sent to last byte. Compared over the pairs of each kind ok
on both sides, as the text speed is: B/A of the p50, with its bootstrap interval.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from infertap.capture.identity import APART

from .compare_outcomes import failure, side_line
from .media import apart_sql
from .ratios import bootstrap_ratio, distribution


def _kind(m: str) -> str:
    """A metrics row's kind of ``APART`` (``image``, ..., ``embeddings``) as SQL, null for any other request."""
    return "coalesce(" + ", ".join(apart_sql(name, f"{m}.path", f"{m}.method") for name in APART) + ")"


def apart_speed(con: Any, a: str, b: str, pairs: str) -> dict[str, dict[str, Any]]:
    """By kind (none where neither side sent one): each side's requests of that kind (``<name>_m`` of
    runs ``a``, ``b``; not refused) by outcome, and e2e over ``pairs``' pairs of that kind ok on both
    sides: each side's distribution (ms), B/A of the p50 and its 95% interval."""
    out: dict[str, dict[str, Any]] = {}
    for side, name in (("a", a), ("b", b)):
        rows = con.execute(
            f"SELECT {_kind('m')} AS kind, count(*), count(*) FILTER (WHERE coalesce(m.ok, false)) FROM {name}_m m "
            "WHERE NOT m.generation AND m.\"end\" IS DISTINCT FROM 'refused' AND kind IS NOT NULL GROUP BY kind"
        ).fetchall()
        for kind, requests, ok in rows:
            errors = con.execute(
                f"SELECT {failure('m')} AS why, count(*) FROM {name}_m m WHERE NOT m.generation "
                f"AND m.\"end\" IS DISTINCT FROM 'refused' AND {_kind('m')} = ? AND NOT coalesce(m.ok, false) "
                "GROUP BY why ORDER BY 2 DESC, 1",
                [kind],
            ).fetchall()
            out.setdefault(kind, {})[side] = {
                "requests": requests,
                "ok": ok,
                "failed": requests - ok,
                "unfinished": 0,
                "errors": dict(errors),
            }
    for kind, sides in out.items():
        for side in ("a", "b"):
            sides.setdefault(side, {"requests": 0, "ok": 0, "failed": 0, "unfinished": 0, "errors": {}})
        values = con.execute(
            f"SELECT ma.e2e_ns, mb.e2e_ns FROM {pairs} p JOIN {a}_m ma ON ma.exchange_id = p.a_id "
            f"JOIN {b}_m mb ON mb.exchange_id = p.b_id WHERE {_kind('ma')} = ? AND {_kind('mb')} = ? "
            "AND ma.ok AND mb.ok AND ma.e2e_ns IS NOT NULL AND mb.e2e_ns IS NOT NULL ORDER BY p.ord",
            [kind, kind],
        ).fetchall()
        va = np.array([x for x, _ in values], dtype=np.float64) / 1e6
        vb = np.array([y for _, y in values], dtype=np.float64) / 1e6
        da, db = distribution(va), distribution(vb)
        sides["e2e"] = {
            "unit": "ms",
            "a": da,
            "b": db,
            "ratio_p50": db["p50"] / da["p50"] if da["p50"] and db["p50"] is not None else None,
            "ratio_ci95": bootstrap_ratio(va, vb),
        }
    return dict(sorted(out.items()))


def apart_lines(speed: dict[str, dict[str, Any]] | None) -> list[tuple[str, bool]]:
    """``apart_speed`` in words, as (text, whether it warns): per kind, each side's answers and e2e."""
    lines = []
    for kind, s in (speed or {}).items():
        what = "embeddings" if kind == "embeddings" else f"{kind} generation"
        answers = "; ".join(side_line(side.upper(), s[side]) for side in ("a", "b"))
        e = s["e2e"]
        if e["a"]["n"]:
            ratio = f"{e['ratio_p50']:.3g}" if e["ratio_p50"] is not None else "-"
            ci = f" (95% CI {e['ratio_ci95'][0]:.3g}-{e['ratio_ci95'][1]:.3g})" if e["ratio_ci95"] else ""
            timed = (
                f"e2e p50 A {e['a']['p50']:.1f} ms, B {e['b']['p50']:.1f} ms, B/A {ratio}{ci} "
                f"over {e['a']['n']} pairs ok on both sides"
            )
        else:
            timed = "e2e over no pair ok on both sides"
        failed = bool(s["a"]["failed"] or s["b"]["failed"])
        lines.append((f"{what} requests (no text tokens: e2e only): {answers}; {timed}", failed))
    return lines


__all__ = ["apart_lines", "apart_speed"]
