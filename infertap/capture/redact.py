"""Credential redaction, applied before a record is queued: secrets never reach the writer.

Only values are replaced; names, order, duplicates and every other byte stay as they were, so a
redacted capture still shows *that* a credential was sent and in which form.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import itertools
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import unquote_plus, urlsplit, urlunsplit

from infertap.apis.body import decoded_chunks, header

from .records import Exchange

REDACTED = "[REDACTED]"
_URL_REDACTED = "REDACTED"  # in a URL's userinfo, where brackets would make it unparseable

DEFAULT_HEADERS = frozenset(
    {
        "x-infertap-token",
        "authorization",
        "proxy-authorization",
        "api-key",
        "x-api-key",
        "x-goog-api-key",
        "ocp-apim-subscription-key",
        "cookie",
        "set-cookie",
    }
)
DEFAULT_QUERY_PARAMS = frozenset(
    {
        "key", "api_key", "apikey", "api-key", "x-api-key", "token", "access_token", "auth", "sig", "signature",
        "client_secret", "password", "refresh_token", "x-amz-signature", "x-amz-security-token",
    }
)  # fmt: skip
# A header whose name has a word that says it carries a credential, beyond the fixed list and
# ``secret_name``: x-custom-key, x-auth-user... (x-session-id, keep-alive, content-type are not).
_SECRET_HEADER_NAME = re.compile(
    r"(?:^|[-_])(?:auth|authorization|token|secret|key|apikey|password|passwd|credentials?|signature)(?:$|[-_])", re.IGNORECASE
)


#: JSON body keys whose string values are secrets (some SDKs send the key in the body); any key
#: ``secret_key`` knows is one too.
DEFAULT_BODY_KEYS = frozenset(
    {"api_key", "apikey", "api-key", "x-api-key", "access_token", "refresh_token", "client_secret", "password", "secret", "token"}
    # a Responses MCP tool's OAuth token, and the headers an MCP tool is given
    | {"authorization", "proxy-authorization", "x-goog-api-key"}
)

# How a header's name that holds a credential ends, once plain (see ``_plain``): X-AuthToken,
# X-Goog-Credential, X-Api-Keys. Never max_tokens, author, top_k. Broad, as a header holds no
# prompt: JSON keys and query parameters, which also carry what a model wrote, use ``_KEY_ENDINGS``.
_SECRET_ENDINGS = (
    "apikey", "apikeys", "token", "secret", "secretkey", "accesskey", "privatekey", "password", "passwd",
    "signature", "credential", "credentials", "auth",
)  # fmt: skip
# Names with such an ending that hold no credential: a tokenizer's special tokens (llama.cpp's
# /props, a chat template's settings) are text the model reads.
_ORDINARY = frozenset(
    f"{role}token" for role in ("bos", "eos", "pad", "unk", "sep", "cls", "mask", "eot", "image", "audio", "video")
)
# How a JSON key or a query parameter that holds a credential ends, once plain: auth_token,
# aws_secret_access_key, admin_api_key. Only credential-shaped words: a tool's input or a template's
# settings hold page_token, nextPageToken, csrf_token, boi_token or auth, which are no credential.
# No signature: Anthropic's thinking blocks and Gemini's parts carry one (``signature``,
# ``thoughtSignature``) that the API must get back as it sent it.
_KEY_ENDINGS = (
    "apikey", "apikeys", "secretkey", "secretaccesskey", "privatekey", "password", "passwd", "clientsecret",
    "accesstoken", "refreshtoken", "authtoken", "bearertoken", "idtoken", "sessiontoken", "privatetoken", "apitoken",
    "credential", "credentials",
)  # fmt: skip
# In a query, a signed URL's signature is a credential too: X-Amz-Signature, X-Goog-Signature.
_QUERY_ENDINGS = (*_KEY_ENDINGS, "signature")
_BODY_NAMES = frozenset(name.replace("_", "").replace("-", "") for name in DEFAULT_BODY_KEYS)


def secret_name(name: str) -> bool:
    """Whether a header of this name holds a credential, by its ending in any casing and with any
    ``-`` or ``_``; also what a replay takes a redacted JSON key for (captures recorded with this
    rule for keys too)."""
    plain = _plain(name)
    return plain.endswith(_SECRET_ENDINGS) and plain not in _ORDINARY


def secret_key(name: str) -> bool:
    """Whether a JSON key of this name holds a credential: a name on ``DEFAULT_BODY_KEYS`` or one
    that ends as a credential's does (``_KEY_ENDINGS``), in any casing, with any ``-`` or ``_``."""
    plain = _plain(name)
    return plain in _BODY_NAMES or plain.endswith(_KEY_ENDINGS)


def _loose(word: str) -> bytes:
    """``word`` as a regex that allows ``-`` or ``_`` between its letters, as ``_plain`` drops them."""
    return b"[-_]*".join(re.escape(c.encode()) for c in word)


# One scan for a JSON key that may hold a secret, in any casing ("max_tokens" is no such key), or
# for a key written with an escape (``"api\u005fkey"``), which only a parser reads by its name.
# It runs over the body reversed, from each key's ``":``: a pattern that begins with a literal is
# searched at C speed, one that begins with the endings' letters tries every letter of the body.
# It finds every key that ends in ``token`` or ``secret`` too: ``secret_key`` decides.
_BODY_HINT = re.compile(
    rb':\s*"(?:[-_]*(?:'
    + b"|".join(_loose(e[::-1]) for e in sorted({*_BODY_NAMES, *_KEY_ENDINGS}))
    + rb')|[^"\\]{0,64}[0-9a-fA-F]{4}u\\)',
    re.IGNORECASE,
)
# Every JSON string of a body in order (never out of step: outside its strings JSON has no quotes),
# with the string after it when it is a key (group 2: where a secret key's value stands, to the
# body's end in a torn one) or the ``[`` of a list (group 3). Each string is consumed whole
# (possessive), to the body's end when it never closes, so no byte is scanned twice: linear in the
# body, which a proxy scans on its event loop.
_JSON_STRING = re.compile(rb'"((?:[^"\\]++|\\.)*+)(?:"(?:\s*:\s*(?:"((?:[^"\\]++|\\.)*+)(?:"|\\?\Z)|(\[)))?|\\?\Z)', re.DOTALL)
_BRACKETS = re.compile(rb"[\[\]{}]")


def _text(string: bytes) -> str:
    """A JSON string's bytes (between its quotes) as it reads; an escape JSON doesn't know leaves
    the bytes as they stand."""
    if b"\\" in string:
        with contextlib.suppress(ValueError):
            return str(json.loads(b'"' + string + b'"'))
    return string.decode("utf-8", "replace")


def _sub_secrets(raw: bytes, found: set[str] | None) -> bytes:
    """``raw`` with the string value of each secret key replaced where it stands (each string of it
    when it is a list: ``"api_keys": ["sk-1", "sk-2"]``), however deep and however written (escapes
    in the key or the value), every other byte as it was; ``found`` collects the values as they
    read. A body that does not parse is read the same way."""
    spans: list[tuple[int, int]] = []
    opened: list[bytes] = []  # the containers open in a secret key's list, innermost last (see ``_nest``)
    last = 0
    for m in _JSON_STRING.finditer(raw):
        if opened:
            _nest(opened, raw, last, m.start())
        if opened and opened[-1] == b"[":  # a string of a secret key's list
            spans.append(m.span(1))
        elif m.group(2) is not None or m.group(3) is not None:  # a key, its value a string or a list
            secret = secret_key(_text(m.group(1)))
            if m.group(2) is not None and secret:
                spans.append(m.span(2))
            elif m.group(3) is not None and (secret or opened):
                opened.append(b"[" if secret else b"(")
        last = m.end()
    return _replaced(raw, spans, found)


def _nest(opened: list[bytes], raw: bytes, start: int, end: int) -> None:
    """``opened`` after the brackets between two strings (``raw[start:end]``, where JSON has no
    quotes, so every bracket there is the body's own): ``[`` a list whose strings are secrets, ``(``
    one whose strings are not (a list in an object in a secret key's list), ``{`` an object."""
    for m in _BRACKETS.finditer(raw, start, end):
        bracket = m.group()
        if bracket in b"]}":
            opened.pop()
            if not opened:
                return
        else:
            opened.append(b"{" if bracket == b"{" else opened[-1])


def _replaced(raw: bytes, spans: list[tuple[int, int]], found: set[str] | None) -> bytes:
    """``raw`` with each span (a string between its quotes) replaced by ``REDACTED`` (one that
    already reads so is left), the values taken out added to ``found``."""
    token = REDACTED.encode()
    pieces: list[bytes] = []
    pos = 0
    for start, end in spans:
        value = raw[start:end]
        if value == token:
            continue
        if found is not None:
            found.add(_text(value))
        pieces += (raw[pos:start], token)
        pos = end
    if not pieces:
        return raw
    pieces.append(raw[pos:])
    return b"".join(pieces)


def _secret_strings(node: object, out: set[str]) -> None:
    """The string values of secret keys anywhere in ``node`` (the strings of a list that is one):
    walked with a stack, not recursion, so that a body nested as deep as its parser allowed is
    walked too."""
    stack: list[tuple[object, bool]] = [(node, False)]  # (a value, whether it is a secret key's list)
    while stack:
        item, secret = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if isinstance(key, str) and secret_key(key) and isinstance(value, str | list):
                    stack.append(([value], True) if isinstance(value, str) else (value, True))
                else:
                    stack.append((value, False))
        elif isinstance(item, list):
            for value in item:
                if secret and isinstance(value, str) and value:
                    out.add(value)
                else:
                    stack.append((value, secret and isinstance(value, list)))


#: The shortest credential ``Redactor.echoes`` looks for in a response.
ECHO_MIN = 8


def _credentials(value: str) -> set[str]:
    """A secret header's value as a response could repeat it: whole, its token after an auth scheme,
    and a Basic token's user and password."""
    out = {value}
    scheme, sep, rest = value.partition(" ")
    if sep and rest and scheme.isalpha():
        out.add(rest.strip())
        if scheme.lower() == "basic":
            with contextlib.suppress(ValueError, UnicodeDecodeError):
                user, _, password = base64.b64decode(rest.strip(), validate=True).decode().partition(":")
                out.update((user, password))
    return out


def _scrubbed(chunks: list[bytes], needles: list[bytes], token: bytes) -> list[bytes]:
    """``chunks`` with each needle replaced by ``token``, one that spans chunks too; each chunk keeps
    its place (a needle cut by a chunk's end goes, whole, to the chunk it began in). The usual case,
    no needle anywhere, costs a join and a scan per needle (C speed, not a Python loop per chunk)."""
    body = b"".join(chunks)
    if not any(n in body for n in needles):
        return chunks
    spans = [m.span() for m in re.finditer(b"|".join(re.escape(n) for n in needles), body)]  # longest first
    pieces: list[bytes] = []
    pos = 0
    for start, end in spans:
        pieces += (body[pos:start], token)
        pos = end
    pieces.append(body[pos:])
    scrubbed = b"".join(pieces)

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


def _encoding(record: Exchange | dict[str, Any]) -> str | None:
    """The response's content-encoding, where it has one (``identity`` is none)."""
    encoding = (header(record.get("response_headers"), "content-encoding") or "").strip().lower()
    return encoding if encoding not in ("", "identity") else None


def _scrubbed_decoded(record: Exchange | dict[str, Any], needles: list[bytes], token: bytes) -> bool:
    """An encoded response (gzip, deflate) searched as a reader decodes it; False when it is not
    one. Where it repeats a credential it is stored decoded and scrubbed, each chunk's share of the
    body at that chunk's time (a chunk that decodes to nothing goes, with its time), its headers
    saying so (no content-encoding, the stored length as content-length); else its bytes stay."""
    chunks = record.get("chunks")
    if not chunks or _encoding(record) is None:
        return False
    decoded = decoded_chunks(record)
    if decoded is None or decoded == chunks:  # an encoding not undone here (br, zstd), or a broken stream
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


def _plain(name: str) -> str:
    """A key as compared: lower case, without ``-`` and ``_`` (``API-Key``, ``api_key``, ``apiKey``)."""
    return name.replace("_", "").replace("-", "").lower()


def without_redacted(query: str) -> str:
    """``query`` less the parameters the capture redacted (their value the placeholder): a
    credential of where the request went, sent by no replay and part of no workload."""
    if REDACTED not in query:
        return query
    return "&".join(p for p in query.split("&") if p.partition("=")[2] != REDACTED)


class Redactor:
    """Knows which header names and query parameters hold secrets."""

    def __init__(self, extra_headers: Iterable[str] = (), extra_query_params: Iterable[str] = ()) -> None:
        self.header_names = DEFAULT_HEADERS | {h.strip().lower() for h in extra_headers}
        self.query_params = DEFAULT_QUERY_PARAMS | {q.strip().lower() for q in extra_query_params}
        self._header_bytes = frozenset(h.encode("latin-1") for h in self.header_names)
        self._query_keys = frozenset(_plain(k) for k in self.query_params | DEFAULT_BODY_KEYS)
        self._secret_header: dict[bytes, bool] = {}  # name as sent -> whether it holds a credential

    def secret_header(self, name: str | bytes) -> bool:
        """Whether a header of this name holds a credential: a name on the list (the defaults and
        those given), or one that says so (``x-auth-token``, ``X-AuthToken``, ``x-client-secret``, ...)."""
        raw = name if isinstance(name, bytes) else name.encode("latin-1")
        found = self._secret_header.get(raw)
        if found is None:
            lower = raw.lower()
            text = lower.decode("latin-1")
            found = lower in self._header_bytes or bool(_SECRET_HEADER_NAME.search(text)) or secret_name(text)
            if len(self._secret_header) < 4096:  # header names repeat: remembered, within bounds
                self._secret_header[raw] = found
        return found

    def headers_from_asgi(self, raw: Iterable[tuple[bytes, bytes]], found: set[str] | None = None) -> list[list[str]]:
        """Bytes header pairs (ASGI scope, httpx raw, mitmproxy fields; any casing) -> redacted [name, value]
        string pairs; ``found`` collects the credentials taken out (see ``echoes``)."""
        return self.header_pairs(((n.decode("latin-1"), v.decode("latin-1")) for n, v in raw), found)

    def header_pairs(self, pairs: Iterable[tuple[str, str]], found: set[str] | None = None) -> list[list[str]]:
        """String header pairs in any casing -> redacted [name, value] pairs; ``found`` collects the
        credentials taken out (see ``echoes``)."""
        out = []
        for name, value in pairs:
            if self.secret_header(name):
                if found is not None:
                    found.update(_credentials(value))
                value = self.redact_value(name, value)
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
            if sep and (_plain(key) in self._query_keys or _plain(key).endswith(_QUERY_ENDINGS)):
                parts[i] = f"{name}={REDACTED}"
                changed = True
                if found is not None:
                    found.update((value, unquote_plus(value)))
        return "&".join(parts) if changed else query

    def url_credentials(self, url: str) -> set[str]:
        """What a URL's userinfo would put on the wire (its user, password, and their Basic token): for ``echoes``."""
        parts = urlsplit(url)
        if not (parts.username or parts.password):
            return set()
        user, password = unquote_plus(parts.username or ""), unquote_plus(parts.password or "")
        return {user, password, base64.b64encode(f"{user}:{password}".encode()).decode()} if password else {user}

    @staticmethod
    def decodes(record: Exchange | dict[str, Any]) -> bool:
        """Whether ``echoes`` would decode this record's response to search it (it has a body and a
        content-encoding): a decompression, which a caller on an event loop runs elsewhere."""
        return bool(record.get("chunks")) and _encoding(record) is not None

    @staticmethod
    def echoes(record: Exchange | dict[str, Any], found: set[str]) -> None:
        """The request's own credentials (``found`` as its headers, query and URL were redacted)
        replaced where its response repeats them: an error such as ``Incorrect API key provided:
        <key>``, a server that echoes the headers it got. Only credentials of ``ECHO_MIN``
        characters or more are looked for, so that other text is not taken for one. A gzip or
        deflate response is searched decoded (see ``_scrubbed_decoded``): ``decodes`` says when,
        work to keep off an event loop."""
        needles = sorted({s.encode("utf-8", "surrogateescape") for s in found if len(s) >= ECHO_MIN}, key=len, reverse=True)
        if not needles:
            return
        token = REDACTED.encode()
        chunks = record.get("chunks")
        if chunks and not _scrubbed_decoded(record, needles, token):
            record["chunks"] = _scrubbed(chunks, needles, token)
        headers = record.get("response_headers")
        if headers:
            record["response_headers"] = [
                [n, _scrubbed([v.encode("latin-1", "replace")], needles, token)[0].decode("latin-1")] for n, v in headers
            ]
        error = record.get("error")
        if isinstance(error, str):
            record["error"] = _scrubbed([error.encode()], needles, token)[0].decode("utf-8", "replace")

    def url(self, url: str) -> str:
        """A URL fit to record or print: the password of its userinfo (or the whole userinfo when it has
        no password: a token given as the user) and secret query values redacted. The userinfo's
        placeholder has no brackets: ``user:[REDACTED]@`` reads as an IPv6 host to ``urlsplit``,
        which then refuses the URL (older captures hold that form: see ``hostfacts.url_parts``)."""
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            host = netloc.rpartition("@")[2]
            netloc = f"{parts.username}:{_URL_REDACTED}@{host}" if parts.password else f"{_URL_REDACTED}@{host}"
        return urlunsplit(parts._replace(netloc=netloc, query=self.query(parts.query)))

    def text(self, text: str, url: str) -> str:
        """``text`` (an error message that may quote ``url``) without ``url``'s credentials."""
        parts = urlsplit(url)
        for secret in (parts.password, parts.username if not parts.password else None):
            if secret:
                text = text.replace(secret, REDACTED)
        return text

    @staticmethod
    def json_value(value: Any) -> Any:
        """A parsed JSON value (an engine's answer kept in a snapshot) with the strings of secret keys
        replaced (each string of a list that is one): SGLang's server info, for one, holds its own
        ``api_key`` and ``admin_api_key``. Such a string is replaced elsewhere in the value too when
        it is ``ECHO_MIN`` characters or more (a shorter one would be taken for ordinary text)."""
        secrets: set[str] = set()
        _secret_strings(value, secrets)
        if not secrets:
            return value
        repeated = {s for s in secrets if len(s) >= ECHO_MIN}
        stack: list[tuple[Any, bool]] = [(value := copy.deepcopy(value), False)]  # as in ``_secret_strings``
        while stack:
            item, secret = stack.pop()
            pairs = item.items() if isinstance(item, dict) else enumerate(item) if isinstance(item, list) else ()
            for key, child in list(pairs):
                held = secret or (isinstance(item, dict) and isinstance(key, str) and secret_key(key))
                if isinstance(child, str) and (held or child in repeated):
                    item[key] = REDACTED
                else:
                    stack.append((child, held and isinstance(child, list)))
        return value

    def body(self, raw: bytes, headers: Iterable[Sequence[str]] = (), found: set[str] | None = None) -> bytes:
        """A JSON body with the string values of secret keys (``api_key``, ``auth_token``,
        ``password``, ...) replaced where they stand, every other byte as it was: a value is never
        looked for elsewhere in the body, where a short one ("1") would match prompt text and
        numbers. Bodies that mention no such key (nor a key written with an escape) are returned
        as is after one scan, so the common case costs next to nothing; one that does but does not
        parse (torn, not JSON) is read the same way. A form body (``headers``, the request's [name,
        value] pairs, say ``application/x-www-form-urlencoded``) is redacted as a query string is.
        ``found`` collects the values taken out (see ``echoes``)."""
        if raw and any(n.lower() == "content-type" and "x-www-form-urlencoded" in v.lower() for n, v in headers):
            return self.query(raw.decode("latin-1"), found).encode("latin-1")
        if not raw or not _BODY_HINT.search(raw[::-1]):
            return raw
        return _sub_secrets(raw, found)
