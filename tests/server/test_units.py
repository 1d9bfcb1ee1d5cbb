"""Small pure pieces: the embedder, rate parsing, the profiles' step lists."""

from __future__ import annotations

import hashlib
import random

import numpy as np
import pytest

from reference_server.governance.profiles import PROFILES, get_profile
from reference_server.governance.ratelimit import parse_rate
from reference_server.pipeline import search as search_pipeline
from reference_server.pipeline import write as write_pipeline
from reference_server.pipeline.embedding import HashingEmbedder, keyword_score, tokens


def test_embedder_is_deterministic_and_overlap_ranks_higher() -> None:
    a, b = HashingEmbedder(), HashingEmbedder()
    text = "The ledger service runs in Frankfurt"
    assert np.array_equal(a.embed(text), b.embed(text))
    assert float(a.embed(text) @ a.embed(text.upper())) == pytest.approx(1.0, abs=1e-5)
    close = float(a.embed(text) @ a.embed("The ledger service runs in Dublin"))
    far = float(a.embed(text) @ a.embed("Quarterly budget review for marketing"))
    assert close > 0.7 > 0.3 > far
    assert not a.embed("").any()  # no words: the zero vector, never NaN


def word_vector(word: str, dim: int = 384) -> np.ndarray:
    """The definition: a generator seeded with sha256(word)'s first 8 bytes, little-endian."""
    seed = int.from_bytes(hashlib.sha256(word.encode("utf-8")).digest()[:8], "little")
    return np.random.default_rng(seed).standard_normal(dim).astype(np.float32)


def running_sum_embedding(text: str) -> np.ndarray:
    """The definition: the word vectors added one after another (float32), normalised."""
    total = np.zeros(384, dtype=np.float32)
    for word in tokens(text):
        total += word_vector(word)
    norm = float(np.linalg.norm(total))
    return total / norm if norm > 0 else total


@pytest.mark.parametrize("path", ["numpy", "kernel"])
def test_embedder_fast_path_makes_the_defined_vectors_bit_for_bit(
        path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both ways of drawing many words' vectors, numpy's generator reseeded per word (with
    the vectorized seeding, `seed_states`, `pcg64_seeded`) and the compiled kernel
    (pipeline/wordgen.py), give every word the vector of its own `default_rng`, and a text
    the running sum's rounding: stored embeddings, and so every similarity, are what they
    were before the bulk speed-ups. 3,006 words are 1.15M draws, ~1,000 of them through the
    ziggurat's tail and ~7,000 through its wedge test."""
    from reference_server.pipeline import embedding, wordgen
    if path == "kernel":  # loaded now rather than on a thread, and used from 1 word on
        monkeypatch.setattr(embedding, "compiled_kernel", lambda: wordgen.standard_normals)
        monkeypatch.setattr(embedding, "KERNEL_MIN_WORDS", 1)
    else:
        monkeypatch.setattr(embedding, "compiled_kernel", lambda: None)
    rng = random.Random(25)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789_éßж中"
    words = ["", "a", "0", "ledger", "Zürich", "中文"] + [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 14))) for _ in range(3000)]
    embedder = HashingEmbedder()
    made = embedder.word_vectors(words)
    assert made.dtype == np.float32 and made.shape == (len(words), 384)
    for word, vector in zip(words, made, strict=True):
        assert np.array_equal(vector, word_vector(word)), word
    texts = [" ".join(rng.choice(words[1:400]) for _ in range(rng.randint(0, 700)))
             for _ in range(40)] + ["", "  ", "The ledger service runs in Frankfurt"]
    fresh = HashingEmbedder()
    many = fresh.embed_many(texts)
    for text, vector in zip(texts, many, strict=True):
        expected = running_sum_embedding(text)
        assert np.array_equal(vector, expected)
        assert np.array_equal(HashingEmbedder().embed(text), expected)  # one at a time
        assert np.array_equal(fresh.embed(text), expected)  # from the caches
        assert not vector.flags.writeable


def test_embedder_caches_a_bounded_share_of_a_large_batch() -> None:
    """A batch of mostly once-seen words (a hostile bulk) adds at most WORD_CACHE_BATCH of
    them to the word cache, as copies: the batch's matrix is not kept alive by the cache."""
    embedder = HashingEmbedder()
    words = [f"w{i}" for i in range(3 * HashingEmbedder.WORD_CACHE_BATCH)]
    embedder.embed_many([" ".join(words)])
    cached = list(embedder._words.values())  # noqa: SLF001 - the cache under test
    assert len(cached) == HashingEmbedder.WORD_CACHE_BATCH
    assert all(v.base is None or v.base.shape[0] == HashingEmbedder.WORD_CACHE_BATCH
               for v in cached)
    for word in words[:50]:
        assert np.array_equal(embedder.word_vectors([word])[0], word_vector(word))


def test_keyword_score_counts_distinct_query_words() -> None:
    assert keyword_score("ledger Frankfurt", "the ledger runs in frankfurt") == 1.0
    assert keyword_score("ledger Dublin", "the ledger runs in frankfurt") == 0.5
    assert keyword_score("the", "anything") == 0.0


@pytest.mark.parametrize("text,spec,wording", [
    ("10/second", "10/second", "10 per 1 second"),
    ("100/minute", "100/minute", "100 per 1 minute"),
    ("100 per 1 minute", "100/minute", "100 per 1 minute"),
    ("5 per 10 seconds", "5 per 10 second", "5 per 10 second"),
])
def test_parse_rate(text: str, spec: str, wording: str) -> None:
    rate = parse_rate(text)
    assert (rate.spec, str(rate)) == (spec, wording)


@pytest.mark.parametrize("text", ["", "ten/second", "0/second", "10/fortnight"])
def test_parse_rate_rejects_nonsense(text: str) -> None:
    with pytest.raises(ValueError):
        parse_rate(text)


def test_every_profile_names_known_steps_and_differs_where_documented() -> None:
    for profile in PROFILES.values():
        write_pipeline.validate_steps(profile.write_steps)
        search_pipeline.validate_steps(profile.search_steps)
    measured, proposed = get_profile("memclaw-2026-05-30"), get_profile("proposed")
    diff = [(m, p) for m, p in zip(measured.write_steps, proposed.write_steps, strict=True)
            if m != p]
    assert diff == [("check_near_duplicate", "check_near_duplicate_unless_single_valued_triple")]
    with pytest.raises(ValueError, match="unknown profile"):
        get_profile("memclaw-2099")


def _worst_case_rows(query: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """Rows whose int8 codes understate their cosine with `query` by all but 0.05 % of the
    bound `vectors.ranked` allows: every component but the largest sits just short of half a
    quantization step from its code, on the side that lowers the product."""
    dim = query.size
    step = 0.2 / 127
    codes = rng.integers(-100, 101, size=(count, dim)).astype(np.float32)
    rows = step * (codes + 0.4995 * np.sign(query))
    rows[:, 0] = 127 * step  # the largest component, exact: the row's scale is `step`
    return rows.astype(np.float32)


def test_int8_prefilter_ranks_exactly_what_the_float_product_does(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The quantized prefilter (int8 codes, compiled kernel) keeps every row the float32
    product puts at or above the gate, even rows its rounding understates by nearly the
    whole error bound; the ranking (rowids, order, cosines) is the float path's."""
    from reference_server.storage import vectors

    assert vectors.int8_dots(wait=True) is not None, "numba kernel"
    rng = np.random.default_rng(3)
    query = rng.standard_normal(384).astype(np.float32)
    query /= np.linalg.norm(query)
    plain = rng.standard_normal((3000, 384)).astype(np.float32)
    plain /= np.linalg.norm(plain, axis=1, keepdims=True)
    worst = _worst_case_rows(query, 40, rng)
    matrix = np.concatenate([plain, worst])
    index = vectors.VectorIndex(384)
    index.load_matrix("t", vectors.ORG, np.arange(len(matrix)), matrix)
    snapshots = index.snapshots("t", [vectors.ORG])
    true = worst @ query
    codes, scales = vectors.quantized(worst)
    assert np.all((codes @ query) * scales < true - 0.4 * scales * np.abs(query).sum())
    for gate in (float(np.median(true)), float(true.min()), 0.05):
        with_kernel = list(vectors.ranked(snapshots, query, gate, first=None))
        monkeypatch.setattr(vectors, "int8_dots", lambda: None)
        plain_path = list(vectors.ranked(snapshots, query, gate, first=None))
        monkeypatch.undo()
        got = np.concatenate([r for r, _ in with_kernel])
        want = np.concatenate([r for r, _ in plain_path])
        assert got.tolist() == want.tolist() and len(want) >= 20, gate
        assert np.allclose(np.concatenate([s for _, s in with_kernel]),
                           np.concatenate([s for _, s in plain_path]), atol=1e-6)


def test_a_block_grown_by_puts_keeps_its_int8_codes_in_step(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows put one by one into a block that outgrows its arrays (and replaced, leaving
    tombstones) are ranked by the int8 path exactly as by the float32 product."""
    from reference_server.storage import vectors

    assert vectors.int8_dots(wait=True) is not None, "numba kernel"
    rng = np.random.default_rng(5)
    index = vectors.VectorIndex(64)
    index.load_matrix("t", vectors.ORG, np.zeros(0, dtype=np.int64),
                      np.zeros((0, 64), dtype=np.float32))
    for rowid in range(300):  # the block starts with room for 64
        v = rng.standard_normal(64).astype(np.float32)
        index.put("t", vectors.ORG, rowid % 250, v / np.linalg.norm(v))
    query = rng.standard_normal(64).astype(np.float32)
    query /= np.linalg.norm(query)
    snapshots = index.snapshots("t", [vectors.ORG])
    got = list(vectors.ranked(snapshots, query, 0.1, first=None))
    monkeypatch.setattr(vectors, "int8_dots", lambda: None)
    want = list(vectors.ranked(snapshots, query, 0.1, first=None))
    assert [r.tolist() for r, _ in got] == [r.tolist() for r, _ in want]
    assert sum(len(r) for r, _ in want) >= 10


def test_warm_up_leaves_both_kernels_loaded_before_it_returns() -> None:
    """`--embed-kernel eager` runs `warm_up` before the port opens (issue 35): once it
    returns, neither kernel is still loading, so the first request takes the fast paths."""
    from reference_server.pipeline.embedding import compiled_kernel
    from reference_server.pipeline.warmup import warm_up
    from reference_server.storage.vectors import int8_dots

    warm_up(hashing_embedder=True)
    assert compiled_kernel() is not None
    assert int8_dots() is not None
