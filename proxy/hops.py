"""Hop-by-hop headers (RFC 9110 7.6.1): what belongs to one connection and is never sent on, by the
proxy forwarding a request or a response, or by a replay sending a recorded request again."""

from __future__ import annotations

from collections.abc import Iterable

# Content-Length of a request is recomputed from the exact body; Host comes from the upstream URL;
# Expect was answered by our own server before the body arrived; the proxy's own token is for it.
HOP_REQUEST = frozenset(
    b"connection keep-alive proxy-connection proxy-authorization te trailer transfer-encoding upgrade "
    b"host content-length expect x-infertap-token".split()
)
HOP_RESPONSE = frozenset(b"connection keep-alive proxy-connection transfer-encoding te trailer upgrade".split())
_NONE: frozenset[bytes] = frozenset()


def connection_named(headers: Iterable[tuple[bytes, bytes]]) -> frozenset[bytes]:
    """The header names (lower case) a ``Connection`` header lists (``Connection: close, X-Hop``):
    hop-by-hop by its say, never sent on. Empty, at the cost of one pass, when there is none."""
    named = [t.strip().lower() for n, v in headers if n.lower() == b"connection" for t in v.split(b",")]
    return frozenset(named) if named else _NONE
