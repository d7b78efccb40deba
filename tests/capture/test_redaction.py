"""Credential redaction (proxy.redact.Redactor): secret values go, every other byte stays."""

from __future__ import annotations

import base64
import json
import os
import string

import pytest

from tests.extras import needs

needs("hypothesis", "dev")
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from infertap.capture.redact import DEFAULT_HEADERS, DEFAULT_QUERY_PARAMS, ECHO_MIN, REDACTED, Redactor

SECRET = "sk-live-0123456789abcdefSECRET"
SECRET_HEADERS = ["authorization", "proxy-authorization", "api-key", "x-api-key", "x-goog-api-key", "cookie", "set-cookie"]
CASINGS = [str.lower, str.upper, str.title, lambda s: "".join(c.upper() if i % 2 else c for i, c in enumerate(s))]

FUZZ_EXAMPLES = int(os.environ.get("INFERTAP_FUZZ_EXAMPLES", "300"))  # `make fuzz` raises it


def test_documented_defaults_are_covered() -> None:
    assert set(SECRET_HEADERS) <= DEFAULT_HEADERS
    assert {"key", "api_key", "token", "access_token"} <= DEFAULT_QUERY_PARAMS


# -- headers -------------------------------------------------------------------------------------


@pytest.mark.parametrize("header", SECRET_HEADERS)
@pytest.mark.parametrize("case", CASINGS)
def test_header_pairs_redacts_each_default_header(header: str, case: object) -> None:
    name = case(header)  # type: ignore[operator]
    pairs = [("Content-Type", "application/json"), (name, SECRET), ("User-Agent", "OpenAI/Python 1.60")]
    out = Redactor().header_pairs(pairs)
    assert out == [["Content-Type", "application/json"], [name, REDACTED], ["User-Agent", "OpenAI/Python 1.60"]]
    assert SECRET not in repr(out)


@pytest.mark.parametrize("header", SECRET_HEADERS)
@pytest.mark.parametrize("case", CASINGS)
def test_headers_from_asgi_redacts_each_default_header(header: str, case: object) -> None:
    name = case(header).encode("latin-1")  # type: ignore[operator]
    raw = [(b"host", b"127.0.0.1:8787"), (name, SECRET.encode()), (b"accept", b"text/event-stream")]
    out = Redactor().headers_from_asgi(raw)
    assert out == [["host", "127.0.0.1:8787"], [name.decode(), REDACTED], ["accept", "text/event-stream"]]
    assert SECRET not in repr(out)


def test_repeated_headers_each_redacted_in_order() -> None:
    pairs = [
        ("Cookie", "a=secret1"),
        ("X-Trace", "t1"),
        ("cookie", "b=secret2"),
        ("Set-Cookie", "c=secret3; Path=/"),
        ("X-Trace", "t2"),
        ("set-cookie", "d=secret4"),
    ]
    out = Redactor().header_pairs(pairs)
    assert [n for n, _ in out] == [n for n, _ in pairs]
    assert out == [
        ["Cookie", REDACTED],
        ["X-Trace", "t1"],
        ["cookie", REDACTED],
        ["Set-Cookie", REDACTED],
        ["X-Trace", "t2"],
        ["set-cookie", REDACTED],
    ]
    raw = [(n.lower().encode(), v.encode()) for n, v in pairs]
    out_asgi = Redactor().headers_from_asgi(raw)
    assert out_asgi == [[n.lower(), v] for n, v in out]
    for i in range(1, 5):
        assert f"secret{i}" not in repr(out) + repr(out_asgi)


@pytest.mark.parametrize("name", ["Authorization", "authorization", "PROXY-AUTHORIZATION", "Proxy-Authorization"])
@pytest.mark.parametrize("scheme", ["Bearer", "Basic", "bearer"])
def test_authorization_keeps_its_scheme(name: str, scheme: str) -> None:
    value = f"{scheme} {SECRET}"
    assert Redactor().header_pairs([(name, value)]) == [[name, f"{scheme} {REDACTED}"]]
    assert Redactor().headers_from_asgi([(name.encode(), value.encode())]) == [[name, f"{scheme} {REDACTED}"]]


@pytest.mark.parametrize("value", [SECRET, f"Bearer{SECRET}", "Bearer ", f"sk-1 {SECRET}", f"{SECRET} extra"])
def test_authorization_without_a_plain_scheme_is_wholly_redacted(value: str) -> None:
    (pair,) = Redactor().header_pairs([("Authorization", value)])
    assert pair == ["Authorization", REDACTED]


@pytest.mark.parametrize("name", ["x-api-key", "Api-Key", "Cookie"])
def test_scheme_is_kept_only_for_authorization_headers(name: str) -> None:
    assert Redactor().header_pairs([(name, f"Bearer {SECRET}")]) == [[name, REDACTED]]


def test_non_secret_headers_are_byte_identical() -> None:
    pairs = [("X-Custom", "  spaced value  "), ("Accept-Encoding", "gzip, br"), ("X-Latin", "caf\xe9"), ("Empty", "")]
    assert Redactor().header_pairs(pairs) == [list(p) for p in pairs]
    raw = [(n.lower().encode("latin-1"), v.encode("latin-1")) for n, v in pairs]
    assert Redactor().headers_from_asgi(raw) == [[n.lower(), v] for n, v in pairs]


def test_extra_headers_from_the_constructor() -> None:
    r = Redactor(extra_headers=["X-Org-Tenant", "  x-tenant-ID "])
    pairs = [
        ("x-org-tenant", "s1secret"),
        ("X-TENANT-ID", "s2secret"),
        ("X-Other", "keep"),
        ("Authorization", "Bearer s3secret"),
    ]
    assert r.header_pairs(pairs) == [
        ["x-org-tenant", REDACTED],
        ["X-TENANT-ID", REDACTED],
        ["X-Other", "keep"],
        ["Authorization", f"Bearer {REDACTED}"],
    ]
    raw = [(n.lower().encode(), v.encode()) for n, v in pairs]
    out = r.headers_from_asgi(raw)
    assert [v for _, v in out] == [REDACTED, REDACTED, "keep", f"Bearer {REDACTED}"]
    # the defaults don't know them
    assert Redactor().header_pairs([("X-Org-Tenant", "s1secret")]) == [["X-Org-Tenant", "s1secret"]]


@pytest.mark.parametrize(
    "name", ["X-Auth-Token", "x-access-token", "X-Client-Secret", "x-custom-key", "X_API_KEY", "x-goog-credentials", "Signature"]
)
def test_a_header_whose_name_says_it_holds_a_credential_is_redacted(name: str) -> None:
    assert Redactor().header_pairs([(name, "s3cret")]) == [[name, REDACTED]]
    assert Redactor().headers_from_asgi([(name.lower().encode(), b"s3cret")]) == [[name.lower(), REDACTED]]


@pytest.mark.parametrize(
    "name",
    [
        *("x-session-id", "x-infertap-session", "X-Claude-Code-Session-Id", "session_id", "x-opencode-session"),
        *("Keep-Alive", "content-type", "x-request-id", "x-stainless-os", "tokens-left"),
    ],
)
def test_a_header_whose_name_only_looks_like_one_is_kept(name: str) -> None:
    assert Redactor().header_pairs([(name, "value")]) == [[name, "value"]]


# -- query ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("param", sorted(DEFAULT_QUERY_PARAMS))
def test_query_default_params(param: str) -> None:
    q = f"model=gpt&{param}={SECRET}&stream=true"
    assert Redactor().query(q) == f"model=gpt&{param}={REDACTED}&stream=true"


@pytest.mark.parametrize("name", ["KEY", "Api_Key", "API_KEY", "Access_Token", "TOKEN"])
def test_query_param_names_in_any_casing(name: str) -> None:
    assert Redactor().query(f"{name}={SECRET}") == f"{name}={REDACTED}"


@pytest.mark.parametrize("name", ["api%5Fkey", "api%5fkey", "%6Bey", "access%5Ftoken", "x%2Dapi%2Dkey", "API%5FKEY"])
def test_query_url_encoded_names(name: str) -> None:
    # the name is kept exactly as the client encoded it; only the value goes
    assert Redactor().query(f"a=1&{name}={SECRET}") == f"a=1&{name}={REDACTED}"


def test_query_keeps_every_other_byte() -> None:
    q = "a=1&&b=%20x+y&flag&key=" + SECRET + "&c=&d==e&key&token=" + SECRET + "&z=%2F"
    out = Redactor().query(q)
    assert out == "a=1&&b=%20x+y&flag&key=" + REDACTED + "&c=&d==e&key&token=" + REDACTED + "&z=%2F"
    assert SECRET not in out


def test_query_repeated_param() -> None:
    assert Redactor().query("key=aaaaaaaa&key=bbbbbbbb&x=1") == f"key={REDACTED}&key={REDACTED}&x=1"


@pytest.mark.parametrize("q", ["", "a=1", "model=m&stream=true", "keyword=x&tokens=5&max_tokens=9", "flag", "key", "=v", "&&"])
def test_query_without_secrets_is_unchanged(q: str) -> None:
    assert Redactor().query(q) == q


def test_query_value_with_equals_signs_is_wholly_redacted() -> None:
    assert Redactor().query(f"sig={SECRET}==&x=1") == f"sig={REDACTED}&x=1"


def test_extra_query_params() -> None:
    r = Redactor(extra_query_params=["Tenant_Ref"])
    assert r.query(f"tenant_ref={SECRET}&key={SECRET}") == f"tenant_ref={REDACTED}&key={REDACTED}"
    assert Redactor().query("tenant_ref=abc") == "tenant_ref=abc"


# -- property ------------------------------------------------------------------------------------

secrets = st.text(alphabet=string.ascii_letters + string.digits, min_size=8, max_size=64)


def random_case(draw: st.DrawFn, name: str) -> str:
    flips = draw(st.lists(st.booleans(), min_size=len(name), max_size=len(name)))
    return "".join(c.upper() if f else c.lower() for c, f in zip(name, flips, strict=True))


@st.composite
def header_sets(draw: st.DrawFn) -> tuple[list[tuple[str, str]], str]:
    secret = draw(secrets)
    names = draw(st.lists(st.sampled_from(SECRET_HEADERS), min_size=1, max_size=6))
    pairs = []
    for name in names:
        cased = random_case(draw, name)
        prefix = draw(st.sampled_from(["", "Bearer ", "Basic ", "key=", "session="]))
        pairs.append((cased, prefix + secret))
        if draw(st.booleans()):
            pairs.append(("X-Request-Id", "req-1"))
    return pairs, secret


@st.composite
def queries(draw: st.DrawFn) -> tuple[str, str]:
    secret = draw(secrets)
    params = draw(st.lists(st.sampled_from(sorted(DEFAULT_QUERY_PARAMS)), min_size=1, max_size=5))
    parts = []
    for p in params:
        name = random_case(draw, p)
        if draw(st.booleans()):
            name = name.replace("_", "%5F").replace("-", "%2D")
        parts.append(f"{name}={secret}")
        if draw(st.booleans()):
            parts.append("stream=true")
    return "&".join(parts), secret


BOILERPLATE = " ".join(
    SECRET_HEADERS + sorted(DEFAULT_QUERY_PARAMS) + ["Bearer", "Basic", REDACTED, "X-Request-Id", "req-1", "stream=true"]
)


@settings(max_examples=FUZZ_EXAMPLES, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(header_sets())
def test_property_secret_headers_never_leak(case: tuple[list[tuple[str, str]], str]) -> None:
    pairs, secret = case
    assume(secret.lower() not in BOILERPLATE.lower())
    out = Redactor().header_pairs(pairs)
    assert [n for n, _ in out] == [n for n, _ in pairs]
    assert all(secret not in v for _, v in out)
    out_asgi = Redactor().headers_from_asgi([(n.lower().encode(), v.encode()) for n, v in pairs])
    assert [n for n, _ in out_asgi] == [n.lower() for n, _ in pairs]
    assert all(secret not in v for _, v in out_asgi)


@settings(max_examples=FUZZ_EXAMPLES, database=None)
@given(queries())
def test_property_secret_query_params_never_leak(case: tuple[str, str]) -> None:
    query, secret = case
    assume(secret.lower() not in BOILERPLATE.lower() + " %5f %2d")
    out = Redactor().query(query)
    assert secret not in out
    assert out.count("&") == query.count("&")
    assert out.count(REDACTED) == query.count(secret)


def test_urls_lose_the_password_and_secret_query_values_only() -> None:
    r = Redactor()
    assert (
        r.url("http://svc:p%40ss@engine:8000/v1?api_key=abc&x=1") == "http://svc:REDACTED@engine:8000/v1?api_key=[REDACTED]&x=1"
    )
    assert r.url("https://engine.example/v1") == "https://engine.example/v1"
    assert r.url("http://sk-token-1@engine:80") == "http://REDACTED@engine:80"  # a token given as the user
    assert r.url("http://sk-token-2:@engine:80") == "http://REDACTED@engine:80"
    assert r.text("cannot reach http://svc:p4ss@engine: refused", "http://svc:p4ss@engine") == (
        "cannot reach http://svc:[REDACTED]@engine: refused"
    )


# -- what a response repeats -------------------------------------------------------------------------


def test_a_response_that_repeats_the_requests_credentials_is_redacted_there() -> None:
    r = Redactor()
    found: set[str] = set()
    basic = base64.b64encode(b"alice:basic-pass-1").decode()
    headers = r.header_pairs(
        [("Authorization", "Bearer sk-bearer-1234"), ("X-Api-Key", "key-5678"), ("Proxy-Authorization", f"Basic {basic}")], found
    )
    assert all(REDACTED in v for _, v in headers)
    r.query("api_key=q-secret-99&x=1", found)
    record = {
        "chunks": [
            b'{"error": "Incorrect API key provided: sk-bearer-1234"}',
            b"key-5678 and basic-pass-1, q-secret-99",
            basic.encode(),
        ],
        "response_headers": [["www-authenticate", "Bearer realm=sk-bearer-1234"], ["x-other", "keep"]],
        "error": "upstream said sk-bearer-1234",
    }
    Redactor.echoes(record, found)
    text = repr(record)
    for secret in ("sk-bearer-1234", "key-5678", "basic-pass-1", "q-secret-99", basic):
        assert secret not in text, secret
    assert record["response_headers"][1] == ["x-other", "keep"] and record["chunks"][0].startswith(b'{"error": "Incorrect')


def test_a_bodys_secrets_are_looked_for_in_its_response() -> None:
    """Each way a body carries a secret (a parsed key, an escaped value, a body that won't parse, a
    form) gives the value as it reads, so that a response repeating it has it replaced."""
    r = Redactor()
    bodies = [
        (b'{"model": "m", "api_key": "sk-parsed-0001"}', (), "sk-parsed-0001"),
        (b'{"api_key": "sk\\u002descaped-0002", "x": 1}', (), "sk-escaped-0002"),
        (b'{"api_key": "sk-torn-0003", "messages": [', (), "sk-torn-0003"),
        (b"user=me&password=form-pass-0004", [("Content-Type", "application/x-www-form-urlencoded")], "form-pass-0004"),
    ]
    for raw, headers, secret in bodies:
        found: set[str] = set()
        assert secret.encode() not in r.body(raw, headers, found)
        assert secret in found, (raw, found)
        record = {"chunks": [b'{"error": "bad key ' + secret.encode() + b'"}']}
        Redactor.echoes(record, found)
        assert secret.encode() not in record["chunks"][0] and REDACTED.encode() in record["chunks"][0]
    # A body with no secret adds nothing, and a response is left as it was.
    found = set()
    assert r.body(b'{"model": "m", "max_tokens": 5}', (), found) == b'{"model": "m", "max_tokens": 5}' and not found


def test_short_values_are_not_looked_for_in_a_response() -> None:
    """A credential shorter than ECHO_MIN would match ordinary text: the response is left as it was."""
    found: set[str] = set()
    Redactor().header_pairs([("X-Api-Key", "abc")], found)
    record = {"chunks": [b"abc is the start of the alphabet"]}
    Redactor.echoes(record, found)
    assert record["chunks"] == [b"abc is the start of the alphabet"] and ECHO_MIN > 3


def test_query_params_named_as_body_secrets_are_redacted() -> None:
    for name in ("client_secret", "password", "access-token", "X-Amz-Signature", "x-amz-security-token", "refreshToken"):
        assert Redactor().query(f"{name}=s3cret&b=2") == f"{name}={REDACTED}&b=2"


@settings(max_examples=FUZZ_EXAMPLES)
@given(
    st.lists(
        st.sampled_from([b"sk-secret-123456", b"text ", b"sk-sec", b"ret-123456", b"\n\n", b"other-secret-xyz"]), max_size=12
    ),
    st.lists(st.integers(0, 200), max_size=8),
)
def test_a_repeated_credential_is_redacted_wherever_the_chunks_cut_it(parts: list[bytes], cuts: list[int]) -> None:
    body = b"".join(parts)
    bounds = sorted({c % (len(body) + 1) for c in cuts} | {0, len(body)})
    chunks = [body[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    record = {"chunks": list(chunks)}
    Redactor.echoes(record, {"sk-secret-123456", "other-secret-xyz"})
    assert b"".join(record["chunks"]) == body.replace(b"sk-secret-123456", REDACTED.encode()).replace(
        b"other-secret-xyz", REDACTED.encode()
    )
    assert len(record["chunks"]) == len(chunks)  # each chunk keeps its place (and its time)


def test_the_hint_scan_a_window_at_a_time_finds_what_one_search_finds() -> None:
    """The body hint is searched in windows (so a worker thread lets the event loop run between
    them): a match across a window's end, however long its whitespace, ``-`` or ``_`` runs or its
    URL, is found as one search over the whole body finds it."""
    import random

    from infertap.capture.redact_json import _BODY_HINT, _URL_CREDENTIAL_HINT, _URL_HINT, hinted

    pieces = [b'"api_key"', b":", b" ", b"\n", b'"', b"x", b'"page_token"', b'"max_tokens"', b"-", b"_", b"\\u005f"]
    pieces += [b'"a\\u005fb"', b"://", b"\\/", b"?", b"@", b"http", b"{", b"}", b"Token", b" " * 50, b"-" * 40]
    pieces += [b'"ab"', b"1234u\\", b"yek_ipa", b"\\u0040", b"secret", b"a" * 30, b"&", b"key", b"=", b"\\u0026"]
    pieces += [b'"token"', b'"_Token"', b'"next_secret"', b"nekot", b'"', b"terces_", b"\\u0074oken"]
    rng = random.Random(7)
    # 1,500 bodies a pass: a window that never grows past its overlap fails within the first 25;
    # 5,000 took three times as long and failed on no planted bug that 1,500 passed.
    for any_url, url in ((False, _URL_CREDENTIAL_HINT), (True, _URL_HINT)):
        found = 0
        for _ in range(1500):
            raw = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
            whole = bool(_BODY_HINT.search(raw[::-1]) or url.search(raw))
            found += whole
            for window in (1, 2, 3, 7, 16, 64):
                assert hinted(raw, window, any_url) is whole, (window, raw)
        assert 150 < found < 1350  # both answers well tried


_KEYS_BODIES = [
    {"messages": [{"role": "user", "content": "x", "page_token": "t", "next_secret": "s"}] * 50, "max_tokens": 5},
    {"token": "sk-a", "_Token": "sk-b", "page_token": "keep", "nested": {"deeper": [{"API-Key": "sk-c"}, {"x": "y"}]}},
    {"api_keys": ["sk-1", ["sk-2", {"no": "keep"}]], "tools": [{"headers": {"X-Custom-Token": "sk-3", "page_token": "sk-4"}}]},
    {"authentication": {"type": "api_key", "key": "sk-5", "key_id": "sk-6"}, "auth_token": 'a"b\\c\u00e9\n'},
    {"server_url": "https://u:p4ss@h/x?api_key=sk-7&q=1", "content": '"api_key": "not a key"'},
    # a real credential among thousands of strings: walked whole, pausing every PAUSE_EVERY of them
    {"messages": [{"role": "user", "content": "x", "page_token": "t"}] * 2000, "api_key": "sk-10", "extra": [{"token": "sk-11"}]},
]


@pytest.mark.parametrize(
    "raw",
    [json.dumps(b).encode() for b in _KEYS_BODIES]
    + [json.dumps(b, indent=1).encode() for b in _KEYS_BODIES]
    + [b'{"api\\u005fkey": "sk-8", "page\\u005ftoken": "keep", "\\u0074oken": "sk-9"}', b'{"page_token": "t", "token": "sk-torn'],
)
def test_a_body_is_redacted_byte_for_byte_as_its_whole_walk_redacts_it(raw: bytes) -> None:
    """The hint that lets a body go unwalked is exact enough to skip a body of many ``*_token``
    keys that are no credential, never one the walk would change: each body comes out as
    ``sub_secrets`` (the walk of every string) makes it, whether walked or not."""
    from infertap.capture.redact_json import sub_secrets

    redactor = Redactor()
    walked_found: set[str] = set()
    walked = sub_secrets(raw, walked_found, redactor.secret_header, redactor.url)
    found: set[str] = set()
    assert (walked != raw) is (b"sk-" in raw)  # the walk had work where a key stood
    assert redactor.body(raw, found=found) == walked
    assert found == walked_found


def test_a_walk_of_many_strings_off_a_loop_pauses_between_its_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """A credential among thousands of strings is walked whole, holding the GIL in bytecode, which
    CPython takes from it only after another thread waited 5 ms: a loop beside the walk (a replay's,
    a recorder's) woke up to 5 ms late all along. Off a loop the walk now lets go of it every
    ``PAUSE_EVERY`` strings, the same bytes out; on a loop (a small body) it never pauses there."""
    import asyncio

    from infertap.capture import redact_json

    raw = json.dumps(_KEYS_BODIES[-1]).encode()
    strings = len(redact_json._JSON_STRING.findall(raw))
    assert strings > 10 * redact_json.PAUSE_EVERY
    redactor, pauses = Redactor(), []
    monkeypatch.setattr(redact_json, "_pause", lambda: pauses.append(1))
    off_loop = redactor.body(raw)
    assert len(pauses) == strings // redact_json.PAUSE_EVERY

    async def on_loop() -> bytes:
        return redactor.body(raw)

    pauses.clear()
    assert asyncio.run(on_loop()) == off_loop and not pauses
    assert off_loop.count(REDACTED.encode()) == 2 and b"sk-1" not in off_loop


def test_a_body_of_many_keys_ending_in_token_but_no_credential_is_not_walked() -> None:
    """``page_token``, ``next_secret`` end as ``token`` and ``secret`` do, but ``secret_key``
    refuses them: a body of thousands of them was walked whole, string by string (0.4 s per 2 MiB,
    the GIL held), to change nothing. Only a key named as a credential, whole, is one."""
    from infertap.capture.redact_json import hinted

    many = json.dumps({"messages": [{"role": "user", "content": "x", "page_token": "t", "next_secret": "s"}] * 1000})
    assert not hinted(many.encode())
    for key in ("token", "_Token", "Secret", "access_token", "x_auth_token", "api-key", "extra_headers", "api\\u005fkey"):
        assert hinted(many[:-1].encode() + b', "' + key.encode() + b'": "v"}'), key


def test_a_url_is_looked_into_where_it_may_hold_a_credential() -> None:
    """A body that quotes search and page URLs (an agent's conversation) is scanned, not walked: only
    a URL with a userinfo or a parameter named as a credential is; any query is, where the redactor
    was given parameter names of its own."""
    from infertap.capture.redact import Redactor
    from infertap.capture.redact_json import hinted

    quoted = json.dumps({"messages": [{"role": "user", "content": "see https://www.google.com/search?q=kv+cache&hl=en#top"}]})
    assert not hinted(quoted.encode())
    for url in ("https://h/x?api_key=s3cret", "https://h/x?q=1&X-Amz-Signature=s3cret", "https://user:s3cret@h/x", "https://h/cb#access_token=s3cret"):  # fmt: skip
        body = json.dumps({"server_url": url}).encode()
        assert hinted(body), url
        assert b"s3cret" not in Redactor().body(body), url
    own = json.dumps({"server_url": "https://h/x?session=s3cret"}).encode()
    assert Redactor().body(own) == own
    assert not hinted(own) and hinted(own, any_url=True)
    assert b"s3cret" not in Redactor(extra_query_params=["session"]).body(own)
