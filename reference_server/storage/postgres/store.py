"""`PostgresStorage`: `SqlStore`'s statements (sql/) over a pool of psycopg connections,
with pgvector's vectors. Its own rooms: the schema (schema.py), the codecs (codecs.py), the
vector blocks searched exactly in this process (blocks.py), the COPY seed (bulk.py) and
the HNSW walk (hnsw.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg
from psycopg.rows import dict_row
from psycopg.types import TypeInfo
from psycopg_pool import ConnectionPool

from ..protocol import RowFilter
from ..rows import NewMemory, now_iso
from ..sql import POSTGRES, encode_columns
from ..vectors import ranked, ranked_rows
from .blocks import VectorBlocks
from .bulk import copy_rows
from .codecs import register_codecs
from .hnsw import HnswWalk
from .schema import create_schema

# Similarity search: `exact` (the default) ranks every row the caller's scope can admit by
# true distance; `hnsw` walks the HNSW index (approximate). With the kit's hashing embedder the
# vectors are near-orthogonal, a case HNSW navigates badly: at 100k rows a filtered HNSW
# search missed rows exact search returns (benchmarks/bench_recall.py measures it), which
# would change what a probe sees, so exactness is the default and HNSW an opt-in
# (`--vector-search hnsw`) for real sentence embeddings, walked for searches over a whole
# tenant only: a fleet-scoped search is ranked exactly in either mode (`scoped_by_index`
# walks the index for those too: what bench_recall.py measures as the index's misses).
VECTOR_SEARCH = ("exact", "hnsw")
DEFAULT_VECTOR_SEARCH = "exact"
# HNSW search breadth and the iterative scan that keeps filtered queries complete;
# benchmarks/bench_recall.py measures recall@k against exact search at these settings.
EF_SEARCH = 100
ITERATIVE_SCAN = "strict_order"
MAX_SCAN_TUPLES = 100_000
# Connections per server process: searches run on worker threads, each on its own pooled
# connection, so 2 cores (and the database's own processes) serve them side by side.
POOL_MIN, POOL_MAX = 1, 8


class _Tx:
    """A transaction's cursor taking the shared statements' `?` placeholders."""

    def __init__(self, cur: psycopg.Cursor) -> None:
        self.cur = cur

    def execute(self, sql: str, args: Sequence[Any] = ()) -> psycopg.Cursor:
        return self.cur.execute(POSTGRES.sql(sql), args)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.cur.executemany(POSTGRES.sql(sql), rows)


class PostgresStorage(HnswWalk):
    """A pool of connections (autocommit; explicit transactions for multi-statement writes),
    each set up alike: NUL-safe text, pgvector's type, the HNSW search settings."""

    dialect = POSTGRES
    RANK_PAGES = (16, 4)  # each page a round trip: start small, grow fast

    def __init__(self, url: str, dim: int, vector_search: str = "exact",
                 pool_size: int = POOL_MAX) -> None:
        if vector_search not in VECTOR_SEARCH:
            raise ValueError(f"vector_search must be one of {VECTOR_SEARCH}")
        self.url, self.dim, self.vector_search = url, dim, vector_search
        create_schema(url, dim, hnsw=vector_search == "hnsw")
        # Commits stay durable (the server's setting, synchronous_commit on by default): an
        # acknowledged write survives a PostgreSQL or OS crash. A deployment that prefers
        # write latency sets `options=-c synchronous_commit=off` in the URL (README).
        self._settings = {"hnsw.ef_search": str(EF_SEARCH),
                          "hnsw.iterative_scan": ITERATIVE_SCAN,
                          "hnsw.max_scan_tuples": str(MAX_SCAN_TUPLES)}
        self._generation = 0  # bumped by `tune`: a connection set up earlier is set again
        # hnsw: a fleet-scoped search walks the index too (else it is ranked exactly)
        self.scoped_by_index = False
        self._pool = ConnectionPool(url, min_size=min(POOL_MIN, pool_size), max_size=pool_size,
                                    kwargs={"autocommit": True, "row_factory": dict_row},
                                    configure=self._configure, open=True, name="fleetprobe")
        self._pool.wait()
        with self._conn() as conn:
            info = TypeInfo.fetch(conn, "vector")
            assert info is not None, "pgvector's type"
        self.blocks = VectorBlocks(dim, self._conn, info.oid)
        self.index = self.blocks.index

    def _configure(self, conn: psycopg.Connection) -> None:
        register_codecs(conn)
        self._apply_settings(conn)

    def _apply_settings(self, conn: psycopg.Connection) -> None:
        for name, value in self._settings.items():
            conn.execute("SELECT set_config(%s, %s, false)", (name, value))
        conn.info_generation = self._generation  # type: ignore[attr-defined]

    def tune(self, **settings: object) -> None:
        """Session settings for every connection from now on (benchmarks and tests, e.g.
        `tune(**{"hnsw.ef_search": 200})`, or `tune(enable_seqscan="off")` to force the
        index)."""
        self._settings.update({k: str(v) for k, v in settings.items()})
        self._generation += 1

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection]:
        with self._pool.connection() as conn:
            if getattr(conn, "info_generation", None) != self._generation:
                self._apply_settings(conn)
            yield conn

    def close(self) -> None:
        self._pool.close()

    @contextmanager
    def _tx(self, durable: bool = True) -> Iterator[_Tx]:
        with self._conn() as conn, conn.transaction(), conn.cursor() as cur:
            if not durable:  # the commit does not wait for the WAL flush
                cur.execute("SET LOCAL synchronous_commit TO OFF")
            yield _Tx(cur)

    def _one(self, sql: str, args: Sequence[Any] = ()) -> dict | None:
        with self._conn() as conn:
            return conn.execute(POSTGRES.sql(sql), args).fetchone()

    def _all(self, sql: str, args: Sequence[Any] = ()) -> list[dict]:
        with self._conn() as conn:
            return conn.execute(POSTGRES.sql(sql), args).fetchall()

    # vectors ---------------------------------------------------------------------------

    def _vector_param(self, vector: np.ndarray) -> np.ndarray:
        return vector.astype(np.float32)

    def _vector_bytes(self, stored: Any) -> bytes | None:
        if stored is None:
            return None
        values = stored.to_numpy() if hasattr(stored, "to_numpy") else np.asarray(stored)
        return values.astype(np.float32).tobytes()

    def _snapshots(self, tenant_id: str, visible: RowFilter | None) -> list:
        return self.blocks.snapshots(tenant_id, visible)

    def ranked_by_similarity(self, tenant_id: str, vector: np.ndarray,
                             min_similarity: float) -> tuple[np.ndarray, np.ndarray]:
        if self.vector_search == "hnsw":  # a distance filter would keep the index unused
            pairs = [(row["_rowid"], sim) for row, sim in
                     self.similar_rows(tenant_id, vector, min_similarity)]
            return (np.asarray([r for r, _ in pairs], dtype=np.int64),
                    np.asarray([s for _, s in pairs], dtype=np.float32))
        return super().ranked_by_similarity(tenant_id, vector, min_similarity)

    def similar_rows(self, tenant_id: str, vector: np.ndarray, min_similarity: float,
                     visible: RowFilter | None = None,
                     first_page: int = 16) -> Iterator[tuple[dict, float]]:
        """The tenant's rows, most similar first, down to `min_similarity`; with `visible`,
        only rows it admits. Exact (the scope's blocks in memory, blocks.py) unless the HNSW
        index is walked; lazy either way: rows are read in pages of growing size, so a
        consumer that stops early pays for one."""
        if self.vector_search == "hnsw" and (
                self.scoped_by_index or visible is None or visible.fleet_scope is None):
            yield from self._index_walk(tenant_id, vector, min_similarity, visible, first_page)
            return
        yield from ranked_rows(ranked(self._snapshots(tenant_id, visible), vector,
                                      min_similarity),
                               self.rows_by_rowids, tenant_id, visible, first_page, 4)

    # inserts ---------------------------------------------------------------------------

    def insert_memories(self, memories: Sequence[NewMemory]) -> None:
        """Every memory's row, links, job and idempotency record in one transaction, each
        table's rows in one batched statement (psycopg's executemany pipelines them)."""
        if not memories:
            return
        runs: list[tuple[tuple[str, ...], list[tuple]]] = []  # (columns, rows), in order
        for m in memories:  # a row without an embedding names fewer columns
            values = encode_columns(m.row)
            if m.embedding is not None:
                values["embedding"] = self._vector_param(m.embedding)
            if not runs or runs[-1][0] != tuple(values):
                runs.append((tuple(values), []))
            runs[-1][1].append(tuple(values.values()))
        # pipelined: BEGIN, the statements and COMMIT go out together, one round trip
        with self._conn() as conn, conn.pipeline(), conn.transaction(), conn.cursor() as cur:
            for cols, rows in runs:
                cur.executemany(f"INSERT INTO memories ({', '.join(cols)}) "
                                f"VALUES ({', '.join('%s' for _ in cols)})", rows)
            self._side_rows(_Tx(cur), memories, now_iso())

    def insert_many(self, rows: Sequence[dict], embeddings: Sequence[np.ndarray]) -> None:
        """Seeding (bulk.py), then VACUUM (ANALYZE) so the planner knows the new rows; this
        process's blocks of the seeded tenants are dropped (reloaded on use)."""
        if not rows:
            return
        with self._tx() as tx:
            copy_rows(tx.cur, rows, embeddings, self.dim, self.vector_search == "hnsw")
        with self._conn() as conn:
            conn.execute("VACUUM (ANALYZE) memories")
        for tenant_id in {r["tenant_id"] for r in rows}:
            self.blocks.forget(tenant_id)
