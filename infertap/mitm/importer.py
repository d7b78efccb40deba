"""``infertap import``: captures from a mitmproxy flow file or a HAR file of LLM API traffic.

Such files keep whole bodies, not the chunks as they arrived: each imported exchange has one
response chunk, timed at the response's end as the file records it, and is marked
``imported`` so that analysis doesn't read stream timings into it (its token times, and so ttft
and tpot, are unknown; its first byte is ``headers_ns``, its end ``end_ns``, both from the send).
The run's header carries the first exchange's wall time, so the traffic keeps its own dates.
Request header names are stored lowercase, as ``infertap record`` stores them (its server hands it
lowercased names), whatever case the file kept; response header names as the file has them, as
record keeps the upstream's.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import json
import os
import socket
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from infertap.capture.hostfacts import GpuList
from infertap.capture.records import End, new_exchange
from infertap.capture.redact import Redactor
from infertap.capture.writer import CaptureWriter
from infertap.errors import InfertapError

from .addon import DEFAULT_PATHS
from .endings import end_of_error, end_of_flow


def recorded_on(kind: str) -> dict[str, Any]:
    """An import's header's host facts: the traffic ran elsewhere, or here at another time, and the
    file does not say on what machine, so none of this machine's facts (nor its GPUs) is its machine's."""
    return {
        "unknown": f"not recorded here: an import of a {kind} file, which does not say the machine its traffic ran on",
        **GpuList(None, f"not listed: an import of a {kind} file, its traffic not recorded on this machine").facts(),
    }


class ImportError_(InfertapError):
    """A file that is neither a HAR nor a mitmproxy flow file, or is damaged."""


def _har_exchanges(
    entries: list[Any], redactor: Redactor, unreadable: list[str], creator: Any = None
) -> Iterator[dict[str, Any]]:
    """Each HAR entry as an exchange; an entry that can't be read as one (a field missing or of
    another type, a body that isn't the base64 it says) is named in ``unreadable`` and left out.
    ``creator`` is the file's ``log.creator.name``: which tool's sizes these are."""
    for i, entry in enumerate(entries):
        try:
            yield _har_exchange(entry, redactor, creator)
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError, binascii.Error) as exc:
            unreadable.append(f"entry {i}: {type(exc).__name__}: {exc}")


def _har_exchange(entry: dict[str, Any], redactor: Redactor, creator: Any = None) -> dict[str, Any]:
    req, resp = entry.get("request") or {}, entry.get("response") or {}
    url = urlsplit(req.get("url", ""))
    started = _dt.datetime.fromisoformat(entry["startedDateTime"].replace("Z", "+00:00")).timestamp()
    timings = entry.get("timings") or {}

    def ms(name: str) -> float:  # -1: does not apply (HAR 1.2)
        return max(0.0, float(timings.get(name, 0) or 0))

    # From the send, as a capture counts: the request went after blocked, dns and connect (ssl within
    # it, HAR 1.2: a browser's queueing for a connection too), its first byte after send + wait, its
    # end after receive too. mitmproxy's savehar times as its flow file does: send is the client's
    # upload to it, after which the request went (its upstream connect is in wait). No timings at
    # all: sent at the start, the first byte unknown, the end the entry's whole time.
    by_mitmproxy = str(creator).lower() == "mitmproxy"
    before, sending = (("send",), ()) if by_mitmproxy else (("blocked", "dns", "connect"), ("send",))
    sent_after_ns = int(sum(map(ms, before)) * 1e6) if timings else 0
    total_ms = float(entry.get("time") or 0)
    status = resp.get("status") or None  # 0: no response came (Chrome's failed requests)
    if status is not None and (not isinstance(status, int) or isinstance(status, bool)):
        raise TypeError(f"response.status is {status!r}, not a number")
    headers_ns = int(sum(map(ms, (*sending, "wait"))) * 1e6) if timings and status else None
    end_ns = int(sum(map(ms, (*sending, "wait", "receive"))) * 1e6) if timings else int(total_ms * 1e6)
    post = req.get("postData") or {}
    body = base64.b64decode(post["text"]) if post.get("encoding") == "base64" else (post.get("text") or "").encode()
    content = resp.get("content") or {}
    text = content.get("text") or ""
    out = base64.b64decode(text) if content.get("encoding") == "base64" else text.encode()
    # A HAR saved without content (Chrome's "sanitized" export, a size limit) says a body was sent
    # and holds none: kept as the file holds it and marked, never read as an empty request or answer.
    # mitmproxy's savehar writes a body it did not keep (a streamed one) as size 0 and text "": the
    # response's own Content-Length is then all that says one was sent (not of a HEAD or a 204/304).
    sent_length = _content_length(resp.get("headers")) if req.get("method") != "HEAD" and status not in (204, 304) else None
    # A body held only in part is not in the file either: Firefox keeps at most 1 MiB of a response,
    # its content.size the whole. That size is the decoded body's (HAR 1.2), as the text is, so a
    # text shorter than it is cut; mitmproxy's savehar writes the encoded length there (a small
    # gzipped body's is larger than the body) and cuts none, so of its files only emptiness tells.
    whole = not by_mitmproxy
    missing = [
        side
        for side, kept, sizes, decoded in (
            ("request", body, (req.get("bodySize"),), req.get("bodySize")),
            ("response", out, (content.get("size"), resp.get("bodySize"), sent_length), content.get("size")),
        )
        if (not kept and any(_count(n) > 0 for n in sizes)) or (whole and _count(decoded) > len(kept))
    ]
    failure = resp.get("_error")  # Chrome's (net::ERR_...) and mitmproxy's savehar's (its own words)
    found = redactor.url_credentials(req.get("url", ""))  # the credentials redacted, looked for in the response
    redactor.query(url.query, found)
    x = {
        "wall": started,
        "sent_after_ns": sent_after_ns,
        "method": str(req.get("method", "GET")),
        "path": url.path or "/",
        "query": url.query,
        "http_version": str(req.get("httpVersion", "1.1")).upper().removeprefix("HTTP/"),
        "request_headers": (
            headers := redactor.header_pairs(
                ((str(h["name"]).lower(), str(h["value"])) for h in req.get("headers") or () if not _pseudo(h)), found
            )
        ),
        "request_body": body,
        # a HAR keeps header values as text: as UTF-8 on the wire, read as the proxy reads those bytes
        "session": redactor.session((n.encode(), v.encode()) for n, v in headers),
        "status": status,
        # HAR keeps the body decoded (HAR 1.2: "decompressed and unchunked") beside the header that
        # says how it was sent: the header is left out, or analysis would undo an encoding twice.
        "response_headers": redactor.header_pairs(
            (str(h["name"]), str(h["value"]))
            for h in resp.get("headers") or ()
            if str(h["name"]).lower() != "content-encoding" and not _pseudo(h)
        ),
        "headers_ns": headers_ns,
        "chunks": [out] if out else [],
        "end_ns": end_ns,
        "upstream": redactor.url(f"{url.scheme}://{url.netloc}"),
    }
    if failure:
        x["error"], x["end"] = str(failure), _end_of_har_error(str(failure))
    if missing:
        x["body_not_in_file"] = missing
        if "request" in missing:
            x["request_body_size"] = int(req["bodySize"])
    messages = entry.get("_webSocketMessages")  # Chrome's and mitmproxy's savehar's
    if isinstance(messages, list) or entry.get("_resourceType") == "websocket":
        x["websocket_messages"] = len(messages) if isinstance(messages, list) else 0
    redactor.request(x, found)
    redactor.echoes(x, found)
    return x


def _end_of_har_error(error: str) -> End:
    """A HAR response's ``_error``: Chrome's net error (a request the page or the user aborted is the
    client gone), else mitmproxy's own wording (its savehar)."""
    lowered = error.lower()
    if not lowered.startswith("net::"):
        return end_of_error(error)
    if "aborted" in lowered or "canceled" in lowered or "cancelled" in lowered:
        return "client_disconnected"
    return "timeout" if "timed_out" in lowered else "upstream_error"


def _count(n: Any) -> float:
    """A HAR size field as a number: 0 where it is none (absent, -1 for unknown, not a number)."""
    return n if isinstance(n, int | float) and not isinstance(n, bool) else 0


def _content_length(headers: Any) -> int | None:
    """A HAR header list's ``Content-Length``, where it is one number."""
    for h in headers if isinstance(headers, list) else ():
        if isinstance(h, dict) and str(h.get("name")).lower() == "content-length":
            value = str(h.get("value")).strip()
            return int(value) if value.isdigit() else None
    return None


def _pseudo(h: dict[str, Any]) -> bool:
    """An HTTP/2 pseudo-header (``:path``, ``:authority``, ``:status``) that a HAR lists among the
    headers: the request line's parts, already read from its url and method; no header a replay
    could send."""
    return str(h["name"]).startswith(":")


def _flow_exchanges(
    path: Path, redactor: Redactor, unreadable: list[str], not_imported: Counter[str]
) -> Iterator[dict[str, Any]]:
    """Each HTTP flow of a mitmproxy flow file as an exchange; another flow (tcp, udp, dns) is
    counted by its type in ``not_imported``. A file damaged after some flows (cut short by a crash
    or a full disk while mitmdump wrote it) gives those, its tail named in ``unreadable``; one whose
    first flow can't be read is no flow file."""
    from mitmproxy import http, io
    from mitmproxy.exceptions import FlowReadException

    read = 0
    with open(path, "rb") as f:
        try:
            for flow in io.FlowReader(f).stream():
                read += 1
                if not isinstance(flow, http.HTTPFlow):
                    not_imported[flow.type] += 1
                    continue
                req, resp = flow.request, flow.response
                sent = req.timestamp_end or req.timestamp_start
                found: set[str] = set()  # the credentials redacted, looked for in the response
                redactor.query(req.path.partition("?")[2], found)
                x = {
                    "wall": req.timestamp_start,
                    "sent_after_ns": int((sent - req.timestamp_start) * 1e9),  # read whole, then sent upstream
                    "method": req.method,
                    "path": req.path.partition("?")[0],
                    "query": req.path.partition("?")[2],
                    "http_version": req.http_version.removeprefix("HTTP/"),
                    "request_headers": redactor.headers_from_asgi(((n.lower(), v) for n, v in req.headers.fields), found),
                    "request_body": req.raw_content or b"",
                    "session": redactor.session(req.headers.fields),
                    "status": resp.status_code if resp else None,
                    "response_headers": redactor.headers_from_asgi(resp.headers.fields) if resp else None,
                    "headers_ns": int((resp.timestamp_start - sent) * 1e9) if resp else None,
                    "chunks": [resp.raw_content] if resp and resp.raw_content else [],
                    "end_ns": int(((resp.timestamp_end or resp.timestamp_start) - sent) * 1e9) if resp else 0,
                    "upstream": f"{req.scheme}://{req.host}:{req.port}",
                    "error": flow.error.msg
                    if flow.error
                    else None
                    if resp
                    else "no response in the flow file (saved in flight?)",
                    "end": end_of_flow(flow, live=False) if flow.error else "complete" if resp else "upstream_error",
                }
                # mitmproxy keeps no body it streamed ("content missing": infertap's addon streams every
                # response, stream_large_bodies a large one): not in the file, never an empty body.
                missing = [side for side, m in (("request", req), ("response", resp)) if m and m.raw_content is None]
                if missing:
                    x["body_not_in_file"] = missing
                    if "request" in missing and (size := req.headers.get("content-length", "").strip()).isdigit():
                        x["request_body_size"] = int(size)
                if flow.websocket is not None:  # the upgrade is the exchange; its messages are not read
                    x["websocket_messages"] = len(flow.websocket.messages)
                redactor.request(x, found)
                redactor.echoes(x, found)
                yield x
        except FlowReadException as exc:
            if not read:
                raise ImportError_(f"{path}: not a readable mitmproxy flow file: {exc}") from exc
            unreadable.append(f"the file after its flow {read} is damaged: {exc}")


def import_file(
    source: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    all_paths: bool = False,
    redact_headers: Iterable[str] = (),
    redact_query: Iterable[str] = (),
) -> dict[str, Any]:
    """Convert ``source`` into the capture ``out``; returns its ``kind`` (``har``, ``mitmproxy``) and
    counts of what was kept, skipped (other paths) and unreadable (HAR entries that aren't an
    exchange, a flow file's damaged tail; with the first one's reason), bodies_not_in_file
    (exchanges kept whose file says a body was sent but holds none) and not_imported (by kind: a
    flow file's tcp, udp and dns flows, and the messages of the WebSockets kept as their upgrade),
    which the capture's header keeps too. ``redact_headers`` and ``redact_query`` name more secrets
    than the defaults, as ``infertap record``'s ``--redact-header`` and ``--redact-query`` do: a
    file from a gateway whose key header no name rule knows keeps it out too."""
    path = Path(source)
    redactor = Redactor(redact_headers, redact_query)
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError as exc:
        raise ImportError_(f"{path}: cannot read: {exc}") from exc
    if not head:  # mitmproxy reads an empty file as a flow file of no flows
        raise ImportError_(f"{path}: an empty file is neither a HAR nor a mitmproxy flow file; nothing imported")
    unreadable: list[str] = []
    not_imported: Counter[str] = Counter()
    # A HAR saved by an editor or a Windows tool may start with a byte order mark or a blank line
    # (a flow file starts with a tnetstring's length digit, never either).
    if head.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")[:1] == b"{":
        try:
            data = json.loads(path.read_text(encoding="utf-8-sig"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise ImportError_(f"{path}: not valid JSON, so not a HAR file: {exc}") from exc
        log = data.get("log") if isinstance(data, dict) else None
        if not isinstance(log, dict) or not isinstance(log.get("entries"), list):
            raise ImportError_(f"{path}: JSON without a list log.entries is not a HAR file")
        creator = log["creator"].get("name") if isinstance(log.get("creator"), dict) else None
        kind, exchanges = "har", list(_har_exchanges(log["entries"], redactor, unreadable, creator))
    else:
        kind, exchanges = "mitmproxy", list(_flow_exchanges(path, redactor, unreadable, not_imported))
    first = min((x["wall"] for x in exchanges), default=None)
    numbered = list(enumerate(sorted(exchanges, key=lambda x: x["wall"]), 1))
    kept = [(seq, x) for seq, x in numbered if all_paths or DEFAULT_PATHS.match(x["path"])]
    # A WebSocket's messages (OpenAI's Realtime, Responses' WebSocket mode) are no request and answer
    # of an API that analysis reads: its upgrade is kept, marked, and the messages counted here.
    not_imported["websocket_messages"] += sum(x.get("websocket_messages", 0) for _, x in kept)
    counts: dict[str, Any] = {
        "kind": kind,
        "kept": 0,
        "skipped": len(numbered) - len(kept),
        "unreadable": len(unreadable),
        "first_unreadable": next(iter(unreadable), None),
        "bodies_not_in_file": 0,
        "websockets": sum("websocket_messages" in x for _, x in kept),
        "not_imported": {k: n for k, n in sorted(not_imported.items()) if n},
    }
    recorder = {
        "pid": os.getpid(),  # info tells an import still writing from one that died
        "kind": "import",
        "from": kind,
        "file": str(path),
        "timing": "coarse: one chunk per response, times from the file",
        "not_imported": counts["not_imported"],
        # Who wrote the run, apart from its traffic's machine: info and stats tell an import still writing by it.
        "importer": {"hostname": socket.gethostname(), "wall": time.time()},
    }
    with CaptureWriter(out, recorder=recorder, wall=first, host=recorded_on(kind)) as writer:  # its traffic's start
        first = first or 0.0
        for seq, x in kept:
            start_ns = int((x["wall"] - first) * 1e9)
            end_ns = x["end_ns"]
            record = new_exchange(
                seq=seq,
                session=x["session"],
                wall=x["wall"],
                start_ns=start_ns,
                sent_ns=start_ns + x["sent_after_ns"],  # the file's times count from the send, as a capture's
                method=x["method"],
                path=x["path"],
                query=redactor.query(x["query"]),
                http_version=x["http_version"],
                request_headers=x["request_headers"],
                request_body=x["request_body"],  # redacted as it was read, its secrets looked for in the response
                status=x["status"],
                response_headers=x["response_headers"],
                headers_ns=x["headers_ns"],
                chunk_ns=[end_ns] * len(x["chunks"]),
                chunks=x["chunks"],
                end_ns=end_ns,
                end=x.get("end") or ("complete" if x["status"] else "upstream_error"),
                error=x.get("error"),
                upstream=x["upstream"],
                imported=kind,
            )
            for key in (
                "request_body_unsearched",
                "response_body_unsearched",
                "request_body_size",
                "body_not_in_file",
                "websocket_messages",
            ):
                if key in x:
                    record[key] = x[key]
            counts["bodies_not_in_file"] += "body_not_in_file" in x
            writer.write(record)
            counts["kept"] += 1
    if writer.error:
        raise ImportError_(f"{out}: could not be written: {writer.error}")
    return counts
