"""llama-cpp-python's server: a FastAPI app whose /openapi.json publishes every request default.

It exposes no template, context size or model file; those come from the GGUF when it is at hand.
Every model endpoint (/v1/models and /extras/tokenize included) takes one lock, and with
``interrupt_requests`` (on by default) a request waiting on that lock ends the stream in flight:
out-of-band calls must wait until no exchange is in flight.
"""

from __future__ import annotations

import atexit
import functools
import os
import re
from datetime import datetime
from typing import Any

from .base import Endpoint, Engine, Tokens, fact, sha256_text
from .gguf_meta import GGUFFacts, dtype_fact, read_gguf
from .llama_cpp_formats import builtin_format, render_builtin, why

_CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
_PROMPT_PATHS = ("/v1/completions", "/completions")
_SCHEMAS = {"/v1/chat/completions": "CreateChatCompletionRequest", "/v1/completions": "CreateCompletionRequest"}


@functools.lru_cache(maxsize=8)
def _compiled(template: str) -> Any:
    """The template compiled once: compiling holds the GIL for milliseconds, which a proxy's event
    loop in the same process would feel as lag on every exchange."""
    import json

    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class IgnoreGenerationTags(jinja2.ext.Extension):
        tags = {"generation"}

        def parse(self, parser):
            parser.stream.skip(1)
            return parser.parse_statements(("name:endgeneration",), drop_needle=True)

    env = ImmutableSandboxedEnvironment(
        loader=jinja2.BaseLoader(),
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[IgnoreGenerationTags, jinja2.ext.loopcontrols],
    )
    env.filters["tojson"] = lambda x, ensure_ascii=False, indent=None, separators=None, sort_keys=False: json.dumps(
        x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )
    return env.from_string(template)


@functools.lru_cache(maxsize=4)
def _vocab(path: str, mtime_ns: int, version: str) -> Any:
    """The engine's tokenizer on a GGUF, vocab only: loaded once per file, not per probe."""
    import llama_cpp

    return llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)


# Freed before the interpreter tears llama_cpp's module down (after that, its destructor fails noisily).
atexit.register(_vocab.cache_clear)


def render_chat(template: str, request: dict[str, Any], bos_token: str, eos_token: str) -> str:
    """Render a chat request the way llama-cpp-python's Jinja2ChatFormatter does."""

    def raise_exception(message: str) -> None:
        raise ValueError(message)

    return _compiled(template).render(
        messages=request.get("messages") or [],
        eos_token=eos_token,
        bos_token=bos_token,
        raise_exception=raise_exception,
        strftime_now=lambda f: datetime.now().strftime(f),
        add_generation_prompt=True,
        functions=request.get("functions"),
        function_call=request.get("function_call"),
        tools=request.get("tools"),
        tool_choice=request.get("tool_choice"),
    )


def _render(gguf: GGUFFacts, request: dict[str, Any]) -> tuple[str, bool, str]:
    """The chat prompt the server writes for ``request``, whether its tokenizer adds the model's
    special tokens to it, and how it was written."""
    name = builtin_format(gguf.chat_template)
    if name is not None:
        try:
            prompt, add_special = render_builtin(name, request)
        except ImportError as exc:
            raise LookupError(f"{why(name)}; writing it needs llama_cpp installed here") from exc
        return prompt, add_special, f"llama-cpp-python's built-in chat format {name} ({why(name)})"
    assert gguf.chat_template is not None  # builtin_format names one for a GGUF without
    prompt = render_chat(gguf.chat_template, request, gguf.bos_token or "", gguf.eos_token or "")
    sha = (sha256_text(gguf.chat_template) or "")[:12]
    return prompt, False, f"GGUF chat template (sha256 {sha}) rendered as llama-cpp-python does"


def _release(version: str) -> tuple[int, ...]:
    """ "0.3.36" as (0, 3, 36); a version it can't read as (0,), before any."""
    parts = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    return tuple(int(p) for p in parts.groups()) if parts else (0,)


class LlamaCppPython(Engine):
    # Every sampling setting, as server/types.py's CreateChatCompletionRequest and CreateCompletionRequest
    # spell their fields (a field they don't have is dropped unread: repetition_penalty, typical_p,
    # max_completion_tokens), less those server/app.py excludes from the call (n; min_tokens it
    # excludes too, but applies as a logits processor). mirostat is mirostat_mode there.
    READS = {
        "temperature": ("temperature",),
        "top_p": ("top_p",),
        "top_k": ("top_k",),
        "min_p": ("min_p",),
        "typical_p": (),
        "repeat_penalty": ("repeat_penalty",),
        "repeat_last_n": (),
        "presence_penalty": ("presence_penalty",),
        "frequency_penalty": ("frequency_penalty",),
        "seed": ("seed",),
        "max_tokens": ("max_tokens",),
        "min_tokens": ("min_tokens",),
        "stop": ("stop",),
        "mirostat": ("mirostat_mode",),
        "mirostat_tau": ("mirostat_tau",),
        "mirostat_eta": ("mirostat_eta",),
        "n": (),
        "logprobs": ("logprobs",),
        "top_logprobs": ("top_logprobs",),
        "dry_multiplier": (),
        "xtc_probability": (),
    }
    # A completion's logprobs is the number of top tokens; top_logprobs is no field of it.
    PATH_READS = {path: {"top_logprobs": ()} for path in _PROMPT_PATHS}

    kind = "llama-cpp-python"
    interrupts_streams = True
    echoes_model = True
    LOCK_FREE = frozenset({"/openapi.json", "/docs"})
    _local: Any = None
    last_error: str | None = None

    @classmethod
    def matches(cls, found: dict[str, Endpoint]) -> bool:
        spec = found.get("/openapi.json")
        if not (spec and spec.ok and isinstance(spec.json, dict)):
            return False
        title = str((spec.json.get("info") or {}).get("title", ""))
        return "llama.cpp Python" in title or "/extras/tokenize" in (spec.json.get("paths") or {})

    def _openapi(self) -> dict[str, Any]:
        return self.get("/openapi.json").json or {}

    def _request_defaults(self, path: str) -> dict[str, Any] | None:
        schemas = (self._openapi().get("components") or {}).get("schemas") or {}
        props = (schemas.get(_SCHEMAS.get(path, ""), {}) or {}).get("properties") or {}
        out = {
            k: v["default"]
            for k, v in props.items()
            if isinstance(v, dict) and "default" in v and k not in ("messages", "stream")
        }
        return out or None

    def gguf(self) -> tuple[GGUFFacts | None, str]:
        """The model file, if given or named by the server as a local path; and how it was found."""
        if self.model_file:
            return read_gguf(self.model_file), f"--model-file {self.model_file}"
        for model_id in self.model_ids():
            if model_id.endswith(".gguf") and os.path.isfile(model_id):
                return read_gguf(model_id), f"the local file the server names as its model ({model_id})"
        return None, "not exposed by llama-cpp-python's server (give --model-file to read it from the GGUF)"

    def facts(self) -> dict[str, dict[str, Any]]:
        info = self._openapi().get("info") or {}
        models = self.model_ids()
        gguf, how = self.gguf()
        defaults = self._request_defaults("/v1/chat/completions")
        from_gguf = f"GGUF metadata, from {how}"
        return {
            "version": fact(info.get("version"), "/openapi.json info.version")
            if info.get("version")
            else fact(None, "not exposed"),
            "models": fact(models, "/v1/models") if models else fact(None, "/v1/models did not answer"),
            "model_path": fact(gguf.path, how) if gguf else fact(None, how),
            "model_sha256": fact(gguf.sha256, f"sha256 of {gguf.path}") if gguf else fact(None, how),
            "quantization": fact(gguf.file_type, from_gguf) if gguf else fact(None, how),
            "dtype": dtype_fact(gguf, how) if gguf else fact(None, how),
            "context_size": fact(None, "not exposed by llama-cpp-python's server (its --n_ctx is not published)"),
            "parallel_slots": fact(1, "llama-cpp-python's server serializes requests behind one model lock"),
            "defaults": fact(defaults, "/openapi.json CreateChatCompletionRequest defaults")
            if defaults
            else fact(None, "not in /openapi.json"),
            "chat_template": self._template_fact(gguf, from_gguf) if gguf else fact(None, how),
            "bos_token": fact(gguf.bos_token, from_gguf) if gguf else fact(None, how),
            "eos_token": fact(gguf.eos_token, from_gguf) if gguf else fact(None, how),
        }

    @staticmethod
    def _template_fact(gguf: GGUFFacts, from_gguf: str) -> dict[str, Any]:
        name = builtin_format(gguf.chat_template)
        if name is not None:
            return fact(f"built-in format {name}", f"built-in format {name}: {why(name)} ({from_gguf})")
        return fact(gguf.chat_template, from_gguf)

    def notes(self) -> list[str]:
        return [
            "requests run one at a time; with interrupt_requests (default on) a new request ends the stream in flight,"
            " so infertap makes its own calls (/v1/models, /extras/tokenize) only while no exchange is in flight",
            "server settings (n_ctx, chat_format override, interrupt_requests) are not published; the chat template"
            " is read from the GGUF, as the server does when no --chat_format is given: the GGUF's template, or the"
            " built-in format the server picks for it (a template it knows by heart, or none)",
            'a completion\'s prompt is text: a list of one runs as that prompt (["ab"] as "ab", [] as ""), as'
            " OpenAI's does; a prompt of token ids, or of several prompts, fails (a 500), where OpenAI and vLLM run it",
        ]

    def defaults_for(self, path: str, model: str | None = None) -> dict[str, Any] | None:
        from .base import canonical

        found = self._request_defaults(path if path in _SCHEMAS else "/v1/chat/completions")
        return {canonical(k): v for k, v in found.items()} if found else None

    def local_tokenizer(self) -> tuple[Any, str] | None:
        """The engine's own tokenizer code, run here on the same GGUF, when the versions match.

        It gives what /extras/tokenize would, without taking the engine's model lock (which ends
        the stream in flight), so it is preferred whenever it is exactly the same code.
        """
        if self._local is not None:
            return self._local or None
        self._local = False
        gguf, _ = self.gguf()
        server_version = (self._openapi().get("info") or {}).get("version")
        try:
            import llama_cpp
        except ImportError:
            return None
        if gguf is None or not server_version or llama_cpp.__version__ != server_version:
            return None
        llama = _vocab(gguf.path, os.stat(gguf.path).st_mtime_ns, server_version)
        self._local = (
            llama,
            f"llama-cpp-python {server_version} tokenizer run locally on the same GGUF (vocab only; same version as the engine)",
        )
        return self._local

    def warm(self) -> None:
        """Load what enrichment needs (model file, compiled template, local tokenizer) now."""
        gguf, _ = self.gguf()
        if gguf is not None and builtin_format(gguf.chat_template) is None and gguf.chat_template:
            _compiled(gguf.chat_template)
        self.local_tokenizer()

    def _tokenize_local(self, text: str, *, add_special: bool = False, chat: bool = True) -> tuple[list[int], str] | None:
        """``add_special``: the model's special tokens added, as a built-in chat format's prompt gets them."""
        local = self.local_tokenizer()
        if local is None:
            return None
        llama, how = local
        # As the server does: a GGUF template's prompt goes in as rendered (add_bos=False).
        ids = llama.tokenize(text.encode("utf-8"), add_bos=add_special, special=True)
        return (ids if chat else self._framed(llama, ids)), how

    @staticmethod
    def _framed(llama: Any, ids: list[int]) -> list[int]:
        """A completion's string prompt, as Llama._create_completion frames it: the model's BOS
        first when it asks for one; its separator (else its EOS) last, unless it has neither a
        separator nor add_eos."""
        model = llama._model
        first, sep = model.token_cls(), model.token_sep()
        first = first if first != -1 else llama.token_bos()
        if model.add_bos_token() and first != -1:
            ids = [first, *ids]
        if model.add_eos_token() or sep != -1:
            ids = [*ids, sep if sep != -1 else llama.token_eos()]
        return ids

    def _tokenize(self, text: str) -> list[int] | None:
        ep = self.post("/extras/tokenize", {"input": text})
        if ep.ok and isinstance(ep.json.get("tokens"), list):
            return ep.json["tokens"]
        self.last_error = ep.error or f"HTTP {ep.status}"
        return None

    def prompt_tokens(self, path: str, request: dict[str, Any], usage: int | None = None) -> Tokens:
        if path in _CHAT_PATHS:
            gguf, how = self.gguf()
            if gguf is None:
                return Tokens(None, f"chat template unknown: {how}")
            try:
                prompt, add_special, template = _render(gguf, request)
            except Exception as exc:  # a template error is the engine's too; record it, don't crash
                return Tokens(None, f"writing the chat prompt as llama-cpp-python does failed: {exc!r}")
            local = self._tokenize_local(prompt, add_special=add_special)
            if local is not None:
                return Tokens(local[0], f"{template} + {local[1]}", prompt)
            ids = self._tokenize(prompt)
            if ids is None:
                return Tokens(None, f"llama-cpp-python /extras/tokenize failed: {self.last_error}", prompt)
            # /extras/tokenize adds BOS when the model asks for it, as a built-in format's prompt
            # gets it; a GGUF template's doesn't (it writes whatever BOS it wants), so drop exactly
            # that one added token there.
            if not add_special and gguf.add_bos_token and ids and ids[0] == gguf.bos_token_id:
                ids = ids[1:]
            return Tokens(ids, f"{template} + /extras/tokenize", prompt)
        if path in _PROMPT_PATHS:
            given = _text_prompt(request.get("prompt"))
            if request.get("suffix") is not None:
                return self._infill(given, request["suffix"])
            if isinstance(given, list) and given and all(type(t) is int for t in given):
                return Tokens(
                    None,
                    "llama-cpp-python's server takes no token ids as a prompt (its request refuses them, a 500): it ran nothing",
                )
            if isinstance(given, list):
                return Tokens(
                    None,
                    "llama-cpp-python's server runs one prompt: a list of several fails its assertion (a 500), it ran nothing",
                )
            if isinstance(given, str):
                local = self._tokenize_local(given, chat=False)
                if local is not None:
                    return Tokens(local[0], local[1])
                ids = self._tokenize(given)
                if ids is None:
                    return Tokens(None, f"llama-cpp-python /extras/tokenize failed: {self.last_error}")
                return Tokens(*self._completion_tail(ids))
        return Tokens(None, f"no prompt to tokenize for {path}")

    def _infill(self, prompt: Any, suffix: Any) -> Tokens:
        """A completion with a ``suffix`` (fill-in-the-middle), laid out as ``Llama._create_completion``
        lays it out since 0.3.7: the prefix, suffix and middle markers all token 0 (its FIM tokens
        are a "TODO: Fix" there), the prompt and suffix tokenized without special tokens, the
        suffix after a "☺" whose first two tokens are dropped where the GGUF adds a space prefix
        (tokenizer.ggml.add_space_prefix, true unless it says false), prefix-suffix-middle (the
        server never sets spm_infill), then BOS and EOS framing as a plain prompt's. Mirrored only
        by the engine's own tokenizer run here (the same version): /extras/tokenize reads special tokens."""
        if not isinstance(prompt, str) or not isinstance(suffix, str):
            return Tokens(None, "a completion with a suffix takes a string prompt and suffix: no prompt llama-cpp-python runs")
        local = self.local_tokenizer()
        if local is None:
            return Tokens(
                None,
                "a suffix (fill-in-the-middle) prompt is laid out by llama-cpp-python's own code: mirrored only with its tokenizer run here, of the engine's version",
            )
        llama, how = local
        version = str((self._openapi().get("info") or {}).get("version"))
        if _release(version) < (0, 3, 7):  # before, the model's own FIM tokens, where it has them
            return Tokens(
                None, f"a suffix (fill-in-the-middle) prompt of llama-cpp-python {version}, before 0.3.7, is not mirrored"
            )
        fim = 0  # its prefix, suffix and middle tokens alike
        skip = 2 if llama.metadata.get("tokenizer.ggml.add_space_prefix", "true") == "true" and suffix else 0
        after = (
            llama.tokenize(("☺" + suffix if skip else suffix).encode("utf-8"), add_bos=False, special=False)[skip:]
            if suffix
            else []
        )
        before = llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=False) if prompt else []
        ids = self._framed(llama, [fim, *before, fim, *after, fim])
        return Tokens(ids, f"the prompt, suffix and FIM tokens laid out as llama-cpp-python lays out a suffix, by the {how}")

    def _completion_tail(self, ids: list[int]) -> tuple[list[int], str]:
        """/extras/tokenize's ids for a completion's prompt, ended as the server ends it: with the
        separator, else the EOS where the model adds one (which /extras/tokenize adds too)."""
        gguf, _ = self.gguf()
        if gguf is None:
            return ids, "llama-cpp-python /extras/tokenize (a separator the server may append: unknown without the GGUF)"
        if gguf.add_eos_token and ids and ids[-1] == gguf.eos_token_id:
            ids = ids[:-1]
        tail = gguf.sep_token_id if gguf.sep_token_id is not None else gguf.eos_token_id if gguf.add_eos_token else None
        if tail is not None:
            return [*ids, tail], f"llama-cpp-python /extras/tokenize, then token {tail} as the server appends it"
        return ids, "llama-cpp-python /extras/tokenize"

    def output_tokens(self, text: str) -> Tokens:
        local = self._tokenize_local(text, chat=True)
        if local is not None:
            return Tokens(local[0], f"re-tokenized from the output text by the {local[1]} (may differ from the ids generated)")
        ids = self._tokenize(text)
        if ids is None:
            return Tokens(None, f"llama-cpp-python /extras/tokenize failed: {self.last_error}")
        gguf, _ = self.gguf()
        if gguf and gguf.add_bos_token and ids and ids[0] == gguf.bos_token_id:
            ids = ids[1:]
        return Tokens(
            ids, "re-tokenized from the output text by llama-cpp-python /extras/tokenize (may differ from the ids generated)"
        )


def _text_prompt(prompt: Any) -> Any:
    """The prompt llama-cpp-python's server runs (``create_completion``): its request takes a string
    or a list of strings, and a list of at most one is that string, an empty one ``""``."""
    if isinstance(prompt, list) and len(prompt) <= 1 and all(isinstance(p, str) for p in prompt):
        return prompt[0] if prompt else ""
    return prompt
