"""Embedders and keyword scoring.

The default embedder mirrors MemClaw's offline `fake` provider: the normalised sum of
per-word vectors derived from sha256 of the word, so word overlap gives high cosine and
identical text gives 1.0. No download, no network, deterministic across runs and machines.
A real sentence-embedding model plugs in by implementing `Embedder`.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from typing import Protocol

import numpy as np

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

    def embed(self, text: str) -> np.ndarray: ...


class HashingEmbedder:
    """Normalised sum of per-word sha256-seeded Gaussian vectors (float32)."""

    name = "hashing-sha256"

    def __init__(self, dim: int = 384) -> None:
        self.dim = dim
        self._word_vector = lru_cache(maxsize=50_000)(self._make_word_vector)

    def _make_word_vector(self, word: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(word.encode("utf-8")).digest()[:8], "little")
        return np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)

    def embed(self, text: str) -> np.ndarray:
        words = tokens(text)
        total = np.zeros(self.dim, dtype=np.float32)
        for word in words:
            total += self._word_vector(word)
        norm = float(np.linalg.norm(total))
        return total / norm if norm > 0 else total


def keyword_score(query: str, content: str) -> float:
    """Share of the query's distinct non-stopword tokens found in the content (0..1)."""
    wanted = {t for t in tokens(query) if t not in STOPWORDS} or set(tokens(query))
    if not wanted:
        return 0.0
    present = set(tokens(content))
    return len(wanted & present) / len(wanted)
