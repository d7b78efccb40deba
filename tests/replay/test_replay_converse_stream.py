"""A replay of Bedrock ``/converse-stream`` requests against a server that answers in AWS's
event-stream framing: the replay's capture keeps the binary frames as they came, reads as the
answer sent (text, stop reason, usage, its end), and compares with the recorded one: the same
answer matches, another differs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from infertap.analysis.compare import compare
from infertap.apis import read_request, read_response, stream_done
from infertap.capture.reader import CaptureReader
from infertap.replay import ReplayConfig, Transforms, run_replay
from tests.analysis.test_converse_stream import _BODY, _MODEL, _PATH
from tests.eventstream_frames import EVENTSTREAM, answer_frames, awkward
from tests.fake_upstream import ServerThread, lifespan
from tests.helpers import write_capture


def _bedrock(frames: list[bytes], asked: list[tuple[str, bytes]]) -> Any:
    """Bedrock as far as ``/converse-stream``: these frames, cut at awkward places, sent apart."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await lifespan(receive, send)
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        asked.append((scope["raw_path"].decode(), body))
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", EVENTSTREAM.encode())]})
        for chunk in awkward(frames):
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await asyncio.sleep(0.005)
        await send({"type": "http.response.body", "body": b""})

    return app


def test_a_converse_stream_replayed_reads_as_answered_and_compares(tmp_path: Path) -> None:
    recorded = answer_frames("It ", "is ", "42.")
    write_capture(tmp_path / "src", [{"id": "x", "path": _PATH, "body": _BODY, "chunks": recorded, "content_type": EVENTSTREAM}])
    runs = {"same": answer_frames("It ", "is ", "42.", latency=300, pad="xyzzy"), "other": answer_frames("It ", "is ", "43.")}
    for name, frames in runs.items():
        asked: list[tuple[str, bytes]] = []
        with ServerThread(_bedrock(frames, asked)) as upstream:
            run_replay(ReplayConfig(tmp_path / "src", upstream.url, tmp_path / name, probe=False, transforms=Transforms()))
        # the request as recorded, nothing added (beside it, the replay's scrape of /metrics)
        assert [(p, json.loads(b)) for p, b in asked if p != "/metrics"] == [(_PATH, _BODY)]
        [record] = list(CaptureReader(tmp_path / name).exchanges())
        assert b"".join(record["chunks"]) == b"".join(frames)
        assert (read_request(record).api, read_request(record).model) == ("bedrock-converse-stream", _MODEL)
        out = read_response(record)
        assert out.readable and out.error is None and stream_done(record["chunks"], out)
        assert (out.text, out.finish_reason, out.output_tokens) == ("It is 42." if name == "same" else "It is 43.", "stop", 3)
        d = compare(tmp_path / "src", tmp_path / name, top=1)["divergence"]
        assert sum(r["read_both"] for r in d["readable"].values()) == 1
        assert (d["counts"].get("exact", 0) == 1) is (name == "same"), (name, d["counts"])
