"""Server-measured figures of a group beyond its distributions (docs/metrics.md, Server-measured).

Ollama's ``load_duration`` is the time it took to get the model ready before the request ran: a few ms
for a model already in memory, seconds for a cold load. A load sits inside the client's ttft and e2e,
and it is no part of the engine's speed: a user comparing engines has to see it apart. The engine's own
token counts (Ollama's ``prompt_eval_count``/``eval_count``, llama.cpp's ``prompt_n``/``predicted_n``)
are said beside infertap's where the two differ, since the figures use infertap's.
"""

from __future__ import annotations

from typing import Any

#: The least load time that can be a load: a model already in memory reports a few ms (Ollama times
#: its lookup of the loaded runner: the API docs' warm example says 4 ms), a load proper starts a
#: runner and reads the weights (the docs' cold example: 101 ms for a small model). Without it, a warm
#: answer to a short or cached prompt (a ttft of a few ms too) was called a cold start.
LOAD_FLOOR_NS = 50_000_000
#: A request that waited for a model load: its load took ``LOAD_FLOOR_NS`` or more, and at least half
#: of its time to first token (or, where no first token was seen, of the server's own total): the
#: load, not the engine, made its ttft.
LOADED = (
    f"server_load_ns IS NOT NULL AND server_load_ns >= {LOAD_FLOOR_NS} "
    "AND server_load_ns >= coalesce(ttft_ns, server_total_ns) / 2"
)
#: Exchange ids a group's ``load.in_ttft`` lists (the first, in send order); ``waited`` counts them all.
LISTED = 20

_PROMPT_BOTH = "server_prompt_tokens IS NOT NULL AND prompt_tokens IS NOT NULL"
# llama.cpp's prompt_n leaves its cached tokens out (cache_n), which the API's usage counts.
_SERVER_PROMPT = "server_prompt_tokens + coalesce(server_cached_tokens, 0)"
_PROMPT_DIFFERS = f"{_PROMPT_BOTH} AND {_SERVER_PROMPT} <> prompt_tokens"
_OUTPUT_DIFFERS = "server_decode_tokens IS NOT NULL AND output_tokens IS NOT NULL AND server_decode_tokens <> output_tokens"

#: The aspect's select (stats.py's ``_Query.rows``), one row per group.
SELECT = (
    "count(server_load_ns), sum(server_load_ns), max(server_load_ns), "
    f"count(*) FILTER (WHERE {LOADED}), sum(server_load_ns) FILTER (WHERE {LOADED}), "
    f"count(*) FILTER (WHERE {LOADED} AND ok), sum(server_load_ns) FILTER (WHERE {LOADED} AND ok), "
    f"(list(exchange_id ORDER BY sent_wall_ns, exchange_id) FILTER (WHERE {LOADED} AND ok))[1:{LISTED}], "
    f"count(*) FILTER (WHERE {_PROMPT_DIFFERS}), sum({_SERVER_PROMPT}) FILTER (WHERE {_PROMPT_DIFFERS}), "
    f"sum(prompt_tokens) FILTER (WHERE {_PROMPT_DIFFERS}), "
    f"count(*) FILTER (WHERE {_OUTPUT_DIFFERS}), sum(server_decode_tokens) FILTER (WHERE {_OUTPUT_DIFFERS}), "
    f"sum(output_tokens) FILTER (WHERE {_OUTPUT_DIFFERS})"
)


#: Where the figures come from: Ollama's done line, the one engine that reports a load time.
SOURCE = "Ollama load_duration"


def duration_text(ms: float | None) -> str:
    """A load's time as ``stats``, ``compare`` and the claim card say it: "1.805 s", "101.4 ms", "-"."""
    if ms is None:
        return "-"
    return f"{ms / 1000:.3f} s" if ms >= 1000 else f"{ms:.1f} ms"


def _ms(ns: int | None) -> float | None:
    return None if ns is None else ns / 1e6


def server_figures(row: list[Any]) -> dict[str, Any]:
    """A group's ``load`` (null where no answer reported a load time) and ``counts_differ``, from its row of ``SELECT``."""
    reported, load_ns, max_ns, waited, waited_ns, in_ttft, in_ttft_ns, listed = row[:8]
    prompt_n, prompt_server, prompt_ours, output_n, output_server, output_ours = row[8:]
    load = None
    if reported:
        load = {
            "source": SOURCE,
            "requests": reported,  # answers that reported a load time, however short
            "total_ms": _ms(load_ns),
            "max_ms": _ms(max_ns),
            "waited": waited,  # of them, those whose load took at least half their ttft
            "waited_ms": _ms(waited_ns),
            # Of those, the ok answers: their ttft and e2e, in the speed figures, include the load.
            "in_ttft": {"requests": in_ttft, "exchange_ids": list(listed or [])},
            "in_ttft_ms": _ms(in_ttft_ns) if in_ttft else 0.0,  # their loads in all
        }
    return {
        "load": load,
        "counts_differ": {
            "prompt": {"requests": prompt_n, "server": prompt_server, "infertap": prompt_ours},
            "output": {"requests": output_n, "server": output_server, "infertap": output_ours},
        },
    }
