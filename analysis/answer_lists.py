"""An answer that lists values ("\\boxed{1, 2}", "\\boxed{(1, 2)}", "\\boxed{\\{1, 2\\}}", "\\boxed{[0, 1]}"): its
items and how they are enclosed, so that the ``number`` extractor reads it as one answer, each item read, and no
longer as its last number ("\\boxed{(1, 2)}" read 2, one answer with "\\boxed{2}", where math-verify reads a tuple).
A set, or items with no bracket, has no order, as math-verify compares them ("\\boxed{1, 2}" is "\\boxed{2, 1}"); a
tuple or an interval keeps its order. A comma between thousands ("1,234") separates no items.

Lists side by side ("\\boxed{(1, 2) (3, 4)}": a product of tuples or intervals, of no value), or a union's
("\\boxed{(1, 2) \\cup (3, 4)}"), are one answer of their brackets, each read (``side_by_side``): they read 4, their
last number, one answer with "\\boxed{4}" and with "\\boxed{(5, 7) (3, 4)}", as math-verify's fallback reads a
product (its LaTeX reading finds no value in it); a union it reads as the set."""

from __future__ import annotations

import re
from dataclasses import dataclass

# The brackets of a list, "\\left" and "\\right" before them too: a set's, a tuple's or an interval's.
_ENCLOSED = re.compile(
    r"\s*(?:\\left\s*)?(\\\{|\(|\[)(.*?)(?:\\right\s*)?(\\\}|\)|\])\s*",
    re.DOTALL,
)
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


@dataclass(frozen=True, slots=True)
class Listed:
    """A list's items as written, its opening and closing bracket ("" for none), and whether its order counts."""

    items: list[str]
    opening: str
    closing: str
    ordered: bool


def listed(answer: str) -> Listed | None:
    """The list an answer is, all of it; None where it is one value (no comma between items at its top level)."""
    opening = closing = ""
    inside = answer
    if (m := _ENCLOSED.fullmatch(answer)) and _paired(m.group(1), m.group(3)) and _top_level(m.group(2)):
        opening, inside, closing = m.group(1), m.group(2), m.group(3)
    items = _split(inside)
    if items is None or len(items) < 2 or not all(item.strip() for item in items):
        return None
    return Listed(items, opening, closing, ordered=opening in ("(", "["))


def _paired(opening: str, closing: str) -> bool:
    """Whether the brackets close one list: a set's braces, or an interval's brackets, half-open too ("[0, 1)")."""
    return (opening == "\\{") == (closing == "\\}")


def _top_level(inside: str) -> bool:
    """Whether the brackets matched enclose all of it ("(1,2)", not "(1)(2)" nor "(1),(2)")."""
    depth = 0
    for c in inside.replace("\\{", "{").replace("\\}", "}"):
        depth += 1 if c in "{([" else -1 if c in "})]" else 0
        if depth < 0:
            return False
    return depth == 0


def _split(inside: str) -> list[str] | None:
    """The items between the top level's commas, none of a thousands group; None where a bracket is left open."""
    items, item, depth = [], "", 0
    for i, c in enumerate(inside):
        depth += 1 if c in "{([" else -1 if c in "})]" else 0
        if depth < 0:
            return None
        if c == "," and depth == 0 and not _THOUSANDS.match(inside, i):
            items.append(item)
            item = ""
        else:
            item += c
    return [*items, item] if depth == 0 else None


# What may join brackets side by side: nothing, a space or a product's sign ("(1, 2) \\cdot (3, 4)"), or a union's or
# an intersection's ("(-\\infty, 2) \\cup (3, \\infty)").
_JOIN = re.compile(r"\s*(?:\\(cup|cap)(?![a-zA-Z])|(?:\\cdot|\\times)(?![a-zA-Z])|\*)?\s*")
_OPENING = re.compile(r"(?:\\left\s*)?(?:\\\{|\(|\[)")


@dataclass(frozen=True, slots=True)
class Joined:
    """Brackets side by side as written, and what joins them: "" for a product, "\\cup" or "\\cap"."""

    groups: list[str]
    joiner: str


def side_by_side(answer: str) -> Joined | None:
    """The brackets an answer is, each as written, where it is two or more side by side, all joined alike, and one of
    them lists values ("(1, 2) (3, 4)", "(1, 2)(3)", "(1, 2) \\cup (3, 4)"); None else, as for brackets of one value
    each ("(2)(3)", a product of numbers)."""
    groups: list[str] = []
    joiners: set[str] = set()
    at, end = len(answer) - len(answer.lstrip()), len(answer.rstrip())
    while at < end:
        if groups and (join := _JOIN.match(answer, at)):
            joiners.add("\\" + join.group(1) if join.group(1) else "")
            at = join.end()
        opening = _OPENING.match(answer, at)
        closing = _closing(answer, opening.end()) if opening else None
        if closing is None:
            return None
        groups.append(answer[at:closing])
        at = closing
    if len(groups) < 2 or len(joiners) != 1 or not any(listed(group) for group in groups):
        return None
    return Joined(groups, joiners.pop())


def _closing(answer: str, start: int) -> int | None:
    """Where the bracket opened right before ``start`` closes, past its closing one (of any kind: "[0, 1)");
    None where it is left open."""
    depth, i = 1, start
    while i < len(answer):
        c = answer[i : i + 2] if answer.startswith(("\\{", "\\}"), i) else answer[i]
        depth += 1 if c in ("{", "(", "[", "\\{") else -1 if c in ("}", ")", "]", "\\}") else 0
        i += len(c)
        if depth == 0:
            return i
    return None
