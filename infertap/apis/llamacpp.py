"""llama.cpp's native completion route (``/completion``, ``/infill``): ``content`` per event or whole.

The last event says why it stopped (``stop_type``: ``eos``, ``word``, ``limit``; ``stopping_word``:
which stop word) and carries the server's own counts (``tokens_evaluated``, ``tokens_predicted``)
and ``timings``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .shapes import Api, Delta, Turn, as_int, prompt_text


class LlamaCpp(Api):
    name = "llamacpp"
    finish_map: ClassVar[dict[str, str]] = {"eos": "stop", "word": "stop", "limit": "length"}

    def event(self, obj: dict[str, Any]) -> Delta:
        if not isinstance(obj.get("content"), str) or "choices" in obj:
            return Delta()
        counts: dict[str, Any] = {k: obj[k] for k in ("tokens_evaluated", "tokens_predicted") if k in obj}
        tokens = obj.get("tokens")
        index = as_int(obj.get("index"))
        if index:  # another prompt's (or completion's) answer, as several prompts in one request get
            return Delta(known=True, choices={index: _answer(obj)}, model=_model(obj), timings=_timings(obj))
        d = _answer(obj)
        d.usage, d.model, d.timings = counts or None, _model(obj), _timings(obj)
        d.token_ids = [t for t in tokens if isinstance(t, int)] or None if isinstance(tokens, list) else None
        return d

    def counts(self, usage: dict[str, Any]) -> tuple[int | None, int | None, int | None]:
        return as_int(usage.get("tokens_evaluated")), None, as_int(usage.get("tokens_predicted"))

    def turns(self, body: dict[str, Any]) -> tuple[tuple[Turn, ...], int | None, str | None]:
        prompt = body.get("prompt")
        return ((Turn("user", prompt_text(prompt)),) if prompt is not None else ()), None, None


def _answer(obj: dict[str, Any]) -> Delta:
    """What one event says of its answer: its text, and on its last event why it stopped."""
    stopped = bool(obj.get("stop"))
    word = obj.get("stopping_word")
    return Delta(
        known=True,
        content=obj["content"],
        finish_reason=obj.get("stop_type") if stopped else None,
        stop_sequence=word if stopped and isinstance(word, str) and word else None,
    )


def _model(obj: dict[str, Any]) -> str | None:
    return obj.get("model") if isinstance(obj.get("model"), str) else None


def _timings(obj: dict[str, Any]) -> dict[str, Any] | None:
    return obj["timings"] if isinstance(obj.get("timings"), dict) else None
