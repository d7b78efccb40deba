"""Which names hold a credential (one rule for headers, query parameters and JSON keys), and a
body's secrets replaced where they stand, never where the same characters occur elsewhere."""

from __future__ import annotations

import json
import os

import pytest

from tests.extras import needs

needs("hypothesis", "dev")
from hypothesis import given, settings
from hypothesis import strategies as st

from infertap.capture.redact import REDACTED, Redactor, secret_name

FUZZ_EXAMPLES = int(os.environ.get("INFERTAP_FUZZ_EXAMPLES", "300"))  # `make fuzz` raises it

SECRET = "sk-names-0123456789"

HEADERS = ["X-AuthToken", "X-AccessToken", "X-ApiToken", "X-SecretKey", "X-Api-Keys", "Private-Token", "X-HF-Token"]
QUERY = ["auth_token", "id_token", "session_token", "private_token", "X-Goog-Signature", "X-Goog-Credential"]
BODY_KEYS = [
    "auth_token", "authToken", "session_token", "private_key", "secret_key", "aws_secret_access_key", "bearer_token",
    "admin_api_key", "apiKey", "x_api_key", "client_secret", "password", "authorization", "Authorization",
]  # fmt: skip

# Ordinary request fields of the OpenAI, Anthropic, Ollama, vLLM, SGLang and llama.cpp APIs, and a
# tokenizer's special tokens: none is a credential.
ORDINARY = [
    "model", "messages", "prompt", "max_tokens", "max_completion_tokens", "max_output_tokens", "max_new_tokens",
    "min_tokens", "num_tokens", "num_predict", "tokens", "prompt_tokens", "add_special_tokens", "skip_special_tokens",
    "spaces_between_special_tokens", "stop_token_ids", "allowed_token_ids", "bad_words", "tokenize",
    "return_tokens_as_token_ids", "prompt_token_ids", "truncate_prompt_tokens", "logprobs", "top_logprobs", "top_k",
    "top_p", "stop", "stop_sequences", "author", "user", "name", "role", "content", "cache_control", "prompt_cache_key",
    "keep_alive", "logit_bias", "seed", "n_predict", "cache_prompt", "bos_token", "eos_token", "pad_token", "keyword",
]  # fmt: skip


@pytest.mark.parametrize("name", HEADERS)
def test_a_header_named_for_a_credential_without_separators_is_redacted(name: str) -> None:
    assert Redactor().header_pairs([(name, SECRET)]) == [[name, REDACTED]]
    assert Redactor().headers_from_asgi([(name.lower().encode(), SECRET.encode())]) == [[name.lower(), REDACTED]]


@pytest.mark.parametrize("name", QUERY)
def test_a_query_parameter_named_for_a_credential_is_redacted(name: str) -> None:
    assert Redactor().query(f"{name}={SECRET}&a=1") == f"{name}={REDACTED}&a=1"


@pytest.mark.parametrize("key", BODY_KEYS)
def test_a_json_key_named_for_a_credential_is_redacted(key: str) -> None:
    found: set[str] = set()
    out = Redactor().body(json.dumps({"model": "m", key: SECRET}).encode(), (), found)
    assert json.loads(out) == {"model": "m", key: REDACTED} and found == {SECRET}


def test_a_json_key_written_with_an_escape_is_read_by_its_name() -> None:
    raw = b'{"model": "m", "api\\u005fkey": "' + SECRET.encode() + b'"}'
    assert json.loads(raw)["api_key"] == SECRET  # valid JSON, the key is api_key
    assert Redactor().body(raw) == b'{"model": "m", "api\\u005fkey": "' + REDACTED.encode() + b'"}'


@pytest.mark.parametrize("name", ORDINARY)
def test_an_ordinary_field_is_no_credential(name: str) -> None:
    assert not secret_name(name)
    body = json.dumps({name: "value-of-the-field", "messages": [{"role": "user", "content": "hi"}]}).encode()
    assert Redactor().body(body) == body
    assert Redactor().query(f"{name}=value") == f"{name}=value"


def test_a_thinking_blocks_signature_is_kept_for_the_api_that_needs_it_back() -> None:
    """Anthropic's thinking blocks and Gemini's parts carry a signature the API must get back."""
    body = json.dumps(
        {"messages": [{"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "EqQBCgIYAhIM"}]}],
         "contents": [{"parts": [{"text": "x", "thoughtSignature": "CiQBVKhc"}]}]}
    ).encode()  # fmt: skip
    assert Redactor().body(body) == body


def test_a_short_body_secret_changes_no_other_byte() -> None:
    """A one-character token: only its own value goes, not every "1" of the body."""
    body = (
        b'{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"what is 1+1? answer 2"}],'
        b'"metadata":{"token":"1"},"n":1}'
    )
    found: set[str] = set()
    out = Redactor().body(body, (), found)
    assert out == body.replace(b'"token":"1"', b'"token":"' + REDACTED.encode() + b'"') and found == {"1"}


def test_a_secret_is_replaced_where_it_stands_not_where_the_prompt_repeats_it() -> None:
    body = json.dumps({"api_key": SECRET, "messages": [{"role": "user", "content": f"my key is {SECRET}"}]}).encode()
    out = json.loads(Redactor().body(body))
    assert out["api_key"] == REDACTED and out["messages"][0]["content"] == f"my key is {SECRET}"


def test_a_torn_body_loses_a_value_cut_short_too() -> None:
    assert Redactor().body(b'{"model": "m", "auth_token": "sk-cut-sh') == b'{"model": "m", "auth_token": "' + REDACTED.encode()


def test_an_engines_answers_lose_every_key_named_for_a_credential_and_keep_its_special_tokens() -> None:
    """SGLang's server info holds api_key and admin_api_key; llama.cpp's props its bos and eos tokens."""
    info = {
        "model_path": "qwen/q",
        "api_key": "sglang-api-key-1111",
        "admin_api_key": "sglang-admin-key-2222",
        "served": {"copy": "sglang-admin-key-2222", "n": "1"},
        "bos_token": "<s>",
        "eos_token": "</s>",
        "max_running_requests": 128,
    }
    out = Redactor().json_value(info)
    assert out == {
        **info,
        "api_key": REDACTED,
        "admin_api_key": REDACTED,
        "served": {"copy": REDACTED, "n": "1"},
    }
    assert info["admin_api_key"] == "sglang-admin-key-2222"  # the answer itself is left as it was


@settings(max_examples=FUZZ_EXAMPLES, database=None)
@given(st.text(max_size=12), st.text(max_size=40), st.integers(0, 10_000))
def test_property_a_body_secret_of_any_length_changes_no_other_byte(secret: str, prompt: str, max_tokens: int) -> None:
    def sent(token: str) -> bytes:
        shape = {"model": "m", "max_tokens": max_tokens, "messages": [{"role": "user", "content": prompt}], "auth_token": token}
        return json.dumps(shape).encode()

    found: set[str] = set()
    assert Redactor().body(sent(secret), (), found) == sent(REDACTED)
    assert found == ({secret} if secret != REDACTED else set())


# What a model writes into a tool's input (Anthropic's tool_use.input, Ollama's tool_calls
# arguments), a paging API's fields (Gemini's nextPageToken) and a chat template's settings
# (chat_template_kwargs): named like a credential's ending, none is one.
WRITTEN = ["page_token", "next_token", "nextPageToken", "csrf_token", "start_token", "boi_token", "think_token", "auth"]


@pytest.mark.parametrize("name", WRITTEN)
def test_a_field_a_model_or_a_template_writes_is_kept_in_a_body_and_a_query(name: str) -> None:
    body = json.dumps(
        {"model": "m", "messages": [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {name: "abc"}}]},
            {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {name: "<|im_start|>"}}}]},
        ], "chat_template_kwargs": {name: "<start_of_image>"}}
    ).encode()  # fmt: skip
    found: set[str] = set()
    assert Redactor().body(body, (), found) == body and not found
    if name != "auth":  # a query's auth is a credential (DEFAULT_QUERY_PARAMS)
        assert Redactor().query(f"{name}=abc&a=1") == f"{name}=abc&a=1"


def test_the_values_of_a_secret_keys_list_are_replaced_and_nothing_else() -> None:
    """``"api_keys": [...]``: each string of it, at any depth of lists; an object in it keeps its
    ordinary strings (its own secret keys go), and the body after the list is read as before."""
    body = {
        "api_keys": ["sk-live-abcdefgh1234", ["sk-live-nested-5678"], 3, {"name": "ci", "password": "pw", "scopes": ["read"]}],
        "stop": ["</s>"],
        "auth_token": "sk-after-the-list",
        "messages": [{"role": "user", "content": "hi"}],
    }
    found: set[str] = set()
    out = json.loads(Redactor().body(json.dumps(body).encode(), (), found))
    assert out == {
        **body,
        "api_keys": [REDACTED, [REDACTED], 3, {"name": "ci", "password": REDACTED, "scopes": ["read"]}],
        "auth_token": REDACTED,
    }
    assert found == {"sk-live-abcdefgh1234", "sk-live-nested-5678", "pw", "sk-after-the-list"}
    assert Redactor().body(b'{"api_keys": ["sk-1", "sk-2') == b'{"api_keys": ["' + REDACTED.encode() + b'", "' + REDACTED.encode()


def test_an_engines_answer_loses_the_strings_of_a_secret_keys_list() -> None:
    info = {"server_args": {"api_key": ["sk-live-abcdefgh1234", "pw"], "admin_api_key": "adm-12345678"}, "copy": "pw"}
    assert Redactor().json_value(info) == {
        "server_args": {"api_key": [REDACTED, REDACTED], "admin_api_key": REDACTED},
        "copy": "pw",  # a short secret is not looked for elsewhere
    }


@pytest.mark.parametrize("torn", [b'\\"', b"a", b"\\"])
def test_a_megabyte_string_that_never_closes_is_scanned_once(torn: bytes) -> None:
    """A torn or not-JSON body whose last string never closes: each of its bytes is scanned once.
    (A scan that tried every position inside it again took 7 s for 40 KB: this test would not end.)"""
    raw = b'{"api_key": "sk-1234567890", "stop": ["' + torn * (1_000_000 // len(torn))
    out = Redactor().body(raw)
    assert out == raw.replace(b"sk-1234567890", REDACTED.encode())


def test_an_mcp_tools_authorization_and_headers_are_redacted_in_the_request() -> None:
    """A Responses request's MCP tool carries its server's OAuth token (``authorization``) or the
    headers to send it (``headers.Authorization``): neither is one of the request's own headers."""
    body = {
        "model": "m",
        "input": "hi",
        "tools": [
            {"type": "mcp", "server_label": "a", "server_url": "https://a", "authorization": SECRET},
            {"type": "mcp", "server_label": "b", "server_url": "https://b", "headers": {"Authorization": f"Bearer {SECRET}"}},
        ],
    }
    raw = json.dumps(body).encode()
    out = json.loads(Redactor().body(raw))
    assert SECRET not in json.dumps(out)
    assert out["tools"][0]["authorization"] == REDACTED and out["tools"][1]["headers"]["Authorization"] == REDACTED
    assert out["tools"][0]["server_url"] == "https://a" and out["input"] == "hi"
