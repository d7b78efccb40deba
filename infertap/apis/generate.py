"""SGLang's and text-generation-inference's (TGI) native ``/generate`` routes.

Both take a raw prompt, no conversation; one path, two shapes (``read.api_for`` tells them apart by
the body: TGI sends ``inputs``, SGLang ``text`` or ``input_ids``). A body holding both is either
server's (each ignores the other's fields): ``AmbiguousGenerate`` until its answer says which server
read it (``read.read_request``), never a guess from the body.

- SGLang ``/generate``: ``{"text" | "input_ids", "sampling_params": {...}, "stream"}``, answered
  ``{"text", "meta_info": {"prompt_tokens", "completion_tokens", "cached_tokens", "finish_reason":
  {"type", "matched"?}}}``; streamed as SSE events that each carry the text so far (cumulative, as
  SGLang's own client slices ``text[prev:]``), then ``data: [DONE]``. ``Delta.so_far`` says so:
  ``fold`` takes each event's new text as the difference (``--incremental-streaming-output`` sends
  the new text alone: an event whose text does not continue the text so far is read as new; one
  shorter that begins it, SGLang 0.4's last after trimming a stop string, is the answer).
- TGI ``/generate``: ``{"inputs", "parameters": {...}}``, answered ``{"generated_text", "details":
  {"finish_reason", "generated_tokens", "tokens": [...]}}`` (details only where asked);
  ``/generate_stream`` sends one event per token, ``{"token": {"id", "text", "special"},
  "generated_text": null, "details": null}``, the last with the whole text and its details and no
  end marker after it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .openai import stop_reason_json, stop_value
from .shapes import Api, Delta, SettingsPlace, Turn, as_dict, as_int, as_list, prompt_text

# SGLang's ``SamplingParams`` (python/sglang/srt/sampling/sampling_params.py): an object, or a list
# of them for a batch; its seed is ``sampling_seed`` (a field an older SGLang refuses by name).
SGLANG_SETTINGS = SettingsPlace(
    "sampling_params",
    {
        "temperature": "temperature",
        "top_p": "top_p",
        "top_k": "top_k",
        "min_p": "min_p",
        "repeat_penalty": "repetition_penalty",
        "frequency_penalty": "frequency_penalty",
        "presence_penalty": "presence_penalty",
        "max_tokens": "max_new_tokens",
        "min_tokens": "min_new_tokens",
        "stop": "stop",
        "seed": "sampling_seed",
        "n": "n",
    },
    frozenset(
        {
            "stop_token_ids",
            "stop_regex",
            "ignore_eos",
            "skip_special_tokens",
            "spaces_between_special_tokens",
            "no_stop_trim",
            "json_schema",
            "regex",
            "ebnf",
            "structural_tag",
            "custom_params",
            "stream_interval",
            "logit_bias",
        }
    ),
    lists=True,
)
# TGI's ``GenerateParameters`` (router/src/lib.rs); serde ignores a field it doesn't know.
TGI_SETTINGS = SettingsPlace(
    "parameters",
    {
        "temperature": "temperature",
        "top_p": "top_p",
        "top_k": "top_k",
        "typical_p": "typical_p",
        "repeat_penalty": "repetition_penalty",
        "frequency_penalty": "frequency_penalty",
        "max_tokens": "max_new_tokens",
        "stop": "stop",
        "seed": "seed",
    },
    frozenset(
        {
            "do_sample",
            "best_of",
            "details",
            "decoder_input_details",
            "return_full_text",
            "truncate",
            "watermark",
            "top_n_tokens",
            "grammar",
            "adapter_id",
        }
    ),
    # validation.rs refuses a temperature of 0 or below; greedy is do_sample false with no warper.
    positive={
        "temperature": "greedy decoding there is --set do_sample=false --unset temperature, with no top_k, top_p or "
        "typical_p (each makes it sample)"
    },
    # A pinned 0 left out: the request goes with TGI's own default, greedy unless a warper is in it.
    positive_pinned={
        "temperature": "TGI decodes greedily, as 0 asks, by its own default (do_sample false) where a request has no "
        "top_k, top_p or typical_p, and samples where it has one (a pinned one among them)"
    },
)


#: Which prompt of a batch an answer is of: SGLang's own key on its batch stream's events, given
#: by ``batch_answers`` to a whole batch's answers by their place.
_CHOICE = "index"
_COUNTS = ("prompt_tokens", "cached_tokens", "completion_tokens")


def batch_answers(answers: list[Any]) -> list[Any]:
    """SGLang's answer to a batch (``text`` or ``input_ids`` a list of prompts): a JSON array, one
    answer per prompt, each read as a choice of its own (its place its ``index``), as n > 1 chat's are."""
    return [{_CHOICE: i, **a} if i and isinstance(a, dict) else a for i, a in enumerate(answers)]


def batch_prompts(body: dict[str, Any] | None) -> int:
    """How many prompts an SGLang ``/generate`` body asks: a ``text`` list's strings, an ``input_ids``
    list's lists (a batch), else one."""
    body = body or {}
    text, ids = body.get("text"), body.get("input_ids")
    if isinstance(text, list):
        return len(text)
    return len(ids) if isinstance(ids, list) and ids and all(isinstance(i, list) for i in ids) else 1


def counted_prompts(usage: dict[str, Any]) -> set[int]:
    """The prompts of a batch whose counts ``usage`` holds (``name#k``: the k-th prompt's, ``name`` the first's)."""
    found = set()
    for key in usage:
        name, _, at = key.partition("#")
        if name in _COUNTS and (not at or at.isdigit()):
            found.add(int(at or 0))
    return found


class SglangGenerate(Api):
    name = "sglang-generate"
    finish_map: ClassVar[dict[str, str]] = {"stop": "stop", "length": "length", "abort": "error"}
    inputs: ClassVar[tuple[str, ...]] = ("text", "input_ids", "input_embeds")
    settings_place = SGLANG_SETTINGS

    def event(self, obj: dict[str, Any]) -> Delta:
        meta = obj.get("meta_info")
        if not isinstance(obj.get("text"), str) or not isinstance(meta, dict):
            return Delta()
        d = Delta(known=True, content=obj["text"], so_far=True)
        counts = {k: meta[k] for k in ("prompt_tokens", "completion_tokens", "cached_tokens") if as_int(meta.get(k)) is not None}
        d.usage = counts or None
        d.response_id = meta["id"] if isinstance(meta.get("id"), str) else None
        finish = meta.get("finish_reason")
        if isinstance(finish, dict) and isinstance(finish.get("type"), str):
            d.finish_reason = finish["type"]
            if "matched" in finish:
                d.matched_stop = stop_reason_json(finish["matched"])
                d.stop_sequence = finish["matched"] if stop_value(finish["matched"]) else None
            if finish["type"] == "abort":
                d.error = str(finish.get("message") or "aborted")
        choice = as_int(obj.get(_CHOICE))
        if not choice:
            return d
        # Another prompt's answer: its counts kept under its own names, the batch's the sum (``counts``)
        counts = {f"{k}#{choice}": v for k, v in (d.usage or {}).items()}
        return Delta(known=True, choices={choice: d}, usage=counts or None)

    def counts(self, usage: dict[str, Any]) -> tuple[int | None, int | None, int | None]:
        """The answer's counts; a batch's, every prompt's summed (``name#k``: the k-th prompt's), as
        chat's usage counts every choice's tokens."""
        sums = []
        for name in _COUNTS:
            each = [as_int(v) for k, v in usage.items() if k == name or k.startswith(f"{name}#")]
            sums.append(None if not each or None in each else sum(n for n in each if n is not None))
        return sums[0], sums[1], sums[2]

    def turns(self, body: dict[str, Any]) -> tuple[tuple[Turn, ...], int | None, str | None]:
        prompt = body.get("text") if body.get("text") is not None else body.get("input_ids")
        return ((Turn("user", prompt_text(prompt)),) if prompt is not None else ()), None, None

    def sampling(self, body: dict[str, Any]) -> dict[str, Any]:
        """``sampling_params``; of a batch's list (one object per prompt), the settings every prompt shares."""
        given = body.get("sampling_params")
        if not isinstance(given, list):
            return dict(as_dict(given))
        each = [as_dict(p) for p in given]
        first = each[0] if each else {}
        return {k: v for k, v in first.items() if all(k in p and p[k] == v for p in each[1:])}


class TgiGenerate(Api):
    name = "tgi-generate"
    finish_map: ClassVar[dict[str, str]] = {"eos_token": "stop", "stop_sequence": "stop", "length": "length"}
    inputs: ClassVar[tuple[str, ...]] = ("inputs",)
    settings_place = TGI_SETTINGS

    def event(self, obj: dict[str, Any]) -> Delta:
        token = obj.get("token")
        text = obj.get("generated_text")
        if not isinstance(token, dict) and not isinstance(text, str):
            return Delta()
        details = as_dict(obj.get("details"))
        d = Delta(known=True)
        if isinstance(token, dict):  # a streamed token; the last event's generated_text restates them all
            d.content = token["text"] if isinstance(token.get("text"), str) and not token.get("special") else ""
            d.token_ids = [token["id"]] if as_int(token.get("id")) is not None else None
        else:
            d.content = text if isinstance(text, str) else ""
            ids = (as_int(t.get("id")) for t in as_list(details.get("tokens")) if isinstance(t, dict))
            d.token_ids = [i for i in ids if i is not None] or None
        if isinstance(details.get("finish_reason"), str):
            d.finish_reason = details["finish_reason"]
        if as_int(details.get("generated_tokens")) is not None:
            d.usage = {"generated_tokens": details["generated_tokens"]}
        return d

    def counts(self, usage: dict[str, Any]) -> tuple[int | None, int | None, int | None]:
        return None, None, as_int(usage.get("generated_tokens"))

    def turns(self, body: dict[str, Any]) -> tuple[tuple[Turn, ...], int | None, str | None]:
        prompt = body.get("inputs")
        return ((Turn("user", prompt_text(prompt)),) if prompt is not None else ()), None, None

    def sampling(self, body: dict[str, Any]) -> dict[str, Any]:
        return dict(as_dict(body.get("parameters")))


class TgiGenerateStream(TgiGenerate):
    """``/generate_stream``: TGI's stream, whatever the body says (it has no ``stream`` field)."""

    name = "tgi-generate-stream"

    def streams(self, body: dict[str, Any]) -> bool:
        return True


class AmbiguousGenerate(Api):
    """A ``/generate`` body holding both TGI's ``inputs`` and SGLang's ``text`` or ``input_ids``: SGLang
    reads the one, TGI the other, each ignoring the rest, so the body can't say which prompt and which
    settings (``sampling_params`` or ``parameters``) the model read. A generation request all the same;
    its prompt and settings unknown here, and no place to put a replay's settings in, until its answer
    names the server (``read.read_request``; ``read_response`` reads the answer by its own shape)."""

    name = "generate-ambiguous"
    inputs: ClassVar[tuple[str, ...]] = (*SglangGenerate.inputs, *TgiGenerate.inputs)

    def event(self, obj: dict[str, Any]) -> Delta:
        return Delta()  # the answer is read as the API its shape is (``read.sniff``)

    def turns(self, body: dict[str, Any]) -> tuple[tuple[Turn, ...], int | None, str | None]:
        return (), None, None

    def sampling(self, body: dict[str, Any]) -> dict[str, Any]:
        return {}


def ambiguous(body: dict[str, Any]) -> bool:
    """Whether a ``/generate`` body holds both servers' prompts (``AmbiguousGenerate``)."""
    return any(k in body for k in TgiGenerate.inputs) and any(k in body for k in SglangGenerate.inputs)
