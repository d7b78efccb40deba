"""A capture enriched in part: the card's sampling listed the enriched requests' settings only, so
"temperature=0 (request, 1)" stood for three requests of which two sent temperature 1.5 themselves."""

from __future__ import annotations

from infertap.analysis.claim import DECISIVE, claim, field_text, unknown_fields
from tests.analysis_builders import enrichment
from tests.helpers import write_capture


def _partly_enriched(path, extra: dict) -> dict:
    """Three chat requests (temperature 0, 1.5, 1.5, each with ``extra``), the first enriched."""
    bodies = [
        {"model": "m", "temperature": t, **extra, "messages": [{"role": "user", "content": f"q{i}"}]}
        for i, t in enumerate([0, 1.5, 1.5])
    ]
    settings = {"temperature": {"value": 0, "source": "request"}, "top_p": {"value": 0.95, "source": "engine_default"}}
    write_capture(
        path, [{"id": f"x{i}", "body": b} for i, b in enumerate(bodies)], enrichments=[enrichment("x0", settings=settings)]
    )
    return claim(path, cache_dir=path.parent / "cache")


def test_the_settings_requests_not_enriched_sent_are_on_the_card(tmp_path):
    card = _partly_enriched(tmp_path / "some", {})
    temperature = card["sampling"]["value"]["temperature"]
    assert {(v["value"], v["source"], v["requests"]) for v in temperature} == {(0, "request", 1), (1.5, "request", 2)}
    assert {"value": None, "source": "not sent", "requests": 2} in card["sampling"]["value"]["top_p"]
    text = field_text("sampling", card["sampling"])
    assert "temperature=0 (request, 1)/1.5 (request, 2)" in text
    assert "known for 1 of 3 generation requests" in text and "top_p" in card["sampling"]["unknown"]
    # Must match: where the requests not enriched sent every setting that decides a pick, each is known.
    every = {name: 1 for name in DECISIVE if name != "temperature"}
    known = _partly_enriched(tmp_path / "all", every)
    assert "sampling" not in unknown_fields(known)
    assert {(v["value"], v["source"], v["requests"]) for v in known["sampling"]["value"]["temperature"]} == {
        (0, "request", 1),
        (1.5, "request", 2),
    }
