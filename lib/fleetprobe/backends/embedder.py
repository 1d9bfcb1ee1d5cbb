"""The kit's deterministic embedder (reference_server/pipeline/embedding.py) in the shapes the
backends take, plus the error a refused LLM call raises: the adapters run with no LLM at all.

CrewAI takes a plain callable (`embed_texts`). LangGraph's store index and mem0's `langchain`
embedder provider take a LangChain `Embeddings` (`langchain_shims.KitEmbeddings`), kept in a
module of its own so the CrewAI adapter does not import LangChain (about 1.4 s of start-up).
"""

from __future__ import annotations

from reference_server.pipeline.embedding import HashingEmbedder

DIM = 384
_EMBEDDER = HashingEmbedder(DIM)


def embed_texts(texts: list[str]) -> list[list[float]]:
    return [_EMBEDDER.embed(t).tolist() for t in texts]


class LLMCalled(RuntimeError):
    """A backend tried to call a language model; the adapters are configured so none does."""
