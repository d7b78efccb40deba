"""A Bedrock ``/converse-stream`` answer through the recording proxy: its binary event-stream bytes
reach the client as sent and are recorded chunk by chunk, and the capture's answer is read from
them. No Bedrock here: a fake upstream sends the frames (built in tests.analysis.test_converse_stream
with struct and zlib alone), cut inside preludes and payloads."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx

from infertap.apis import read_request, read_response, stream_done
from tests.analysis.test_converse_stream import _BODY, _MODEL, _PATH
from tests.eventstream_frames import EVENTSTREAM, answer_frames, awkward, chunk_of_end
from tests.fake_upstream import ServerThread, lifespan
from tests.proxy.in_process import InProcessRecorder


def _upstream(chunks: list[bytes]) -> Any:
    """Bedrock as far as one ``/converse-stream`` answer: these chunks, each sent alone."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await lifespan(receive, send)
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", EVENTSTREAM.encode())]})
        for chunk in chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await asyncio.sleep(0.01)  # apart on the wire, so that the recorder has chunks to time
        await send({"type": "http.response.body", "body": b""})

    return app


def test_a_converse_stream_is_recorded_as_sent_and_read_from_the_capture(tmp_path: Path) -> None:
    frames = answer_frames("It ", "is ", "42.")
    chunks = awkward(frames)
    with ServerThread(_upstream(chunks)) as upstream:
        recorder = InProcessRecorder(upstream.url, tmp_path / "cap")
        recorder.server.__enter__()
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{recorder.port}", timeout=30) as client:
                with client.stream("POST", _PATH, json=_BODY) as response:
                    got = b"".join(response.iter_raw())
                    assert response.headers["content-type"] == EVENTSTREAM
        finally:
            [record] = recorder.stop()
    assert got == b"".join(frames)  # the client's bytes as the upstream sent them
    assert b"".join(record["chunks"]) == got and record["end"] == "complete"
    asked = read_request(record)
    assert (asked.api, asked.model, asked.stream, asked.generation) == ("bedrock-converse-stream", _MODEL, True, True)
    out = read_response(record)
    assert out.readable and out.error is None and out.text == "It is 42." and out.finish_reason == "stop"
    assert (out.prompt_tokens, out.output_tokens) == (21, 3) and stream_done(record["chunks"], out)
    # each event at the recorded chunk that holds its last byte, however the wire grouped them
    assert [e.chunk for e in out.events] == [chunk_of_end(record["chunks"], frames, k) for k in range(len(frames))]
    ns = record["chunk_ns"]
    assert [ns[e.chunk] for e in out.events] == sorted(ns[e.chunk] for e in out.events)
    assert len(record["chunks"]) == len(ns)
    assert json.loads(record["request_body"]) == _BODY
