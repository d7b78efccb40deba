"""Which names hold credentials: headers, query parameters and JSON keys (see ``redact``).

A header holds no prompt, so its rule is broad; a query parameter or a JSON key can hold what a
model wrote (a tool's input) or a template's settings, so theirs takes only credential-shaped names.
A JSON key is also read by where it stands: an MCP tool's ``headers`` object holds headers, an
Azure On Your Data ``authentication`` object holds its ``key``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

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

# How a header's name that holds a credential ends, once plain (see ``plain``): X-AuthToken,
# X-Goog-Credential, X-Api-Keys. Never max_tokens, author, top_k. Broad, as a header holds no
# prompt: JSON keys and query parameters, which also carry what a model wrote, use ``KEY_ENDINGS``.
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
# ``thoughtSignature``) that the API must get back as it sent it. ``authorization_token``: an
# Anthropic MCP server's; ``connection_string``: an Azure one holds its ``AccountKey``.
KEY_ENDINGS = (
    "apikey", "apikeys", "secretkey", "secretaccesskey", "privatekey", "password", "passwd", "clientsecret",
    "accesstoken", "refreshtoken", "authtoken", "bearertoken", "idtoken", "sessiontoken", "privatetoken", "apitoken",
    "authorizationtoken", "connectionstring", "credential", "credentials",
)  # fmt: skip
# In a query, a signed URL's signature is a credential too: X-Amz-Signature, X-Goog-Signature.
QUERY_ENDINGS = (*KEY_ENDINGS, "signature")
BODY_NAMES = frozenset(name.replace("_", "").replace("-", "") for name in DEFAULT_BODY_KEYS)
#: Key endings (plain) of the objects whose keys are read by where they stand (``secret_field``).
HOLDERS = ("headers", "authentication")
# In an Azure On Your Data ``authentication`` object: {"type": "api_key", "key": ...},
# {"type": "key_and_key_id", "key": ..., "key_id": ...} (the rest are named as credentials anyway).
_AUTHENTICATION_KEYS = frozenset({"key", "keyid"})


def plain(name: str) -> str:
    """A key as compared: lower case, without ``-`` and ``_`` (``API-Key``, ``api_key``, ``apiKey``)."""
    return name.replace("_", "").replace("-", "").lower()


def secret_name(name: str) -> bool:
    """Whether a header of this name holds a credential, by its ending in any casing and with any
    ``-`` or ``_``; also what a replay takes a redacted JSON key for (captures recorded with this
    rule for keys too)."""
    name = plain(name)
    return name.endswith(_SECRET_ENDINGS) and name not in _ORDINARY


def secret_key(name: str) -> bool:
    """Whether a JSON key of this name holds a credential: a name on ``DEFAULT_BODY_KEYS`` or one
    that ends as a credential's does (``KEY_ENDINGS``), in any casing, with any ``-`` or ``_``."""
    name = plain(name)
    return name in BODY_NAMES or name.endswith(KEY_ENDINGS)


def secret_query_param(name: str, names: frozenset[str]) -> bool:
    """Whether a query parameter of this name (read, not as sent) holds a credential; ``names``
    are the plain names given beside the rule."""
    name = plain(name)
    return name in names or name.endswith(QUERY_ENDINGS)


def default_secret_header(name: str) -> bool:
    """Whether a header of this name holds a credential by the default rules (no name given)."""
    return name.lower() in DEFAULT_HEADERS or bool(_SECRET_HEADER_NAME.search(name)) or secret_name(name)


def secret_field(key: str, holder: str | None, secret_header: Callable[[str], bool] = default_secret_header) -> bool:
    """Whether the string value of JSON key ``key`` is a credential, ``holder`` the key of the object
    that holds it (None at the top or in a list): a secret key anywhere; in an object of headers
    (an MCP tool's ``headers``, ``extra_headers``) each header ``secret_header`` redacts (Cookie,
    X-Custom-Token); in an ``authentication`` object (Azure On Your Data) its ``key`` and ``key_id``."""
    if secret_key(key):
        return True
    if holder is None:
        return False
    held = plain(holder)
    if held.endswith("headers"):
        return secret_header(key)
    return held == "authentication" and plain(key) in _AUTHENTICATION_KEYS
