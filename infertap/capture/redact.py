"""Credential redaction, applied before a record is queued: secrets never reach the writer.

Only values are replaced; names, order, duplicates and every other byte stay as they were, so a
redacted capture still shows *that* a credential was sent and in which form.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import itertools
import re
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import unquote_plus, urlsplit, urlunsplit

from infertap.apis import body as _body
from infertap.apis.body import encoded, header

from .encoding import decoded
from .records import Exchange, session_of
from .redact_json import REDACTED, WINDOW, hinted, secret_strings, spliced, sub_secrets
from .redact_names import (
    DEFAULT_BODY_KEYS,
    DEFAULT_HEADERS,
    DEFAULT_QUERY_PARAMS,
    default_secret_header,
    plain,
    secret_key,
    secret_name,
    secret_query_param,
)

__all__ = [
    "DEFAULT_BODY_KEYS",
    "DEFAULT_HEADERS",
    "DEFAULT_QUERY_PARAMS",
    "ECHO_MIN",
    "REDACTED",
    "Redactor",
    "redacted_url",
    "secret_key",
    "secret_name",
    "without_redacted",
]

_URL_REDACTED = "REDACTED"  # in a URL's userinfo, where brackets would make it unparseable
# Headers whose value is a URL or a request target, its query able to hold a credential
# (``?key=``, Gemini's own auth): an HTTP/2 HAR's ``:path``, a Referer, a redirect's Location.
_URL_HEADERS = frozenset(
    {":path", "referer", "origin", "location", "content-location", "x-original-url", "x-original-uri", "x-forwarded-uri"}
)

#: The shortest credential ``Redactor.echoes`` looks for in a response.
ECHO_MIN = 8


def _credentials(value: str) -> set[str]:
    """A secret header's value as a response could repeat it: whole, its token after an auth scheme,
    and a Basic token's password (its user only where it has none: a token given as the user). A
    user name beside a password is no secret, and may be any word ("assistant") that a response
    must keep."""
    out = {value}
    scheme, sep, rest = value.partition(" ")
    if sep and rest and scheme.isalpha():
        out.add(rest.strip())
        if scheme.lower() == "basic":
            with contextlib.suppress(ValueError, UnicodeDecodeError):
                user, _, password = base64.b64decode(rest.strip(), validate=True).decode().partition(":")
                out.add(password or user)
    return out


# A browser can't set headers on a WebSocket: OpenAI's Realtime and Responses WebSocket mode take
# the key as a subprotocol, ``Sec-WebSocket-Protocol: realtime, openai-insecure-api-key.sk-...``.
_KEY_SUBPROTOCOL = "openai-insecure-api-key."


def _subprotocols(value: str, found: set[str] | None) -> str:
    """A Sec-WebSocket-Protocol list with the key of each key-carrying subprotocol redacted, the
    others (``realtime``, ``openai-beta.realtime-v1``) and the list's spacing as sent."""
    if _KEY_SUBPROTOCOL not in value.lower():
        return value
    parts = value.split(",")
    for i, part in enumerate(parts):
        offered = part.strip()
        if offered.lower().startswith(_KEY_SUBPROTOCOL):
            if found is not None:
                found.add(offered[len(_KEY_SUBPROTOCOL) :])
            parts[i] = part.replace(offered, offered[: len(_KEY_SUBPROTOCOL)] + REDACTED)
    return ",".join(parts)


def _needles(found: set[str]) -> list[bytes]:
    """The credentials taken out (``found``) long enough to look for elsewhere, longest first."""
    return sorted({s.encode("utf-8", "surrogateescape") for s in found if len(s) >= ECHO_MIN}, key=len, reverse=True)


def _scrubbed(chunks: list[bytes], needles: list[bytes], token: bytes) -> list[bytes]:
    """``chunks`` with each needle replaced by ``token``, one that spans chunks too; each chunk keeps
    its place (a needle cut by a chunk's end goes, whole, to the chunk it began in). The usual case,
    no needle anywhere, costs a join and a scan per needle (C speed, not a Python loop per chunk)."""
    body = b"".join(chunks)
    spans = _spans(body, re.compile(b"|".join(re.escape(n) for n in needles)), max(map(len, needles)))  # longest first
    if not spans:
        return chunks
    scrubbed = spliced(body, [(start, end, token) for start, end in spans])

    def moved(cut: int) -> int:  # a chunk boundary of ``body`` in ``scrubbed``
        shift = 0
        for start, end in spans:
            if end <= cut:
                shift += len(token) - (end - start)
            elif start < cut:
                return start + shift + len(token)
            else:
                break
        return cut + shift

    cuts = [moved(cut) for cut in itertools.accumulate(map(len, chunks))]
    return [scrubbed[a:b] for a, b in zip([0, *cuts[:-1]], cuts, strict=True)]


def _scrubbed_start(tail: bytes, needles: list[bytes], token: bytes) -> bytes:
    """``tail`` (a cut body's last bytes) with the end of a needle it starts with replaced: the
    credential its first byte cut, ``ECHO_MIN // 2`` characters of it or more (fewer are ordinary text)."""
    for needle in needles:
        for k in range(1, len(needle) - ECHO_MIN // 2 + 1):
            if tail.startswith(needle[k:]):
                return token + tail[len(needle) - k :]
    return tail


def _spans(body: bytes, pattern: re.Pattern[bytes], longest: int, window: int = WINDOW) -> list[tuple[int, int]]:
    """Where ``pattern`` (needles of ``longest`` bytes at most) matches in ``body``, as one scan
    finds them, searched ``window`` bytes at a time in place (``pos``, ``endpos``: no copy).
    CPython's ``re`` holds the GIL for a whole search: at 48 MiB that was 20-60 ms at a stretch, from
    a worker thread too; between windows other threads (an event loop) run. A match that begins in
    a window ends within ``longest`` bytes of its end, so the next window starts after it."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for start in range(0, len(body), window):
        pos = max(pos, start)
        for m in pattern.finditer(body, pos, min(len(body), start + window + longest - 1)):
            if m.start() >= start + window:
                break
            spans.append(m.span())
            pos = m.end()
    return spans


def _scrubbed_pairs(pairs: list[list[str]], needles: list[bytes], token: bytes) -> list[list[str]]:
    """Header or trailer [name, value] pairs with each needle in a value replaced by ``token``."""
    return [[n, _scrubbed([v.encode("latin-1", "replace")], needles, token)[0].decode("latin-1")] for n, v in pairs]


def _scrubbed_decoded(record: Exchange | dict[str, Any], needles: list[bytes], token: bytes) -> bool:
    """An encoded response (gzip, deflate, zstd, br) searched as a reader decodes it; False when it
    is not one. Where it repeats a credential it is stored decoded and scrubbed, each chunk's share of the
    body at that chunk's time (a chunk that decodes to nothing goes, with its time), its headers
    saying so (no content-encoding, the stored length as content-length); else its bytes stay. One
    that decodes past ``apis.body.DECODED_LIMIT`` is not decoded (a few KiB may inflate to GiB):
    its bytes stay, said unsearched (``response_body_unsearched``), as a request body is."""
    chunks = record.get("chunks")
    if not chunks or not encoded(record):
        return False
    decoded, why = _body.decoding(record)
    if why == _body.TOO_LARGE:
        encoding = (header(record.get("response_headers"), "content-encoding") or "").strip().lower()
        record["response_body_unsearched"] = f"{encoding} decodes to more than {_body.DECODED_LIMIT} bytes"
    if decoded is None or decoded == chunks:  # an encoding not undone here (compress), a broken stream, too large
        return False
    scrubbed = _scrubbed(decoded, needles, token)
    if scrubbed is decoded:
        return True
    kept = [i for i, chunk in enumerate(scrubbed) if chunk]
    record["chunks"] = [scrubbed[i] for i in kept]
    times = record.get("chunk_ns")
    if times is not None and len(times) == len(scrubbed):
        record["chunk_ns"] = [times[i] for i in kept]
    size = str(sum(map(len, record["chunks"])))
    record["response_headers"] = [
        [n, size if n.lower() == "content-length" else v]
        for n, v in record.get("response_headers") or ()
        if n.lower() != "content-encoding"
    ]
    return True


def without_redacted(query: str) -> str:
    """``query`` less the parameters the capture redacted (their value the placeholder): a
    credential of where the request went, sent by no replay and part of no workload."""
    if REDACTED not in query:
        return query
    return "&".join(p for p in query.split("&") if p.partition("=")[2] != REDACTED)


def redacted_url(text: str) -> bool:
    """Whether a URL (a string of a body) had a credential taken out when recorded: a parameter
    that reads as the placeholder, or the placeholder for its userinfo's password or user."""
    if REDACTED in text:
        return True
    try:
        parts = urlsplit(text)
    except ValueError:
        return False
    return _URL_REDACTED in (parts.password, parts.username)


class Redactor:
    """Knows which header names and query parameters hold secrets."""

    def __init__(self, extra_headers: Iterable[str] = (), extra_query_params: Iterable[str] = ()) -> None:
        self.header_names = DEFAULT_HEADERS | {h.strip().lower() for h in extra_headers}
        self.query_params = DEFAULT_QUERY_PARAMS | {q.strip().lower() for q in extra_query_params}
        self._header_bytes = frozenset(h.encode("latin-1") for h in self.header_names)
        self._query_keys = frozenset(plain(k) for k in self.query_params | DEFAULT_BODY_KEYS)
        self._any_url = self.query_params != DEFAULT_QUERY_PARAMS  # names given: any URL's query may hold one
        self._secret_header: dict[bytes, bool] = {}  # name as sent -> whether it holds a credential

    def secret_header(self, name: str | bytes) -> bool:
        """Whether a header of this name holds a credential: a name on the list (the defaults and
        those given), or one that says so (``x-auth-token``, ``X-AuthToken``, ``x-client-secret``, ...)."""
        raw = name if isinstance(name, bytes) else name.encode("latin-1")
        found = self._secret_header.get(raw)
        if found is None:
            lower = raw.lower()
            text = lower.decode("latin-1")
            found = lower in self._header_bytes or default_secret_header(text)
            if len(self._secret_header) < 4096:  # header names repeat: remembered, within bounds
                self._secret_header[raw] = found
        return found

    def session(self, headers: Iterable[tuple[bytes, bytes]]) -> str | None:
        """The session a request's headers name (``session_of``), read from those this redactor
        keeps only: one redacted (``--redact-header x-session-id``) reached the capture in clear as
        the exchange's ``session``, or, read once redacted, put every request in one session."""
        return session_of((name, value) for name, value in headers if not self.secret_header(name))

    def headers_from_asgi(self, raw: Iterable[tuple[bytes, bytes]], found: set[str] | None = None) -> list[list[str]]:
        """Bytes header pairs (ASGI scope, httpx raw, mitmproxy fields; any casing) -> redacted [name, value]
        string pairs; ``found`` collects the credentials taken out (see ``echoes``)."""
        return self.header_pairs(((n.decode("latin-1"), v.decode("latin-1")) for n, v in raw), found)

    def header_pairs(self, pairs: Iterable[tuple[str, str]], found: set[str] | None = None) -> list[list[str]]:
        """String header pairs in any casing -> redacted [name, value] pairs (a URL-valued one, such
        as ``:path`` or ``Referer``, as ``url`` redacts it); ``found`` collects the credentials taken
        out (see ``echoes``)."""
        out = []
        for name, value in pairs:
            if self.secret_header(name):
                if found is not None:
                    found.update(_credentials(value))
                value = self.redact_value(name, value)
            elif name.lower() == "sec-websocket-protocol":
                value = _subprotocols(value, found)
            elif ("?" in value or "@" in value or "#" in value) and name.lower() in _URL_HEADERS:
                value = self.url(value, found)
            out.append([name, value])
        return out

    @staticmethod
    def redact_value(name: str | bytes, value: str) -> str:
        # Keep an auth scheme ("Bearer", "Basic"): it tells how the client authenticated, not the secret.
        lname = name.lower()
        if lname in ("authorization", b"authorization", "proxy-authorization", b"proxy-authorization"):
            scheme, sep, rest = value.partition(" ")
            if sep and rest and scheme.isalpha():
                return f"{scheme} {REDACTED}"
        return REDACTED

    def query(self, query: str, found: set[str] | None = None) -> str:
        """Redact secret parameters of a raw query string, leaving its other bytes exactly as they were;
        ``found`` collects the values taken out (see ``echoes``)."""
        if not query:
            return query
        parts = query.split("&")
        changed = False
        for i, part in enumerate(parts):
            name, sep, value = part.partition("=")
            key = unquote_plus(name).strip()
            if sep and secret_query_param(key, self._query_keys):
                parts[i] = f"{name}={REDACTED}"
                changed = True
                if found is not None:
                    found.update((value, unquote_plus(value)))
        return "&".join(parts) if changed else query

    def url_credentials(self, url: str) -> set[str]:
        """What a URL's userinfo would put on the wire, for ``echoes``: its password and the Basic
        token of user and password (its user only where it has no password: a token given as the
        user; a user beside a password is no secret, see ``_credentials``)."""
        parts = urlsplit(url)
        if not (parts.username or parts.password):
            return set()
        user, password = unquote_plus(parts.username or ""), unquote_plus(parts.password or "")
        return {password, base64.b64encode(f"{user}:{password}".encode()).decode()} if password else {user}

    @staticmethod
    def request_decodes(record: Exchange | dict[str, Any]) -> bool:
        """Whether ``request`` would decode this record's request body to search it (it has one,
        sent with a content-encoding): a decompression to as much as 64 MiB (``apis.body.DECODED_LIMIT``), however
        small the body, which a caller on an event loop runs elsewhere."""
        encoding = (header(record.get("request_headers") or [], "content-encoding") or "").strip().lower()
        return bool(record.get("request_body")) and encoding not in ("", "identity")

    @staticmethod
    def request_strings(record: Exchange | dict[str, Any]) -> int:
        """About how many strings ``request`` may read one by one in this record's request body, a
        count at C speed: its JSON strings (half its quotes; a body with a credential's key is walked
        string by string, ~1 us each, where its size says little: 200 KiB of short strings took
        ~50 ms), or a form body's parameters. What a caller on an event loop weighs, beside the size."""
        raw = record.get("request_body") or b""
        form = "x-www-form-urlencoded" in (header(record.get("request_headers") or [], "content-type") or "").lower()
        return raw.count(b"&") + 1 if form else raw.count(b'"') // 2

    @staticmethod
    def decodes(record: Exchange | dict[str, Any]) -> bool:
        """Whether ``echoes`` would decode this record's response to search it (it has a body and a
        content-encoding): a decompression, which a caller on an event loop runs elsewhere."""
        return bool(record.get("chunks")) and encoded(record)

    @staticmethod
    def echoes(record: Exchange | dict[str, Any], found: set[str]) -> None:
        """The request's own credentials (``found`` as its headers, query and URL were redacted)
        replaced where its response repeats them: an error such as ``Incorrect API key provided:
        <key>``, a server that echoes the headers it got; in its body, headers, trailers (an
        error's detail may come last) and error. Only credentials of ``ECHO_MIN`` characters or
        more are looked for, so that other text is not taken for one. An encoded response is
        searched decoded (see ``_scrubbed_decoded``; one too large to decode is searched as it came
        and said unsearched): ``decodes`` says when, work to keep off an event loop."""
        needles = _needles(found)
        if not needles:
            return
        token = REDACTED.encode()
        chunks = record.get("chunks")
        if chunks and not _scrubbed_decoded(record, needles, token):
            record["chunks"] = _scrubbed(chunks, needles, token)
        tail = record.get("response_tail")  # a cut body's end (never an encoded one's): searched as it came
        if tail:
            record["response_tail"] = _scrubbed_start(_scrubbed([tail], needles, token)[0], needles, token)
        headers, trailers = record.get("response_headers"), record.get("response_trailers")
        if headers:
            record["response_headers"] = _scrubbed_pairs(headers, needles, token)
        if trailers:
            record["response_trailers"] = _scrubbed_pairs(trailers, needles, token)
        for interim in record.get("interim", ()):
            interim["headers"] = _scrubbed_pairs(interim["headers"], needles, token)
        error = record.get("error")
        if isinstance(error, str):
            record["error"] = _scrubbed([error.encode()], needles, token)[0].decode("utf-8", "replace")

    def url(self, url: str, found: set[str] | None = None) -> str:
        """A URL fit to record or print: the password of its userinfo (or the whole userinfo when it has
        no password: a token given as the user) and secret query values (and fragment values: an
        OAuth ``#access_token=``) redacted; ``found`` collects them (see ``echoes``). The userinfo's
        placeholder has no brackets: ``user:[REDACTED]@`` reads as an IPv6 host to ``urlsplit``,
        which then refuses the URL (older captures hold that form: see ``hostfacts.url_parts``)."""
        try:
            parts = urlsplit(url)
        except ValueError:  # no URL (a bad IPv6 host): its query is still read as one
            base, sep, query = url.partition("?")
            return base + sep + self.query(query, found) if sep else url
        netloc = parts.netloc
        if "@" in netloc:
            if found is not None:
                found.update(self.url_credentials(url))
            host = netloc.rpartition("@")[2]
            netloc = f"{parts.username}:{_URL_REDACTED}@{host}" if parts.password else f"{_URL_REDACTED}@{host}"
        query, fragment = self.query(parts.query, found), self.query(parts.fragment, found)
        if (netloc, query, fragment) == (parts.netloc, parts.query, parts.fragment):
            return url  # as written, never as urlunsplit would write it
        return urlunsplit(parts._replace(netloc=netloc, query=query, fragment=fragment))

    def text(self, text: str, url: str) -> str:
        """``text`` (an error message that may quote ``url``) without ``url``'s credentials."""
        parts = urlsplit(url)
        for secret in (parts.password, parts.username if not parts.password else None):
            if secret:
                text = text.replace(secret, REDACTED)
        return text

    def json_value(self, value: Any) -> Any:
        """A parsed JSON value (an engine's answer kept in a snapshot) with what a body's redaction
        takes out taken out (see ``body``): SGLang's server info, for one, holds its own ``api_key``
        and ``admin_api_key``. Such a string is replaced elsewhere in the value too when it is
        ``ECHO_MIN`` characters or more (a shorter one would be taken for ordinary text)."""
        places = list(secret_strings(value, self.secret_header))
        if not places:
            return value
        value = copy.deepcopy(value)
        secrets: set[str] = set()
        for path, text, secret in places:
            node = value
            for step in path[:-1]:
                node = node[step]
            node[path[-1]] = REDACTED if secret else self.url(text, secrets)
            if secret:
                secrets.add(text)
        repeated = {s for s in secrets if len(s) >= ECHO_MIN}
        stack: list[Any] = [value]
        while repeated and stack:
            item = stack.pop()
            pairs = item.items() if isinstance(item, dict) else enumerate(item) if isinstance(item, list) else ()
            for key, child in list(pairs):
                if isinstance(child, str) and child in repeated:
                    item[key] = REDACTED
                else:
                    stack.append(child)
        return value

    def request(self, record: Exchange | dict[str, Any], found: set[str] | None = None) -> None:
        """A record's request body redacted in place (``body``, by its request headers). One sent
        encoded (its content-encoding gzip, deflate, zstd or br) is searched decoded: where it held
        a credential it is stored decoded and redacted, its headers saying so (no content-encoding,
        the stored length as content-length), as an encoded response that repeats one is; else its
        exact bytes stay. One that can't be decoded keeps its bytes and says why it was not
        searched (``request_body_unsearched``)."""
        headers = record.get("request_headers") or []
        refused = record.get("refused_body")
        if refused:
            record["refused_body"] = self._refused_body(refused, headers, found)
        raw = record.get("request_body") or b""
        encoding = (header(headers, "content-encoding") or "").strip().lower()
        if not raw or encoding in ("", "identity"):
            record["request_body"] = self.body(raw, headers, found)
            return
        plain_body, why = decoded(raw, encoding)
        if plain_body is None:
            record["request_body_unsearched"] = why
            return
        clean = self.body(plain_body, headers, found)
        if clean == plain_body:
            return
        record["request_body"] = clean
        record["request_headers"] = [
            [n, str(len(clean)) if n.lower() == "content-length" else v] for n, v in headers if n.lower() != "content-encoding"
        ]

    def _refused_body(self, raw: bytes, headers: Iterable[Sequence[str]], found: set[str] | None) -> bytes:
        """A chunked body's bytes its parser refused (``refused_body``: chunk-size lines among body
        bytes, never a whole JSON value): its secret fields redacted as a torn body's are, and every
        credential its request's headers and query carried (``found``) taken out wherever it stands,
        as a response that repeats one: the client may have sent the key again in what was refused."""
        clean = self.body(raw, headers, found)
        needles = _needles(found or set())
        return _scrubbed([clean], needles, REDACTED.encode())[0] if needles else clean

    def body(self, raw: bytes, headers: Iterable[Sequence[str]] = (), found: set[str] | None = None) -> bytes:
        """A JSON body with the string values of secret fields (``api_key``, ``auth_token``,
        ``password``, an MCP server's ``authorization_token``, a secret header in a ``headers``
        object, an ``authentication`` object's ``key``: ``redact_names.secret_field``) replaced
        where they stand, and the credentials of each string that is a URL taken out as ``url``
        takes them (``"server_url": "https://...?api_key=..."``), every other byte as it was: a value is never
        looked for elsewhere in the body, where a short one ("1") would match prompt text and
        numbers. Bodies that mention no such key (nor a key written with an escape) are returned
        as is after one scan, so the common case costs next to nothing; one that does but does not
        parse (torn, not JSON) is read the same way. A form body (``headers``, the request's [name,
        value] pairs, say ``application/x-www-form-urlencoded``) is redacted as a query string is.
        ``found`` collects the values taken out (see ``echoes``)."""
        if raw and any(n.lower() == "content-type" and "x-www-form-urlencoded" in v.lower() for n, v in headers):
            return self.query(raw.decode("latin-1"), found).encode("latin-1")
        if not raw or not hinted(raw, any_url=self._any_url):
            return raw
        return sub_secrets(raw, found, self.secret_header, self._body_url)

    def _body_url(self, text: str, found: set[str] | None) -> str:
        return self.url(text, found)
