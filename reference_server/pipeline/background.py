"""Background memories: a tenant's store filled with n rows straight through the storage layer
(no HTTP), so scale runs and benchmarks measure governance and latency against a production-
sized store rather than an empty one.

The rows are deterministic for a seed: random sentences over a synthetic vocabulary (plus the
row number, so every row and every vector is distinct), spread over `fleets` background fleets
and their agents, a tenth of them fleet-less (visible to every prober under the scope rules,
so they pass the filter and compete in ranking). None is a secret, a fact or a chain of an
experiment; the experiments' own rows are written through the API as usual.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..storage import now_iso, open_storage
from .embedding import HashingEmbedder
from .write import content_hash

DEFAULT_FLEETS = 8


def vocabulary(rng: random.Random, size: int = 3000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(size)]


def sentence(rng: random.Random, words: list[str]) -> str:
    return " ".join(rng.choice(words) for _ in range(rng.randint(12, 20)))


def background_row(tenant_id: str, i: int, content: str, fleet_id: str | None,
                   agent_id: str) -> dict:
    return {"id": str(uuid.UUID(int=random.Random(f"{tenant_id}:{i}").getrandbits(128),
                                version=4)),
            "tenant_id": tenant_id, "fleet_id": fleet_id, "agent_id": agent_id,
            "memory_type": "fact", "title": None, "content": content, "weight": 0.5,
            "source_uri": None, "run_id": None, "metadata": {"write_mode": "fast",
                                                              "background": True},
            "content_hash": content_hash(tenant_id, fleet_id, content),
            "client_request_id": None, "created_at": now_iso(), "expires_at": None,
            "deleted_at": None, "ts_valid_start": None, "ts_valid_end": None,
            "subject_entity_id": None, "predicate": None, "object_value": None,
            "status": "active", "visibility": "scope_team", "recall_count": 0,
            "last_recalled_at": None, "supersedes_id": None}


def background_rows(tenant_id: str, n: int, seed: int = 0, fleets: int = DEFAULT_FLEETS,
                    fleet_names: list[str] | None = None,
                    null_fleet_share: float = 0.1) -> Iterator[dict]:
    rng = random.Random(f"background:{seed}")
    words = vocabulary(rng)
    names = fleet_names or [f"background-fleet-{f}" for f in range(fleets)]
    every = round(1 / null_fleet_share) if null_fleet_share > 0 else 0
    for i in range(n):
        f = i % len(names)
        fleet = None if every and i % every == every - 1 else names[f]
        yield background_row(tenant_id, i, f"{sentence(rng, words)} {i}", fleet,
                             f"{names[f]}-agent-{(i // len(names)) % 4}")


def seed_background(db: Path | str, tenant_id: str, n: int, seed: int = 0,
                    dim: int = 384, **kwargs: object) -> list[dict]:
    """Write n background memories of `tenant_id` into the store at `db` (a SQLite path or a
    postgresql:// URL) in one transaction; returns the rows. The store may be serving: a
    SQLite server loads the tenant's vectors on its first search, PostgreSQL indexes them."""
    embedder = HashingEmbedder(dim)
    rows = list(background_rows(tenant_id, n, seed, **kwargs))  # type: ignore[arg-type]
    vectors: list[np.ndarray] = []
    for start in range(0, n, 10_000):  # each chunk's new words drawn together (1M rows: ~1 min)
        vectors += embedder.embed_many([r["content"] for r in rows[start:start + 10_000]])
    storage = open_storage(db, dim)
    try:
        storage.insert_many(rows, vectors)
    finally:
        storage.close()
    return rows
