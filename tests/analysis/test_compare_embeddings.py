"""compare on embeddings traffic: the vectors are the output. The same vectors match (cosine 1,
identical), whatever encoding carried them (base64 float32 or JSON floats); one changed component,
another dimension or another number of vectors differs; a body that holds no vectors is counted as
not read, never as agreement, and nothing else of the comparison is lost."""

from __future__ import annotations

import base64
import json
import math
import struct

import pytest
from click.testing import CliRunner

from infertap.analysis.compare import compare
from infertap.analysis.divergence_notes import embedding_notes
from infertap.analysis.embedding_divergence import COSINE_FLOOR
from infertap.cli import cli
from tests.helpers import write_capture

#: float32 values (each exactly a float32), so that base64 and JSON carry one vector.
V1 = [0.5, -0.25, 0.125, 1.0, -2.0, 0.0625]
V2 = [1.5, 0.75, -0.375, 0.0, 3.0, 0.5]


def _b64(v: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode()


def _openai(vectors: list[list[float]], *, base64_: bool = False) -> bytes:
    data = [{"object": "embedding", "index": i, "embedding": _b64(v) if base64_ else v} for i, v in enumerate(vectors)]
    return json.dumps({"object": "list", "data": data, "model": "m", "usage": {"prompt_tokens": 3, "total_tokens": 3}}).encode()


def _capture(path, answers: list[bytes], *, path_: str = "/v1/embeddings", statuses: list[int] | None = None):
    xs = [
        {
            "path": path_,
            "body": {"model": "m", "input": [f"text {i}", f"more {i}"]},
            "chunks": [answer],
            "status": (statuses or [200] * len(answers))[i],
        }
        for i, answer in enumerate(answers)
    ]
    write_capture(path, xs)
    return path


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def test_the_same_vectors_match_whatever_encoding_carried_them(tmp_path):
    """And in whatever order the items came: each is its ``index``'s input."""
    shuffled = json.loads(_openai([V2, V1]))
    shuffled["data"].reverse()
    a = _capture(tmp_path / "a", [_openai([V1, V2]), _openai([V2, V1])])
    b = _capture(tmp_path / "b", [_openai([V1, V2], base64_=True), json.dumps(shuffled).encode()])
    e = compare(a, b)["divergence"]["embeddings"]
    assert e["pairs"] == e["compared"] == e["identical"] == 2 and e["differ"] == 0
    assert e["vectors"] == 4 and e["cosine_mean"] == 1.0 and e["cosine_min"] == 1.0
    assert e["below_floor"] == e["dimensions_differ"] == e["not_read_a"] == e["not_read_b"] == 0
    assert e["least_similar"] == []


def test_one_changed_component_differs_by_its_cosine(tmp_path):
    changed = [*V1[:2], V1[2] + 1.0, *V1[3:]]
    a = _capture(tmp_path / "a", [_openai([V1, V2]), _openai([V2])])
    b = _capture(tmp_path / "b", [_openai([changed, V2], base64_=True), _openai([V2])])
    e = compare(a, b)["divergence"]["embeddings"]
    expected = _cosine(V1, changed)
    assert expected < COSINE_FLOOR  # the change is one a user must see
    assert e["compared"] == 2 and e["identical"] == 1 and e["differ"] == 1 and e["below_floor"] == 1
    assert e["vectors"] == 3
    assert e["cosine_min"] == pytest.approx(expected)
    assert e["cosine_mean"] == pytest.approx((expected + 2.0) / 3)
    assert [p["a_id"] for p in e["least_similar"]] == ["src-0"]


def test_a_scaled_vector_points_the_same_way_and_differs_in_length(tmp_path):
    """Normalized on one side, not on the other: cosine can't see it, the length does."""
    norm = math.sqrt(sum(x * x for x in V1))
    a = _capture(tmp_path / "a", [_openai([V1])])
    b = _capture(tmp_path / "b", [_openai([[x / norm for x in V1]])])
    e = compare(a, b)["divergence"]["embeddings"]
    assert e["differ"] == 1 and e["identical"] == 0 and e["length_differs"] == 1 and e["below_floor"] == 0
    assert e["cosine_min"] == pytest.approx(1.0)


def test_another_dimension_or_number_of_vectors_differs_without_a_cosine(tmp_path):
    a = _capture(tmp_path / "a", [_openai([V1]), _openai([V1, V2])])
    b = _capture(tmp_path / "b", [_openai([V1[:4]]), _openai([V1])])
    d = compare(a, b)["divergence"]
    e = d["embeddings"]
    assert e["compared"] == 2 and e["differ"] == 2 and e["identical"] == 0
    assert e["dimensions_differ"] == 1 and e["dimensions"] == [[len(V1), 4, 1]]
    assert e["count_differs"] == 1 and e["vectors"] == 1  # the second pair's first vector, the same on both
    first = next(p for p in e["least_similar"] if p["a_id"] == "src-0")
    assert first["cosine_min"] is None and first["dimensions"] == [len(V1), 4]
    said = "\n".join(text for text, _ in embedding_notes(d))
    assert f"1 of another dimension (A {len(V1)} vs B 4 ×1)" in said and "1 with another number of vectors" in said


def test_ollama_shapes_are_read_as_openai_s(tmp_path):
    a = _capture(tmp_path / "a", [json.dumps({"model": "m", "embeddings": [V1, V2]}).encode()], path_="/api/embed")
    b = _capture(tmp_path / "b", [json.dumps({"model": "m", "embeddings": [V1, V1]}).encode()], path_="/api/embed")
    e = compare(a, b)["divergence"]["embeddings"]
    assert e["compared"] == 1 and e["differ"] == 1 and e["cosine_min"] == pytest.approx(_cosine(V2, V1))
    a = _capture(tmp_path / "c", [json.dumps({"embedding": V1}).encode()], path_="/api/embeddings")
    b = _capture(tmp_path / "d", [json.dumps({"embedding": V1}).encode()], path_="/api/embeddings")
    e = compare(a, b)["divergence"]["embeddings"]
    assert e["identical"] == 1 and e["vectors"] == 1


def test_one_vector_per_token_is_compared_row_by_row(tmp_path):
    """llama-cpp-python's server on a model without pooling (its answer's recorded shape: each
    ``data[i].embedding`` a list of rows, one per token) and llama-server's native /embedding."""
    rows = {"object": "list", "data": [{"object": "embedding", "embedding": [V1, V2], "index": 0}], "model": "m"}
    moved = {**rows, "data": [{**rows["data"][0], "embedding": [V1, V1]}]}
    a = _capture(tmp_path / "a", [json.dumps(rows).encode(), json.dumps([{"index": 0, "embedding": [V1]}]).encode()])
    b = _capture(tmp_path / "b", [json.dumps(moved).encode(), json.dumps([{"index": 0, "embedding": [V1]}]).encode()])
    e = compare(a, b)["divergence"]["embeddings"]
    assert e["compared"] == 2 and e["vectors"] == 3 and e["identical"] == 1 and e["differ"] == 1
    assert e["cosine_min"] == pytest.approx(_cosine(V2, V1))


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b'{"data": [{"index": 0, "embedding": "not base64!"}]}', "not base64"),
        (b'{"data": [{"index": 0, "embedding": ["0.5", 1]}]}', "not a number"),
        (b'{"object": "list"}', "no embeddings in the body"),
        (b"<html>oops</html>", "not JSON"),
        (b'{"data": [{"index": 0, "embedding": "AAAA"}]}', "no float32 vector"),  # 3 bytes
    ],
)
def test_a_malformed_answer_is_counted_not_read_and_the_rest_compared(tmp_path, body, why):
    a = _capture(tmp_path / "a", [_openai([V1]), _openai([V2])])
    b = _capture(tmp_path / "b", [body, _openai([V2])])
    e = compare(a, b)["divergence"]["embeddings"]
    assert e["pairs"] == 2 and e["not_read_a"] == 0 and e["not_read_b"] == 1
    assert e["compared"] == 1 and e["identical"] == 1 and why in e["why_not_read"]["b"]


def test_a_failed_side_is_counted_apart(tmp_path):
    a = _capture(tmp_path / "a", [_openai([V1]), _openai([V2])])
    b = _capture(tmp_path / "b", [b'{"error": {"message": "boom"}}', _openai([V2])], statuses=[500, 200])
    e = compare(a, b)["divergence"]["embeddings"]
    assert e["failed"] == 1 and e["compared"] == 1 and e["not_read_b"] == 0


def test_compare_prints_and_json_carry_the_same_figures(tmp_path):
    changed = [*V1[:-1], V1[-1] + 1.0]
    a = _capture(tmp_path / "a", [_openai([V1]), _openai([V2])])
    b = _capture(tmp_path / "b", [_openai([changed]), b"{}"])
    runner = CliRunner()
    shown = runner.invoke(cli, ["compare", str(a), str(b)])
    assert shown.exit_code == 0, shown.output
    as_json = runner.invoke(cli, ["compare", str(a), str(b), "--json"])
    assert as_json.exit_code == 0, as_json.output
    e = json.loads(as_json.output)["divergence"]["embeddings"]
    text = " ".join(shown.output.split())
    assert f"embeddings: {e['pairs']} pairs of embeddings answers, {e['compared']} compared" in text
    assert f"{e['identical']} identical, {e['differ']} differ ({e['below_floor']} below cosine {COSINE_FLOOR:g}" in text
    assert f"mean {e['cosine_mean']:.6f}, min {e['cosine_min']:.6f}" in text
    assert "answers not read: A 0, B 1" in text
    assert "pairs not compared (no API's answer" not in text  # embeddings are compared, not set aside


def test_the_report_says_what_compare_prints(tmp_path):
    import html

    from infertap.analysis.report import render

    a = _capture(tmp_path / "a", [_openai([V1])])
    b = _capture(tmp_path / "b", [_openai([V2])])
    lines = embedding_notes(compare(a, b)["divergence"])
    page = render(a, b)
    assert lines and all(html.escape(text) in page for text, _ in lines)


def test_the_baseline_s_embeddings_are_said_beside_b_s(tmp_path):
    """A against A again is the noise floor: its identical vectors are said under B's that differ."""
    a = _capture(tmp_path / "a", [_openai([V1])])
    again = _capture(tmp_path / "again", [_openai([V1], base64_=True)])
    b = _capture(tmp_path / "b", [_openai([V2])])
    out = CliRunner().invoke(cli, ["compare", str(a), str(b), "--baseline", str(again)])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "embeddings: 1 pairs of embeddings answers, 1 compared: 0 identical, 1 differ" in text
    assert "baseline: embeddings: 1 pairs of embeddings answers, 1 compared: 1 identical, 0 differ" in text


def test_vectors_are_found_by_pair_whatever_order_b_holds_them_in(tmp_path, monkeypatch):
    """Each side's vectors are read from its own file a row group at a time: with a row group of
    two answers and B's answers in the reverse order, every pair still meets its own vectors."""
    from infertap.analysis import summaries

    per_answer = 2 * 4 * len(V1)  # bytes of an answer's two vectors
    monkeypatch.setattr(summaries, "BATCH_BYTES", per_answer + 1)  # two answers per row group
    answers = [_openai([V1, [x * (i + 1) for x in V2]]) for i in range(6)]
    xs = [{"path": "/v1/embeddings", "body": {"model": "m", "input": f"t{i}"}, "chunks": [a]} for i, a in enumerate(answers)]
    write_capture(tmp_path / "a", xs)
    write_capture(tmp_path / "b", xs[::-1])
    e = compare(tmp_path / "a", tmp_path / "b")["divergence"]["embeddings"]
    assert e["compared"] == e["identical"] == 6 and e["vectors"] == 12
    write_capture(tmp_path / "c", [{**x, "chunks": [_openai([V1, V1])]} if i == 4 else x for i, x in enumerate(xs)][::-1])
    e = compare(tmp_path / "a", tmp_path / "c")["divergence"]["embeddings"]
    assert e["identical"] == 5 and [p["a_id"] for p in e["least_similar"]] == ["src-4"]


def test_top_limits_the_embeddings_listed_as_its_help_says(tmp_path):
    """``--top`` cut the embeddings pairs listed too, and ``compare --help`` didn't say so: it says it
    now, and a ``--top`` under the pairs that differ lists that many, one over them every one."""
    runner = CliRunner()
    said = runner.invoke(cli, ["compare", "--help"], env={"COLUMNS": "2000"})
    assert said.exit_code == 0, said.output
    top_help = " ".join(said.output.split("--top", 1)[1].split("--json", 1)[0].split())
    assert "embeddings pairs whose vectors differ" in top_help, top_help
    changed = [[v + 1.0 for v in V1], [v - 1.0 for v in V1]]
    a = _capture(tmp_path / "a", [_openai([V1]), _openai([V1]), _openai([V1])])
    b = _capture(tmp_path / "b", [_openai([changed[0]]), _openai([changed[1]]), _openai([V1])])
    for top, listed in ((1, 1), (3, 2)):
        out = runner.invoke(cli, ["compare", "--json", "--top", str(top), str(a), str(b)])
        assert out.exit_code == 0, out.output
        e = json.loads(out.output)["divergence"]["embeddings"]
        assert e["differ"] == 2 and e["identical"] == 1, e
        assert len(e["least_similar"]) == listed, (top, e["least_similar"])
