"""The derived views, in SQL: each metric of docs/metrics.md is computed here and only here.

All times are ns since the exchange's request was sent upstream (the capture's own clock for
``chunk_ns``, ``headers_ns`` and ``end_ns``), so ``ttft_ns`` is a chunk's receive time as recorded.
"""

from __future__ import annotations

from infertap.apis import FINISHING_APIS, MARKER_APIS, TOKEN_IDS_SOURCE

# itl: the gaps between successive token-bearing chunks of an exchange; `events` is what the later
# chunk carried. The token chunks (chunks that carried generated output: text, reasoning text or a
# tool-call delta, with how many such events each held; a chunk may carry several tokens, which is why
# itl is per chunk) and their gaps are a decoded table (analysis/token_chunks.py): a scan here.
ITL = """
CREATE OR REPLACE VIEW itl AS
SELECT capture, exchange_id, chunk, t_ns, events, gap_ns FROM token_chunks WHERE gap_ns IS NOT NULL
"""

# Each exchange's enrichment (`infertap enrich` may have run more than once), field by field: its
# output count from the newest enrichment that counted the output, its prompt count from the newest
# that counted the prompt, its settings from the newest whose engine was known. A later one that could
# not count (its probe failed, "engine unknown (probe failed)", or its tokenize call did) must not
# erase an earlier one's count, turning an answer's tokenizer count back into token events: it says
# nothing new about the answer. `output_run_id` and `prompt_run_id` name the run that counted each.
# Whether the capture's rebuilt prompts can stand for the engine's: not where any disagreed with the
# engine's own count (usage), as when the engine renders otherwise than its probed template says.
# compare chooses by the same orders (compare.py's ``Run``): its figures are of the same enrichments;
# replay's --pin-defaults reads settings by SETTINGS_FROM's order too (infertap.capture.records.settings_rank).
#: Of an exchange's enrichments (rows with ``kind``, ``wall``, ``output_tokens``, ``prompt_tokens``
#: and ``ord`` as the ``enrichments`` table has them), the first in each order is the one each field is taken from.
#: Between two of one wall the later record (``ord``, its place in the capture) is taken.
SETTINGS_FROM = "kind IS NULL, wall DESC NULLS LAST, ord DESC"
OUTPUT_FROM = "output_tokens IS NULL, wall DESC NULLS LAST, ord DESC"
PROMPT_FROM = "prompt_tokens IS NULL, wall DESC NULLS LAST, ord DESC"

ENRICHMENT_LATEST = f"""
CREATE OR REPLACE VIEW enrichment_latest AS
WITH ranked AS (
    SELECT *,
        row_number() OVER (PARTITION BY capture, exchange_id ORDER BY {SETTINGS_FROM}) AS rn,
        row_number() OVER (PARTITION BY capture, exchange_id ORDER BY {OUTPUT_FROM}) AS out_rn,
        row_number() OVER (PARTITION BY capture, exchange_id ORDER BY {PROMPT_FROM}) AS prompt_rn
    FROM enrichments
    WHERE attached  -- one naming an id several exchanges carry and no occurrence is attached to none (decode.enrichment_attached)
), joined AS (
    SELECT l.* EXCLUDE (rn, out_rn, prompt_rn, prompt_tokens, prompt_ids, prompt_source, prompt_rendered,
                        agrees_with_usage, output_tokens, output_ids, output_source),
        p.prompt_tokens, p.prompt_ids, p.prompt_source, p.prompt_rendered, p.agrees_with_usage,
        CASE WHEN p.prompt_tokens IS NOT NULL THEN p.run_id END AS prompt_run_id,
        o.output_tokens, o.output_ids, o.output_source,
        CASE WHEN o.output_tokens IS NOT NULL THEN o.run_id END AS output_run_id
    FROM ranked l
    JOIN ranked o ON o.capture = l.capture AND o.exchange_id IS NOT DISTINCT FROM l.exchange_id AND o.out_rn = 1
    JOIN ranked p ON p.capture = l.capture AND p.exchange_id IS NOT DISTINCT FROM l.exchange_id AND p.prompt_rn = 1
    WHERE l.rn = 1
)
SELECT *, NOT coalesce(bool_or(agrees_with_usage = false) OVER (PARTITION BY capture), false) AS prompt_trusted
FROM joined
"""

# An OpenAI stream ends its answer with a finish reason, then [DONE] (Messages with its stop reason,
# then message_stop; Responses with response.completed): a stream that ended cleanly with
# none is an answer the engine cut (so is an Ollama or llama.cpp /completion stream that ended cleanly
# with no end marker: theirs is their finish), however cleanly the body ended: by [DONE] alone (llama-cpp-python's
# interrupt_requests sends it when the next request waits, after as little as the role chunk), or by
# the body's end after some chunks (a server or gateway that drops the request). Not ok. The rule is
# infertap.apis.cut_short's, which `infertap replay` counts by, over the decoded columns of its
# arguments' names: a change to one is a change to both (tests/analysis/test_unfinished_streams.py).
UNFINISHED = f"""coalesce(x.generation AND x.streamed AND x.status BETWEEN 200 AND 299 AND (
             (x.api IN ({", ".join(f"'{a}'" for a in FINISHING_APIS)})
              AND (x.finish_reason IS NULL OR (x.choices_unfinished > 0 AND x.error_message IS NULL))
              AND (x.stream_done OR (x."end" = 'complete' AND x.readable)))
             OR (x.api IN ({", ".join(f"'{a}'" for a in MARKER_APIS)})
              AND NOT x.stream_done AND x."end" = 'complete' AND x.readable
              AND x.error_message IS NULL)), false)"""

# An enrichment's output count stands for the answer's output: one of its token ids, or of its text
# where the text is all it generated (exchanges.answer_text_only).
ENRICHED_COUNT = f"(e.output_tokens IS NOT NULL AND (x.answer_text_only OR e.output_source = '{TOKEN_IDS_SOURCE}'))"

METRICS = """
CREATE OR REPLACE VIEW metrics AS
WITH base AS (
    SELECT
        x.capture, x.capture_id, x.run_id, x.recorder, x.recorder_id, x.exchange_id, x.seq,
        coalesce(t.session, x.session) AS session, coalesce(t.session_capture, x.capture) AS session_capture,
        t.turn, t.parent_id, t.link, t.think_ns, x.model, x.method, x.path,
        x.status, x."end", x.generation, x.stream, x.api, x.streamed, x.readable, x.parse_error, x.finish_reason, x.finish_reason_raw,
        x.choices_finish_reasons, x.tool_calls,
        -- A client may hang up right after the stream's end marker, before the engine ends the body
        -- (the openai SDK closes on [DONE]); the recorder then says client_disconnected, yet every
        -- byte of the answer arrived.
        -- An answer to a request for tokens is one only where its body was read as one: a 200 whose
        -- body reports an error (in-band, as an overloaded server may), or that no adapter reads, is not.
        (x.status BETWEEN 200 AND 299 AND (x."end" = 'complete' OR (x."end" = 'client_disconnected' AND x.stream_done))
         AND (NOT x.generation OR (x.readable AND x.error_message IS NULL)) AND NOT {UNFINISHED}) AS ok,
        {UNFINISHED} AS unfinished,
        x.sent_wall_ns, x.sent_wall_ns + x.end_ns AS end_wall_ns, x.end_ns AS duration_ns,
        x.first_token_ns AS ttft_ns,
        x.first_content_ns AS ttft_content_ns,
        x.first_chunk_ns AS t_first_byte_ns,
        CASE WHEN x."end" = 'complete' THEN x.end_ns ELSE x.last_chunk_ns END AS e2e_ns,
        x.first_token_ns AS t_first_token_ns, x.last_token_ns AS t_last_token_ns, x.finish_ns AS t_finish_ns,
        -- The answer's own count (infertap.apis.answer_tokens, decoded: its usage, else a streamed
        -- answer's token events, the rule replay's summary counts by), an enrichment's between the two.
        -- An enrichment's count of the text alone (an older infertap's, of any answer) stands for
        -- the output only where the text is all it generated: of an answer that reasoned or called a
        -- tool it leaves those tokens out, and its token events count them.
        CASE WHEN x.answer_tokens_source = 'usage' THEN x.answer_tokens
             WHEN {COUNTED} THEN e.output_tokens
             ELSE x.answer_tokens END AS output_tokens,
        CASE WHEN x.answer_tokens_source = 'usage' THEN 'usage'
             WHEN {COUNTED} THEN 'tokenize'
             ELSE x.answer_tokens_source END AS output_tokens_source,
        CASE WHEN x.usage_completion_tokens IS NULL AND {COUNTED}
             THEN e.output_source END AS output_tokens_detail,  -- how the enrichment counted them
        CASE WHEN x.usage_completion_tokens IS NULL AND {COUNTED}
             THEN e.output_run_id END AS output_tokens_run_id,  -- and which enrichment (its run) did
        CASE WHEN x.usage_completion_tokens IS NOT NULL THEN coalesce(x.usage_hidden_reasoning_tokens, 0) ELSE 0 END
            AS hidden_reasoning_tokens,
        coalesce(x.choices, 1) AS choices,
        coalesce(x.token_chunk_count, 0) AS token_chunks,
        coalesce(x.token_event_count, 0) AS token_events,
        coalesce(x.usage_prompt_tokens, CASE WHEN e.prompt_trusted THEN e.prompt_tokens END) AS prompt_tokens,
        CASE WHEN x.usage_prompt_tokens IS NOT NULL THEN 'usage'
             WHEN e.prompt_tokens IS NOT NULL AND e.prompt_trusted THEN 'tokenize' END AS prompt_tokens_source,
        coalesce(x.usage_cached_tokens, x.server_cached_tokens) AS cached_tokens,
        CASE WHEN x.usage_cached_tokens IS NOT NULL THEN 'usage'
             WHEN x.server_cached_tokens IS NOT NULL THEN 'server' END AS cached_tokens_source,
        x.server_prompt_ms, x.server_decode_ms, x.server_prompt_tokens, x.server_decode_tokens, x.server_cached_tokens,
        x.server_load_ns, x.server_total_ns, x.server_timings_source,
        p.unit AS prefix_unit, p.length AS prefix_length, p.shared AS prefix_shared,
        x.source_id, x.repeat, x.scheduled_ns, x.lag_ns, x.queue_ns, x.dep_wait_ns, x.client_wait_ns
    FROM exchanges x
    LEFT JOIN enrichment_latest e ON e.capture = x.capture AND e.exchange_id = x.exchange_id
    LEFT JOIN prefixes p ON p.capture = x.capture AND p.exchange_id = x.exchange_id
    LEFT JOIN turns t ON t.capture = x.capture AND t.exchange_id = x.exchange_id
)
SELECT *,
    -- Token spacing is only observed when the tokens arrived in two chunks or more. An engine's own
    -- count includes a final token that carries no text (llama-server counts the end-of-sequence
    -- token): its arrival is the finish event, a decode step after the last text, so the span ends there.
    -- Hidden reasoning tokens came before the answer's first token, and are left out of the count: the
    -- span then starts at the first visible content (a reasoning summary streamed before it is no part
    -- of the tokens counted). The tokens of several choices (n > 1) are counted together while the
    -- times are choice 0's: no spacing per sequence to tell.
    CASE WHEN output_tokens - hidden_reasoning_tokens > 1 AND token_chunks > 1 AND choices = 1
         THEN (CASE WHEN output_tokens_source = 'usage' AND t_finish_ns > t_last_token_ns THEN t_finish_ns
                    ELSE t_last_token_ns END
               - CASE WHEN hidden_reasoning_tokens > 0 THEN coalesce(ttft_content_ns, t_first_token_ns) ELSE t_first_token_ns END)
              / (output_tokens - hidden_reasoning_tokens - 1) END AS tpot_ns
FROM base
""".replace("{UNFINISHED}", UNFINISHED).replace("{COUNTED}", ENRICHED_COUNT)

DERIVED = (ITL, ENRICHMENT_LATEST, METRICS)
