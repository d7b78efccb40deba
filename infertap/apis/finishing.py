"""Which APIs say their finish where, apart from the readers: the ``metrics`` view's SQL (analysis)
names them, and a warm ``infertap stats`` imports no reader."""

#: The APIs whose streams end with a finish reason before their end marker (``[DONE]``,
#: ``message_stop``) or as it (``response.completed``): one that ended cleanly without it was cut (an
#: agent's cut answer read as ok before: a Messages stream closed after some text, or a Responses
#: stream with no final event; an SGLang ``/generate`` stream says it in ``meta_info`` before ``[DONE]``). Ollama's and llama.cpp's own APIs say it on their end marker, and
#: older Ollama not at all: not these. Bedrock's ``/converse-stream`` says its ``stopReason`` in ``messageStop``
#: before its ``metadata``.
FINISHING_APIS = ("chat", "completions", "messages", "responses", "sglang-generate", "bedrock-converse-stream")
#: The APIs whose end marker is their finish (replay reads it from the tail, as the others'): Ollama's last line (``"done": true``, with its
#: ``done_reason`` where it says one: older Ollama does not) and llama.cpp ``/completion``'s last
#: event (``"stop": true``, with its ``stop_type``). A stream of theirs that ended cleanly without it
#: was cut (a server or gateway that dropped the request): read as ok before. TGI's ``/generate_stream``
#: ends on the event that holds the whole text and its ``details`` (the finish reason), no marker after.
MARKER_APIS = ("ollama-chat", "ollama-generate", "llamacpp", "tgi-generate-stream")
