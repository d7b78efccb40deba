"""The claim card's served models and sampling settings are counted over the exchanges its figures
count (``active.COUNTED``): a request infertap refused (a body over the size limit) was never sent,
so neither its model nor its settings are any the engine served. Captures written by the project's
own writer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infertap.analysis.claim import claim
from tests.analysis_builders import body, enrichment, event, exchange, sse, write_capture


def answer(model: str) -> list[tuple[float, bytes]]:
    """A streamed answer, as ``model`` names itself."""
    events = [{**event("x", role="assistant"), "model": model}, {**event(finish="stop"), "model": model}, "[DONE]"]
    return [(1.0, sse(*events))]


def capture(path: Path, *, refused: bool, enriched: bool) -> dict[str, Any]:
    """A served request for model ``m`` (temperature 0) and one for ``big`` (temperature 0.7),
    refused by infertap or served too; the served first one enriched (``enriched``)."""
    served = exchange("a", request=body(model="m", temperature=0), chunks=answer("m"))
    if refused:
        other = exchange("b", sent_ms=10, seq=1, request=body(model="big", temperature=0.7), status=413, end="refused")
    else:
        other = exchange("b", sent_ms=10, seq=1, request=body(model="big", temperature=0.7), chunks=answer("big"))
    write_capture(path, [served, other, *([enrichment("a")] if enriched else [])])
    return claim(path, cache_dir=path.parent / "cache")


def test_a_refused_requests_model_and_settings_are_not_the_cards(tmp_path: Path) -> None:
    """The card listed the refused request's model as served and counted its settings: "big" among
    the models, temperature 0.7 among the settings sent, and "effective settings known for 1 of 2"
    where the one request served was enriched. A request served keeps both (must match)."""
    refused = capture(tmp_path / "refused", refused=True, enriched=False)
    assert refused["model"]["value"]["served"] == ["m"]
    assert refused["sampling"]["value"]["temperature"] == [{"value": 0, "source": "request", "requests": 1}]
    assert "1 generation requests" in refused["sampling"]["source"]
    enriched = capture(tmp_path / "refused-enriched", refused=True, enriched=True)
    assert "known for" not in (enriched["sampling"].get("unknown") or ""), enriched["sampling"]

    served = capture(tmp_path / "served", refused=False, enriched=False)
    assert served["model"]["value"]["served"] == ["big", "m"]
    assert [v["value"] for v in served["sampling"]["value"]["temperature"]] == [0, 0.7]
    enriched = capture(tmp_path / "served-enriched", refused=False, enriched=True)
    assert "effective settings known for 1 of 2 generation requests" in enriched["sampling"]["unknown"]
