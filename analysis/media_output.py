"""What an image, video or speech answer made, as digests of its bytes: what compare says is identical or not.

A media answer has no text to diff: an image is the same or it isn't. Its body is not what to compare
whole: OpenAI's images answer is JSON with a ``created`` time (new on every request) beside each image
(``data[i].b64_json``, or a ``url``); a speech answer is the audio's bytes, or (``stream_format="sse"``)
events each carrying a piece of it in base64 (``speech.audio.delta``). So each image (decoded from its
base64) or the whole audio is digested, and only the digests and sizes are kept in the summary.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any

from infertap.apis.body import decoded_chunks
from infertap.apis.media import media_kind

#: A media answer as summarized: its kind (``image``, ``video``, ``speech``), then either why its
#: output was not read (the digests None), or the digest and size of each thing it made.
MediaOutput = tuple[str, str | None, tuple[tuple[bytes, int], ...] | None]


def _digest(data: bytes) -> tuple[bytes, int]:
    return hashlib.blake2b(data, digest_size=16).digest(), len(data)


def media_output(record: dict[str, Any]) -> MediaOutput | None:
    """The media answer of ``record`` (a POST to ``apis.media.MEDIA_ROUTES``), or None for another request."""
    kind = media_kind(record.get("path"), record.get("method"))
    if kind is None:
        return None
    chunks = decoded_chunks(record)
    body = b"".join(chunks if chunks is not None else record.get("chunks") or [])
    ctype = next((v.lower() for n, v in record.get("response_headers") or [] if n.lower() == "content-type"), "")
    if ctype.startswith("text/event-stream"):
        return _events(kind, body)
    if not ctype.startswith("application/json") and body.lstrip()[:1] not in (b"{", b"["):
        return (kind, None, (_digest(body),)) if body else (kind, "an empty body", None)  # the audio (an image) itself
    try:
        answer = json.loads(body)
    except ValueError:
        return kind, "not JSON", None
    items = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(items, list) or not items:
        if kind == "video":  # videos.create answers a job: the video is fetched later by its id
            return kind, "a video job (its id and status), not the video: fetched later by its id", None
        return kind, f"no {kind} in the body", None
    made = []
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("b64_json"), str):
            try:
                made.append(_digest(base64.b64decode(item["b64_json"], validate=True)))
            except (binascii.Error, ValueError):
                return kind, "an image not base64", None
        elif isinstance(item, dict) and isinstance(item.get("url"), str):
            made.append(_digest(item["url"].encode()))  # a link, not the image: the same link, the same image
        else:
            return kind, f"an item with no {kind} (no b64_json, no url)", None
    return kind, None, tuple(made)


def _events(kind: str, body: bytes) -> MediaOutput:
    """A speech stream's audio, its events' base64 pieces (``speech.audio.delta``'s ``audio``) joined."""
    audio = bytearray()
    for line in body.split(b"\n"):
        if not line.startswith(b"data:"):
            continue
        try:
            event = json.loads(line[5:])
            piece = event.get("audio") if isinstance(event, dict) else None
            if isinstance(piece, str):
                audio += base64.b64decode(piece, validate=True)
        except (ValueError, binascii.Error):
            return kind, "an event not JSON, or audio not base64", None
    return (kind, None, (_digest(bytes(audio)),)) if audio else (kind, f"no {kind} in the events", None)


__all__ = ["MediaOutput", "media_output"]
