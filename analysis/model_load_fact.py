"""The claim card's model-load fact: how many of a run's requests waited for Ollama to load the model.

A card's ttft and e2e figures hold a cold load where one happened (a 2 s wait for the model before
the first request ran): read far from ``stats``' note, that looks like the engine's speed. The fact
gives stats' counts (server_figures.py's rule); "none" where loads were reported and none waited;
unknown, with the reason, where the engine reports no load time at all (only Ollama does).
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
    value = {
        "reported": load["requests"],  # answers that reported a load time, however short
        "waited": load["waited"],  # of them, those whose load made their ttft (server_figures.LOADED)
        "waited_ms": load["waited_ms"],
        # Of those, the ok answers: the figures' ttft and e2e include their loads.
        "in_figures": load["in_ttft"]["requests"],
        "exchange_ids": load["in_ttft"]["exchange_ids"],
    }
    return {"value": value, "source": f"{SOURCE} (server-measured); rule: analysis/server_figures.py"}


def load_line(fact: dict[str, Any] | None) -> str | None:
    """The fact in words under the card's figures; None where it is unknown (the engine reports no load
    time: ``--json`` says so) or absent (a card older than the fact)."""
    value = (fact or {}).get("value")
    if value is None:
        return None
    head = f"model load ({SOURCE}, server-measured): "
    if not value["waited"]:
        return head + f"none: no request waited for a load ({counted(value['reported'], 'answer')} reported a load time)"
    said = f"{counted(value['waited'], 'request')} waited for a load, {duration_text(value['waited_ms'])}"
    said += " in all" if value["waited"] > 1 else ""
    n = value["in_figures"]
    if not n:
        return head + said + ": none of them ok, so no figure above includes it"
    ids = ", ".join(value["exchange_ids"][:5]) + (f" and {n - 5} more" if n > 5 else "")
    return head + said + f": the ttft and e2e above include it for {counted(n, 'ok request')} ({ids})"
