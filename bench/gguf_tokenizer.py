"""A Hugging Face tokenizer folder built from a GGUF file's own vocabulary, for peer tools offline.

Peer load generators (AIPerf, GuideLLM) count tokens with a Hugging Face tokenizer and, with no
network to the hub, can't fetch one. The GGUF that the engine serves carries its tokenizer:
``tokenizer.ggml.tokens``, ``token_type``, ``merges`` and ``pre`` (llama.cpp's pre-tokenizer
name). For a byte-level BPE vocabulary (``tokenizer.ggml.model == "gpt2"``) this writes the
equivalent ``tokenizer.json`` (plain JSON, no ``tokenizers`` needed here), ``tokenizer_config.json``
(special tokens and the GGUF's chat template) and a ``config.json`` naming the architecture
(transformers 5 reads it first), so that the peer counts with the engine's own vocabulary.
``compare_with_engine`` checks the result against llama.cpp's ``/tokenize`` on given texts.

    python -m bench.gguf_tokenizer OUT_DIR [--gguf PATH]
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any

import httpx

# llama.cpp pre-tokenizer names (``tokenizer.ggml.pre``) and the Hugging Face pre-tokenizer each
# stands for. "smollm" is llama.cpp's LLAMA_VOCAB_PRE_TYPE_SMOLLM: every digit split alone, then
# GPT-2's regex, as SmolLM2's own tokenizer.json has it.
_BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
_PRE = {
    "smollm": {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True}, _BYTE_LEVEL]},
    "gpt-2": _BYTE_LEVEL,
    "default": _BYTE_LEVEL,
}

_CONTROL, _USER_DEFINED = 3, 4  # llama.cpp token types


def write_hf_tokenizer(gguf_path: str | Path, folder: str | Path) -> dict[str, Any]:
    """Write ``tokenizer.json`` and ``tokenizer_config.json`` for the GGUF's vocabulary into ``folder``.

    Returns what was built: the vocabulary kind, ``pre``, sizes and whether the pre-tokenizer is an
    exact mapping of llama.cpp's (``exact_pre``).
    """
    import gguf  # numpy-backed, installed with infertap

    reader = gguf.GGUFReader(str(gguf_path))

    def value(key: str) -> Any:
        field = reader.fields.get(key)
        return field.contents() if field is not None else None

    kind = value("tokenizer.ggml.model")
    if kind != "gpt2":
        raise ValueError(
            f"{gguf_path}: tokenizer.ggml.model is {kind!r}; only byte-level BPE ('gpt2') vocabularies are supported"
        )
    tokens: list[str] = value("tokenizer.ggml.tokens")
    types: list[int] = value("tokenizer.ggml.token_type") or [1] * len(tokens)
    merges: list[str] = value("tokenizer.ggml.merges") or []
    pre = value("tokenizer.ggml.pre") or "default"

    def token(key: str) -> str | None:
        i = value(key)
        return tokens[i] if isinstance(i, int) and 0 <= i < len(tokens) else None

    added = [
        {
            "id": i,
            "content": t,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": types[i] == _CONTROL,
        }
        for i, t in enumerate(tokens)
        if types[i] in (_CONTROL, _USER_DEFINED)
    ]
    spec = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": _PRE.get(pre, _BYTE_LEVEL),
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": "",
            "end_of_word_suffix": "",
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": {t: i for i, t in enumerate(tokens)},
            "merges": merges,
        },
    }
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tokenizer.json").write_text(json.dumps(spec, ensure_ascii=False))
    config: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": value(f"{value('general.architecture')}.context_length") or 2048,
        "add_bos_token": bool(value("tokenizer.ggml.add_bos_token")),
        "clean_up_tokenization_spaces": False,
    }
    for name, key in (("bos_token", "bos"), ("eos_token", "eos"), ("unk_token", "unknown"), ("pad_token", "padding")):
        text = token(f"tokenizer.ggml.{key}_token_id")
        if text is not None:
            config[name] = text
    template = value("tokenizer.chat_template")
    if template:
        config["chat_template"] = template
    (folder / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False, indent=1))
    # transformers 5 reads the model's config.json before the tokenizer's, even for a tokenizer alone.
    (folder / "config.json").write_text(json.dumps({"model_type": value("general.architecture") or "llama"}))
    return {
        "source": str(gguf_path),
        "model": kind,
        "pre": pre,
        "exact_pre": pre in _PRE,
        "vocab": len(tokens),
        "merges": len(merges),
        "added_tokens": len(added),
        "chat_template": bool(template),
    }


_ENCODE = """
import json, sys
from transformers import AutoTokenizer
tok = AutoTokenizer.from_pretrained(sys.argv[1])
print(json.dumps([tok.encode(t, add_special_tokens=False) for t in json.load(sys.stdin)]))
"""


def encode_with(python: str | Path, folder: str | Path, texts: list[str], env: dict[str, str] | None = None) -> list[list[int]]:
    """Token ids of ``texts`` by the tokenizer in ``folder``, loaded by transformers in another venv's ``python``."""
    done = subprocess.run(
        [str(python), "-c", _ENCODE, str(folder)], input=json.dumps(texts), capture_output=True, text=True, env=env, timeout=300
    )
    if done.returncode != 0:
        raise RuntimeError(f"loading the tokenizer with {python} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def engine_ids(url: str, texts: list[str]) -> list[list[int]]:
    """llama.cpp's own tokenization (``POST /tokenize``, no special tokens added)."""
    with httpx.Client(timeout=30, trust_env=False) as client:
        return [client.post(url + "/tokenize", json={"content": t, "add_special": False}).json()["tokens"] for t in texts]


def compare_with_engine(
    python: str | Path, folder: str | Path, url: str, texts: list[str], env: dict[str, str] | None = None
) -> dict[str, Any]:
    """How many ``texts`` the built tokenizer splits exactly as the engine does, and the first that differs."""
    ours, theirs = encode_with(python, folder, texts, env), engine_ids(url, texts)
    differ = [(t, a, b) for t, a, b in zip(texts, ours, theirs, strict=True) if a != b]
    result: dict[str, Any] = {"texts": len(texts), "identical": len(texts) - len(differ)}
    if differ:
        text, a, b = differ[0]
        result["first_difference"] = {"text": text[:200], "tokenizer": a[:40], "engine": b[:40]}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="folder to write tokenizer.json and tokenizer_config.json into")
    parser.add_argument("--gguf", help="the model file (default: the embedded SmolLM2 GGUF)")
    args = parser.parse_args()
    if args.gguf is None:
        from infertap.launch import smollm2_gguf

        args.gguf = smollm2_gguf()
    print(json.dumps(write_hf_tokenizer(args.gguf, args.out), indent=1))


if __name__ == "__main__":
    main()
