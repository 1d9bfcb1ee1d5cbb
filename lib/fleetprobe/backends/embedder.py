"""The kit's deterministic embedder (reference_server/embedding.py) in the shapes the backends
take, plus a chat model that refuses every call: the adapters run with no LLM at all.

`KitEmbeddings` is a LangChain `Embeddings`: LangGraph's store index and mem0's `langchain`
embedder provider take one as documented. CrewAI takes a plain callable (`embed_texts`).
"""

from __future__ import annotations

from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models.chat_models import BaseChatModel

from reference_server.embedding import HashingEmbedder

DIM = 384
_EMBEDDER = HashingEmbedder(DIM)


def embed_texts(texts: list[str]) -> list[list[float]]:
    return [_EMBEDDER.embed(t).tolist() for t in texts]


class KitEmbeddings(Embeddings):
    """sha256-hashed word vectors, 384 dimensions, no download, no network."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return embed_texts(list(texts))

    def embed_query(self, text: str) -> list[float]:
        return embed_texts([text])[0]


class LLMCalled(RuntimeError):
    """A backend tried to call a language model; the adapters are configured so none does."""


class NoLLM(BaseChatModel):
    """A chat model for backends that insist on one at construction: any call raises."""

    @property
    def _llm_type(self) -> str:
        return "fleetprobe-no-llm"

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> Any:
        raise LLMCalled("fleetprobe backend adapters run with no LLM; this call is a bug in "
                        "the adapter's configuration (infer/consolidation must be off)")
