"""A glob the shell left quoted (`infertap stats 'captures/run-*'`) reaches infertap unexpanded: every
argument that takes captures expands it itself, as the shell would have."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from infertap.cli import cli
from tests.helpers import write_capture


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env={"COLUMNS": "300"})


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def refused(result: Result, *words: str) -> None:
    assert result.exit_code != 0 and "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    for word in words:
        assert word in result.output, (word, result.output)


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """run-a (2 exchanges), run-b (3), and run-[ab] (1): a capture whose name is itself a glob of the other two."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    for name, n in (("run-a", 2), ("run-b", 3), ("run-[ab]", 1)):
        write_capture(tmp_path / name, [{"offset_s": i * 0.01} for i in range(n)])
    return tmp_path


def requests(stats: Result) -> dict[str, int]:
    """Generation requests per capture (by folder name) in `stats --json` output."""
    out = json.loads(stats.stdout)
    return {Path(g["key"]["capture"]).name: g["requests"] for g in out["groups"]}


def test_captures_arguments_expand_a_quoted_glob(runs: Path) -> None:
    assert requests(ok(invoke("stats", "run-?", "--json"))) == {"run-a": 2, "run-b": 3}
    assert requests(ok(invoke("stats", "run-b*", "--json"))) == {"run-b": 3}
    rows = json.loads(ok(invoke("sql", "-q", "SELECT count(*) AS n FROM exchanges", "run-?", "--json")).stdout)
    assert rows == [{"n": 5}]
    ok(invoke("export", "run-?", "--parquet", "wh"))
    assert "exchanges (5 rows)" in ok(invoke("export", "run-?", "--parquet", "wh2")).output


def test_a_literal_path_that_exists_is_taken_as_it_is_not_as_a_glob(runs: Path) -> None:
    # 'run-[ab]' as a pattern matches run-a and run-b; the capture of that very name is what is meant.
    assert requests(ok(invoke("stats", "run-[ab]", "--json"))) == {"run-[ab]": 1}
    card = json.loads(ok(invoke("claim", "run-[ab]", "--json")).stdout)
    assert Path(card["capture"]).name == "run-[ab]"
    assert json.loads(ok(invoke("info", "run-[ab]", "--json")).stdout)["exchanges"] == 1


def test_one_capture_arguments_take_a_glob_that_matches_one(runs: Path) -> None:
    assert Path(json.loads(ok(invoke("claim", "run-b*", "--json")).stdout)["capture"]).name == "run-b"
    assert json.loads(ok(invoke("info", "run-b*", "--json")).stdout)["exchanges"] == 3
    compared = json.loads(ok(invoke("compare", "run-a*", "run-b*", "--baseline", "run-a*", "--json")).stdout)
    assert (Path(compared["a"]["path"]).name, Path(compared["b"]["path"]).name) == ("run-a", "run-b")
    ok(invoke("report", "run-a*", "run-b*", "-o", "r.html"))
    assert (runs / "r.html").is_file()


def test_a_glob_that_matches_nothing_or_too_much_is_refused_by_name(runs: Path) -> None:
    for args in (
        ("stats", "nothing-*"),
        ("sql", "-q", "SELECT 1", "nothing-*"),
        ("export", "nothing-*", "--parquet", "wh"),
        ("claim", "nothing-*"),
        ("info", "nothing-*"),
        ("compare", "run-a", "nothing-*"),
        ("compare", "run-a", "run-b", "--baseline", "nothing-*"),
        ("report", "nothing-*"),
        ("replay", "nothing-*", "--target", "http://127.0.0.1:9", "--out", "o"),
        ("sweep", "nothing-*", "--target", "http://127.0.0.1:9", "--out", "s", "--slo", "e2e:p90<=1s", "--speeds", "1"),
    ):
        refused(invoke(*args), "nothing-*: no file or directory matches")
    assert not (runs / "wh").exists() and not (runs / "o").exists() and not (runs / "s").exists()
    # One capture on a side: a glob matching two is not guessed at.
    for args in (("claim", "run-?"), ("compare", "run-?", "run-b"), ("report", "run-a", "run-?"), ("cat", "run-?")):
        refused(invoke(*args), "run-?: matches 2 paths (run-a, run-b); name one")
    refused(invoke("claim", "nothing"), "nothing: no such capture")


def test_replay_and_sweep_expand_a_quoted_glob(runs: Path, fake: tuple[object, str]) -> None:
    _, url = fake
    summary = json.loads(ok(invoke("replay", "run-?", "--target", url, "--no-probe", "--out", "rp", "--json")).stdout)
    assert summary["sent"] == 5
    swept = invoke(
        "sweep",
        "run-b*",
        "--target",
        url,
        "--no-probe",
        "--grace",
        "1",
        "--slo",
        "e2e:p90<=10s",
        "--speeds",
        "1",
        "--out",
        "sw",
        "--json",
    )
    assert [p["sent"] for p in json.loads(ok(swept).stdout)["points"]] == [3]
    # A sweep's result alone (its points' captures not kept) is a sweep to report: a glob takes it too.
    (runs / "sw-result").mkdir()
    (runs / "sw-result" / "sweep.json").write_bytes((runs / "sw" / "sweep.json").read_bytes())
    (runs / "sw-result.txt").write_text("notes\n")
    reported = ok(invoke("report", "sw-r*", "-o", "sweep.html"))
    assert "left out sw-result.txt" in reported.stderr and (runs / "sweep.html").is_file()


def test_compare_refuses_a_folder_of_several_captures_naming_them_before_reading_any(runs: Path) -> None:
    """A folder of shards on a side was decoded whole (A's, then B's) before the capture reader said it
    held several: refused now at the argument, each side and the baseline, naming the captures, the
    cache untouched. A folder of one capture is that capture, as replay takes it."""
    (runs / "shards").mkdir()
    for name in ("run-a", "run-b"):
        (runs / name).rename(runs / "shards" / name)
    said = "shards: holds 2 captures (shards/run-a, shards/run-b), and compare takes one capture a side: name one"
    for args in (("shards", "run-[ab]"), ("run-[ab]", "shards"), ("run-[ab]", "run-[ab]", "--baseline", "shards")):
        refused(invoke("compare", *args), said, "replay and sweep take such a folder as one workload")
    assert not (runs / "cache").exists()  # nothing was read
    (runs / "one").mkdir()
    (runs / "shards" / "run-b").rename(runs / "one" / "run-b")
    compared = json.loads(ok(invoke("compare", "one", "shards", "--json")).stdout)
    assert (compared["a"]["path"], compared["b"]["path"]) == ("one/run-b", "shards/run-a")


def test_a_glob_takes_the_captures_it_matches_and_says_what_it_left_out(runs: Path, fake: tuple[object, str]) -> None:
    """`stats 'run-*'` refused everything for a `run-notes.txt` beside the captures: a glob now takes
    the captures it matches and says which matches it left out, and why; a path named as it is
    must still be a capture, and a glob must still match one."""
    (runs / "run-notes.txt").write_text("the GPU was throttled on run-b\n")
    (runs / "run-empty.txt").touch()  # empty, as a segment just created is, but not named as one
    (runs / "run-folder").mkdir()
    left = [
        "run-*: left out run-empty.txt: not a capture (an empty file not named *.itap.zst)",
        "run-*: left out run-folder: not a capture, and no capture in it (no *.itap.zst segments)",
        "run-*: left out run-notes.txt: not a capture (a segment starts with an infertap block head; this file doesn't)",
    ]
    stats = ok(invoke("stats", "run-*", "--json"))
    assert requests(stats) == {"run-[ab]": 1, "run-a": 2, "run-b": 3}
    assert [line.removeprefix("warning: ") for line in stats.stderr.splitlines() if "left out" in line] == left
    # The JSON lists them too (it said nothing of them: a script saw the captures as all there was).
    listed = json.loads(stats.stdout)["left_out"]
    assert [f"{x['pattern']}: left out {x['path']}: {x['why']}" for x in listed] == left
    rows = json.loads(ok(invoke("sql", "-q", "SELECT count(*) AS n FROM exchanges", "run-*", "--json")).stdout)
    assert rows == [{"n": 6}]
    exported = ok(invoke("export", "run-*", "--parquet", "wh"))
    assert "exchanges (6 rows)" in exported.stdout and all(line in exported.stderr for line in left)
    _, url = fake
    replayed = ok(invoke("replay", "run-*", "--target", url, "--no-probe", "--out", "rp", "--json"))
    assert json.loads(replayed.stdout)["sent"] == 6 and all(line in replayed.stderr for line in left)
    # Must match: a glob of captures only leaves nothing out, and says nothing of it.
    only_captures = ok(invoke("stats", "run-?", "--json"))
    assert "left out" not in only_captures.stderr and json.loads(only_captures.stdout)["left_out"] == []
    # Named as they are, they are refused; a glob matching no capture is refused, naming what it matched.
    for args in (
        ("stats", "run-a", "run-notes.txt"),
        ("sql", "-q", "SELECT 1", "run-notes.txt"),
        ("export", "run-notes.txt", "--parquet", "w2"),
    ):
        refused(invoke(*args), "run-notes.txt: not a capture (a segment starts with an infertap block head")
    refused(invoke("stats", "run-folder"), "run-folder: not a capture, and no capture in it")
    refused(
        invoke("stats", "run-*.txt"),
        "run-*.txt: matches no capture (run-empty.txt: not a capture",
        "run-notes.txt: not a capture",
    )
    refused(invoke("replay", "run-*.txt", "--target", url, "--out", "o"), "run-*.txt: matches no capture")
    assert not (runs / "w2").exists() and not (runs / "o").exists()


def test_one_capture_arguments_take_the_one_capture_a_glob_matches_and_say_what_they_left_out(runs: Path) -> None:
    """`claim 'run-a*'` was refused for a `run-a-notes.txt` beside `run-a/` ("matches 2 paths") where
    `stats` took the capture and warned: the one-capture arguments do the same now; a glob of two
    captures is still refused, naming them, and one of no capture names what it matched."""
    (runs / "run-a-notes.txt").write_text("the GPU was throttled\n")
    left = "warning: run-a*: left out run-a-notes.txt: not a capture (a segment starts with an infertap block head"

    def warned(result: Result) -> Result:
        said = [line for line in result.stderr.splitlines() if "left out" in line]
        assert len(said) == 1 and said[0].startswith(left), result.stderr
        return result

    named = {
        cmd: ok(invoke(cmd, "run-a", *more)).stdout for cmd, more in (("claim", ["--json"]), ("info", ["--json"]), ("cat", []))
    }
    assert warned(ok(invoke("cat", "run-a*"))).stdout == named["cat"]
    for cmd in ("claim", "info"):  # the same, but for the matches left out, listed as stats --json lists them
        globbed = json.loads(warned(ok(invoke(cmd, "run-a*", "--json"))).stdout)
        assert [x["path"] for x in globbed.pop("left_out")] == ["run-a-notes.txt"]
        assert json.loads(named[cmd]).pop("left_out") == []
        if cmd == "claim":
            globbed["warnings"] = [w for w in globbed["warnings"] if "left out" not in w]
        assert {**globbed, "left_out": []} == json.loads(named[cmd])
    compared = json.loads(warned(ok(invoke("compare", "run-a*", "run-b", "--json"))).stdout)
    assert (compared["a"]["path"], compared["b"]["path"]) == ("run-a", "run-b")
    compared = json.loads(warned(ok(invoke("compare", "run-b", "run-b", "--baseline", "run-a*", "--json"))).stdout)
    assert compared["baseline"]["path"] == "run-a"
    warned(ok(invoke("report", "run-a*", "-o", "a.html")))
    assert (runs / "a.html").is_file()
    # Must stay: a glob of the captures alone warns of nothing.
    assert "left out" not in ok(invoke("claim", "run-b*", "--json")).stderr
    # Must differ: two captures where one is wanted are refused, naming them, and so is a glob of no capture.
    for args in (("claim", "run-*"), ("info", "run-*"), ("compare", "run-*", "run-b"), ("report", "run-b", "run-*")):
        refused(invoke(*args), "run-*: matches 3 captures (run-[ab], run-a, run-b) besides 1 holding none; name one")
    refused(invoke("info", "run-?"), "run-?: matches 2 paths (run-a, run-b); name one")
    refused(invoke("claim", "run-a-*"), "run-a-*: matches no capture (run-a-notes.txt: not a capture")


def test_claim_and_info_json_list_what_a_glob_left_out(runs: Path) -> None:
    """`claim 'run-a*' --json` and `info 'run-a*' --json` said the matches left out on stderr only: a
    script reading the JSON saw the one capture as all the glob named. They list them now under
    `left_out` as `stats --json` does, and the card among its `warnings` too (said once on stderr)."""
    (runs / "run-a-notes.txt").write_text("the GPU was throttled\n")
    why = "not a capture (a segment starts with an infertap block head; this file doesn't)"
    stats = json.loads(ok(invoke("stats", "run-a*", "--json")).stdout)["left_out"]
    assert stats == [{"pattern": "run-a*", "path": "run-a-notes.txt", "why": why}]
    for cmd in ("claim", "info"):
        result = ok(invoke(cmd, "run-a*", "--json"))
        assert json.loads(result.stdout)["left_out"] == stats, cmd
        assert result.stderr.count("left out run-a-notes.txt") == 1, (cmd, result.stderr)
    card = json.loads(ok(invoke("claim", "run-a*", "--json")).stdout)
    assert f"run-a*: left out run-a-notes.txt: {why}" in card["warnings"]
    # Must match: a glob of the capture alone, or the capture named, leaves nothing out and warns of nothing.
    for args in (("run-b*", "--json"), ("run-b", "--json")):
        for cmd in ("claim", "info"):
            result = ok(invoke(cmd, *args))
            assert json.loads(result.stdout)["left_out"] == [] and "left out" not in result.stderr, (cmd, args)
    assert not [w for w in json.loads(ok(invoke("claim", "run-b*", "--json")).stdout)["warnings"] if "left out" in w]


def test_the_reports_claim_cards_list_what_a_glob_left_out(runs: Path) -> None:
    """`report 'run-a*'` warned of the matches left out on stderr only: the page, all a reader of
    it sees, showed the one capture's card as all the glob named. Its cards list them now, as
    `claim --json`'s `left_out` and warnings do (said once on stderr)."""
    (runs / "run-a-notes.txt").write_text("the GPU was throttled\n")
    card = json.loads(ok(invoke("claim", "run-a*", "--json")).stdout)
    said = card["warnings"][0]
    assert card["left_out"] and said.startswith("run-a*: left out run-a-notes.txt: not a capture")
    for args in (("run-a*",), ("run-a*", "run-b"), ("run-b", "run-a*")):
        result = ok(invoke("report", *args, "-o", "r.html"))
        assert result.stderr.count("left out run-a-notes.txt") == 1, (args, result.stderr)
        page = (runs / "r.html").read_text()
        cards = page[page.index("<h2>Claim cards</h2>") :]
        row = next(r for r in cards.split("<tr") if ">left out<" in r)
        assert html.escape(said) in row, row
        name = "A" if args[0] == "run-a*" else "B"
        assert f"{name}: warning: {html.escape(said)}" in cards
        if len(args) == 2:  # the other run's card leaves nothing out
            assert row.count("run-a-notes.txt") == 1 and ">none<" in row, row
    # Must match: a glob of the capture alone, or the capture named, leaves nothing out: no such row.
    for args in (("run-b*",), ("run-a", "run-b")):
        result = ok(invoke("report", *args, "-o", "r.html"))
        page = (runs / "r.html").read_text()
        assert "left out" not in result.stderr and ">left out<" not in page and "run-a-notes" not in page, args
