"""Two runs that pair nothing because one holds no generation request (it only listed the models,
or infertap refused all it got): compare and report said "no exchange of B matches one of A", the
rules' failure, where the reason is the capture: it has nothing to compare."""

from __future__ import annotations

from click.testing import CliRunner

from infertap.cli import cli
from tests.helpers import REFUSED_OVER_LIMIT, write_capture

MODELS = {"method": "GET", "path": "/v1/models", "body": b""}


def _refusal(*args: str) -> tuple[int, str]:
    run = CliRunner().invoke(cli, list(args))
    return run.exit_code, " ".join(run.output.split())


def test_a_capture_with_no_generation_request_is_said_to_have_nothing_to_compare(tmp_path):
    models, chat, refused = tmp_path / "models", tmp_path / "chat", tmp_path / "refused"
    write_capture(models, [MODELS, MODELS])
    write_capture(chat, [{}])
    write_capture(refused, [REFUSED_OVER_LIMIT, REFUSED_OVER_LIMIT])
    out = str(tmp_path / "r.html")
    listed = f"nothing to compare: no generation requests in {models} (only 2 × GET /v1/models)"
    for args in (
        ("compare", str(models), str(chat)),
        ("compare", str(chat), str(models)),
        ("report", str(models), str(chat), "-o", out),
    ):
        code, said = _refusal(*args)
        assert (code, said) == (1, f"Error: {listed}"), args
    assert not (tmp_path / "r.html").exists()
    never_sent = f"no counted generation requests in {refused}: 2 refused by infertap, never sent (counted in no figure)"
    assert _refusal("compare", str(chat), str(refused)) == (1, f"Error: nothing to compare: {never_sent}")
    write_capture(tmp_path / "again", [{}])  # pairs with chat: only the baseline has nothing
    code, said = _refusal("compare", str(chat), str(tmp_path / "again"), "--baseline", str(models))
    assert (code, said) == (1, f"Error: the baseline has nothing to compare: {listed.removeprefix('nothing to compare: ')}")
    # The claim card of each says the same of it, and still makes its card.
    assert "figures: no generation requests in this capture: no figures" in _refusal("claim", str(models))[1]
    assert never_sent.replace(str(refused), "this capture") in _refusal("claim", str(refused))[1]

    # Must stay: two runs each with generation requests, none alike, are refused by the pairing rules,
    # with the same exit status.
    other = tmp_path / "other"
    write_capture(other, [{"body": {"model": "m", "messages": [{"role": "user", "content": "another"}]}}])
    code, said = _refusal("compare", str(chat), str(other))
    assert code == 1 and said.startswith(f"Error: no exchange of {other} matches one of {chat}: 0 pairs"), said
    # Must stay: a listing beside a listing still pairs, and compares as before.
    both = tmp_path / "both"
    write_capture(both, [{}, MODELS])
    assert CliRunner().invoke(cli, ["compare", str(models), str(both)]).exit_code == 0
