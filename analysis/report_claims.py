"""The report's claim cards: each run's nine facts side by side (``claim``), unknowns with their reason,
then its headline figures as ``claim`` prints them.

One row per field, one column per run; a row whose values differ between the runs is highlighted,
since a different device, runtime or workload explains a different number before any metric does.
A card's warnings (a capture still being written) come first, as ``claim`` puts them before its card.
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .claim import FIELDS, claim, field_text, figure_lines, value_text, with_left_out
from .sources import LeftOut
from .svg import _table


def _same(field: str, value: Any, text: str) -> str:
    """What must be equal for a field to read the same on two runs: a workload, its two identities,
    whether its schedule was kept (a replay's text also names its source; a replay capped by
    --max-concurrency hashes the schedule it was given, not the one it kept) and the image, video
    and speech requests beside it, their counts and their own identity (in no figure, but traffic), and
    the embeddings requests' identity likewise."""
    if field == "workload" and value is not None:
        if value.get("bodies_unknown"):  # requests in no identity: equal hashes don't make it the same
            return f"unknown {id(value)}"
        media = (
            f"{sorted((value.get('not_text') or {}).items())} {value.get('media_identity')} {value.get('embeddings_identity')}"
        )
        return f"{value['identity']} {value['schedule_identity']} {value.get('schedule_not_kept')} {media}"
    return text


def _left_out_text(left_out: Sequence[dict[str, str]]) -> str:
    """A card's ``left_out`` as its row says it: each match of the glob with why it holds no capture."""
    if not left_out:
        return "none"
    return "; ".join(f"{x['pattern']}: left out {x['path']}: {x['why']}" for x in left_out)


def _captures_of(runs: Sequence[tuple[str, str | os.PathLike[str]]]) -> dict[str, list[str]]:
    """Each run's capture paths, by run name."""
    out: dict[str, list[str]] = {}
    for name, path in runs:
        out.setdefault(name, []).append(str(path))
    return out


def headings(runs: Sequence[tuple[str, str | os.PathLike[str]]]) -> list[str]:
    """Each run's column heading, ``NAME: PATH``: the path's last part, or as many of its last parts as
    tell it apart from every other column of that name (``run/a/out`` and ``run/b/out``: ``a/out``,
    ``b/out``), since two columns both headed ``A: out`` can't be told apart."""
    parts = [(name, Path(os.path.normpath(os.path.abspath(path))).parts) for name, path in runs]
    out = []
    for i, (name, mine) in enumerate(parts):
        others = [p for j, (n, p) in enumerate(parts) if j != i and n == name and p != mine]
        k = 1
        while k < len(mine) and any(p[-k:] == mine[-k:] for p in others):
            k += 1
        out.append(f"{name}: {'/'.join(mine[-k:]).lstrip('/') or mine[-1]}")
    return out


def claim_cards(
    runs: Sequence[tuple[str, str | os.PathLike[str]]],
    made: Sequence[dict[str, Any]] | None = None,
    left_out: Mapping[str, Sequence[LeftOut]] | None = None,
) -> list[str]:
    """The section for ``runs`` (name, capture path; a run of several captures once per capture): a
    table of their claim cards (``made``: the cards where the caller has them, in the runs' order;
    ``left_out``: by run name, what the glob that named it matched besides, on each of its cards as
    ``claim`` puts it there, and a row of the table)."""
    left = left_out or {}
    cards = [
        (name, with_left_out(card, left.get(name, ())))
        for name, card in (
            zip((name for name, _ in runs), made, strict=True) if made else ((name, claim(path)) for name, path in runs)
        )
    ]
    rows, differs = [], []
    for field in FIELDS:
        values = [value_text(field, card[field]["value"]) for _, card in cards]
        rows.append([field, *(field_text(field, card[field]) for _, card in cards)])  # worded as claim prints it
        differs.append(len({_same(field, card[field]["value"], text) for text, (_, card) in zip(values, cards, strict=True)}) > 1)
    if any(card["left_out"] for _, card in cards):  # what the run's glob named besides: no part of its figures
        rows.append(["left out", *(_left_out_text(card["left_out"]) for _, card in cards)])
        differs.append(False)
    # The headline figures (and what they are over), as ``claim`` prints them; runs' figures always differ.
    lines = [figure_lines(card["figures"]) for _, card in cards]
    for i in range(max(map(len, lines), default=0)):  # a row per line: a run's, then the note on what they are over
        rows.append(["figures" if i == 0 else "", *(each[i] if i < len(each) else "" for each in lines)])
        differs.append(False)
    return [
        "<h2>Claim cards</h2>",
        # claim's own warning of a capture still being written: its figures leave out what is in flight
        *(
            f'<p class="warn">{html.escape(name)}: warning: {html.escape(w)}</p>'
            for name, card in cards
            for w in card["warnings"]
        ),
        "<p>The facts each run's numbers stand on (<code>infertap claim RUN</code>; its <code>--json</code> has each "
        "field's source). Unknowns are stated with their reason, not guessed.</p>",
        # a run that is a folder of captures (shards) has a card each, as claim takes one capture
        *(
            f"<p>{html.escape(name)} is {len(paths)} captures: a card each, as <code>infertap claim CAPTURE</code> prints it.</p>"
            for name, paths in _captures_of(runs).items()
            if len(paths) > 1
        ),
        _table(["field", *headings(runs)], rows, differs),
    ]
