"""SGLang: /get_server_info (its server arguments and version) and /get_model_info, or where an
SGLang has dropped those deprecated names, /server_info and /model_info (the same answers).

Follows SGLang's native API docs (docs/basic_usage/native_api.md, 2026-02; server arguments as in
docs/backend/server_arguments.md).
"""

from __future__ import annotations

import json
from typing import Any

from .base import Endpoint, Engine, canonical, fact
from .model_folder import folder_json, hub_lacks, is_hub_snapshot, local_folder

_RESPONSES = "/v1/responses"
_CHAT = "/v1/chat/completions"
_COMPLETIONS = "/v1/completions"
#: What a chat request runs where it gives none (``ChatCompletionRequest.to_sampling_params``,
#: SGLang main at 004c82e): the model's generation_config.json value under --sampling-defaults
#: model (SGLang's default; ``ModelConfig.get_default_sampling_params``), else these.
CHAT_DEFAULTS: dict[str, Any] = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0}
#: What a chat request ran before --sampling-defaults (SGLang PR #11304, 2025-10, which set the
#: above): ``ChatCompletionRequest``'s field defaults, temperature 0.7, no generation config read.
#: Such an SGLang's /get_server_info (all its server arguments) has no ``sampling_defaults``.
CHAT_DEFAULTS_BEFORE: dict[str, Any] = {**CHAT_DEFAULTS, "temperature": 0.7}
_BEFORE = "SGLang before --sampling-defaults (no sampling_defaults in /get_server_info; PR #11304, 2025-10)"
#: The generation_config.json keys SGLang takes as its defaults under --sampling-defaults model
#: (``ModelConfig.get_default_sampling_params``): those not None in ``GenerationConfig.to_dict()``.
GENERATION_KEYS = ("repetition_penalty", "temperature", "top_k", "top_p", "min_p")
#: Those keys under infertap's names.
_MODEL_SET = frozenset(canonical(k) for k in GENERATION_KEYS)
#: Why a generation_config.json without top_k leaves it unknown: ``to_dict()`` fills the keys a
#: file leaves out with transformers' defaults, which agree with SGLang's but for top_k.
_TOP_K_UNSET = (
    "generation_config.json sets no top_k: SGLang then runs transformers' GenerationConfig default, "
    "50 under transformers 4, none (-1) under 5, and its API doesn't say which it has"
)
#: Why a Responses request's value from generation_config.json is version dependent.
_RESPONSES_OLDER = (
    "; SGLang versions whose Responses API drops the model's generation config "
    "(OpenAIServingResponses: default_sampling_params = {}) run 0.7, 1.0, or the preferred params' or SGLang's own"
)
#: What a chat request runs from its own field defaults, whatever the model or server says.
CHAT_FIXED: dict[str, Any] = {"presence_penalty": 0.0, "frequency_penalty": 0.0, "min_tokens": 0, "n": 1}
#: What a /v1/completions request runs where it gives none: ``CompletionRequest``'s field
#: defaults, all set on every request (no generation_config there), 16 tokens of output among them.
COMPLETIONS_FIXED: dict[str, Any] = {**CHAT_DEFAULTS, **CHAT_FIXED, "max_tokens": 16}
#: The sampling keys (SGLang's names) both OpenAI paths write on every request, None where the
#: request gives none: --preferred-sampling-params fill only keys a request leaves out
#: (``TokenizerManager``: ``{**preferred, **sampling_params}``), so never these.
OPENAI_SETS = frozenset(
    {*CHAT_DEFAULTS, "presence_penalty", "frequency_penalty", "max_new_tokens", "min_new_tokens", "n", "stop", "sampling_seed"}
)
#: What a Responses request sets where it gives nothing (``ResponsesRequest.to_sampling_params``,
#: SGLang main at 004c82e): temperature 0.7 (a chat request's is 1.0) and top_p 1.0 from its own
#: table, both penalties 0.0 from its fields. Set on every request, they hide
#: --preferred-sampling-params, which fill only keys a request leaves out (``TokenizerManager``).
RESPONSES_DEFAULTS: dict[str, Any] = {"temperature": 0.7, "top_p": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0}
#: Tokens it takes off a Responses request's output budget: "headroom for BOS/EOS".
RESPONSES_HEADROOM = 2
#: The least budget it gives a Responses request, whatever of the context its prompt leaves.
RESPONSES_MIN_BUDGET = 512


class SGLang(Engine):
    # Its OpenAI requests: repetition_penalty; max_completion_tokens before max_tokens, as vLLM.
    READS = {"repeat_penalty": ("repetition_penalty",), "max_tokens": ("max_completion_tokens", "max_tokens")}
    # ResponsesRequest has max_output_tokens only, as vLLM's (SGLang main, 2026-12: protocol.py);
    # what it then runs is ``adjusted``.
    PATH_READS = {"/v1/responses": {"max_tokens": ("max_output_tokens",)}}

    kind = "sglang"

    @classmethod
    def matches(cls, found: dict[str, Endpoint]) -> bool:
        info = found.get("/get_server_info")
        model = found.get("/get_model_info")
        models = found.get("/v1/models")
        data = models.json.get("data") if models and models.ok and isinstance(models.json, dict) else None
        sglang = isinstance(data, list) and any(isinstance(m, dict) and m.get("owned_by") == "sglang" for m in data)
        return bool(
            (info and info.ok and isinstance(info.json, dict))
            or (model and model.ok and "model_path" in model.json)
            or sglang  # an SGLang whose deprecated /get_* names are gone: its ModelCard's owner
        )

    def _native(self, old: str) -> tuple[dict[str, Any], str]:
        """What SGLang answers on ``old`` (``/get_server_info``, ``/get_model_info``) and the path
        that answered: ``old`` while it does (asked at detection, no extra request), else its new
        name, which SGLang keeps as ``old`` is deprecated and dropped."""
        for path in (old, old.replace("/get_", "/", 1)):
            ep = self.get(path)
            if ep.ok and isinstance(ep.json, dict):
                return ep.json, path
        return {}, old

    def _server_info(self) -> dict[str, Any]:
        return self._native("/get_server_info")[0]

    def generation_config(self) -> tuple[dict[str, Any] | None, str, bool]:
        """The settings SGLang takes from the model's generation_config.json, where it comes from and
        whether a file was read: {} under --sampling-defaults openai or without the file (SGLang's
        own then apply), None where this host can't read the model folder."""
        info = self._server_info()
        if info.get("sampling_defaults") == "openai":
            return {}, "--sampling-defaults openai", False
        if self._before_sampling_defaults():
            return {}, f"{_BEFORE}: no generation_config.json applied", False
        path = self._native("/get_model_info")[0].get("model_path") or info.get("model_path")
        revision = info.get("revision") if isinstance(info.get("revision"), str) else None
        folder, why = local_folder(self.base, path, "model_path", revision)
        if folder is None:
            return None, f"the model's generation_config.json, unread: {why}", False
        file = folder / "generation_config.json"
        hub = is_hub_snapshot(folder)
        # A hub id's files are the Hugging Face cache's: this host's, assumed the engine's too.
        cached = f" (the Hugging Face cache's {revision or 'main'} of {path})" if hub else ""
        if not file.exists():
            if hub and not hub_lacks(folder, "generation_config.json"):
                return None, f"the model's generation_config.json, unread: {folder} holds none downloaded", False
            return {}, f"{folder}{cached} has no generation_config.json", False
        config = folder_json(folder, "generation_config.json")
        if config is None:
            return None, f"{file} is unreadable", False
        taken = {k: config[k] for k in GENERATION_KEYS if config.get(k) is not None}
        return taken, f"{file}{cached} (--sampling-defaults model)", True

    def defaults_for(self, path: str, model: str | None = None) -> dict[str, Any] | None:
        """--preferred-sampling-params, less what each OpenAI path sets over them: the chat ones
        (the model's generation_config.json where read), the completions and Responses ones."""
        preferred = super().defaults_for(path, model)
        if path not in (_CHAT, _COMPLETIONS, _RESPONSES):
            return preferred
        generation, _, read = self.generation_config()
        if path == _RESPONSES:
            return self._responses_defaults(preferred or {}, generation, read)
        value = self.facts()["defaults"]["value"]
        kept = {canonical(k): v for k, v in value.items() if k not in OPENAI_SETS} if isinstance(value, dict) else {}
        if path == _COMPLETIONS:
            own = COMPLETIONS_FIXED
        elif generation is None:  # the model's generation_config.json may set them, unread from here
            own = CHAT_FIXED
        else:
            chat = CHAT_DEFAULTS_BEFORE if self._before_sampling_defaults() else CHAT_DEFAULTS
            own = {**chat, **generation, **CHAT_FIXED}
            if read and "top_k" not in generation:
                del own["top_k"]
        return {**kept, **{canonical(k): v for k, v in own.items()}}

    @staticmethod
    def _responses_defaults(preferred: dict[str, Any], generation: dict[str, Any] | None, read: bool) -> dict[str, Any]:
        """A Responses request's defaults (``ResponsesRequest.to_sampling_params``): temperature and
        top_p from the generation config else 0.7 and 1.0; top_k, min_p and repetition_penalty
        from it, else the preferred params, else SGLang's own; both penalties 0."""
        own = {canonical(k): v for k, v in RESPONSES_DEFAULTS.items()}
        if generation is None:  # unread: any of the five may be the model's
            rest = {k: v for k, v in preferred.items() if k not in _MODEL_SET}
            return {**rest, **{k: v for k, v in own.items() if k not in _MODEL_SET}}
        fallback = {canonical(k): v for k, v in CHAT_DEFAULTS.items() if k not in RESPONSES_DEFAULTS}
        out = {**fallback, **preferred, **own, **{canonical(k): v for k, v in generation.items()}}
        if read and "top_k" not in generation:
            out.pop("top_k", None)
        return out

    def adjusted(
        self, path: str, settings: dict[str, dict[str, Any]], prompt_tokens: int | None = None
    ) -> dict[str, dict[str, Any]]:
        """Why a chat or Responses request's defaults of the model's generation config are what they
        are; and a Responses request's ``max_tokens`` as SGLang runs it: ``max_output_tokens`` (else
        all the context its prompt leaves, at least 512) capped by that room, less 2."""
        if path in (_CHAT, _RESPONSES):
            settings = self._explained(path, settings)
        if path != _RESPONSES:
            return settings
        given = settings.get("max_tokens") or {}
        asked = given.get("value") if given.get("source") == "request" else None
        context = self._context_length()
        room = max(context - prompt_tokens, RESPONSES_MIN_BUDGET) if context and prompt_tokens is not None else None
        rule = (
            f"SGLang's Responses API generates max_output_tokens (else the context its prompt leaves, at least "
            f"{RESPONSES_MIN_BUDGET}) capped by that room, less {RESPONSES_HEADROOM} kept for BOS/EOS"
        )
        if asked is not None and isinstance(asked, int) and not isinstance(asked, bool):
            value = (min(asked, room) if room is not None else asked) - RESPONSES_HEADROOM
            why = (
                rule
                if room is not None
                else f"{rule}; its room unknown (no usage or context length), this assumes the prompt leaves room for it"
            )
            out = {"value": value, "source": "engine_adjusted", "requested": asked, "why": why}
        elif asked is None and room is not None:
            out = {"value": room - RESPONSES_HEADROOM, "source": "engine_default", "why": rule}
        else:
            return settings
        if given.get("ignored"):
            out["ignored"] = given["ignored"]
        return {**settings, "max_tokens": out}

    def _before_sampling_defaults(self) -> bool:
        """Whether the SGLang predates --sampling-defaults: its /get_server_info, which lists every
        server argument, answered without one."""
        info = self._server_info()
        return bool(info) and "sampling_defaults" not in info

    def _explained(self, path: str, settings: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """The five settings SGLang may take from generation_config.json, each not sent with a
        ``why``: the file it came from, or why it is unknown."""
        generation, source, read = self.generation_config()
        if path == _CHAT and self._before_sampling_defaults():
            setting = settings.get("temperature")
            if setting and setting.get("source") != "request":
                return {**settings, "temperature": {**setting, "why": f"{_BEFORE}: ChatCompletionRequest's 0.7"}}
        if not read and generation is not None:
            return settings  # SGLang's own defaults: nothing of the model's
        taken = {canonical(k) for k in generation or ()}
        out = dict(settings)
        for name in _MODEL_SET & set(settings):
            setting = settings[name]
            if setting.get("source") == "request":
                continue
            if name in taken:
                why = source + (_RESPONSES_OLDER if path == _RESPONSES else "")
            elif generation is None and setting.get("source") == "unknown":
                why = source
            elif name == "top_k" and read:
                why = _TOP_K_UNSET
            else:
                continue
            out[name] = {**setting, "why": why}
        return out

    def _context_length(self) -> int | None:
        """The context SGLang's model runs with: /v1/models ``max_model_len`` (its
        ``model_config.context_len``), else /get_server_info ``context_length``."""
        data = (self.get("/v1/models").json or {}).get("data") or []
        first = data[0] if data and isinstance(data[0], dict) else {}
        value = first.get("max_model_len") or self._server_info().get("context_length")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def notes(self) -> list[str]:
        return [
            "--preferred-sampling-params never reach a /v1/chat/completions or /v1/completions request's "
            "temperature, top_p, top_k, min_p, penalties, output budget or seed, which those paths always set "
            "(SGLang main at 004c82e; issue #39096): a chat request runs the model's generation_config.json "
            "values (under --sampling-defaults model, SGLang's default, which its API doesn't show: read from the "
            "model folder where on this host, else unknown) else 1.0, 1.0, -1, 0 and 1.0, and a completions "
            "request those, with max_tokens 16",
            "a /v1/responses request runs temperature 0.7 where it gives none (a chat request 1.0), top_p 1.0 and "
            "both penalties 0 whatever --preferred-sampling-params say, and max_output_tokens less 2 (SGLang main at "
            "004c82e, ResponsesRequest.to_sampling_params): its effective settings are recorded so",
        ]

    def facts(self) -> dict[str, dict[str, Any]]:
        info, at = self._native("/get_server_info")
        model, model_at = self._native("/get_model_info")
        models = self.model_ids()
        not_exposed = "not exposed by SGLang's API"
        preferred = model.get("preferred_sampling_params") or info.get("preferred_sampling_params")
        if isinstance(preferred, str):  # SGLang keeps --preferred-sampling-params as the JSON text given
            try:
                preferred = json.loads(preferred)
            except ValueError:
                preferred = None
        path = model.get("model_path") or info.get("model_path")
        slots = info.get("max_running_requests")
        return {
            "version": fact(info.get("version"), f"{at} version") if info.get("version") else fact(None, not_exposed),
            "models": fact(models, "/v1/models") if models else fact(None, "/v1/models did not answer"),
            "model_path": fact(path, f"{model_at} model_path") if path else fact(None, not_exposed),
            "model_sha256": fact(None, not_exposed),
            "quantization": fact(info.get("quantization"), f"{at} quantization")
            if info.get("quantization")
            else fact(None, f"none set in {at}"),
            "dtype": fact(info.get("dtype"), f"{at} dtype (the --dtype flag; auto: the checkpoint's)")
            if info.get("dtype")
            else fact(None, not_exposed),
            "context_size": fact(info.get("context_length"), f"{at} context_length")
            if info.get("context_length")
            else fact(None, f"{at} context_length is unset (the model's own)"),
            "parallel_slots": fact(slots, f"{at} max_running_requests") if slots else fact(None, not_exposed),
            "defaults": fact(preferred, f"{model_at} preferred_sampling_params")
            if isinstance(preferred, dict)
            else fact(None, "no --preferred-sampling-params set; SGLang's defaults apply, not published"),
            "chat_template": fact(info.get("chat_template"), f"{at} chat_template (a name or path)")
            if info.get("chat_template")
            else fact(None, not_exposed),
            "bos_token": fact(None, not_exposed),
            "eos_token": fact(None, not_exposed),
        }
