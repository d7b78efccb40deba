"""The requests no group holds (``speed_stats``' ``in_no_group``), in the words ``stats`` prints,
so that the report says of a capture with no group what stats says of it: a capture whose every
generation request infertap refused is not one of "no generation requests"."""

from __future__ import annotations


def in_no_group_words(apart: dict[str, int]) -> str:
    """The requests counted apart that no group holds, in words: never sent, or of unknown kind."""
    said = []
    if apart.get("refused"):
        said.append(f"{apart['refused']} refused by infertap, never sent (counted in no figure)")
    if apart.get("request_body_unknown"):
        said.append(
            f"{apart['request_body_unknown']} sent with a body not kept or cut short (generation or not unknown: counted in no figure)"
        )
    return "; ".join(said)


def no_group_line(apart: dict[str, int], where: str = "these captures") -> str:
    """What ``stats`` says of captures with no group: none to count, and the requests held apart;
    ``where``: "this capture" for the claim card, which speaks of its one capture."""
    said = in_no_group_words(apart)
    return f"no counted generation requests in {where}: {said}" if said else f"no generation requests in {where}"


def apart_line(apart: dict[str, int], of: str = "group") -> str | None:
    """What ``stats`` says after its groups (``of``: "group", or "session" by session) of the requests
    held apart that none of them holds (a capture of refusals alone beside counted traffic); None
    where there are none."""
    said = in_no_group_words(apart)
    key = "session" if of == "session" else "key"
    return f"in no {of} above (no request of their {key} was counted): {said}" if said else None


def not_text_line(counts: dict[str, int], embeddings: int = 0) -> str | None:
    """What ``stats`` says of ``media.not_text``'s requests and the ``embeddings`` requests sent; None where there are none."""
    said = [not_text_words(counts)] if counts else []
    said += [f"{embeddings} embeddings request{'s' if embeddings != 1 else ''}"] if embeddings else []
    if not said:
        return None
    return f"not in these figures: {', '.join(said)} (no text tokens to time: not counted as generation requests)"


def not_text_words(counts: dict[str, int]) -> str:
    """``media.not_text``'s counts in words: ``2 image generation requests, 1 speech generation request``."""
    return ", ".join(f"{n} {kind} generation request{'s' if n != 1 else ''}" for kind, n in counts.items()) or "none"


__all__ = ["apart_line", "in_no_group_words", "no_group_line", "not_text_line", "not_text_words"]
