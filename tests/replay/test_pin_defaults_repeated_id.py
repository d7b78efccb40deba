"""``--pin-defaults`` pins nothing from an enrichment of an id several exchanges of the capture carry:
the enrichment names the id alone, so which of them it was written for is unknown, and the analysis
(``enrichment_latest``, compare) attaches it to none. The replay counts them and says so."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from infertap.cli import cli
from tests.helpers import write_capture

_DEFAULTS = {"repeat_penalty": {"value": 1.1, "source": "engine_default"}}


def _replayed(src: Path, url: str, out: Path, app) -> tuple[dict[str, object], dict[str, object], str]:
    """Each replayed body's repeat_penalty by tag (absent: None), the summary, and what was said on stderr."""
    app.requests.clear()
    args = ["replay", str(src), "--target", url, "--pin-defaults", "--no-probe", "--json", "--out", str(out)]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    sent = [json.loads(r["body"]) for r in app.requests if r["path"].startswith("/v1/")]
    summary = json.loads(done.stdout)
    return {b["tag"]: b.get("repeat_penalty") for b in sent}, summary, done.stderr


def _capture(path: Path, ids: list[str]) -> Path:
    exchanges = [
        {"id": x, "offset_s": i * 0.01, "body": {"model": "m", "messages": [], "tag": f"t{i}"}} for i, x in enumerate(ids)
    ]
    write_capture(path, exchanges, enrichments=[{"exchange_id": x, "settings": _DEFAULTS} for x in dict.fromkeys(ids)])
    return path


def test_an_enrichment_of_a_repeated_id_pins_none_of_its_exchanges(fake, tmp_path: Path) -> None:
    app, url = fake
    # Must differ: the two exchanges of "dup" are pinned nothing, and the replay says how many.
    sent, summary, said = _replayed(_capture(tmp_path / "dup", ["dup", "dup", "one"]), url, tmp_path / "o1", app)
    assert sent == {"t0": None, "t1": None, "t2": 1.1}
    assert summary["unpinned"] == 2
    assert "--pin-defaults pinned nothing of 2 exchanges" in said
    # Must match: ids each carried once are pinned as before, and nothing is said.
    sent, summary, said = _replayed(_capture(tmp_path / "unique", ["a", "b", "one"]), url, tmp_path / "o2", app)
    assert sent == {"t0": 1.1, "t1": 1.1, "t2": 1.1}
    assert summary["unpinned"] == 0
    assert "pinned nothing" not in said


def test_only_repeated_ids_enriched_is_refused_with_why(fake, tmp_path: Path) -> None:
    app, url = fake
    src = _capture(tmp_path / "dup", ["dup", "dup"])
    done = CliRunner().invoke(
        cli, ["replay", str(src), "--target", url, "--pin-defaults", "--no-probe", "--json", "--out", str(tmp_path / "o")]
    )
    assert done.exit_code != 0
    assert "name no exchange it holds (2 exchanges of their ids)" in done.output, done.output
    assert not [r for r in app.requests if r["path"].startswith("/v1/")]  # nothing sent


def test_an_enrichment_that_says_which_exchange_of_its_id_pins_that_one(fake, tmp_path: Path) -> None:
    """``infertap enrich`` writes which exchange of an id each enrichment is (``occurrence``): of a
    repeated id, each exchange is pinned its own enrichment's settings, as the analysis attaches them."""
    app, url = fake
    exchanges = [
        {"id": x, "offset_s": i * 0.01, "body": {"model": "m", "messages": [], "tag": f"t{i}"}}
        for i, x in enumerate(["dup", "dup", "one"])
    ]
    pinned = [("dup", 1, 1.1), ("dup", 2, 1.3), ("one", 1, 1.2)]
    enrichments = [
        {"exchange_id": x, "occurrence": k, "settings": {"repeat_penalty": {"value": v, "source": "engine_default"}}}
        for x, k, v in pinned
    ]
    write_capture(tmp_path / "src", exchanges, enrichments=enrichments)
    # Must differ from an enrichment of the id alone (above): each of "dup"'s exchanges pinned, its own value.
    sent, summary, said = _replayed(tmp_path / "src", url, tmp_path / "o", app)
    assert sent == {"t0": 1.1, "t1": 1.3, "t2": 1.2}
    assert summary["unpinned"] == 0 and "pinned nothing" not in said
