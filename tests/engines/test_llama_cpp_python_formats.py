"""llama-cpp-python's server on a GGUF whose template it knows by heart: it writes the prompt with
its own built-in format then, and infertap must too (the real server on a copy of SmolLM2)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.extras import needs

llama_cpp = needs("llama_cpp", "engine")
gguf = needs("gguf", "engine")
from llama_cpp import llama_chat_format

from infertap.engines import llama_cpp_formats
from infertap.engines.probe import open_engine, probe
from infertap.launch import Process, llama_cpp_python_server, smollm2_gguf

pytestmark = pytest.mark.engine

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "temperature": 0}


def gguf_copy(src: Path, dst: Path, metadata: dict[str, tuple[Any, Any]]) -> Path:
    """A copy of ``src`` with ``metadata`` (key: (type, value)) set, as gguf-new-metadata writes it (~3 s)."""
    from gguf.scripts.gguf_new_metadata import MetadataDetails, copy_with_new_metadata

    reader = gguf.GGUFReader(str(src), "r")
    writer = gguf.GGUFWriter(str(dst), arch=reader.get_field(gguf.Keys.General.ARCHITECTURE).contents())
    copy_with_new_metadata(reader, writer, {k: MetadataDetails(t, v) for k, (t, v) in metadata.items()}, [])
    return dst


@pytest.fixture(scope="module")
def chatml_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2 with llama_cpp's own CHATML template (SmolLM2's differs: it adds a default system
    prompt), a BOS the model asks for (SmolLM2's doesn't: a built-in format's prompt gets one), and
    a separator token (a completion's prompt ends with it)."""
    types = gguf.GGUFValueType
    return gguf_copy(
        smollm2_gguf(),
        tmp_path_factory.mktemp("gguf") / "chatml.gguf",
        {
            gguf.Keys.Tokenizer.CHAT_TEMPLATE: (types.STRING, llama_chat_format.CHATML_CHAT_TEMPLATE),
            gguf.Keys.Tokenizer.ADD_BOS: (types.BOOL, True),
            gguf.Keys.Tokenizer.SEP_ID: (types.UINT32, 0),
        },
    )


@pytest.fixture(scope="module")
def chatml_engine(chatml_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    with llama_cpp_python_server(model=chatml_gguf, log_dir=tmp_path_factory.mktemp("chatml-engine")) as proc:
        yield proc


def test_the_template_hashes_name_the_formats_llama_cpp_guesses():
    """Without llama_cpp installed the guess is made from hashes: they stay those of its templates."""
    for const in ("CHATML", "MISTRAL_INSTRUCT", "MIXTRAL_INSTRUCT", "LLAMA3_INSTRUCT"):
        template = getattr(llama_chat_format, f"{const}_CHAT_TEMPLATE")
        guessed = llama_chat_format.guess_chat_format_from_gguf_metadata({"tokenizer.chat_template": template})
        assert guessed is not None and llama_cpp_formats.builtin_format(template) == guessed
        assert llama_cpp_formats._KNOWN[llama_cpp_formats.sha256_text(template) or ""] == guessed
    assert llama_cpp_formats.builtin_format(None) == "llama-2"
    assert llama_cpp_formats.builtin_format(llama_chat_format.CHATML_CHAT_TEMPLATE + " ") is None


def test_a_built_in_format_is_the_fact_and_the_prompt_tokens_are_the_engines(chatml_engine, chatml_gguf):
    snap = probe(chatml_engine.url, model_file=str(chatml_gguf))
    template = snap["facts"]["chat_template"]
    assert template["value"] == "built-in format chatml" and "built-in format chatml" in template["source"]
    assert snap["facts"]["chat_template_sha256"]["value"] != llama_cpp_formats.sha256_text(llama_chat_format.CHATML_CHAT_TEMPLATE)
    usage = httpx.post(f"{chatml_engine.url}/v1/chat/completions", json=CHAT, timeout=120).json()["usage"]
    engine = open_engine(chatml_engine.url, model_file=str(chatml_gguf))
    try:
        local = engine.prompt_tokens("/v1/chat/completions", CHAT)
        engine._local = False  # as where the installed llama_cpp is another version: /extras/tokenize
        remote = engine.prompt_tokens("/v1/chat/completions", CHAT)
    finally:
        engine.http.close()
    # chatml writes an empty system turn, and the tokenizer adds the model's BOS.
    assert local.text == "<|im_start|>system\n<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert local.ids is not None and local.ids[0] == 1 and len(local.ids) == usage["prompt_tokens"]
    assert remote.ids == local.ids, remote.source
    assert "built-in chat format chatml" in local.source and "/extras/tokenize" in remote.source


def test_a_completions_prompt_ends_with_the_separator_the_server_appends(chatml_engine, chatml_gguf):
    """llama-cpp-python frames a completion's string prompt itself: the model's BOS, the text, and
    its separator token (else its EOS where the model adds one)."""
    request = {"model": "m", "prompt": "One, two,", "max_tokens": 1, "temperature": 0}
    usage = httpx.post(f"{chatml_engine.url}/v1/completions", json=request, timeout=120).json()["usage"]
    engine = open_engine(chatml_engine.url, model_file=str(chatml_gguf))
    try:
        local = engine.prompt_tokens("/v1/completions", request)
        engine._local = False  # /extras/tokenize, ended from the GGUF's metadata
        remote = engine.prompt_tokens("/v1/completions", request)
    finally:
        engine.http.close()
    assert local.ids is not None and (local.ids[0], local.ids[-1]) == (1, 0)
    assert len(local.ids) == usage["prompt_tokens"]
    assert remote.ids == local.ids, remote.source
