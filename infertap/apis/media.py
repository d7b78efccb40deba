"""Routes whose requests are not text generation (media, embeddings), alone in their module: analysis
counts their requests apart without importing any API's reader (a warm ``infertap stats`` reads none,
nor msgspec)."""

from __future__ import annotations

#: Routes that generate something other than text from a ``prompt`` or ``input`` (OpenAI's
#: ``images.generate``/``edit``/``create_variation``, ``videos.create``, ``audio.speech.create``),
#: by what they make: no text tokens to time, so no generation request, counted apart (``media_kind``).
MEDIA_ROUTES: tuple[tuple[str, str], ...] = (
    ("/images/generations", "image"),
    ("/images/edits", "image"),
    ("/images/variations", "image"),
    ("/videos", "video"),
    ("/audio/speech", "speech"),
)


def media_kind(path: str | None, method: str | None = "POST") -> str | None:
    """What a request to ``path`` generates where it is not text (``MEDIA_ROUTES``), else None. Only a
    POST generates: ``GET /v1/videos`` lists the user's videos, and a client that polls it is asking
    for nothing new."""
    if (method or "").upper() != "POST":
        return None
    route = (path or "").split("?", 1)[0].rstrip("/")
    return next((kind for suffix, kind in MEDIA_ROUTES if route.endswith(suffix)), None)


#: Path endings of the embeddings routes (any prefix, no query): OpenAI's and llama-server's
#: ``/v1/embeddings``, llama-server's native ``/embedding``, Ollama's ``/api/embed`` and ``/api/embeddings``.
EMBEDDINGS_ROUTES = ("/embeddings", "/embedding", "/api/embed")


def is_embeddings(path: str | None) -> bool:
    """Whether ``path`` is an embeddings route (``EMBEDDINGS_ROUTES``)."""
    return (path or "").split("?", 1)[0].rstrip("/").endswith(EMBEDDINGS_ROUTES)


__all__ = ["EMBEDDINGS_ROUTES", "MEDIA_ROUTES", "is_embeddings", "media_kind"]
