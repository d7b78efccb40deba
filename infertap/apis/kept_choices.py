"""How each choice of a cut n > 1 answer ended, as far as its kept head and tail tell (``apis.kept``).

A chat or completions stream asked for several answers (``n`` > 1, a completions batch of prompts)
streams each choice's deltas and finish reason in events of its own, interleaved: the last events,
all a cut answer's ``response_tail`` holds, may be one choice's alone, the others' finish reasons
said long before, in the head or in the middle the recorder dropped. So each choice is read from
both ends: it finished where a finish reason (or an error object) of it is in either; it was cut
where a token of it is in the tail and no finish reason of it follows (none can come before a
choice's last token); else how it ended is unknown, as is the count of unfinished choices then.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .read import COMPLETIONS, request_json
from .shapes import Api, Delta, Event

__all__ = ["asked_choices", "kept_choices"]


def asked_choices(record: Mapping[str, Any], api: Api) -> int:
    """How many answers the request asks for: ``n`` of each prompt, and a completions batch's
    prompts each (one where its body is unread: the choices seen are all that is known then)."""
    body = request_json(record) or {}
    n = body.get("n")
    n = n if type(n) is int and n > 1 else 1
    prompt = body.get("prompt")
    several = api is COMPLETIONS and isinstance(prompt, list) and not all(type(t) is int for t in prompt)
    return n * (len(prompt) if several and prompt else 1)


def kept_choices(head: Sequence[Event], tail: Sequence[Event], asked: int) -> tuple[int, int | None]:
    """(choices, unfinished): the answer's choices (``asked``, or more where the events name more),
    and of those after the first how many said no finish reason, None where one's end is unknown.
    ``head`` and ``tail``: the kept whole events of each end, folded (``Event.delta`` read)."""
    finished: set[int] = set()
    for event in head:
        finished.update(k for k, d in _choices(event.delta) if _ends(d))
    tokens: set[int] = set()
    for event in tail:
        for k, d in _choices(event.delta):
            if _ends(d):
                finished.add(k)
                tokens.discard(k)  # its finish follows its last token
            elif d.content or d.reasoning or d.refusal or d.audio or d.tool_calls:
                tokens.add(k)
    seen = {k for e in (*head, *tail) for k, _ in _choices(e.delta)}
    count = max(asked, 1 + max(seen, default=0))
    others = range(1, count)
    if any(k not in finished and k not in tokens for k in others):
        return count, None  # it may have finished in the middle, not kept
    return count, sum(k in tokens and k not in finished for k in others)


def _choices(d: Delta) -> list[tuple[int, Delta]]:
    """Each choice an event speaks for: choice 0's is the event's own delta."""
    return [(0, d), *(d.choices or {}).items()]


def _ends(d: Delta) -> bool:
    return bool(d.finish_reason) and isinstance(d.finish_reason, str) or d.error is not None
