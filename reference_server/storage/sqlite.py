"""The SQLite store (WAL, one file): `SqlStore`'s statements (sql/store.py) over one
connection, and the vectors of the searched scope blocks in memory.

Every acknowledged write is committed before the response is sent; the contradiction job
for a memory is inserted in the same transaction as the memory row, so a restart or a
`kill -9` loses neither. Vector scores come from in-memory blocks per tenant and fleet
(vectors.py), loaded lazily from the stored embeddings; a scoped search multiplies only the
blocks its scope can admit, and the ranking is exact (PostgreSQL + pgvector: postgres/).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from .protocol import RowFilter
from .rows import NewMemory, now_iso
from .sql import SQLITE, SqlStore, decode_row, encode_columns
from .sql.schema import tables_sql
from .vectors import ORG, Unit, VectorIndex, unit_of, units_in_scope

# The shared tables, then the index the vector blocks load by: the expression, not the
# column, leads it, so a query on (tenant_id, fleet_id) keeps ix_memories_hash / its own.
SCHEMA = tables_sql(real="REAL", embedding="BLOB") + """
CREATE INDEX IF NOT EXISTS ix_memories_unit ON memories
    (tenant_id, visibility = 'scope_org', fleet_id);
"""

SQL_FLEET_IDS_MAX = 500  # longer fleet_ids lists stay out of SQL (one parameter per id)
ROW_CACHE_MAX = 50_000  # decoded rows kept per store (a 10x-scale tenant is ~20,000)


class SqliteStorage(SqlStore):
    dialect = SQLITE

    def __init__(self, path: Path | str, dim: int) -> None:
        self.path = str(path)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL: a committed transaction survives a process crash (kill -9);
        # only an OS crash could lose the last commits.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(SCHEMA)
        self.index = VectorIndex(dim)
        self._row_cache: dict[int, tuple[tuple, dict]] = {}  # rowid -> (fetched, built)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def _tx(self, durable: bool = True) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _one(self, sql: str, args: Sequence[Any] = ()) -> sqlite3.Row | None:
        with self._lock:
            return self._db.execute(sql, args).fetchone()

    def _all(self, sql: str, args: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def _memory_rows(self, sql: str, args: Sequence[Any] = ()) -> list[dict]:
        """Memory rows as plain dicts (metadata decoded). Searches read the same rows again
        and again, and building the dict cost a third of a search: a row whose fetched tuple
        (its rowid first) equals the one its cached dict was built from reuses that dict, so
        a changed row, or another column list, is always rebuilt. Callers treat rows as
        read-only."""
        with self._lock:
            cursor = self._db.cursor()
            cursor.row_factory = None
            cursor.execute(sql, args)
            names = [d[0] for d in cursor.description]
            rows = cursor.fetchall()
        if names[0] != "_rowid":
            return [decode_row(dict(zip(names, r, strict=True))) for r in rows]
        cache = self._row_cache
        if len(cache) > ROW_CACHE_MAX:
            cache.clear()
        out = []
        for r in rows:
            hit = cache.get(r[0])
            if hit is None or hit[0] != r:
                hit = cache[r[0]] = (r, decode_row(dict(zip(names, r, strict=True))))
            out.append(hit[1])
        return out

    def _visible_clause(self, tenant_id: str, visible: RowFilter) -> tuple[str, list[Any]] | None:
        # a fleet list too long for SQLite's parameters is judged by the caller alone
        if len(visible.fleet_ids) > SQL_FLEET_IDS_MAX:
            return None
        return visible.sql("?")

    # vectors: float32 blobs, blocks in memory ------------------------------------------

    def _vector_param(self, vector: np.ndarray) -> bytes:
        return vector.astype(np.float32).tobytes()

    def _vector_bytes(self, stored: Any) -> bytes | None:
        return stored

    def _vectors_changed(self, row: dict, changes: dict[str, Any],
                         embedding: np.ndarray | None) -> None:
        was = unit_of(row["fleet_id"], row["visibility"])
        unit = unit_of(row["fleet_id"], changes.get("visibility", row["visibility"]))
        with self._lock:
            if embedding is not None:
                self.index.put(row["tenant_id"], unit, row["_rowid"], embedding, was)
            elif unit != was:
                self.index.move(row["tenant_id"], row["_rowid"], was, unit)

    def _snapshots(self, tenant_id: str, visible: RowFilter | None) -> list:
        """Snapshots of the units `visible` can admit rows from (every unit without a fleet
        scope), each loaded from the store on first use."""
        with self._lock:
            fleets = self.index.fleets(tenant_id)
            if fleets is None:
                fleets = {r[0] for r in self._db.execute(
                    "SELECT DISTINCT fleet_id FROM memories WHERE tenant_id = ?", (tenant_id,))}
                self.index.set_fleets(tenant_id, fleets)
            scope = visible.fleet_scope if visible is not None else None
            units = (units_in_scope(scope, fleets) if scope is not None
                     else [("fleet", f) for f in fleets] + [ORG])
            for unit in units:
                if not self.index.loaded(tenant_id, unit):
                    self._load_unit(tenant_id, unit)
            return self.index.snapshots(tenant_id, units)

    def _load_unit(self, tenant_id: str, unit: Unit) -> None:
        # the expression, not the column, leads ix_memories_unit: a query on (tenant_id,
        # fleet_id) such as the exact-duplicate gate keeps its own index
        if unit == ORG:
            where, args = "(visibility = 'scope_org') = 1", ()
        else:
            where, args = "(visibility = 'scope_org') = 0 AND fleet_id IS ?", (unit[1],)
        cursor = self._db.cursor()
        cursor.row_factory = None
        rows = cursor.execute(f"SELECT rowid, embedding FROM memories WHERE tenant_id = ? "
                              f"AND {where} AND embedding IS NOT NULL ORDER BY rowid",
                              (tenant_id, *args)).fetchall()
        self.index.load(tenant_id, unit, [r[0] for r in rows], [r[1] for r in rows])

    # inserts ---------------------------------------------------------------------------

    def insert_memories(self, memories: Sequence[NewMemory]) -> None:
        """Every memory's row, links, job and idempotency record in one transaction."""
        if not memories:
            return
        rowids = []
        enqueued = now_iso()
        with self._tx() as db:
            for m in memories:  # one statement a row: each row's rowid for the vector index
                values = encode_columns(m.row)
                if m.embedding is not None:
                    values["embedding"] = self._vector_param(m.embedding)
                cur = db.execute(f"INSERT INTO memories ({', '.join(values)}) "
                                 f"VALUES ({', '.join('?' for _ in values)})",
                                 tuple(values.values()))
                rowids.append(cur.lastrowid)
            self._side_rows(db, memories, enqueued)
        with self._lock:  # searches read the index from worker threads
            for m, rowid in zip(memories, rowids, strict=True):
                if m.embedding is not None and rowid is not None:
                    unit = unit_of(m.row.get("fleet_id"), m.row.get("visibility", "scope_team"))
                    self.index.put(m.row["tenant_id"], unit, rowid, m.embedding)

    def insert_many(self, rows: Sequence[dict], embeddings: Sequence[np.ndarray]) -> None:
        """Seeding (benchmarks, fixtures): many rows in one transaction, no jobs."""
        if not rows:
            return
        cols = [*rows[0], "embedding"]
        sql = (f"INSERT INTO memories ({', '.join(cols)}) "
               f"VALUES ({', '.join('?' for _ in cols)})")
        values = [(*(json.dumps(v) if k == "metadata" and v is not None else v
                     for k, v in row.items()), self._vector_param(emb))
                  for row, emb in zip(rows, embeddings, strict=True)]
        with self._tx() as db:
            db.executemany(sql, values)
            for tenant_id in {row["tenant_id"] for row in rows}:  # reloaded on first use
                self.index.forget(tenant_id)
