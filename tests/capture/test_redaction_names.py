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
    "admin_api_key", "apiKey", "x_api_key", "client_secret", "password",
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
