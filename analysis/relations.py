"""An answer that is an inequality ("\\boxed{x \\le 3}", "$1 < x < 3$"): its sides and relations, so that the ``number``
extractor reads it as one answer and no longer as its last number ("\\boxed{x < 3}" and "\\boxed{x > 3}" read 3, one
answer, where math-verify reads two relations). Each relation has one spelling ("\\leq" is "\\le", "\\gt" ">"), and a
chain that falls is written rising ("3 \\ge x" as "x \\le 3"), as math-verify reads the two as one."""

from __future__ import annotations

import re

# A relation at the top level; "=" is none here: an equation's answer is its right-hand side.
_RELATION = re.compile(r"\\(?:leqslant|geqslant|leq|geq|neq|le|ge|ne|lt|gt)(?![a-zA-Z])|[<>≤≥≠]")
_SPELLING = {
    "\\leqslant": "\\le", "\\leq": "\\le", "\\le": "\\le", "≤": "\\le",
    "\\geqslant": "\\ge", "\\geq": "\\ge", "\\ge": "\\ge", "≥": "\\ge",
    "\\neq": "\\ne", "\\ne": "\\ne", "≠": "\\ne",
    "\\lt": "<", "<": "<", "\\gt": ">", ">": ">",
}  # fmt: skip
_REVERSED = {"\\ge": "\\le", ">": "<", "\\le": "\\ge", "<": ">"}


def related(math: str) -> tuple[list[str], list[str]] | None:
    """The sides as written and the relations between them, each spelled one way, a falling chain reversed; None
    where the math holds no relation at its top level, or one side is empty."""
    sides, relations, at, scanned, depth = [], [], 0, 0, 0
    for m in _RELATION.finditer(math):
        depth, scanned = depth + _depth(math, scanned, m.start()), m.end()
        if depth:
            continue
        sides.append(math[at : m.start()])
        relations.append(_SPELLING[m.group()])
        at = m.end()
    if not relations or not all(side.strip() for side in [*sides, math[at:]]):
        return None
    sides.append(math[at:])
    if all(r in ("\\ge", ">") for r in relations):  # "3 > x > 1" as "1 < x < 3"
        return sides[::-1], [_REVERSED[r] for r in reversed(relations)]
    return sides, relations


def _depth(math: str, start: int, end: int) -> int:
    """How many brackets or braces open between ``start`` and ``end`` are left open."""
    stretch = math[start:end].replace("\\{", "").replace("\\}", "")
    return sum(c in "{([" for c in stretch) - sum(c in "})]" for c in stretch)
