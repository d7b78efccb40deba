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

from .records import Exchange

REDACTED = "[REDACTED]"

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
# A header whose name says it carries a credential, beyond the fixed list: x-auth-token,
# x-access-token, x-client-secret, x-custom-key... (x-session-id, keep-alive, content-type are not).
_SECRET_HEADER_NAME = re.compile(
    r"(?:^|[-_])(?:auth|authorization|token|secret|key|apikey|password|passwd|credentials?|signature)(?:$|[-_])", re.IGNORECASE
)


#: JSON body keys whose string values are secrets (some SDKs send the key in the body).
DEFAULT_BODY_KEYS = frozenset(
    {"api_key", "apikey", "api-key", "x-api-key", "access_token", "refresh_token", "client_secret", "password", "secret", "token"}
)
# One scan for a JSON key that may hold a secret, in any casing ("max_tokens" is no such key).
_BODY_HINT = re.compile(
    rb'"(?:x[-_]?)?(?:api[-_]?key|access[-_]?token|refresh[-_]?token|client[-_]?secret|password|secret|token)"\s*:', re.IGNORECASE
)


# The same keys with the JSON string after them: for a body that can't be parsed (torn, not JSON
# at all, nested too deeply), whose secrets are then found where they stand.
_BODY_SECRET = re.compile(
    rb'("(?:x[-_]?)?(?:api[-_]?key|access[-_]?token|refresh[-_]?token|client[-_]?secret|password|secret|token)"\s*:\s*")'
    rb'((?:[^"\\]|\\.)*)"',
    re.IGNORECASE | re.DOTALL,
)


def _sub_secrets(raw: bytes, found: set[str] | None) -> bytes:
    """``raw`` with the JSON string after each secret key replaced; ``found`` collects the strings."""
    token = REDACTED.encode()

    def replaced(m: re.Match[bytes]) -> bytes:
        if found is not None and m.group(2) != token:
            try:
                found.add(json.loads(b'"' + m.group(2) + b'"'))
            except ValueError:  # an escape JSON doesn't know: the bytes as they stand
                found.add(m.group(2).decode("utf-8", "replace"))
        return m.group(1) + token + b'"'

    return _BODY_SECRET.sub(replaced, raw)


def _secret_strings(node: object, keys: frozenset[str], out: set[str]) -> None:
    """The string values of secret keys anywhere in ``node``: walked with a stack, not recursion, so
    that a body nested as deep as its parser allowed is walked too."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if isinstance(key, str) and _plain(key) in keys and isinstance(value, str) and value:
                    out.add(value)
                else:
                    stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)


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


def _plain(name: str) -> str:
    """A key as compared: lower case, without ``-`` and ``_`` (``API-Key``, ``api_key``, ``apiKey``)."""
    return name.replace("_", "").replace("-", "").lower()


class Redactor:
    """Knows which header names and query parameters hold secrets."""

    def __init__(self, extra_headers: Iterable[str] = (), extra_query_params: Iterable[str] = ()) -> None:
        self.header_names = DEFAULT_HEADERS | {h.strip().lower() for h in extra_headers}
        self.query_params = DEFAULT_QUERY_PARAMS | {q.strip().lower() for q in extra_query_params}
        self._header_bytes = frozenset(h.encode("latin-1") for h in self.header_names)
        self._body_keys = frozenset(_plain(k) for k in DEFAULT_BODY_KEYS)
        self._query_keys = frozenset(_plain(k) for k in self.query_params | DEFAULT_BODY_KEYS)
        self._secret_header: dict[bytes, bool] = {}  # name as sent -> whether it holds a credential

    def secret_header(self, name: str | bytes) -> bool:
        """Whether a header of this name holds a credential: a name on the list (the defaults and
        those given), or one that says so (``x-auth-token``, ``x-client-secret``, ...)."""
        raw = name if isinstance(name, bytes) else name.encode("latin-1")
        found = self._secret_header.get(raw)
        if found is None:
            lower = raw.lower()
            found = lower in self._header_bytes or bool(_SECRET_HEADER_NAME.search(lower.decode("latin-1")))
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
            if sep and _plain(unquote_plus(name).strip()) in self._query_keys:
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
    def echoes(record: Exchange | dict[str, Any], found: set[str]) -> None:
        """The request's own credentials (``found`` as its headers, query and URL were redacted)
        replaced where its response repeats them: an error such as ``Incorrect API key provided:
        <key>``, a server that echoes the headers it got. Only credentials of ``ECHO_MIN``
        characters or more are looked for, so that other text is not taken for one."""
        needles = sorted({s.encode("utf-8", "surrogateescape") for s in found if len(s) >= ECHO_MIN}, key=len, reverse=True)
        if not needles:
            return
        token = REDACTED.encode()
        chunks = record.get("chunks")
        if chunks:
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
        no password: a token given as the user) and secret query values redacted."""
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            host = netloc.rpartition("@")[2]
            netloc = f"{parts.username}:{REDACTED}@{host}" if parts.password else f"{REDACTED}@{host}"
        return urlunsplit(parts._replace(netloc=netloc, query=self.query(parts.query)))

    def text(self, text: str, url: str) -> str:
        """``text`` (an error message that may quote ``url``) without ``url``'s credentials."""
        parts = urlsplit(url)
        for secret in (parts.password, parts.username if not parts.password else None):
            if secret:
                text = text.replace(secret, REDACTED)
        return text

    def json_value(self, value: Any) -> Any:
        """A parsed JSON value (an engine's answer kept in a snapshot) with the strings of secret keys
        replaced: SGLang's server info, for one, holds its own ``api_key``."""
        secrets: set[str] = set()
        _secret_strings(value, self._body_keys, secrets)
        if not secrets:
            return value
        stack: list[Any] = [value := copy.deepcopy(value)]
        while stack:
            item = stack.pop()
            pairs = item.items() if isinstance(item, dict) else enumerate(item) if isinstance(item, list) else ()
            for key, child in list(pairs):
                if isinstance(child, str) and child in secrets:
                    item[key] = REDACTED
                else:
                    stack.append(child)
        return value

    def body(self, raw: bytes, headers: Iterable[Sequence[str]] = (), found: set[str] | None = None) -> bytes:
        """A JSON body with the values of secret keys (``api_key``, ``password``, ...) replaced where
        they occur, every other byte as it was. Bodies that mention no such key are returned as is
        after a substring check, so the common case costs next to nothing; one that does but does not
        parse has the string after each such key replaced. A form body (``headers``, the request's
        [name, value] pairs, say ``application/x-www-form-urlencoded``) is redacted as a query string
        is. ``found`` collects the values taken out (see ``echoes``)."""
        if raw and any(n.lower() == "content-type" and "x-www-form-urlencoded" in v.lower() for n, v in headers):
            return self.query(raw.decode("latin-1"), found).encode("latin-1")
        if not raw or not _BODY_HINT.search(raw):
            return raw
        try:
            parsed = json.loads(raw)
        except (ValueError, RecursionError):  # not JSON to a parser: each secret key's string where it stands
            return _sub_secrets(raw, found)
        secrets: set[str] = set()
        _secret_strings(parsed, self._body_keys, secrets)
        if found is not None:
            found.update(secrets)
        for secret in sorted(secrets, key=len, reverse=True):
            for form in {json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}:
                raw = raw.replace(form.encode("utf-8"), REDACTED.encode())
        # A value sent with escapes of its own choosing ("sk\u002d...") is in neither form above.
        return _sub_secrets(raw, found)
