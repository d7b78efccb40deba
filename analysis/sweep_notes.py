"""What a sweep point's figures can't say on their own, in one wording for ``infertap sweep``'s
notes and the sweep report: a point whose answers were all unknown, requests never sent or cut in
flight by the replayer, answers with no token count or kept only in part, SLOs measured on fewer
exchanges than the point had. The report said none of them, so its "errors 56%" read as a target
failing requests the replayer had cancelled."""

from __future__ import annotations

from typing import Any

from infertap.replay.sweep import load_text
from infertap.wording import counted


def lowest_not_passed(kind: str, point: dict[str, Any]) -> str:
    """Why a sweep whose lowest load tried (``point``) did not pass has no capacity: it failed, or it
    had no answer to judge (``unjudged``), which "met the SLOs at no load tried" misread as a failure.
    One sentence for ``infertap sweep``'s capacity line and the report's."""
    how = "had no answer to judge (see the notes)" if point.get("unjudged") else "failed"
    return f"the lowest {kind} tried, {load_text(point[kind])}, {how}"


def _none_sent(point: dict[str, Any]) -> bool:
    """Whether the point's file says it sent nothing: its ``requests`` (generation requests sent), or
    in a sweep.json written without them, the replayer's own ``sent``. Neither there: not known to be
    none, so its not-sent requests are still said (an old file read as it was written)."""
    said = point.get("requests", point.get("sent"))
    return said is not None and said == 0


def _of(point: dict[str, Any], before: str = "") -> str:
    """``"100 "`` of "of its 100 requests" (``before`` it: "of "), or nothing where the point's file
    has no count to give."""
    return "" if point.get("requests") is None else f"{before}{point['requests']} "


def point_notes(kind: str, point: dict[str, Any]) -> list[str]:
    """The sentences on ``point`` (a sweep.json point of a ``kind`` sweep), each led by its load."""
    where, p, lines = f"{kind} {load_text(point[kind])}", point, []
    if p.get("unjudged"):
        lines.append(f"{where}: {p['unjudged']}: its figures are unknown, and it counts as no pass")
    if p.get("not_sent") and not _none_sent(p):  # with none sent, the unjudged sentence says it
        lines.append(
            f"{where}: {counted(p['not_sent'], 'request')} not sent (refused by the replayer, such as a turn continuing "
            "a response outside the replay: each says why in the point's capture), left out of its figures"
        )
    if cancelled := p.get("cancelled"):
        lines.append(
            f"{where}: {cancelled} of its {_of(p)}requests were cancelled by the replayer in flight when it cut "
            "the point short: among its errors and over every bound, though the target sent no error for them"
        )
    if uncounted := p.get("output_tokens_unknown"):
        of = "none counted" if p.get("output_tokens_per_s") is None else "output tokens/s counts the others"
        lines.append(f"{where}: {uncounted} of {p['ok']} ok answers have no output token count (sent whole, with no usage): {of}")
    if p.get("response_not_kept") and not p.get("unjudged"):  # an unjudged point's own sentence says so
        lines.append(
            f"{where}: {p['response_not_kept']} answers kept only in part (past --max-response-mb): "
            "unknown, held to no SLO and left out of its figures but requests and the span"
        )
    for s in p.get("slos") or ():
        if s.get("missing"):
            lines.append(
                f"{where}: {s['slo']} could not be measured on {s['missing']} {_of(p, 'of ')}exchanges "
                f"(ok answers without a {s['metric']}: counted over the bound)"
            )
    return lines
