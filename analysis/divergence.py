"""How two outputs of the same request differ: first divergence, similarity, logprob KL, tool calls.

Pure functions over parsed responses and token ids, so each definition can be checked by hand
(docs/metrics.md names them).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Sequence
from typing import Any, TypeGuard

from infertap.apis.openai import choice_index
from infertap.apis.shapes import as_int, as_list, as_text, canonical_arguments


def first_divergence(a: Sequence[Any], b: Sequence[Any]) -> int | None:
    """Index of the first position where the sequences differ; None when equal."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def similarity(a: str, b: str) -> float:
    """difflib's ratio over characters: 1.0 identical, 0.0 nothing in common."""
    if a == b:
        return 1.0
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


_WORDS = re.compile(r"\s+|\w+|[^\w\s]")


def text_diff(a: str, b: str, *, context: int = 40) -> str:
    """An inline word diff: shared text once (long runs shortened), then [-removed-]{+added+}."""
    wa, wb = _WORDS.findall(a), _WORDS.findall(b)
    sm = difflib.SequenceMatcher(None, wa, wb, autojunk=False)
    out = []
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            chunk = "".join(wa[i1:i2])
            out.append(chunk if len(chunk) <= 2 * context else chunk[:context] + " … " + chunk[-context:])
        else:
            if i2 > i1:
                out.append(f"[-{''.join(wa[i1:i2])}-]")
            if j2 > j1:
                out.append(f"{{+{''.join(wb[j1:j2])}+}}")
    return "".join(out)


#: Between the parts of an output compared as one string (the ASCII record separator): text that
#: moves between the reasoning and the answer, or into a tool call, is a difference.
PART = "\x1e"


def output_text(
    reasoning: str,
    text: str,
    tool_calls: Sequence[dict[str, Any]],
    error: str | None = None,
    refusal: str = "",
    audio: str = "",
    citations: Sequence[str] = (),
    results: Sequence[str] = (),
    others: Sequence[str] = (),
) -> str:
    """An output as one string, in the order it is generated: its reasoning, its text, a refusal
    (``refused: ...``), an audio answer's transcript (``said: ...``), each source cited (``cited:
    ...``, canonical JSON), each tool call as ``name(arguments)`` (canonical JSON; ``server:
    name(arguments)`` of one the API ran itself; ``name(arguments) from CALLER`` of one its code made,
    ``callers``; ``TOOLSET/name(arguments)`` of one of a toolset's tools), what each server tool gave back (``result: ...``,
    canonical JSON), each block or item of a type not read (``item: ...``) and the error it reports,
    ``PART`` between them. Just the text when there is nothing else, so that a character position
    is most often one in the text."""
    parts = [reasoning] if reasoning else []
    parts.append(text)
    if refusal:
        parts.append(f"refused: {refusal}")
    if audio:
        parts.append(f"said: {audio}")
    parts += (f"cited: {c}" for c in citations)
    parts += (
        f"{'server: ' if c.get('server') else ''}{_toolset(c)}{c.get('name') or ''}({_arguments(c)}){f' from {by}' if by else ''}"
        for c, by in zip(tool_calls, callers(tool_calls), strict=True)
    )
    parts += (f"result: {r}" for r in results)
    parts += (f"item: {o}" for o in others)
    if error is not None:
        parts.append(error)
    return PART.join(parts)


def callers(calls: Sequence[dict[str, Any]]) -> list[str | None]:
    """Who made each call, where not the model itself (``"caller"``: Anthropic's programmatic calls,
    made by code run in its code execution; Responses', made by a ``program`` item's code,
    ``caller_id`` its call id): the caller's type and the call of this answer that
    ran that code (``code_execution_20250825 (call 0)``), or its id as sent where this answer
    holds no such call (code started by an earlier answer, its id in the request: the same on both
    sides of a pair). By place, not id: ids are new on every answer. None: the model's own call."""
    at = {c["id"]: i for i, c in enumerate(calls) if isinstance(c.get("id"), str)}
    out: list[str | None] = []
    for c in calls:
        caller = c.get("caller")
        if not isinstance(caller, dict):
            out.append(None)
            continue
        tool = caller.get("tool_id", caller.get("caller_id"))  # Anthropic's; Responses' (a program's call id)
        where = f"call {at[tool]}" if isinstance(tool, str) and tool in at else str(tool)
        out.append(f"{caller.get('type')} ({where})")
    return out


def _toolset(call: dict[str, Any]) -> str:
    """``TOOLSET/`` of a call of a toolset's tool (Anthropic's ``toolset_name``), else nothing."""
    toolset = call.get("toolset")
    return f"{toolset}/" if isinstance(toolset, str) and toolset else ""


def _arguments(call: dict[str, Any]) -> str:
    """A call's arguments as canonical JSON: key order aside, ``true`` and ``1`` differ; none: ``{}``.
    A custom tool's free-form input (``"free"``) as the text it is: ``{"a":1}`` and ``{ "a": 1 }``
    are two inputs to a tool that reads text."""
    if call.get("free"):
        return as_text(call.get("arguments"))
    return canonical_arguments(call.get("arguments") or "{}")


Position = tuple[int | str | None, dict[int | str, float]]


def logprob_positions(events: Sequence[dict[str, Any]], api: str | None = None, choice: int = 0) -> list[Position]:
    """Per output position, the token the engine chose (its id, or its text when no id) and the
    top-k {token: logprob} it reported (an entry of another shape, a logprob that isn't a number, is
    no entry). Ollama's native API (``api`` "ollama-*") sends each object's positions as a list of
    its own, ``logprobs`` beside ``message`` or ``response`` (api/types.go's ``[]Logprob``). The
    Responses API (``api`` "responses") sends them on each ``response.output_text.delta`` and on each
    ``output_text`` part of the whole response (``include: ["message.output_text.logprobs"]``), which
    a stream's final event restates: those of the response where it holds any, as its text is read.
    A legacy completion (``/v1/completions`` of vLLM, llama-cpp-python, OpenAI) sends parallel lists,
    ``tokens``, ``token_logprobs`` and ``top_logprobs`` (each a {token: logprob}); llama.cpp's native
    ``/completion`` (``api`` "llamacpp", ``n_probs``) sends ``completion_probabilities`` beside
    ``content``, each entry a chat completion's, in the first answer's events (``index`` 0).
    ``choice``: the answer whose positions (n > 1: each choice is an answer, ``index`` k; llama.cpp's
    answer to prompt k): Ollama's and the Responses API's answers are one choice."""
    if choice and (api == "responses" or (api is not None and api.startswith("ollama"))):
        return []
    if api == "responses":
        return _responses_positions(events)
    if api == "llamacpp":
        return _llamacpp_positions(events, choice)
    positions: list[Position] = []
    for event in events:
        if api is not None and api.startswith("ollama"):
            positions += _positions(event.get("logprobs"))
            continue
        for answer in as_list(event.get("choices")):
            if not isinstance(answer, dict) or choice_index(answer) != choice:
                continue
            logprobs = answer.get("logprobs")
            if isinstance(logprobs, dict):
                positions += _positions(logprobs["content"]) if "content" in logprobs else _legacy_positions(logprobs)
    return positions


def post_sampling(events: Sequence[dict[str, Any]], api: str | None = None) -> bool:
    """Whether an answer's positions are llama.cpp's probabilities after its sampler chain, not the
    model's own distribution: with ``post_sampling_probs`` today's llama-server reads them off the
    candidates its samplers left (tools/server/server-context.cpp ``populate_token_probs``:
    ``common_sampler_get_candidates(slot.smpl, true)``, else ``get_token_probabilities``, the
    softmax of the logits) and names them ``prob``/``top_probs``; a llama-server from before its
    late-2024 rewrite always did (examples/server/server.cpp: ``probs`` from ``ctx_sampling->cur``
    after sampling, "Tokens filtered out due to e.g. top_k have 0 probability", greedy 1.0/0.0).
    top_k, top_p and min_p cut such a distribution and renormalise it, so a KL over it moves with
    the sampling settings too, and one against the model's own logprobs compares two things."""
    if api == "responses" or (api is not None and api.startswith("ollama")):
        return False
    for event in events:
        if api == "llamacpp":
            lists = [event.get("completion_probabilities")]
        else:  # llama-server's OpenAI-compatible answers write their logprobs as its /completion does
            lists = [
                answer["logprobs"].get("content")
                for answer in as_list(event.get("choices"))
                if isinstance(answer, dict) and isinstance(answer.get("logprobs"), dict)
            ]
        if any(_post_sampled(item) for items in lists for item in as_list(items)):
            return True
    return False


def _post_sampled(item: Any) -> bool:
    """A position entry in llama.cpp's post-sampling shape: ``top_probs`` (or an older server's
    ``probs``), or a ``prob`` where a logprob would be."""
    if not isinstance(item, dict):
        return False
    return "top_probs" in item or "probs" in item or ("prob" in item and "logprob" not in item)


def _llamacpp_positions(events: Sequence[dict[str, Any]], choice: int) -> list[Position]:
    """llama.cpp's ``completion_probabilities`` of the answer ``index`` ``choice``. A llama-server
    from before its late-2024 rewrite sent each entry as ``{"content": token, "probs": [{"tok_str",
    "prob"}]}``, one chunk's tokens in each streamed event, and restated every position in a
    stream's last event (``stop``): a ``stop`` event's positions where it holds any (a whole answer
    is one such event; today's server sends none in a stream's last), else the streamed ones."""
    streamed: list[Position] = []
    whole: list[Position] = []
    for event in events:
        if (as_int(event.get("index")) or 0) != choice:  # its answer to another prompt: none of this one's
            continue
        said = _positions(event.get("completion_probabilities"))
        if event.get("stop") is True and said:
            whole = said
        else:
            streamed += said
    return whole or streamed


def _legacy_positions(logprobs: dict[str, Any]) -> list[Position]:
    """A legacy completion's positions: ``tokens[i]`` chosen, ``top_logprobs[i]`` its top-k (a
    {token: logprob}), else ``{token: token_logprobs[i]}``; a position whose value isn't a number
    (the echoed prompt's first token, null) has no entry."""
    tokens, chosen, tops = (as_list(logprobs.get(k)) for k in ("tokens", "token_logprobs", "top_logprobs"))
    positions: list[Position] = []
    for i, token in enumerate(tokens):
        top = tops[i] if i < len(tops) and isinstance(tops[i], dict) and tops[i] else None
        said = list(top.items()) if top is not None else [(token, chosen[i] if i < len(chosen) else None)]
        top_k: dict[int | str, float] = {t: float(v) for t, v in said if isinstance(t, str) and _number(v)}
        positions.append((token if isinstance(token, str) else None, top_k))
    return positions


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _responses_positions(events: Sequence[dict[str, Any]]) -> list[Position]:
    """A Responses answer's positions: its whole response's (a body sent whole, a stream's final
    event) where that holds any, else its text deltas'."""
    streamed: list[Position] = []
    whole: list[Position] = []
    for event in events:
        kind = event.get("type")
        if kind == "response.output_text.delta":
            streamed += _positions(event.get("logprobs"))
        response = event if kind is None and event.get("object") == "response" else event.get("response")
        if isinstance(response, dict) and (said := _output_positions(response)):
            whole = said
    return whole or streamed


def _output_positions(response: dict[str, Any]) -> list[Position]:
    """The positions of a response's ``output_text`` parts, in order (its messages' text)."""
    return [
        position
        for item in as_list(response.get("output"))
        if isinstance(item, dict) and item.get("type") == "message"
        for part in as_list(item.get("content"))
        if isinstance(part, dict) and part.get("type") == "output_text"
        for position in _positions(part.get("logprobs"))
    ]


def _positions(items: Any) -> list[Position]:
    """A list of chosen-token entries, each with its ``top_logprobs`` (llama.cpp's ``top_probs``
    where the request asked for ``post_sampling_probs``, an older llama.cpp's ``probs``), as positions."""
    positions: list[Position] = []
    for item in as_list(items):
        if not isinstance(item, dict):
            continue
        top = item.get("top_logprobs") or item.get("top_probs") or item.get("probs") or [item]
        top_k = dict(entry for t in as_list(top) if (entry := _logprob(t)) is not None)
        positions.append((_token(item), top_k))
    return positions


def _key(entry: dict[str, Any]) -> Any:
    """A logprob entry's token: its id where it has an integer one, else its text (as given; an
    older llama.cpp's top-k entry names it ``tok_str``, its chosen token ``content``)."""
    if isinstance(entry.get("id"), int):
        return entry.get("id")
    for name in ("token", "tok_str", "content"):
        if name in entry:
            return entry[name]
    return None


def _token(entry: dict[str, Any]) -> int | str | None:
    key = _key(entry)
    return key if isinstance(key, (int, str)) and not isinstance(key, bool) else None


def _logprob(entry: Any) -> tuple[Any, float] | None:
    """A top-k entry as (its token id, else its text or None; its logprob), or None when it has no
    numeric logprob. llama.cpp's post-sampling entries give a probability (``prob``) instead: its log."""
    if not isinstance(entry, dict):
        return None
    value = entry.get("logprob")
    if "logprob" not in entry and _number(prob := entry.get("prob")) and 0 <= prob <= 1:
        value = math.log(prob) if prob > 0 else -math.inf
    if not _number(value):
        return None
    key = _key(entry)
    return (key, float(value)) if key is None or isinstance(key, (int, str)) else None


def shared_positions(a: Sequence[Position], b: Sequence[Position]) -> int:
    """How many leading positions chose the same token on both sides: the prefix that KL is taken
    over when the first divergence is known by character only (logprob entries are tokens)."""
    n = first_divergence([t for t, _ in a], [t for t, _ in b])
    return min(len(a), len(b)) if n is None else n


#: The least log probability taken as it is (-inf is taken as this). Sums are taken in logs: vLLM
#: reports -9999.0 for -inf, and below about -745 exp() is 0, so a position whose every probability
#: was that small divided by a zero sum.
_LEAST_LOGPROB = -1e6


def _renormalised(p: dict[int | str, float], union: set[int | str]) -> dict[int | str, float]:
    """Log probabilities over ``union`` that sum to 1: ids ``p`` lacks get its smallest, halved;
    computed in logs (a log-sum-exp), so that no probability underflows to a zero sum."""
    clamped = {t: max(v, _LEAST_LOGPROB) for t, v in p.items()}
    missing = min(clamped.values()) - math.log(2)
    logs = {t: clamped.get(t, missing) for t in union}
    top = max(logs.values())
    total = top + math.log(sum(math.exp(v - top) for v in logs.values()))
    return {t: v - total for t, v in logs.items()}


def kl_shared_prefix(
    a: Sequence[dict[int | str, float]], b: Sequence[dict[int | str, float]], upto: int
) -> dict[str, Any] | None:
    """Mean KL(a || b) over positions before ``upto`` (the first divergence), on each position's top-k
    renormalised over the union of ids (ids missing on one side get that side's smallest reported
    probability, halved); and the share of those positions whose top-1 agrees."""
    n = min(upto, len(a), len(b))
    if n <= 0:
        return None
    kls, agree = [], 0
    for pa, pb in zip(a[:n], b[:n], strict=False):
        if not pa or not pb or any(math.isnan(v) for v in (*pa.values(), *pb.values())):
            continue
        union = set(pa) | set(pb)
        la, lb = _renormalised(pa, union), _renormalised(pb, union)
        kls.append(sum(math.exp(la[t]) * (la[t] - lb[t]) for t in union))
        agree += max(pa, key=pa.__getitem__) == max(pb, key=pb.__getitem__)
    if not kls:
        return None
    return {"kl_mean": sum(kls) / len(kls), "kl_max": max(kls), "top1_agreement": agree / len(kls), "positions": len(kls)}


def tool_call_diff(a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Names and arguments (canonical JSON, as ``output_text`` writes them) of the tool calls on each
    side, and whether they agree; ``equal`` also whether each is run by the same party: a call the
    API ran itself (``"server"``: Anthropic's web search, its result in the answer) is not its
    client's call of a tool of the same name, which the answer leaves for the client to make; and
    whether each is made by the same caller: a call made by code run in Anthropic's code execution
    (programmatic tool calling, its result back to that code) is not the model's own call.
    And whether each calls a tool of the same toolset (Anthropic's ``toolset_name``, Responses'
    ``namespace``): the browser's ``left_click`` is not the computer's. ``server``: the indexes of each side's server calls, where
    either side has one; ``callers``: each side's callers (``callers``, None the model's own), where
    either side has one; ``toolsets``: each side's toolsets (None: no toolset's), where either side has one."""
    na = [(c.get("name") or "", _arguments(c), bool(c.get("free"))) for c in a]
    nb = [(c.get("name") or "", _arguments(c), bool(c.get("free"))) for c in b]
    ran_a = [i for i, c in enumerate(a) if c.get("server")]
    ran_b = [i for i, c in enumerate(b) if c.get("server")]
    by_a, by_b = callers(a), callers(b)
    set_a, set_b = [c.get("toolset") for c in a], [c.get("toolset") for c in b]
    diff: dict[str, Any] = {
        "a": [n for n, _, _ in na],
        "b": [n for n, _, _ in nb],
        "names_equal": [n for n, _, _ in na] == [n for n, _, _ in nb],
        "arguments_equal": na == nb,
        "equal": na == nb and ran_a == ran_b and by_a == by_b and set_a == set_b,
    }
    if ran_a or ran_b:
        diff["server"] = [ran_a, ran_b]
    if any(by_a) or any(by_b):
        diff["callers"] = [by_a, by_b]
    if any(set_a) or any(set_b):
        diff["toolsets"] = [set_a, set_b]
    return diff
