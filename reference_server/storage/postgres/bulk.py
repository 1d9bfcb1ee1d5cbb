"""Seeding (benchmarks, fixtures): rows by binary COPY in one transaction, no jobs. A large
seed drops every index of the table but its keys' and builds each once after the copy (a
sorted build instead of a million scattered inserts per index), with memory for the whole
HNSW graph and parallel workers (one build at 1M rows instead of a graph that outgrows
`maintenance_work_mem` and crawls).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import psycopg

from ..sql import encode_columns
from .schema import BULK_REBUILD_ROWS, SECONDARY_INDEXES, build_indexes


def copy_rows(cur: psycopg.Cursor, rows: Sequence[dict], embeddings: Sequence[np.ndarray],
              dim: int, hnsw: bool) -> None:
    """`rows` (each with the same columns) and their embeddings, in the caller's
    transaction; `hnsw`: the store searches through the HNSW index (rebuilt if dropped)."""
    cols = [*rows[0], "embedding"]
    # a durable commit: VACUUM after it cannot mark pages all-visible (what lets a search
    # skip the heap) while the commit's WAL is not yet on disk
    cur.execute("SET LOCAL synchronous_commit = on")
    hnsw = hnsw or cur.execute(
        "SELECT to_regclass('ix_memories_embedding') IS NOT NULL AS x").fetchone()["x"]  # type: ignore[index]
    types = {r["attname"]: r["typname"] for r in cur.execute(  # type: ignore[index]
        "SELECT a.attname, t.typname FROM pg_attribute a JOIN pg_type t "
        "ON t.oid = a.atttypid WHERE a.attrelid = 'memories'::regclass "
        "AND a.attnum > 0").fetchall()}
    stored = cur.execute("SELECT reltuples AS n FROM pg_class "
                         "WHERE oid = 'memories'::regclass").fetchone()["n"]  # type: ignore[index]
    rebuild = len(rows) >= max(BULK_REBUILD_ROWS, stored // 4)
    dropped: list[str] = []
    if rebuild:
        for r in cur.execute(SECONDARY_INDEXES).fetchall():
            cur.execute(f'DROP INDEX "{r["name"]}"')  # type: ignore[index]
            dropped.append(r["definition"])  # type: ignore[index]
    with cur.copy(f"COPY memories ({', '.join(cols)}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types([types[c] for c in cols])
        for row, emb in zip(rows, embeddings, strict=True):
            copy.write_row([*encode_columns(row).values(), emb.astype(np.float32)])
    if rebuild:
        build_indexes(cur, dim, hnsw, dropped)
