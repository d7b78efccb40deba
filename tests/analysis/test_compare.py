"""compare: on hand-built captures with known differences, and on two real engines."""

from __future__ import annotations

import json
import math
import re

import pytest
from click.testing import CliRunner

from infertap.analysis import Analysis
from infertap.analysis.compare import compare
from infertap.analysis.errors import AnalysisError
from infertap.analysis.report import render
from infertap.analysis.svg import ticks
from infertap.cli import cli
from infertap.cli_compare import print_comparison
from tests import sdk_shapes
from tests.helpers import write_capture


def _chat(content: str, i: int) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": content}], "temperature": 0, "n": i}


def _reply(text: str, finish: str = "stop") -> list[bytes]:
    return [
        json.dumps(
            {
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 3},
            }
        ).encode()
    ]


def _enrich(i: int, penalty: float, ids: list[int]) -> dict:
    return {
        "exchange_id": f"src-{i}",
        "settings": {
            "repeat_penalty": {"value": penalty, "source": "engine_default"},
            "temperature": {"value": 0, "source": "request"},
        },
        "prompt_tokens": {"ids": ids, "count": len(ids), "source": "test"},
        "output_tokens": {"ids": None},
    }


def _runs(tmp_path, answers_a, answers_b, *, prompts_b=None):
    xs_a = [{"body": _chat(f"q{i}", i), "chunks": _reply(t), "duration_ns": 10_000_000} for i, t in enumerate(answers_a)]
    xs_b = [{"body": _chat(f"q{i}", i), "chunks": _reply(t), "duration_ns": 20_000_000} for i, t in enumerate(answers_b)]
    write_capture(tmp_path / "a", xs_a, enrichments=[_enrich(i, 1.1, [1, 2, 3]) for i in range(len(xs_a))])
    write_capture(tmp_path / "b", xs_b, enrichments=[_enrich(i, 1.0, (prompts_b or [1, 2, 3])) for i in range(len(xs_b))])
    return tmp_path / "a", tmp_path / "b"


def test_compare_by_construction(tmp_path):
    a, b = _runs(
        tmp_path, ["The answer is 42.", "Paris.", "blue"], ["The answer is 41.", "Paris.", "blue sky"], prompts_b=[1, 1, 2, 3]
    )
    r = compare(a, b, extract="number", top=2)
    assert r["pairing"]["pairs"] == 3 and r["pairing"]["by"]["identical request"] == 3
    (setting,) = r["config"]["settings"]
    assert (setting["setting"], setting["a"], setting["b"], setting["exchanges"]) == (
        "repeat_penalty",
        "1.1 (engine_default)",
        "1.0 (engine_default)",
        3,
    )
    assert r["config"]["prompts"] == {
        "compared": 3,
        "equal": 0,
        "differences": {"B repeats its first token (1): a duplicated BOS": 3},
    }
    d = r["divergence"]
    assert d["exact_match_rate"] == pytest.approx(1 / 3)
    assert d["counts"]["answer_changed"] == 1 and d["counts"]["answer_unchanged"] == 2
    assert [p["text"][1] for p in d["most_divergent"]] == ["blue sky", "The answer is 41."]  # least similar first
    worst = d["most_divergent"][1]
    assert worst["answer"] == ["42", "41"] and worst["first_divergence"] == {"at": 15, "unit": "character"}
    assert worst["diff"] == "The answer is [-42-]{+41+}."
    e2e = next(row for row in r["speed"] if row["metric"] == "e2e")
    assert (
        e2e["a"]["p50"] == pytest.approx(10.0)
        and e2e["b"]["p50"] == pytest.approx(20.0)
        and e2e["ratio_p50"] == pytest.approx(2.0)
    )


def test_baseline_gives_the_noise_floor(tmp_path):
    a, b = _runs(tmp_path, ["x", "y"], ["x", "z"])
    write_capture(tmp_path / "a2", [{"body": _chat(f"q{i}", i), "chunks": _reply(t)} for i, t in enumerate(["x", "y"])])
    r = compare(a, b, baseline=tmp_path / "a2")
    assert r["divergence"]["exact_match_rate"] == 0.5
    assert r["baseline"]["divergence"]["exact_match_rate"] == 1.0
    # A baseline of other requests pairs nothing: an error, not a comparison without its noise floor.
    write_capture(tmp_path / "other", [{"body": _chat("elsewhere", 0), "chunks": _reply("x")}])
    with pytest.raises(AnalysisError, match="no exchange of the baseline .*other matches"):
        compare(a, b, baseline=tmp_path / "other")
    result = CliRunner().invoke(cli, ["compare", str(a), str(b), "--baseline", str(tmp_path / "other")])
    assert result.exit_code == 1 and "baseline" in result.output and "Traceback" not in result.output


def test_workloads_that_do_not_match_say_why(tmp_path):
    write_capture(tmp_path / "a", [{"body": _chat("one", 0)}])
    write_capture(tmp_path / "b", [{"body": _chat("two", 0)}])
    with pytest.raises(AnalysisError, match="no exchange .* matches.*1 exchange of A and 1 of B have no counterpart"):
        compare(tmp_path / "a", tmp_path / "b")
    result = CliRunner().invoke(cli, ["compare", str(tmp_path / "a"), str(tmp_path / "b")])
    assert result.exit_code == 1 and "no counterpart" in result.output and "Traceback" not in result.output


def test_compare_cli_prints_configuration_first(tmp_path):
    a, b = _runs(tmp_path, ["The answer is 42."], ["The answer is 41."])
    result = CliRunner().invoke(cli, ["compare", str(a), str(b), "--extract", "number"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert (
        out.index("1. Configuration")
        < out.index("repeat_penalty")
        < out.index("2. Speed")
        < out.index("3. Divergence")
        < out.index("4. Most divergent")
    )
    as_json = json.loads(CliRunner().invoke(cli, ["compare", str(a), str(b), "--json"]).output)
    assert as_json["config"]["settings"][0]["setting"] == "repeat_penalty"


def test_the_speed_table_fits_80_columns_in_plain_numbers(tmp_path, monkeypatch, capsys):
    a, b = _runs(tmp_path, ["x"], ["y"])
    r = compare(a, b)

    def dist(p50: float, p99: float) -> dict:
        return {"n": 12_345, "p50": p50, "p90": None, "p99": p99, "mean": None}

    r["speed"] = [  # as wide as speeds get: over 100 s at the tail, a ratio far from 1
        {
            "metric": "ttft",
            "unit": "ms",
            "a": dist(0.85, 12.34),
            "b": dist(1289.4, 64_213.4),
            "ratio_p50": 0.98712,
            "ratio_ci95": (0.9512, 1.0498),
        },
        {
            "metric": "ttft_content",
            "unit": "ms",
            "a": dist(0.0042, 99.96),
            "b": dist(123_456.7, 987_654.3),
            "ratio_p50": 1289.4,
            "ratio_ci95": (1042.0, 1534.9),
        },
        {
            "metric": "tpot",
            "unit": "ms",
            "a": {"n": 0, "p50": None, "p99": None},
            "b": {"n": 0, "p50": None, "p99": None},
            "ratio_p50": None,
            "ratio_ci95": None,
        },
    ]
    monkeypatch.setenv("COLUMNS", "80")
    print_comparison(r)
    out = capsys.readouterr().out
    speed = out[out.index("2. Speed") : out.index("3. Divergence")]
    assert "e+" not in out and "…" not in speed
    assert max(len(line) for line in speed.splitlines()) <= 80
    rows = [[cell.strip() for cell in line.split("│")] for line in speed.splitlines() if "│" in line]
    cells = {row[0]: row[1:] for row in rows}
    assert cells["ttft"] == ["0.85", "12.3", "1,289", "64,213", "0.987", "0.951–1.05", "12,345"]
    assert cells["ttft_content"] == ["0.0042", "100", "123,457", "987,654", "1,289", "1,042–1,535", "12,345"]
    assert cells["tpot"] == ["-"] * 6 + ["0"]


def _engine(kind: str, version: str | None) -> dict:
    return {"kind": kind, "facts": {"version": {"value": version, "source": "test"}}, "host": {}}


def test_versions_of_two_engine_kinds_are_shown_not_counted(tmp_path, monkeypatch, capsys):
    from infertap.analysis.configdiff import snapshot_diff
    from infertap.demo import pair_summary

    a, b = _runs(tmp_path, ["x"], ["y"])
    r = compare(a, b)
    monkeypatch.setenv("COLUMNS", "120")

    def configuration(snap_a: dict, snap_b: dict) -> tuple[str, dict[str, list[str]]]:
        r["config"]["snapshots"] = snapshot_diff(snap_a, snap_b)
        print_comparison(r)
        out = capsys.readouterr().out
        section = out[out.index("1. Configuration") : out.index("2. Speed")]
        rows = [[cell.strip() for cell in line.split("│")][1:-1] for line in section.splitlines() if "│" in line]
        return section, {row[0]: row[1:] for row in rows if len(row) == 3}  # the snapshots' table: fact, A, B

    # The same engine in two versions: a difference.
    _, cells = configuration(_engine("vllm", "0.31.0"), _engine("vllm", "0.32.0"))
    assert cells == {"version": ["0.31.0", "0.32.0"]}
    assert pair_summary(r).startswith("configuration differs in version;")
    # Two engines: their versions don't compare. Shown beside each kind, not counted on their own.
    _, cells = configuration(_engine("llama-cpp-python", "0.3.36"), _engine("vllm", "0.32.0"))
    assert cells == {"kind": ["llama-cpp-python 0.3.36", "vllm 0.32.0"]}
    assert pair_summary(r).startswith("configuration differs in kind;")
    # A version known on one side only goes with its kind too, not among the facts known on one side.
    section, cells = configuration(_engine("llama-server", None), _engine("vllm", "0.32.0"))
    assert cells["kind"] == ["llama-server", "vllm 0.32.0"] and "known on one side only" not in section


def test_snapshots_alike_are_one_line_and_a_difference_a_table_at_80_columns(tmp_path, monkeypatch):
    """Nothing differing printed a header-only table under a title wrapped into its narrow column;
    now one line says how many facts known on both sides were compared, and a difference is a table."""
    from infertap.capture.writer import CaptureWriter

    monkeypatch.setenv("COLUMNS", "80")

    def configuration(slots_b: int) -> str:
        a, b = _runs(tmp_path / str(slots_b), ["x"], ["x"])
        for path, slots in ((a, 4), (b, slots_b)):
            with CaptureWriter(path, recorder={"kind": "proxy"}) as w:
                w.write(_snapshot("fp", slots, 1.8e9))
        out = CliRunner().invoke(cli, ["compare", str(a), str(b)]).output
        return out[out.index("1. Configuration") : out.index("effective sampling settings")]  # the snapshots' part

    same = configuration(4)
    assert "engine snapshots: the 3 facts known on both sides are the same" in same  # kind, version, slots
    assert "what differs" not in same and "┃" not in same and "│" not in same
    differs = configuration(1)
    assert "engine snapshots: what differs (1 of the 3 facts known on both sides)" in differs
    rows = [[c.strip() for c in line.split("│")][1:-1] for line in differs.splitlines() if "│" in line]
    assert rows == [["parallel_slots", "4", "1"]]


def _snapshot(fingerprint: str, slots: int, wall: float) -> dict:
    facts = {"version": {"value": "b1", "source": "/props"}, "parallel_slots": {"value": slots, "source": "/props"}}
    return {"type": "engine", "url": "http://127.0.0.1:8080", "wall": wall, "kind": "llama-server", "facts": facts,
            "unknown": [], "notes": [], "raw": {}, "host": {}, "labels": {}, "fingerprint": fingerprint}  # fmt: skip


def test_a_side_under_two_engine_configurations_is_never_called_one(tmp_path, monkeypatch, capsys):
    """compare read each side's last snapshot only: A, run on 1 slot and swapped to B's 4 at its end,
    showed no configuration difference at all (the claim card said "2 engine configurations")."""
    from infertap.capture.writer import CaptureWriter
    from infertap.demo import pair_summary

    a, b = _runs(tmp_path, ["x"], ["x"])
    write_capture(tmp_path / "again", [{"body": _chat("q0", 0), "chunks": _reply("x")}])
    for path, snapshots in ((a, [("fp1", 1), ("fp2", 4)]), (b, [("fp2", 4)]), (tmp_path / "again", [("fp2", 4), ("fp2", 4)])):
        with CaptureWriter(path, recorder={"kind": "proxy"}) as w:
            for i, (fingerprint, slots) in enumerate(snapshots):
                w.write(_snapshot(fingerprint, slots, 1.8e9 + 60 * i))
    monkeypatch.setenv("COLUMNS", "200")

    def configuration(r: dict) -> str:
        print_comparison(r)
        out = capsys.readouterr().out
        return " ".join(out[out.index("1. Configuration") : out.index("2. Speed")].split())

    swapped = compare(a, b)
    cfg = swapped["config"]
    assert not any(row["differs"] for row in cfg["snapshots"])  # the last snapshots are the same
    assert [c["fingerprint"] for c in cfg["configurations"]["A"]] == ["fp1", "fp2"] and len(cfg["configurations"]["B"]) == 1
    assert cfg["several_configurations"].startswith(
        "A ran under 2 engine configurations (llama-server at http://127.0.0.1:8080 (fingerprint fp1), llama-server at "
    )
    section = configuration(swapped)
    assert "A ran under 2 engine configurations" in section
    assert "each side's last engine snapshot: the 3 facts known on both sides are the same" in section
    assert "(A ran under 2 engine configurations)" in pair_summary(swapped)
    assert "A ran under 2 engine configurations" in render(a, b)
    # Probed twice, one configuration: nothing to say.
    same = compare(tmp_path / "again", b)
    assert same["config"]["several_configurations"] is None
    assert [len(c) for c in same["config"]["configurations"].values()] == [1, 1]
    section = configuration(same)
    assert "ran under" not in section and "engine snapshots: the 3 facts known on both sides are the same" in section
    assert "engine configurations" not in pair_summary(same)


@pytest.mark.engine
def test_llama_cpp_python_against_llama_server_shows_the_setting_then_the_divergence(
    engine, llama_server_engine, record, gguf, tmp_path
):
    """Same GGUF, same requests, temperature 0: the repeat_penalty default explains the answers."""
    import httpx

    from infertap.replay import ReplayConfig, Schedule, run_replay

    rec = record(engine.url, "--model-file", str(gguf))
    for question in ["What is 17 + 25?", "What is 12 + 30?"]:
        httpx.post(
            f"{rec.url}/v1/chat/completions",
            json={
                "model": "SmolLM2-135M-Instruct",
                "messages": [{"role": "user", "content": question}],
                "temperature": 0,
                "max_tokens": 24,
            },
            timeout=120,
        )
    rec.stop()
    run_replay(
        ReplayConfig(
            rec.out, llama_server_engine.url, tmp_path / "on-llama-server", schedule=Schedule("concurrency", concurrency=1)
        )
    )
    r = compare(rec.out, tmp_path / "on-llama-server", extract="number")
    snapshots = {row["fact"]: row for row in r["config"]["snapshots"]}
    assert (snapshots["kind"]["a"], snapshots["kind"]["b"]) == ("llama-cpp-python", "llama-server")
    assert snapshots["default repeat_penalty"]["differs"] and not snapshots["chat_template_sha256"]["differs"]
    known = [s for s in r["config"]["settings"] if "(unknown)" not in s["a"] + s["b"]]
    assert known[0]["setting"] == "repeat_penalty" and known[0]["exchanges"] == 2
    assert r["config"]["prompts"]["equal"] == 2  # same template, same tokens: the prompt is not the difference
    assert r["divergence"]["exact_match_rate"] < 1.0
    assert r["divergence"]["counts"]["answer_changed"] >= 1


def test_report_is_one_offline_html_file(tmp_path):
    a, b = _runs(tmp_path, ["The answer is 42.", "Paris."], ["The answer is 41.", "Paris."])
    out = tmp_path / "r.html"
    result = CliRunner().invoke(cli, ["report", str(a), str(b), "-o", str(out), "--extract", "number"])
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert page.startswith("<!doctype html>") and "<script" not in page and "http://" not in page and "https://" not in page
    assert page.index("1. Configuration") < page.index("repeat_penalty") < page.index("2. Speed") < page.index("3. Divergence")
    assert page.count("<svg") == 4  # ttft and e2e CDFs, e2e over time, divergence positions
    assert "no tpot ms values" in page  # non-streamed answers: token spacing was never observed
    assert "The answer is [-42-]{+41+}." in page
    single = CliRunner().invoke(cli, ["report", str(a), "-o", str(tmp_path / "one.html")])
    assert single.exit_code == 0 and "<svg" in (tmp_path / "one.html").read_text()
    nested = CliRunner().invoke(cli, ["report", str(a), "-o", str(tmp_path / "reports" / "run" / "a.html")])
    assert nested.exit_code == 0 and (tmp_path / "reports" / "run" / "a.html").read_text().startswith("<!doctype html>")
    blocked = CliRunner().invoke(cli, ["report", str(a), "-o", str(out / "r.html")])  # a folder where a file is
    assert blocked.exit_code == 1 and "cannot write the report" in blocked.output and "Traceback" not in blocked.output
    failed = CliRunner().invoke(cli, ["report", str(tmp_path / "reports"), "-o", str(out)])  # not a capture
    assert failed.exit_code != 0 and out.read_text() == page  # a report that fails leaves the earlier one as it was


@pytest.mark.parametrize("hi", [0.5, 1.0, 3.0, 7.0, 12.3, 99.0, 1289.0, 20_000.0, 64_213.0])
def test_axis_ticks_are_4_to_6_round_numbers_covering_the_data(hi):
    marks = ticks(hi)
    step = marks[1]
    assert 4 <= len(marks) <= 6 and marks[0] == 0 and marks[-1] >= hi and marks[-2] < hi
    assert round(step / 10 ** math.floor(math.log10(step)), 9) in (1, 2, 5)


def test_ticks_for_counts_stay_whole():
    assert ticks(1, whole=True) == [0, 1, 2, 3] and ticks(7, whole=True) == [0, 2, 4, 6, 8]


def test_report_numbers_are_plain_and_every_plot_has_tick_labels(tmp_path):
    ms = [0.5, 3.0, 47.0, 1289.0, 20_000.0]
    for name, scale, answer in (("a", 1.0, "The answer is 42."), ("b", 0.8, "The answer is 41.")):
        write_capture(
            tmp_path / name,
            [
                {
                    "body": _chat(f"q{i}", i),
                    "chunks": _reply(answer),
                    "duration_ns": int(v * scale * 1e6),
                    "chunk_ns": [int(v * scale * 5e5)],
                }
                for i, v in enumerate(ms)
            ],
        )
    page = render(tmp_path / "a", tmp_path / "b")
    shown = [text for _, text in re.findall(r"<(td|text)\b[^>]*>([^<]*)<", page)]  # table cells and plot labels
    assert not [text for text in shown if re.search(r"\de[+-]\d", text)]
    assert "20,000" in shown and "10,000" in shown  # A's e2e and ttft p99 (were 2e+04 and 1e+04)
    plots = dict(re.findall(r'<svg [^>]*aria-label="([^"]*)"[^>]*>(.*?)</svg>', page, re.S))
    labels = {name: re.findall(r'<text class="tick"[^>]*>([^<]*)</text>', svg) for name, svg in plots.items()}
    # y, then x: 0.4 to 20,000 ms, its largest over 20x its median, on a log axis numbered at its two
    # ends and the decades between (10,000 left bare, too close to the end's 20,000 for its label)
    assert labels["e2e ms CDF"] == ["0", "0.2", "0.4", "0.6", "0.8", "1", "0.2", "1", "10", "100", "1,000", "20,000"]
    assert labels["ttft ms CDF"][6:] == ["0.1", "1", "10", "100", "1,000", "10,000"]  # from below B's 0.2 ms, not on it
    assert "ttft ms (log scale)" in plots["ttft ms CDF"]
    # The same e2e values over time: log on y by the CDFs' rule, time linear from 0.
    assert labels["e2e ms over time"] == ["0.2", "1", "10", "100", "1,000", "20,000", "0", "1", "2", "3", "4"]
    # pairs, then the bars: the empty 0-7 drawn too, so 8-15 stands where it lies
    assert labels["position of first divergence (characters)"] == ["0", "1", "2", "3", "4", "5", "0-7", "8-15"]


def test_rebuilt_prompts_that_disagree_with_the_engines_count_are_not_the_prompt(tmp_path):
    """llama-cpp-python started with --chat_format renders otherwise than the GGUF's template that
    the enrichment rebuilds prompts from: compare called the prompts identical, and stats counted
    the rebuilt ids where usage was missing."""
    a, b = _runs(tmp_path, ["x", "y"], ["x", "y"])
    assert compare(a, b)["config"]["prompts"] == {"compared": 2, "equal": 2, "differences": {}}  # they agree: trusted
    off = dict(_enrich(0, 1.0, [1, 2, 3]), exchange_id="src-0")
    off["prompt_tokens"] = {**off["prompt_tokens"], "agrees_with_usage": False}  # usage counted 5, not 3
    unknown = {**_enrich(1, 1.0, [1, 2, 3]), "prompt_tokens": {"ids": [1, 2, 3], "count": 3, "source": "test"}}
    xs = [{"body": _chat(f"q{i}", i), "chunks": _reply(t)} for i, t in enumerate(["x", "y"])]
    xs[1]["chunks"] = [
        json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": "y"}}]}).encode()
    ]  # no usage
    write_capture(tmp_path / "c", xs, enrichments=[off, unknown])
    prompts = compare(a, tmp_path / "c")["config"]["prompts"]
    assert prompts["equal"] == 0 and list(prompts["differences"]) == [
        "rebuilt prompts disagree with the engine's own count on B (a chat format the engine was started with?)"
    ]
    with Analysis([tmp_path / "c"], cache_dir=tmp_path / "cache") as an:
        rows = dict(an.sql("SELECT exchange_id, prompt_tokens FROM metrics").fetchall())
    assert rows == {"src-0": 5, "src-1": None}  # usage where sent; the rebuilt 3 is no count of what ran


def test_a_superseded_enrichment_that_disagreed_with_usage_distrusts_no_prompt(tmp_path):
    """compare distrusted a run's rebuilt prompts where any enrichment, superseded ones included,
    disagreed with usage, where enrichment_latest's prompt_trusted asks only the one each prompt is
    taken from (the newest by wall that counted it, whatever the record order)."""
    a, _ = _runs(tmp_path, ["x", "y"], ["x", "y"])
    xs = [{"body": _chat(f"q{i}", i), "chunks": _reply(t)} for i, t in enumerate(["x", "y"])]

    def run(name: str, disagreeing_wall: float) -> tuple[dict, bool]:
        off = {**_enrich(0, 1.0, [1, 2, 3]), "kind": "llama-cpp-python", "wall": disagreeing_wall}
        off["prompt_tokens"] = {**off["prompt_tokens"], "agrees_with_usage": False}
        agrees = {**_enrich(0, 1.0, [1, 2, 3]), "kind": "llama-cpp-python", "wall": 1_800_000_100.0}
        agrees["prompt_tokens"] = {**agrees["prompt_tokens"], "agrees_with_usage": True}
        # the disagreeing one written last: its wall, not its place, says whether it is superseded
        write_capture(tmp_path / name, xs, enrichments=[agrees, _enrich(1, 1.0, [1, 2, 3]), off])
        with Analysis([tmp_path / name], cache_dir=tmp_path / "cache") as an:
            (trusted,) = an.sql("SELECT bool_and(prompt_trusted) FROM enrichment_latest").fetchall()[0]
        return compare(a, tmp_path / name)["config"]["prompts"], trusted

    prompts, trusted = run("older", 1_800_000_000.0)  # must match: superseded, as the view says
    assert trusted and prompts == {"compared": 2, "equal": 2, "differences": {}}, prompts
    prompts, trusted = run("newer", 1_800_000_200.0)  # must differ: the one taken disagreed
    assert not trusted and prompts["equal"] == 0, prompts
    assert list(prompts["differences"]) == [
        "rebuilt prompts disagree with the engine's own count on B (a chat format the engine was started with?)"
    ]


def test_the_report_says_up_front_whether_the_traffic_was_the_same(tmp_path):
    """A replay with --set temperature=... compared with its source: compare says NOT identical above
    its B/A ratios, the report printed them without a word."""
    a, b = _runs(tmp_path, ["x", "y"], ["x", "y"])
    assert "traffic: identical" in render(a, b)
    changed = [
        {"body": {**_chat(f"q{i}", i), "temperature": 1}, "chunks": _reply("x"), "source_id": f"src-{i}"} for i in range(2)
    ]
    write_capture(tmp_path / "c", changed)
    page = render(a, tmp_path / "c")
    assert re.search(r'<p class="warn">traffic: NOT identical \(A wl1:\w+, B wl1:\w+\)', page), page[:2000]


def test_a_difference_in_the_engines_prompt_cache_is_a_cause_listed_before_the_speed(tmp_path):
    """Two runs alike but for the tokens the engine read from its cache (usage's cached_tokens):
    compare said nothing of it anywhere. It is a cause of ttft any API that counts it reports."""

    def run(path, cached: int):
        usage = {"prompt_tokens": 52, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": cached}}
        reply = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "x"}, "finish_reason": "stop"}], "usage": usage}  # fmt: skip
        write_capture(path, [{"body": _chat(f"q{i}", 1), "chunks": [json.dumps(reply).encode()]} for i in range(3)])
        return path

    hot, cold = run(tmp_path / "hot", 40), run(tmp_path / "cold", 0)
    r = compare(hot, cold)
    assert r["energy"]["engine_state"]["a"]["cached_prompt_share"] == pytest.approx(40 / 52)
    assert {"name": "cached_prompt_share", "a": pytest.approx(40 / 52), "b": 0.0} in r["config"]["engine_state"]
    assert compare(hot, run(tmp_path / "hot2", 40))["config"]["engine_state"] == []  # the same cache: no difference
    assert "cached_prompt_share" in CliRunner().invoke(cli, ["compare", str(hot), str(cold)]).output


def _timed(xid: str, i: int, ttft_ms: float, *, streamed: bool = True, **extra) -> dict:
    """A 20-token answer to prompt ``i``: streamed (first token at ``ttft_ms``, 10 ms apart) or whole at the same end."""
    from tests.analysis_builders import JSON_HEADERS, body, event, exchange, sse

    usage = {"prompt_tokens": 5, "completion_tokens": 20, "total_tokens": 25}
    end = ttft_ms + 190
    if streamed:
        chunks = [(ttft_ms + 10 * k, sse(event("t"))) for k in range(19)]
        chunks.append((end, sse(event("z", finish="stop"), event(choices=False, usage=usage), "[DONE]")))
        return exchange(xid, sent_ms=1000 * i, chunks=chunks, request=body(f"q{i}"), **extra)
    whole = sdk_shapes.chat_completion({"id": "r", "object": "chat.completion", "created": 0, "model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": "t" * 19 + "z"}, "finish_reason": "stop"}], "usage": usage})  # fmt: skip
    return exchange(xid, sent_ms=1000 * i, chunks=[(end, json.dumps(whole).encode())], end_ms=end, request=body(f"q{i}"), headers=JSON_HEADERS, **extra)  # fmt: skip


def _speed(result: dict) -> dict:
    return {row["metric"]: row for row in result["speed"]}


def test_ttft_is_compared_only_between_answers_streamed_alike(tmp_path, capsys):
    """A whole body's ttft is the time to all of it: against a streamed first token it read as a 4.8x
    slower first token, with an interval, as measured. Those pairs are left out of ttft and said."""
    from tests.analysis_builders import write_capture as write_built

    a = write_built(tmp_path / "a", [_timed(f"a{i}", i, 50) for i in range(12)])
    whole = write_built(tmp_path / "whole", [_timed(f"b{i}", i, 50, streamed=False, source_id=f"a{i}") for i in range(12)])
    streamed = write_built(tmp_path / "streamed", [_timed(f"b{i}", i, 100, source_id=f"a{i}") for i in range(12)])
    apart = _speed(compare(a, whole))
    assert apart["ttft"]["a"]["n"] == 0 and apart["ttft"]["ratio_p50"] is None and apart["ttft"]["stream_differs"] == 12
    assert apart["ttft_content"]["stream_differs"] == 12 and apart["e2e"]["a"]["n"] == 12
    assert apart["e2e"]["ratio_p50"] == pytest.approx(1.0)
    alike = _speed(compare(a, streamed))
    assert alike["ttft"]["a"]["n"] == 12 and alike["ttft"]["stream_differs"] == 0 and alike["ttft"]["ratio_p50"] > 1.5
    print_comparison(compare(a, whole))
    assert "ttft left out for 12 pairs streamed on one side only" in capsys.readouterr().out


def test_a_repeated_replay_pairs_its_first_pass_whatever_order_it_was_written_in(tmp_path):
    """A --repeat replay's exchanges all name their source: the first recorded took the pair, so a
    run that wrote pass 1 first compared pass 1's speed."""
    from tests.analysis_builders import write_capture as write_built

    a = write_built(tmp_path / "a", [_timed(f"a{i}", i, 100) for i in range(12)])
    first = [_timed(f"b{i}", i, 200, source_id=f"a{i}", repeat=0) for i in range(12)]
    second = [_timed(f"c{i}", i + 50, 400, source_id=f"a{i}", repeat=1) for i in range(12)]
    ratios = []
    for name, records in (("in order", first + second), ("second first", second + first)):
        result = compare(a, write_built(tmp_path / name, records))
        ratios.append(_speed(result)["ttft"]["ratio_p50"])
        assert result["pairing"]["pairs"] == 12 and "already" in result["pairing"]["explain"]
    assert ratios == [pytest.approx(2.0), pytest.approx(2.0)]


def test_compare_reads_expressions_and_mixed_numbers_alike_on_both_sides(tmp_path):
    """Through the CLI on captures: "\\frac{\\sqrt2}{2}" against "\\boxed{2}" was no change (both 2),
    "1 1/2" against "1.5" a change (0.5 against 1.5), "-1 1/2" against "1/2" none."""
    pairs = {
        "q0": ("\\boxed{\\frac{\\sqrt2}{2}}", "\\boxed{\\frac{\\sqrt{2}}{2}}", "\\frac{\\sqrt{2}}{2}"),  # must match
        "q1": ("\\boxed{\\frac{\\sqrt{2}}{2}}", "\\boxed{2}", "\\frac{\\sqrt{2}}{2}"),  # must differ
        "q2": ("That is 1 1/2 cups.", "The answer is 1.5", "3/2"),  # must match
        "q3": ("\\boxed{2\\frac{1}{2}}", "\\boxed{2.5}", "2.5"),  # must match
        "q4": ("-1 1/2", "-\\frac{1}{2}", "-1.5"),  # must differ
        "q5": ("\\boxed{2\\frac{1}{2}}", "\\boxed{\\frac{1}{2}}", "5/2"),  # must differ
        "q6": ("The answer is 42.", "#### 42", "42"),  # plain: must match
        "q7": ("The answer is 42.", "The answer is 41.", "42"),  # plain: must differ
    }
    write_capture(tmp_path / "a", [{"body": _chat(q, 0), "chunks": _reply(a)} for q, (a, _, _) in pairs.items()])
    write_capture(tmp_path / "b", [{"body": _chat(q, 0), "chunks": _reply(b)} for q, (_, b, _) in pairs.items()])
    refs = tmp_path / "answers.json"
    refs.write_text(json.dumps({q: known for q, (_, _, known) in pairs.items()}))
    args = ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--extract", "number", "--reference", str(refs)]
    out = CliRunner().invoke(cli, [*args, "--top", "8", "--json"])
    assert out.exit_code == 0, out.output
    r = json.loads(out.output)
    answers = {tuple(p["answer"]) for p in r["divergence"]["most_divergent"]}
    root2 = "\\frac{\\sqrt{2}}{2}"
    assert answers == {
        (root2, root2),
        (root2, "2"),
        ("1.5", "1.5"),
        ("2.5", "2.5"),
        ("-1.5", "-0.5"),
        ("2.5", "0.5"),
        ("42", "42"),
        ("42", "41"),
    }
    assert (r["divergence"]["counts"]["answer_unchanged"], r["divergence"]["counts"]["answer_changed"]) == (4, 4)
    acc = r["accuracy"]
    assert (acc["a_right"], acc["b_right"], acc["right_to_wrong"], acc["wrong_to_right"]) == (8, 4, 4, 0), acc


def _sse(events: list[dict], check) -> list[bytes]:
    """``events`` framed, each passed through ``check`` (an ``sdk_shapes`` check) first."""
    return [f"event: {e['type']}\ndata: {json.dumps(check(e))}\n\n".encode() for e in events]


def _streamed_or_whole(api: str, text: str, *, stream: bool, cut: bool = False) -> dict:
    """``text`` answered by chat completions, Messages or Responses: streamed with its end marker (or
    ``cut`` short before it, the rest all sent), or as one JSON body."""
    if api == "chat":
        path, body = "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "q"}]}
        head = {"id": "c", "created": 0, "model": "m"}
        whole = sdk_shapes.chat_completion({**head, "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]})  # fmt: skip
        chunk = {**head, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}  # fmt: skip
        last = {**head, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        events = [b"data: %s\n\n" % json.dumps(sdk_shapes.chat_chunk(e)).encode() for e in (chunk, last)] + [b"data: [DONE]\n\n"]  # fmt: skip
    elif api == "messages":
        path, body = "/v1/messages", {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "q"}]}
        usage = {"input_tokens": 5, "output_tokens": 3}
        whole = sdk_shapes.message({"type": "message", "id": "m", "role": "assistant", "model": "m", "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None, "usage": usage})  # fmt: skip
        start = {**whole, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
        events = _sse(
            [
                {"type": "message_start", "message": start},
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
                {"type": "content_block_stop", "index": 0},
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 3},
                },  # fmt: skip
                {"type": "message_stop"},
            ],
            sdk_shapes.message_event,
        )
    else:
        path, body = "/v1/responses", {"model": "m", "input": "q"}
        message = {"type": "message", "id": "msg", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": text, "annotations": []}]}  # fmt: skip
        head = {"object": "response", "id": "r", "model": "m", **sdk_shapes.RESPONSE_REST}
        whole = sdk_shapes.response({**head, "status": "completed", "output": [message], "usage": sdk_shapes.response_usage(5, 3)})  # fmt: skip
        started = {**message, "status": "in_progress", "content": []}
        said = {"item_id": "msg", "output_index": 0, "content_index": 0, "delta": text, "logprobs": []}
        events = [
            {"type": "response.created", "response": {**head, "status": "in_progress", "output": []}},
            {"type": "response.output_item.added", "output_index": 0, "item": started},
            {"type": "response.output_text.delta", **said},
            {"type": "response.output_item.done", "output_index": 0, "item": message},
            {"type": "response.completed", "response": whole},
        ]
        events = _sse([{**e, "sequence_number": n} for n, e in enumerate(events)], sdk_shapes.response_event)
    if not stream:
        return {"path": path, "body": body, "chunks": [json.dumps(whole).encode()], "content_type": "application/json"}
    return {"path": path, "body": {**body, "stream": True}, "chunks": events[:-1] if cut else events, "content_type": "text/event-stream"}  # fmt: skip


def test_an_answer_streamed_on_one_side_and_sent_whole_on_the_other_is_the_same_answer(tmp_path):
    """A JSON body carries no stream end marker: the same answer streamed (to its [DONE],
    message_stop, response.completed) against it was never an exact match (end_marker_differs).
    A stream cut short before its marker is still not the whole answer, nor is other text; one cut
    before it said its finish reason (a Responses stream with no response.completed) is no answer
    at all: the streamed side failed, unfinished."""
    match = [(api, "Hello there.", "Hello there.", False) for api in ("chat", "messages", "responses")]
    differ = [(api, "Hello there.", "Hello there.", True) for api in ("chat", "messages", "responses")]
    differ += [(api, "Hello there.", "Goodbye now.", False) for api in ("chat", "messages", "responses")]
    cases = match + differ
    for streamed in (0, 1):  # the stream recorded first (A), then replayed whole (B); and the other way round
        for side in (0, 1):
            on = side == streamed
            xs = [_streamed_or_whole(api, (a, b)[side], stream=on, cut=cut and on) for api, a, b, cut in cases]
            link = [{"id": f"x{i}"} if side == 0 else {"id": f"y{i}", "source_id": f"x{i}"} for i in range(len(xs))]
            write_capture(tmp_path / f"{streamed}{side}", [{**x, **at} for x, at in zip(xs, link, strict=True)])
        args = ["compare", str(tmp_path / f"{streamed}0"), str(tmp_path / f"{streamed}1"), "--top", "20", "--json"]
        out = CliRunner().invoke(cli, args)
        assert out.exit_code == 0, out.output
        d = json.loads(out.output)["divergence"]
        unfinished = cases.index(("responses", "Hello there.", "Hello there.", True))
        differing = set(range(len(match), len(cases))) - {unfinished}
        assert {int(item["a_id"][1:]) for item in d["most_divergent"]} == differing, d["counts"]
        assert d["counts"]["exact"] == len(match) and d["counts"]["end_marker_differs"] == 2, d["counts"]
        [failed] = d["failed_pairs"]
        assert int(failed["a_id"][1:]) == unfinished and (failed["a"], failed["b"])[streamed] == "unfinished", failed
        marked = [item["stream_done"] for item in d["most_divergent"] if "stream_done" in item]
        assert marked == [[False, None] if streamed == 0 else [None, False]] * 2, marked  # None: a body sent whole


def test_the_first_divergence_positions_say_what_they_count(tmp_path):
    """A position is a token's where both sides' ids are known, else a character's: the median and
    the histogram say which (or that they mix both), in --json, the printed table and the report."""
    answers_a, answers_b = ["The answer is 42.", "red"], ["The answer is 41.", "blue"]
    a, b = _runs(tmp_path / "chars", answers_a, answers_b)  # no output ids: characters only
    chars = compare(a, b)["divergence"]
    assert chars["first_divergence_units"] == {"character": 2} and chars["first_divergence_median"] == 7.5
    out = " ".join(CliRunner().invoke(cli, ["compare", str(a), str(b)], env={"COLUMNS": "200"}).output.split())
    assert "7.5 (characters)" in out and "first divergence positions (characters): 0-7: 1, 8-15: 1" in out

    (tmp_path / "mixed").mkdir()
    for side, answers in (("a", answers_a), ("b", answers_b)):
        ids = [[5, 6, 7, 42 if side == "a" else 41], None]  # the first pair re-tokenized on both sides
        xs = [{"body": _chat(f"q{i}", i), "chunks": _reply(t)} for i, t in enumerate(answers)]
        enrich = [{**_enrich(i, 1.0, [1, 2, 3]), "output_tokens": {"ids": ids[i]}} for i in range(2)]
        write_capture(tmp_path / "mixed" / side, xs, enrichments=enrich)
    a, b = tmp_path / "mixed" / "a", tmp_path / "mixed" / "b"
    mixed = compare(a, b)["divergence"]
    assert mixed["first_divergence_units"] == {"token (re-tokenized)": 1, "character": 1}
    out = " ".join(CliRunner().invoke(cli, ["compare", str(a), str(b)], env={"COLUMNS": "200"}).output.split())
    assert "(mixed units: token (re-tokenized) ×1, character ×1)" in out and "(characters)" not in out
    report = tmp_path / "r.html"
    assert CliRunner().invoke(cli, ["report", str(a), str(b), "-o", str(report)]).exit_code == 0
    assert "first divergence (median position, mixed units: token (re-tokenized) ×1, character ×1)" in report.read_text()


def _context(value: int | None, source: str) -> dict:
    return {"kind": "llama-server", "facts": {"context_size": {"value": value, "source": source}}, "host": {}}


def test_a_context_size_per_slot_is_said_per_slot_as_probe_says_it(tmp_path, monkeypatch, capsys):
    """llama-server -np N reports n_ctx per slot: 1024 per slot is no context of 1024, so compare
    says so where probe does, in the table and among the facts known on one side only."""
    from infertap.analysis.configdiff import snapshot_diff

    a, b = _runs(tmp_path, ["x"], ["y"])
    r = compare(a, b)
    monkeypatch.setenv("COLUMNS", "120")
    per_slot = "/props default_generation_settings.n_ctx (per slot)"

    def section(snap_a: dict, snap_b: dict) -> str:
        r["config"]["snapshots"] = snapshot_diff(snap_a, snap_b)
        print_comparison(r)
        out = capsys.readouterr().out
        return " ".join(out[out.index("1. Configuration") : out.index("2. Speed")].split())

    assert "known on one side only: context_size (A: 1024 (per slot))" in section(
        _context(1024, per_slot), _context(None, "not exposed")
    )
    differs = section(_context(1024, per_slot), _context(4096, "/v1/models max_model_len"))
    assert "context_size │ 1024 (per slot) │ 4096" in differs
    same = section(_context(1024, per_slot), _context(1024, per_slot))
    assert "context_size" not in same


def test_effective_prompt_tokens_say_why_no_pair_was_compared(tmp_path):
    """B recorded with no enrichment (no probe): compare and the report said "0 of 0 pairs
    identical", as if nothing had been asked; they say no pair was compared and which side lacks it."""
    xs = [{"body": _chat(f"q{i}", i), "chunks": _reply("x")} for i in range(2)]
    write_capture(tmp_path / "a", xs, enrichments=[_enrich(i, 1.0, [1, 2, 3]) for i in range(2)])
    write_capture(tmp_path / "b", xs)
    a, b = tmp_path / "a", tmp_path / "b"
    prompts = compare(a, b)["config"]["prompts"]
    assert prompts["compared"] == 0 and "B has none (recorded with --no-probe" in prompts["not_compared"]
    assert "A has none" not in prompts["not_compared"]
    assert "neither side has one (recorded with --no-probe" in compare(b, b)["config"]["prompts"]["not_compared"]
    said = " ".join(CliRunner().invoke(cli, ["compare", str(a), str(b)]).output.split())
    page = render(a, b)
    for text in (said, page):
        assert "0 of 0" not in text
        assert "effective prompt tokens: none compared, no pair has an enrichment" in text.lower()
    # Pairs enriched on both sides: the count, as before.
    a2, b2 = _runs(tmp_path / "both", ["x", "y"], ["x", "y"])
    said = " ".join(CliRunner().invoke(cli, ["compare", str(a2), str(b2)]).output.split())
    assert "effective prompt tokens: 2 of 2 pairs identical" in said and "none compared" not in said
    assert "Effective prompt tokens: 2 of 2 pairs identical." in render(a2, b2)


def _paragraphs(page: str) -> list[str]:
    """The page's paragraphs' text, as a reader reads them."""
    from html.parser import HTMLParser

    class Reader(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.found: list[str] = []
            self.text: str | None = None

        def handle_starttag(self, tag, attrs):
            if tag == "p":
                self.text = ""

        def handle_endtag(self, tag):
            if tag == "p" and self.text is not None:
                self.found.append(self.text)
                self.text = None

        def handle_data(self, data):
            if self.text is not None:
                self.text += data

    reader = Reader()
    reader.feed(page)
    return reader.found


def test_the_report_says_what_its_speed_table_and_its_plots_are_over(tmp_path):
    """The table's B p50 is over the pairs, the plots' and the claim card's over B's every answer: the
    report said neither, and two B p50s of one run read as one wrong. Its "-" for an interval was unsaid
    too, where compare prints why."""
    a, b = _runs(tmp_path, ["x", "y", "z"], ["x", "y", "z", "w"])  # B's fourth request has no counterpart
    said = _paragraphs(render(a, b))
    assert "Paired exchanges that succeeded on both sides; B/A: B's p50 over A's (95% CI)." in said
    assert "No interval below 10 pairs: a resampled one would be narrower than 95%." in said
    assert (
        "The plots: every successful generation request of each run, as stats and the claim cards count them "
        "(3 in A, 4 in B)." in said
    )
    many = [f"{i}" for i in range(12)]  # must differ: 12 pairs have their interval, nothing to explain
    said = _paragraphs(render(*_runs(tmp_path / "many", many, many)))
    assert not [p for p in said if p.startswith("No interval")] and any(p.endswith("(12 in A, 12 in B).") for p in said)
    one = _paragraphs(render(a))  # one run: no table, the plots still said
    assert not [p for p in one if p.startswith("Paired")] and any(p.endswith("(3 in A).") for p in one)


def test_the_reports_legend_names_each_runs_lines_by_more_than_their_colour(tmp_path):
    a, b = _runs(tmp_path, ["x"], ["y"])
    legend = _paragraphs(render(a, b))[0]
    assert legend == f"■ A: {a} (solid line, filled dots)■ B: {b} (dashed line, hollow dots)"
    assert _paragraphs(render(a))[0] == f"■ A: {a}"  # must match: one run, nothing to tell apart
