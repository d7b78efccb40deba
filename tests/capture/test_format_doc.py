"""docs/capture-format.md against what the recorders write: a capture recorded through the real
proxy (probe, telemetry, enrichment on) and a replay of it, every key of every record named in its
record's section of the page, and every exchange key the page gives no condition for present in
each exchange. A key added to a record without its line in the spec, or a spec line the writer
dropped, fails here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
from click.testing import CliRunner

from infertap.capture.reader import CaptureReader
from infertap.capture.records import Exchange
from infertap.cli import cli
from tests import sdk_shapes
from tests.fake_engines import vllm_app
from tests.fake_upstream import ServerThread

DOC = (Path(__file__).resolve().parents[2] / "docs" / "capture-format.md").read_text()
# A row whose meaning starts so is of a key only some exchanges have.
CONDITIONAL = ("present", "replays only", "imports only", "`infertap mitm` only")


def section(record_type: str) -> str:
    """The text of a record type's section (``### `footer```), up to the next heading."""
    start = DOC.index(f"### `{record_type}`")
    end = re.compile(r"^##", re.M).search(DOC, start + 4)
    return DOC[start : end.start() if end else len(DOC)]


def named(text: str) -> set[str]:
    return set(re.findall(r"`([a-z_0-9]+)`", text))


def exchange_rows() -> dict[str, str]:
    """Each key of the exchange table (the section's first table: later ones, such as the session
    headers', name headers, not keys), with its row's meaning."""
    rows: dict[str, str] = {}
    for line in section("exchange").splitlines():
        if line.startswith("| `"):
            _, keys, meaning = line.split("|", 3)[:3]
            rows.update(dict.fromkeys(re.findall(r"`([a-z_0-9]+)`", keys), meaning.strip()))
        elif rows and not line.startswith("|"):
            break
    return rows


def undocumented(record: dict[str, Any], text: str) -> set[str]:
    return set(record) - {"type"} - named(text)


def test_every_exchange_key_of_the_code_has_its_row() -> None:
    rows = exchange_rows()
    assert set(Exchange.__annotations__) - {"type"} <= set(rows)
    assert set(rows) <= set(Exchange.__annotations__), "a row for a key the code doesn't have"
    unconditional = {k for k, meaning in rows.items() if not meaning.startswith(CONDITIONAL)}
    assert unconditional == set(Exchange.__required_keys__) - {"type"}


def _answer(request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    message = {"role": "assistant", "content": "hello"}
    usage = {"prompt_tokens": 12, "completion_tokens": 1, "total_tokens": 13}
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    body = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": request["model"], "choices": [choice], "usage": usage}  # fmt: skip
    return 200, sdk_shapes.chat_completion(body)


def _recorded(tmp_path: Path, record: Any) -> list[dict[str, Any]]:
    """A capture recorded in front of a (fake) vLLM, and a replay of it on the same engine."""
    app = vllm_app()
    app.routes["POST", "/v1/chat/completions"] = _answer
    chat = {"model": "Qwen/Qwen3-8B", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    with ServerThread(app) as engine:
        rec = record(engine.url)
        for _ in range(2):
            assert httpx.post(f"{rec.url}/v1/chat/completions", json=chat, timeout=30).status_code == 200
        assert rec.stop() == 0
        replay = tmp_path / "replay"
        args = ["replay", str(rec.out), "--target", engine.url, "--out", str(replay), "--json"]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
    return [*CaptureReader(rec.out).records(), *CaptureReader(replay).records()]


def test_every_key_a_recording_writes_is_documented(tmp_path: Path, record: Any) -> None:
    records = _recorded(tmp_path, record)
    kinds = {r["type"] for r in records}
    assert {"header", "engine", "exchange", "enrichment", "footer", "telemetry"} <= kinds, kinds
    rows = exchange_rows()
    required = {k for k, meaning in rows.items() if not meaning.startswith(CONDITIONAL)}
    recorders = set()
    for r in records:
        kind = r["type"]
        if kind == "exchange":
            assert set(r) - {"type"} <= set(rows), set(r) - set(rows)
            assert required <= set(r), required - set(r)
            continue
        text = section(kind)
        assert not undocumented(r, text), (kind, undocumented(r, text))
        if kind == "header":
            recorders.add(r["recorder"]["kind"])
            assert not undocumented(r["recorder"], text), undocumented(r["recorder"], text)
            assert not undocumented(r["host"], text), undocumented(r["host"], text)
        elif kind == "footer" and "loop_lag" in r:
            assert not undocumented(r["loop_lag"], text), undocumented(r["loop_lag"], text)
        elif kind == "engine":
            for nested in (r["facts"], r["host"]):
                assert not undocumented(nested, text), undocumented(nested, text)
        elif kind == "enrichment":
            for nested in (r["prompt_tokens"], r["output_tokens"], r["response"]):
                assert not undocumented(nested, text), undocumented(nested, text)
    assert recorders == {"proxy", "replay"}
