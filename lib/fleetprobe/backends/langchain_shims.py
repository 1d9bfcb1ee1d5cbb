"""LangChain shapes of the kit's embedder and of a chat model that refuses every call, for
the LangGraph store's index and mem0's `langchain` embedder and LLM providers."""

from __future__ import annotations

from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models.chat_models import BaseChatModel

from .embedder import LLMCalled, embed_texts


class KitEmbeddings(Embeddings):
    """sha256-hashed word vectors, 384 dimensions, no download, no network."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return embed_texts(list(texts))

    def embed_query(self, text: str) -> list[float]:
        return embed_texts([text])[0]


class NoLLM(BaseChatModel):
    """A chat model for backends that insist on one at construction: any call raises."""

    @property
    def _llm_type(self) -> str:
        return "fleetprobe-no-llm"

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> Any:
        raise LLMCalled("fleetprobe backend adapters run with no LLM; this call is a bug in "
                        "the adapter's configuration (infer/consolidation must be off)")
