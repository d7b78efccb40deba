"""llama-cpp-python's built-in chat formats: where its server writes the prompt without the GGUF's template.

Started without ``--chat_format``, ``Llama.__init__`` compares the GGUF's ``tokenizer.chat_template``
with a few templates it knows by heart (``guess_chat_format_from_gguf_metadata``: chatml,
mistral-instruct, llama-3); on an exact match it writes prompts with its own Python formatter for
that format, not the template: chatml writes a system turn when there is none, mistral-instruct
drops system messages, llama-3 doesn't trim. A GGUF with no template gets ``llama-2``. These
formatters leave special tokens to the tokenizer (``added_special=False``), so the prompt is
tokenized with the model's BOS (``add_bos=True``), where the GGUF template's is not.

The guess and the formatters are llama_cpp's own, imported where it is installed, so they stay in
step with its version. Without it the guess is made from the templates' hashes below, and the
prompt can't be written here.
"""

from __future__ import annotations

from typing import Any

from .base import sha256_text

#: What the server falls back to for a GGUF without a chat template.
FALLBACK = "llama-2"

#: sha256 of the templates llama_cpp 0.3 guesses from (llama_chat_format's CHATML_CHAT_TEMPLATE,
#: MISTRAL_INSTRUCT_, MIXTRAL_INSTRUCT_, LLAMA3_INSTRUCT_): the guess where llama_cpp isn't installed.
_KNOWN = {
    "153280e3ff55d19da1398bdb3914ee2a51b80429bfaedde11d7d216c39db80f3": "chatml",
    "7e995b379ec01747807246483647cd99030abf331653f1119e16d7ac041a3495": "mistral-instruct",
    "26a59556925c987317ce5291811ba3b7f32ec4c647c400c6cc7e3a9993007ba7": "mistral-instruct",
    "ba03a121d097859c7b5b9cd03af99aafe95275210d2876f642ad9929a150f122": "llama-3",
}

#: The formatter behind each format the server picks by itself (llama_chat_format registers them by name).
_FORMATTERS = {
    "chatml": "format_chatml",
    "mistral-instruct": "format_mistral_instruct",
    "llama-3": "format_llama3",
    "llama-2": "format_llama2",
}


def builtin_format(template: str | None) -> str | None:
    """The built-in format the server uses for a GGUF with this ``tokenizer.chat_template``;
    None where it renders the template itself."""
    if not template:
        return FALLBACK
    try:
        from llama_cpp.llama_chat_format import guess_chat_format_from_gguf_metadata
    except ImportError:
        return _KNOWN.get(sha256_text(template) or "")
    return guess_chat_format_from_gguf_metadata({"tokenizer.chat_template": template})


def why(name: str) -> str:
    """Why the server uses format ``name``, for a fact's source."""
    if name == FALLBACK:
        return f"the GGUF has no chat template, so llama-cpp-python's server falls back to its built-in format {name}"
    return (
        f"the GGUF's chat template is exactly one llama-cpp-python knows, so its server (without --chat_format)"
        f" uses its built-in format {name} instead"
    )


def render_builtin(name: str, request: dict[str, Any]) -> tuple[str, bool]:
    """The prompt llama_cpp's formatter ``name`` writes for a chat request, and whether the model's
    special tokens are to be added when tokenizing it. ImportError without llama_cpp."""
    from llama_cpp import llama_chat_format

    attr = _FORMATTERS.get(name)
    if attr is None or not hasattr(llama_chat_format, attr):
        raise LookupError(f"infertap doesn't know llama_cpp's formatter for the built-in format {name!r}")
    result = getattr(llama_chat_format, attr)(
        messages=request.get("messages") or [],
        functions=request.get("functions"),
        function_call=request.get("function_call"),
        tools=request.get("tools"),
        tool_choice=request.get("tool_choice"),
    )
    return result.prompt, not result.added_special
