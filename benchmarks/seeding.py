"""Seeded stores for the benchmarks: n memories of one tenant over 8 fleets, written straight
through the storage layer (quick), on SQLite or on a fresh database of an embedded PostgreSQL.
Every row has distinct content (a random sentence plus its number), so distinct vectors."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from reference_server.api.app import ServerConfig, build_state
from reference_server.governance.auth import new_raw_key
from reference_server.governance.profiles import get_profile
from reference_server.pipeline.background import seed_background, sentence, vocabulary
from reference_server.storage import AgentRow, open_storage

__all__ = ["FLEETS", "Seeded", "seed", "sentence", "store_location"]

FLEETS = [f"fleet-{i}" for i in range(8)]


@dataclass
class Seeded:
    db: Path | str
    tenant_id: str
    key: str
    rows: list[dict]  # a sample of the seeded rows (for GET and search queries)
    words: list[str]


def seed(db: Path | str, profile: str, n: int, rng: random.Random,
         sample: int = 2000, vector_search: str = "exact") -> Seeded:
    """Tenant, its key and n memories (reference_server.pipeline.background: 8 fleets, one agent key
    per fleet registered) in the store at `db` (a path or postgresql:// URL). A PostgreSQL
    seed of >= 5k rows builds its indexes once, after the copy; `vector_search="hnsw"` then
    builds the HNSW index a server in that mode searches (an exact store keeps none)."""
    state = build_state(ServerConfig(get_profile(profile), db, new_raw_key()))
    tenant_id, storage = "bench", state.storage
    storage.create_tenant(tenant_id)
    raw_key, _ = state.keys.mint(tenant_id)
    for i, fleet in enumerate(FLEETS):
        storage.upsert_agent(AgentRow(tenant_id, f"agent-{i}", fleet, 1))
    storage.close()
    rows = seed_background(db, tenant_id, n, seed=rng.randrange(1 << 30), fleet_names=FLEETS,
                           null_fleet_share=0.0)
    if vector_search == "hnsw":
        open_storage(db, 384, "hnsw").close()
    return Seeded(db, tenant_id, raw_key, rows[::max(1, n // sample)], vocabulary(rng))


@contextmanager
def store_location(backend: str, tmp: Path) -> Iterator[Path | str]:
    """A SQLite path under tmp, or a fresh database on a temporary embedded PostgreSQL."""
    if backend == "sqlite":
        yield tmp / "bench.db"
        return
    from reference_server.launch.embedded_pg import EmbeddedPostgres

    with EmbeddedPostgres(tmp / "pgdata") as pg:
        yield pg.create_database("bench")
