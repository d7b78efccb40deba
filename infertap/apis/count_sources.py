"""How an enrichment counted an answer's output, apart from the readers: the enrichment writes it and
the ``metrics`` view's SQL (analysis) asks it, and a warm ``infertap stats`` imports no reader."""

#: An enrichment's output count from the answer's own token ids: every token it generated, its
#: reasoning's and calls' too, so it stands for the output whatever the answer holds (a count of its
#: text only where the text is all it generated, ``text_is_output``).
TOKEN_IDS_SOURCE = "engine (token ids in the response)"
