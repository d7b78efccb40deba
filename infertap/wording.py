"""Counts in the text the commands print: ``counted(1, "turn")`` is "1 turn", never "1 turns"."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, plural unless ``n`` is one (``plural``: where adding "s" is wrong, "passes")."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


__all__ = ["counted"]
