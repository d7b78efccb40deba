"""The default path filter of `infertap mitm` and `infertap import` keeps every route infertap's
analysis reads (infertap/apis/read.py) and leaves other traffic out. It dropped llama.cpp's
/infill and /embedding, SGLang's and TGI's /generate, Azure's /openai/responses and deployments' /embeddings, and Anthropic's
Messages on Vertex AI (:streamRawPredict) and Bedrock (/model/.../invoke), Bedrock's Converse."""

from __future__ import annotations

import pytest

from infertap.apis import read
from infertap.mitm.addon import DEFAULT_PATHS, InfertapCapture

RECORDED = [
    "/v1/chat/completions",
    "/chat/completions",
    "/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21",
    "/v1/completions",
    "/completion",
    "/infill",
    "/v1/responses",
    "/v1/responses/resp_123/input_items",
    "/v1/responses/compact",
    "/openai/responses?api-version=2025-04-01-preview",
    "/openai/v1/responses",
    "/v1/messages",
    "/v1/messages/count_tokens",
    "/api/chat",
    "/api/generate",
    "/generate",
    "/generate_stream",
    "/api/embed",
    "/tokenize",
    "/detokenize",
    "/apply-template",
    "/props",
    "/v1/embeddings",
    "/embeddings",
    "/embedding",
    "/openai/deployments/text-embedding-3/embeddings?api-version=2024-10-21",
    "/rerank",
    "/v1/rerank",
    "/v1/models",
    "/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-sonnet-4@20250514:streamRawPredict",
    "/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-sonnet-4@20250514:rawPredict",
    "/model/anthropic.claude-3-5-sonnet-20241022-v2:0/invoke",
    "/model/anthropic.claude-3-5-sonnet-20241022-v2%3A0/invoke-with-response-stream",
    "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse",
    "/model/amazon.nova-lite-v1:0/converse-stream",
]
SKIPPED = [
    "/",
    "/not-an-llm-path",
    "/logo.png",
    "/messages",
    "/api/messages",
    "/inbox/messages/42",
    "/responses",
    "/survey/responses",
    "/v2/messages",
    "/metrics",
    "/health",
    "/v1/files",
    "/api/v1/users",
    "/model/x/predict",
    "/static/completions.js",
]


@pytest.mark.parametrize("path", RECORDED)
def test_an_llm_api_path_is_recorded(path: str) -> None:
    assert DEFAULT_PATHS.match(path)


@pytest.mark.parametrize("path", SKIPPED)
def test_other_paths_are_not(path: str) -> None:
    assert not DEFAULT_PATHS.match(path)


def test_every_route_analysis_reads_is_among_those_recorded() -> None:
    """A route added to read.py without a recorded path here (and so, in the filter) fails."""
    routes = [suffix for suffix, _ in read._BY_PATH] + list(read._NOT_GENERATION) + [read._GENERATE]
    bare = [p.split("?", 1)[0] for p in RECORDED]
    assert [r for r in routes if not any(p.endswith(r) for p in bare)] == []
    # Messages on Vertex AI and Bedrock are told by body: their routes are recorded above


def test_the_addon_matches_a_flow_by_its_path_with_its_query() -> None:
    from mitmproxy.test import tflow

    addon = InfertapCapture()
    flow = tflow.tflow()
    for path, expected in (("/openai/responses?api-version=2025-04-01-preview", True), ("/survey/responses?x=1", False)):
        flow.request.path = path
        assert addon.matches(flow) is expected
