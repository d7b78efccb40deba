"""Requests that generate something other than text (``infertap.apis.media.MEDIA_ROUTES``: an image, a
video, speech): no generation request, since they have no text tokens to time, so in no figure and
not in the (text) workload identity; counted here, by kind, so that ``stats``, ``compare`` and the claim
card name them rather than leave them out silently. Their own identity is the workload's ``media``
(``workload_identity.media_sql``): traffic is identical only where both are."""

from __future__ import annotations

from infertap.apis.media import EMBEDDINGS_ROUTES, MEDIA_ROUTES

from .store import Analysis


def kind_sql(path: str = "path", method: str = "method") -> str:
    """What a request to the path in column ``path`` by the method in column ``method`` generates
    where it is not text, as SQL (``media_kind``'s: a POST's): ``'image'``, ``'video'``, ``'speech'``,
    else NULL."""
    route = f"rtrim(split_part({path}, '?', 1), '/')"
    return (
        f"CASE WHEN upper({method}) IS DISTINCT FROM 'POST' THEN NULL "
        + " ".join(f"WHEN ends_with({route}, '{suffix}') THEN '{made}'" for suffix, made in MEDIA_ROUTES)
        + " END"
    )


def apart_sql(name: str, path: str = "path", method: str = "method") -> str:
    """The kind of a request the identity ``name`` hashes (``identity.APART``), as SQL: ``kind_sql``'s for
    ``media``; ``'embeddings'`` for ``embeddings`` (a POST to a route of ``apis.media.EMBEDDINGS_ROUTES``), else NULL."""
    if name == "media":
        return kind_sql(path, method)
    route = f"rtrim(split_part({path}, '?', 1), '/')"
    ends = " OR ".join(f"ends_with({route}, '{suffix}')" for suffix in EMBEDDINGS_ROUTES)
    return f"CASE WHEN upper({method}) = 'POST' AND ({ends}) THEN 'embeddings' END"


def not_text(analysis: Analysis, capture: str | None = None) -> dict[str, int]:
    """The requests sent (not refused) to a route of ``MEDIA_ROUTES``, by kind (``{"image": 2}``), of
    the loaded captures or of one (its ``capture`` column value)."""
    case = kind_sql()
    where = "" if capture is None else "AND capture = ?"
    rows = analysis.query(
        f"SELECT kind, count(*) FROM (SELECT {case} AS kind FROM exchanges "
        f"WHERE \"end\" IS DISTINCT FROM 'refused' {where}) WHERE kind IS NOT NULL GROUP BY kind ORDER BY kind",
        [] if capture is None else [capture],
    ).rows
    return {str(kind): int(n) for kind, n in rows}


def embeddings_sent(analysis: Analysis, capture: str | None = None) -> int:
    """The embeddings requests sent (not refused; ``apart_sql``'s), of the loaded captures or of one:
    in no figure, their own identity the workload's ``embeddings``."""
    where = "" if capture is None else "AND capture = ?"
    return int(
        analysis.query(
            f"SELECT count(*) FROM exchanges WHERE {apart_sql('embeddings')} IS NOT NULL "
            f"AND \"end\" IS DISTINCT FROM 'refused' {where}",
            [] if capture is None else [capture],
        ).rows[0][0]
    )


__all__ = ["apart_sql", "embeddings_sent", "kind_sql", "not_text"]
