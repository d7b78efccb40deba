"""The claim card's model-load fact: how many of a run's requests waited for Ollama to load the model.

A card's ttft and e2e figures hold a cold load where one happened (a 2 s wait for the model before
the first request ran): read far from ``stats``' note, that looks like the engine's speed. The fact
gives stats' counts (server_figures.py's rule) of the requests the card's figures are over, its ok
ones, and the failed ones that waited apart (in no figure); "none" where loads were reported and none
waited; unknown, with the reason, where the engine reports no load time at all (only Ollama does).
"""

from __future__ import annotations

from typing import Any

from infertap.wording import counted

from .server_figures import SOURCE, duration_text

#: Why a run's fact is unknown: no answer reported a load time.
NOT_REPORTED = f"the engine reported no model load time (only Ollama does, its {SOURCE}): a load inside ttft and e2e is not seen"


def model_load_fact(load: dict[str, Any] | None) -> dict[str, Any]:
    """The fact of one run from its stats group's ``server_timings.load`` (None: no load time reported)."""
    if load is None:
        return {"value": None, "source": "none", "unknown": NOT_REPORTED}
    ok = load["in_ttft"]["requests"]
    # A card older than ``in_ttft_ms`` read every waited request's loads: known only where all were ok.
    ok_ms = load.get("in_ttft_ms", load["waited_ms"] if ok == load["waited"] else None)
    value = {
        "reported": load["requests"],  # answers that reported a load time, however short
        # Of them, the ok answers whose load made their ttft (server_figures.LOADED): the requests the
        # figures are over, whose ttft and e2e include their loads.
        "waited": ok,
        "waited_ms": ok_ms,
        "in_figures": ok,
        "exchange_ids": load["in_ttft"]["exchange_ids"],
        # The failed answers that waited for a load too: in no figure.
        "failed_waited": load["waited"] - ok,
        "failed_waited_ms": None if ok_ms is None or load["waited_ms"] is None else load["waited_ms"] - ok_ms,
    }
    return {"value": value, "source": f"{SOURCE} (server-measured); rule: analysis/server_figures.py"}


def load_line(fact: dict[str, Any] | None) -> str | None:
    """The fact in words under the card's figures; None where it is unknown (the engine reports no load
    time: ``--json`` says so) or absent (a card older than the fact)."""
    value = (fact or {}).get("value")
    if value is None:
        return None
    head = f"model load ({SOURCE}, server-measured): "
    failed = value.get("failed_waited") or 0
    apart = ""
    if failed:
        apart = f"{counted(failed, 'failed request')} waited for a load {'too' if value['waited'] else 'all the same'}, "
        apart += f"{duration_text(value.get('failed_waited_ms'))}{' in all' if failed > 1 else ''}, in no figure"
    if not value["waited"]:
        reported = f"({counted(value['reported'], 'answer')} reported a load time)"
        if failed:
            return head + f"no ok request waited for a load {reported}; {apart}"
        return head + f"none: no request waited for a load {reported}"
    n = value["waited"]
    said = f"{counted(n, 'ok request')} waited for a load, {duration_text(value['waited_ms'])}"
    said += " in all" if n > 1 else ""
    ids = ", ".join(value["exchange_ids"][:5]) + (f" and {n - 5} more" if n > 5 else "")
    return head + said + f": the ttft and e2e above include it ({ids})" + (f"; {apart}" if apart else "")
