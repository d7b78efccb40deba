"""The decode's version, alone in its module: the cache keys every entry on it, and a warm
``infertap stats`` reads it without importing the decoder (every API's reader, msgspec, the
prefix index), which only a decode runs. ``decode.py`` exports it as before."""

#: Bumped whenever decoding changes what a table holds, so that older caches are rebuilt. 4: the
#: telemetry table; 5: sessions and turns; 6: engines.dtype; 7: requests.digest, token times;
#: 8: repeated exchange ids named apart; 9: values of another type read as none (a tool call's index
#: that is not an integer is its place in the list); 10: an imported exchange's token times unknown;
#: 11: llama.cpp's "stop": true ends its stream (stream_done); 12: a refusal's events are token events,
#: Responses' custom tool calls and the functions API's function_call are tool calls, vLLM's
#: {"object": "error"} an error, Ollama's calls without an index calls of their own; 13: the Responses
#: API's built-in tool calls (local shell, web search, ...), Anthropic's server and MCP tool calls and
#: chat's custom tool calls are tool calls, and link turns; chat content as parts (Mistral's) read,
#: an audio answer's transcript is its events' text; exchanges.usage_hidden_reasoning_tokens, choices;
#: a Responses stream that sent no delta read from its final event; llama.cpp's answers to several
#: prompts apart; 14: an MCP tool named with its server; 15: a turn continues only what had ended
#: when it was sent, a session is a whole tree of turns, think time from the last end in the session;
#: 16: captures.closed_cleanly only when every run closed; 17: a Responses reasoning summary leaves the
#: reasoning tokens hidden; 18: a stream read up to its first [DONE], a choice whose index is no
#: integer as choice 0, both reasoning fields where they differ, a Responses call only its final event
#: restates, tool-call arguments canonical only where nothing is lost (turns link by them); 19: a
#: request's digest leaves out query parameters the capture redacted; 20: arguments sent as an
#: object keep digits past a double; 21: exchanges.client_wait_ns; 22: an error beside a chat choice
#: (a gateway's mid-stream error) is the answer's, a Responses message sent whole beside streamed
#: calls is read, an Anthropic request to Vertex AI or Bedrock is read as Messages; 23: of identical
#: conversations (two agents that began alike), a turn continues the first to end that none continues yet;
#: 24: a turn of a header session continues the session's request its conversation extends, not the latest end;
#: 25: a request holding one value msgspec refuses (a lone surrogate, 1e400) reads its other numbers
#: rounded as any other request's (its turns link); 26: a setting sent under two names (max_tokens and
#: max_completion_tokens) read by a fixed precedence, not the body's key order; 27: an image or
#: document block's cache_control is no part of its turn (a moved cache breakpoint still links);
#: 28: an integer beyond int64 (a seed of 2**64-1, a usage count of 10**20) read as unknown instead of
#: failing the decode; 29: a NaN or infinite number (server timings, a sampling setting, a telemetry
#: sample) unknown; 30: runs.pid and captures.open_runs (stats says a capture is still being written);
#: 31: a completion's prompt that is no string (token ids) read as its JSON, not as its texts alone;
#: 32: the images an Ollama message or prompt sends are part of its turn (conversations differing in an image link apart);
#: 33: an imported answer whose body is not in the file (body_not_in_file) unread with that reason;
#: 34: a zstd or br response read decoded, as gzip and deflate are (it was read as its compressed bytes);
#: 35: an answer read from the chunks its client was handed (delivered_chunks), exchanges.undelivered_chunks;
#: 36: a response decoded past apis.body.DECODED_LIMIT (a decompression bomb) unread, its answer unknown (TOO_LARGE);
#: 37: runs.telemetry_urls (the exporters a run scraped, where its energy and engine figures came from);
#: 38: a completion's prompt sent as a list of one (["ab"]) is that prompt's turn, as "ab" is (a batch of one);
#: 39: exchanges.request_body_unknown (sent with a body not kept: stats counts it unknown, not as no generation);
#: 40: a body infertap mitm marks request_body_not_kept (mitmproxy streamed it unseen) is request_body_unknown too;
#: 41: exchanges.request_body_unsearched, response_body_unsearched (stats warns of bodies not searched for credentials);
#: 42: a response the recorder kept only the head of (response_body_size) unread, its answer unknown (NOT_KEPT),
#: its response_bytes, n_chunks and last_chunk_ns the real ones;
#: 43: the links table (each generation request's link digests: captures read together are linked as one);
#: 44: a generation request infertap refused (never sent) is a leaf of its session: no turn continues
#: it and its end starts no think time (the links table's refused), as replay links them;
#: 45: a Responses stream whose response.completed holds output items is read from them (the answer the client ends with);
#: 46: an Ollama /api/generate answer's tool calls (top-level tool_calls on its done line) are read;
#: 47: a cut Responses answer's id read from its kept head (apis.kept_response_id): the turn naming it links to it;
#: 48: runs.telemetry (whether a run sampled telemetry: --no-telemetry is said apart from no power telemetry);
#: 49: a cut answer's exchanges.response_id read from its kept head, of every API (a chat chunk's id, message_start);
#: 50: a cut answer's usage and finish reason read from its kept tail (response_tail, apis.tail_usage): its output tokens counted;
#: 51: an imported answer the file holds only the head of (body_not_in_file with its head kept) unread, never that head;
#: 52: an imported WebSocket (websocket_messages, its messages not imported) unread as not in the file, never an empty answer;
#: 53: a cut Messages answer's prompt usage read from the message_start its kept head begins with (the tail has its output's);
#: 54: a cut Responses answer's usage read back from the end of a response.completed longer than its kept tail;
#: 55: runs.telemetry_intervals_s (each source's sampling interval asked for: energy's gaps and reach are judged by it);
#: 56: an Ollama answer that calls a tool finishes as tool_calls (finish_reason; its done_reason "stop" is finish_reason_raw);
#: 57: a cut Responses answer's finish reason read back from the end of its response.completed (status, incomplete reason,
#: calls), and its usage with a data: [DONE] after that event;
#: 58: a cut Ollama /api/chat answer's "stop" unknown where it was offered tools and its tail holds no call (one may have come before);
#: 59: a chat answer that calls a tool and says "stop" finishes as tool_calls (its cut answer's "stop" unknown as Ollama's);
#: 60: an exchange recorded with no session takes the one its kept request headers name (a client's own, read since);
#: a request of a header session never continues another header session's turn by its conversation.
#: 61: exchanges.choices_unfinished (an n > 1 stream whose other choice said no finish reason is unfinished);
#: 62: a Responses answer finishes as tool_calls only where its output holds a call its client makes (a web search then a
#: message is stop), read whole, streamed or from a cut answer's tail.
#: 63: runs.importer (an import's machine and time, apart from its header's host: not its traffic's machine).
#: 64: a chat or completions answer whose choice other than 0 (n > 1) reports an error (its error object, or
#: finish_reason "error"), or whose choice 0 says finish_reason "error" with no error object, has that
#: error as exchanges.error_message (not ok: a failure, not unfinished).
#: 65: an n > 1 answer kept in part has each choice's end read from its kept head and tail (apis.kept_choices):
#: exchanges.choices and choices_unfinished as a whole read's where they tell, choices_unfinished null where
#: not; its finish_reason from the head where choice 0 ended there.
#: 66: a Responses answer whose status is failed or cancelled with no error object has error_message
#: "response failed" ("response cancelled"): it read as ok.
#: 67: an Anthropic answer's prompt, cached and output tokens are its usage.iterations' sums (a compaction's
#: tokens counted: the top level leaves them out).
#: 68: a Responses ``program`` item (programmatic tool calling) is a call of the API's (``tool_calls`` counts it).
#: 69: a Responses shell, apply patch or tool search call's arguments leave out its ``created_by`` (an id).
#: 70: a Responses audio answer's transcript (``response.audio.transcript.delta``) is read (token events);
#: an MCP server's tool list (``mcp_list_tools``' ``tools``) is what its tool gave back.
#: 71: a Responses code interpreter's code and shell's commands streamed as deltas are read (token
#: events), and a call cut before its item's end is that item as it stood.
#: 72: a request body cut short (request_body_cut: a request never run, or refused in its chunked body) is
#: request_body_unknown: its part is not the request (stats counts it refused where it ended so).
#: 73: exchanges.answer_tokens and answer_tokens_source: an answer's own output count (infertap.apis.answer_tokens),
#: which the metrics view reads and replay's summary counts by.
#: 74: a request body recorded before request_body_cut whose exchange ended by the client's hang-up or the
#: recorder's shutdown while it arrived (its error says so) is cut short too: request_body_unknown.
#: 75: exchanges.choices_finish_reasons: each choice after the first's finish reason (stats counts every choice's).
#: 76: image, video and speech generation routes (apis.media.MEDIA_ROUTES) are no generation requests (api unknown).
#: 77: requests.digest holds the headers that change what a request asks (identity.ASKED_HEADERS) where sent;
#: requests.asked_headers names them.
#: 78: requests.digest of image, video and speech generation requests too (the traffic's media identity).
#: 79: exchanges.server_load_ns and server_total_ns (Ollama's load_duration and total_duration); an Ollama
#: duration that is no integer ns or is negative unknown (it was read as a negative or fractional time).
#: 80: enrichments.ord (the record's place: between two of one wall the later is taken) and
#: enrichments.attached (false: it names an id several exchanges carry, attached to none).
#: 81: requests.digest of a media route's request only where it is a POST (GET /v1/videos lists, it generates nothing).
#: 82: requests.digest of a multipart body with its boundary written as one (identity.asked_body).
#: 83: exchanges.error_message of llama.cpp's stream errors: an older build's ``error:`` SSE field and its
#: Anthropic route's bare ``{"code", "message", "type"}`` error event (both were read as no error).
#: 84: enrichments.exchange_id of an enrichment naming a repeated id with an ``occurrence`` (infertap
#: enrich's): the exchange it names (``<id>~k``), attached; without one, attached to none as before.
#: 85: llama.cpp's /infill sent with no ``prompt`` (``input_prefix`` and ``input_suffix`` alone) is a generation
#: request: requests.digest, exchanges.generation (it was in no figure and no workload identity).
#: 86: a request body sent with a content-encoding (the Codex CLI's zstd) is read decoded: exchanges.generation,
#: requests.digest and the request's fields (it was no JSON, so no generation request).
#: 87: SGLang's and TGI's native ``/generate`` (and TGI's ``/generate_stream``) are read: exchanges.generation,
#: api, the answer's text, events, token times and counts (they were in no figure and no workload identity).
#: 88: OpenAI's ``/v1/responses/compact`` (the Codex CLI's compaction) is a generation request read as a
#: Responses answer (its usage, its compaction item); the user messages it restates are not its text.
#: 89: requests.digest holds Bedrock's guardrail and trace headers (identity.ASKED_HEADERS) where sent.
#: 90: requests.digest of an embeddings request (a POST to apis.media.EMBEDDINGS_ROUTES) too: the traffic's embeddings identity.
#: 91: an SGLang ``/generate`` stream whose last text is shorter than the one before it (a stop string
#: trimmed) answers that text (it was the text before with it added again).
#: 92: an enrichment whose ``occurrence`` is past its repeated id's exchanges is attached to none
#: (enrichments.attached false, its exchange_id the id), not to an ``<id>~k`` no exchange carries.
#: 93: requests.newer: a generation request an older infertap left out of the workload identity (a body sent
#: compressed, a prompt-less /infill, /generate, /v1/responses/compact): the identity is tagged wl3.
#: 94: requests.sampling reads SGLang's ``sampling_seed`` and ``min_new_tokens`` as ``seed`` and ``min_tokens``.
#: 95: Bedrock's Converse (``/model/{id}/converse``) is read as itself (api bedrock-converse), not as chat:
#: its settings, tools, answer and usage; ``/converse-stream`` is a generation request whose answer is unread.
#: 96: SGLang's answer to a batch of prompts (a JSON array) is read, each prompt's answer a choice.
#: 97: an SGLang batch's stream is read per prompt (its events' ``index``), its token counts every
#: prompt's summed; a batch's list of ``sampling_params`` reads as the settings its prompts share.
#: 98: exchanges.answer_text_only: an enrichment's count of an answer's text is its output count only where
#: the text is all it generated (not of one that reasoned or called a tool: its token events count it).
#: 99: a chat tool-call piece that names nothing and adds no argument text carries no token (events.tool_calls,
#: token times, ttft, itl, token events), as an empty content "" carries none.
#: 100: Bedrock's ``/converse-stream`` is read (its AWS event-stream frames: text, tool use, reasoning,
#: stop reason, usage, each event at its chunk), a cut or damaged frame said so; a Converse request's
#: model is its path's, ``additionalModelRequestFields`` among its settings, its ``metrics.latencyMs``
#: as server_total_ns.
#: 101: an enrichment whose ``occurrence`` is past the first of an id one exchange carries is attached to
#: none (enrichments.attached false), and counted in the meta (``unattached_enrichments``) and said.
#: 102: the meta counts request bodies of plain JSON under a content-encoding they aren't in
#: (``mislabelled_requests``, apis.body.mislabelled), which stats and sql say.
#: 103: a Bedrock Converse answer's prompt_tokens hold its cache's reads and writes (``inputTokens`` leave them
#: out), as an Anthropic answer's do; before, a cached prompt counted only its uncached tokens.
#: 104: a Bedrock Converse answer's ``citationsContent`` text is its text (it was left out) and its sources
#: its citations; a ``/converse-stream`` ``citation`` delta a source cited, a block of another type (an image)
#: kept whole; both its blocks' layout, redacted reasoning counted as encrypted in a whole answer.
#: 105: a request Bedrock's Converse refused (a JSON ``{"message"}``) is read as that error, not unreadable.
#: 106: a compressed request body's ``requests.body`` is its decoded JSON (it held the compressed bytes,
#: read as UTF-8 with replacement characters: ``body->>'$.field'`` read nothing), and the byte prefixes
#: (``prefixes`` unit bytes, prefix reuse) are measured over the decoded bytes, not the compression's.
#: 107: requests.asked_headers of a media or embeddings request too (as in its digest): compare names them.
#: 108: a Bedrock Converse request to Amazon Nova reads its ``topK`` (in ``additionalModelRequestFields.inferenceConfig``)
#: as requests.top_k (it was left out).
#: 109: a cut (response_not_kept) Bedrock ``/converse-stream`` answer's usage and stop reason are read from the
#: whole frames of its kept tail (they were never read: its output tokens uncounted).
#: 110: requests.body_cut marks a compressed request body recorded cut short inside its encoding (a gzip
#: trailer missing), counted in the meta (``cut_requests``) and said by stats and sql; before, silently read.
#: 111: a /generate body holding both TGI's inputs and SGLang's text/input_ids reads as the server its answer
#: names (its prompt and settings that server's), else api generate-ambiguous; before, TGI's by guess.
#: 112: the token_chunks table (each exchange's token-bearing chunks and the gap since the one before,
#: from its events at decode time), which the itl view reads instead of a window over every event.
#: 113: a cut /generate answer to a body of both TGI's and SGLang's shapes reads its kept tail's usage and finish
#: reason as the server its answer's shape names (they were never read: its output tokens uncounted).
#: 114: an SGLang batch answer (a JSON array) to a /generate body of both TGI's and SGLang's shapes reads as
#: SGLang's, per prompt; before, unreadable ("the body is not JSON"), its request api generate-ambiguous.
#: 115: a Bedrock Converse path whose ARN came with its '/' unencoded (``/model/arn:...:inference-profile/x/converse``)
#: reads the whole ARN as the exchange's model (it read none).
#: 116: a cut SGLang /generate batch stream's kept tail gives its usage only where it holds every prompt's counts
#: (a prompt that ended before the tail was left out of the batch's sum, silently); a cut batch answered as a
#: JSON array whose head and tail are the whole body reads its usage and finish reason per prompt (it read none).
DECODE_VERSION = 116
