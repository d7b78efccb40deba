"""The vectors of an embeddings answer, each as float32 little-endian bytes: what compare's cosine reads.

An embeddings answer has no text, so no chat adapter reads it; its vectors are its output. The
shapes read: OpenAI's ``data[i].embedding`` (vLLM, llama-server, llama-cpp-python), a list of
floats or, with ``encoding_format: "base64"``, float32 little-endian bytes in base64, as OpenAI
defines it; Ollama's ``/api/embed`` (``embeddings``: one list per input) and ``/api/embeddings``
(``embedding``: one list); llama-server's native ``/embedding`` (a list of ``{index, embedding}``).
An embedding of one row per token (no pooling) is those rows, each a vector.

Kept as float32, the precision OpenAI's base64 carries and the engines compute in, so that one
vector sent as base64 and as JSON floats is one vector; a value past float32's range is infinite.
"""

from __future__ import annotations

import base64
import binascii
import sys
from array import array
from collections.abc import Iterable, Mapping
from typing import Any

from .body import decoded_chunks
from .fastjson import loads

#: An answer read: (None, its vectors in input order); not read: (why, []).
Vectors = tuple[str | None, list[bytes]]


def read_embeddings(record: Mapping[str, Any]) -> Vectors:
    """The vectors of the record's answer, or why none were read (a body that is no embeddings answer)."""
    chunks = decoded_chunks(record)
    if chunks is None:
        return "cannot decode the response's content-encoding", []
    try:
        body = loads(b"".join(chunks))
    except ValueError:
        return "the body is not JSON", []
    try:
        return None, [_vector(v) for v in _listed(body)]
    except _Unread as exc:
        return str(exc), []


class _Unread(Exception):
    """Why a body holds no vectors that can be read."""


def _listed(body: Any) -> list[Any]:
    """The answer's embeddings in input order, each as sent (a list of numbers or a base64 string)."""
    if isinstance(body, dict) and isinstance(body.get("data"), list):
        return _rows(_item(x) for x in _by_index(body["data"]))
    if isinstance(body, dict) and isinstance(body.get("embeddings"), list):
        return list(body["embeddings"])
    if isinstance(body, dict) and isinstance(body.get("embedding"), list):
        return [body["embedding"]]
    if isinstance(body, list) and body and all(isinstance(x, dict) for x in body):  # llama-server's native /embedding
        return _rows(_item(x) for x in _by_index(body))
    raise _Unread("no embeddings in the body (data[].embedding, embeddings or embedding)")


def _rows(embeddings: Iterable[Any]) -> list[Any]:
    """Each input's embedding, one that is a list of lists as its rows: a model with no pooling (pooling
    none; llama-cpp-python's server on a causal model) answers one vector per token of the input."""
    rows: list[Any] = []
    for e in embeddings:
        rows.extend(e if isinstance(e, list) and e and all(isinstance(r, list) for r in e) else [e])
    return rows


def _item(x: Any) -> Any:
    if not isinstance(x, dict) or "embedding" not in x:
        raise _Unread("an item of the answer carries no embedding")
    return x["embedding"]


def _by_index(items: list[Any]) -> list[Any]:
    """Items in their ``index`` order where every one says it (an engine may send them in any order)."""
    indexes = [x.get("index") if isinstance(x, dict) else None for x in items]
    ints = [i for i in indexes if isinstance(i, int) and not isinstance(i, bool)]
    if len(ints) == len(items) and len(set(ints)) == len(items):
        order = sorted(range(len(items)), key=ints.__getitem__)
        return [items[k] for k in order]
    return items


def _vector(v: Any) -> bytes:
    """One embedding as float32 little-endian bytes."""
    if isinstance(v, str):
        try:
            raw = base64.b64decode(v, validate=True)
        except (binascii.Error, ValueError):
            raise _Unread("an embedding is a string that is not base64") from None
        if not raw or len(raw) % 4:
            raise _Unread(f"a base64 embedding of {len(raw)} bytes is no float32 vector")
        return raw
    if not isinstance(v, list) or not v:
        raise _Unread("an embedding is neither a list of numbers nor base64" if v != [] else "an embedding is empty")
    if any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in v):
        raise _Unread("an embedding holds a value that is not a number")
    try:
        floats = array("f", v)
    except OverflowError:
        raise _Unread("an embedding holds a number too large for a float") from None
    if sys.byteorder == "big":
        floats.byteswap()
    return floats.tobytes()
