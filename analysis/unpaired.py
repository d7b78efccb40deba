"""Why two runs paired nothing, where a side has nothing to compare: a capture that only listed the
models, or whose every generation request infertap refused, holds no answer to set beside the
other's, and "no exchange of B matches one of A" left the user to find that out. Said in the words
``stats`` and the claim card use of such a capture (``no_group_line``).

Image, video, speech and embeddings requests are something to compare (their answers and e2e, though
no text): a run of them alone that paired nothing is refused by the pairing rules' words, as text is."""

from __future__ import annotations

import os

from infertap.capture.identity import APART

from .active import COUNTED
from .in_no_group import no_group_line
from .media import apart_sql
from .store import Analysis


def nothing_to_compare(path: str | os.PathLike[str]) -> str | None:
    """Why the run at ``path`` has nothing to compare (no generation request it sent, and what it
    holds instead), or None where it has one. Read on the error path only: a run that paired pays nothing."""
    with Analysis([path]) as analysis:
        apart = " OR ".join(f"{apart_sql(name)} IS NOT NULL" for name in APART)
        [(counted, refused, unknown)] = analysis.sql(
            f"SELECT count(*) FILTER (WHERE {COUNTED} OR (({apart}) AND \"end\" IS DISTINCT FROM 'refused')), "
            "count(*) FILTER (WHERE \"end\" = 'refused' AND (generation OR body_unknown)), "
            "count(*) FILTER (WHERE body_unknown AND \"end\" IS DISTINCT FROM 'refused') "
            'FROM (SELECT m.generation, m."end", m.path, m.method, x.request_body_unknown AS body_unknown '
            "FROM metrics m JOIN exchanges x USING (capture, exchange_id))"
        ).fetchall()
        if counted:
            return None
        others = analysis.sql(
            "SELECT method, path, count(*) AS n FROM metrics WHERE NOT generation AND \"end\" IS DISTINCT FROM 'refused' "
            "GROUP BY ALL ORDER BY n DESC, method, path"
        ).fetchall()
    line = no_group_line({"refused": refused, "request_body_unknown": unknown}, str(path))
    held = ", ".join(f"{n} × {method} {where}" for method, where, n in others)
    if held:
        return f"{line} ({'only ' if not refused and not unknown else 'besides: '}{held})"
    return line if refused or unknown else f"{line} (it holds no exchange)"


__all__ = ["nothing_to_compare"]
