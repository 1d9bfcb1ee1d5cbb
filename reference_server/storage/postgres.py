"""PostgreSQL + pgvector storage behind the `Storage` protocol (what MemClaw runs on).

`python -m reference_server --db postgresql://...` selects it. The schema is created at start
(idempotent). Similarity is the inner product over unit vectors (= cosine). Search is exact by
default: the vectors of the caller's scope blocks (SCOPE_BLOCK: a fleet's rows, or the
fleet-less and org-wide rows) are ranked in this process by numpy (`vectors.py`, as the SQLite
store does), from blocks loaded from the table on first use and kept current from it before
every search (`_catch_up`: every row whose vector or block a transaction changed carries that
transaction's id, so another server writing to the same database is followed too); the rows
are then read by rowid and judged by the scope rule. `hnsw` walks an HNSW index (built only for
a store opened in that mode) with the scope predicate in the SQL, as MemClaw does
(`scope.search_predicate_sql`), for searches over a whole tenant; a fleet-scoped search, whose
readable rows a filtered index walk can miss (see VECTOR_SEARCH), is ranked exactly there too
unless `scoped_by_index` is set (bench_recall.py measures the index walk that way).

Timestamps stay ISO-8601 text, as in SQLite, so ordering and comparisons are the same on both
backends; `metadata` stays JSON text for the same reason.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg.abc import Buffer
from psycopg.adapt import Loader
from psycopg.pq import Format
from psycopg.rows import dict_row, tuple_row
from psycopg.types import TypeInfo
from psycopg.types.string import StrBinaryDumper, StrDumperUnknown, TextBinaryLoader, TextLoader
from psycopg_pool import ConnectionPool

from .protocol import RowFilter
from .rows import (
    LIVE_STATUSES,
    MEMORY_COLUMNS,
    AgentRow,
    IdempotencyRecord,
    KeyRow,
    ListFilter,
    NewMemory,
    list_where,
    now_iso,
)
from .vectors import ORG, Unit, VectorIndex, ranked, ranked_rows, unit_of, units_in_scope

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
LONG_FLEET_LIST = 256  # longer `fleet_ids` lists are cut to the tenant's fleets first
# A bulk seed this large (and at least a quarter of the rows already stored) drops the
# secondary indexes, copies, and rebuilds them (much faster); the HNSW build's memory is
# capped here (the graph of 1M 384-d rows: about 2.5 GB).
BULK_REBUILD_ROWS = 5_000
# The table's indexes other than its keys' (those enforce uniqueness as the rows arrive).
SECONDARY_INDEXES = """SELECT i.relname AS name, pg_get_indexdef(i.oid) AS definition
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
WHERE x.indrelid = 'memories'::regclass
AND NOT EXISTS (SELECT FROM pg_constraint c WHERE c.conindid = x.indexrelid)"""
HNSW_BUILD_MAX_MB = 8192
# Connections per server process: searches run on worker threads, each on its own pooled
# connection, so 2 cores (and the database's own processes) serve them side by side.
POOL_MIN, POOL_MAX = 1, 8


def schema_sql(dim: int) -> str:
    return f"""
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE IF NOT EXISTS tenants (
    tenant_id TEXT PRIMARY KEY,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS api_keys (
    key_hash TEXT PRIMARY KEY,
    id TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    agent_id TEXT,
    kind TEXT NOT NULL,
    key_prefix TEXT NOT NULL,
    label TEXT,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS agents (
    tenant_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    fleet_id TEXT,
    display_name TEXT,
    trust_level INTEGER NOT NULL DEFAULT 1,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (tenant_id, agent_id)
);
CREATE TABLE IF NOT EXISTS memories (
    rowid BIGSERIAL UNIQUE,
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    fleet_id TEXT,
    agent_id TEXT NOT NULL,
    memory_type TEXT NOT NULL,
    title TEXT,
    content TEXT NOT NULL,
    weight DOUBLE PRECISION NOT NULL DEFAULT 0.5,
    source_uri TEXT,
    run_id TEXT,
    metadata TEXT,
    content_hash TEXT NOT NULL,
    client_request_id TEXT,
    created_at TEXT NOT NULL,
    expires_at TEXT,
    deleted_at TEXT,
    ts_valid_start TEXT,
    ts_valid_end TEXT,
    subject_entity_id TEXT,
    predicate TEXT,
    object_value TEXT,
    status TEXT NOT NULL DEFAULT 'active',
    visibility TEXT NOT NULL DEFAULT 'scope_team',
    recall_count INTEGER NOT NULL DEFAULT 0,
    last_recalled_at TEXT,
    supersedes_id TEXT,
    embedding vector({dim})
);
CREATE INDEX IF NOT EXISTS ix_memories_tenant_created ON memories (tenant_id, created_at);
CREATE INDEX IF NOT EXISTS ix_memories_hash ON memories (tenant_id, content_hash);
CREATE INDEX IF NOT EXISTS ix_memories_subject ON memories (tenant_id, subject_entity_id);
CREATE INDEX IF NOT EXISTS ix_memories_supersedes ON memories (supersedes_id);
CREATE INDEX IF NOT EXISTS ix_memories_request ON memories (tenant_id, client_request_id);
ALTER TABLE memories ADD COLUMN IF NOT EXISTS scope_block TEXT
    GENERATED ALWAYS AS ({SCOPE_BLOCK}) STORED;
ALTER TABLE memories DROP COLUMN IF EXISTS embedding_half;
DROP INDEX IF EXISTS ix_memories_scope;
ALTER TABLE memories ADD COLUMN IF NOT EXISTS vec_xid xid8 NOT NULL
    DEFAULT pg_current_xact_id();
CREATE OR REPLACE FUNCTION memories_vec_xid() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.vec_xid := pg_current_xact_id(); RETURN NEW; END $$;
CREATE OR REPLACE TRIGGER memories_vec_xid BEFORE UPDATE OF embedding, fleet_id, visibility
    ON memories FOR EACH ROW EXECUTE FUNCTION memories_vec_xid();
{BLOCK_INDEX}
{VEC_XID_INDEX}
CREATE TABLE IF NOT EXISTS entities (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    fleet_id TEXT,
    entity_type TEXT NOT NULL,
    canonical_name TEXT NOT NULL,
    attributes TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_entities_match ON entities (tenant_id, entity_type, canonical_name);
CREATE TABLE IF NOT EXISTS memory_entity_links (
    memory_id TEXT NOT NULL,
    entity_id TEXT NOT NULL,
    role TEXT,
    PRIMARY KEY (memory_id, entity_id)
);
CREATE INDEX IF NOT EXISTS ix_links_entity ON memory_entity_links (entity_id);
CREATE TABLE IF NOT EXISTS detection_jobs (
    memory_id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    due_at DOUBLE PRECISION NOT NULL,
    enqueued_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS idempotency (
    tenant_id TEXT NOT NULL,
    key TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    status_code INTEGER NOT NULL,
    body TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (tenant_id, key)
);
"""


# Unit vectors: inner product is cosine, and `<#>` (negative inner product) is the cheapest
# distance. m / ef_construction are pgvector's defaults.
HNSW_INDEX = ("CREATE INDEX IF NOT EXISTS ix_memories_embedding ON memories "
              "USING hnsw (embedding vector_ip_ops) WITH (m = 16, ef_construction = 64);")
# Exact scoped search: a fleet-scoped caller can read only rows of its fleets, fleet-less rows
# and `scope_org` rows (rule 4; `RowFilter.fleet_scope`). `scope_block` names that partition
# of a row ('' for fleet-less and org-wide rows, 'f:<fleet>' otherwise); the store keeps the
# vectors of the blocks searched in memory (vectors.py's units: block '' holds two, the
# fleet-less unit and ORG), loads a block by ix_memories_block on first use, and follows
# changes by `vec_xid`: the id of the transaction that inserted the row or last changed its
# vector or block (the column's default and a trigger: every writer, any process).
SCOPE_BLOCK = ("CASE WHEN fleet_id IS NULL OR visibility = 'scope_org' THEN '' "
               "ELSE 'f:' || fleet_id END")
BLOCK_INDEX = "CREATE INDEX IF NOT EXISTS ix_memories_block ON memories (tenant_id, scope_block);"
VEC_XID_INDEX = "CREATE INDEX IF NOT EXISTS ix_memories_vec_xid ON memories (tenant_id, vec_xid);"
# Every transaction below this id had ended when the statement's snapshot was taken: a
# catch-up from it reads every row committed since, however late a transaction commits.
OLDEST_OPEN_XID = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS low"
# A catch-up larger than this drops the tenant's blocks instead (reloaded on use).
CATCH_UP_MAX_ROWS = 5_000
# The tenant's blocks, each found by one index probe (a loose scan of ix_memories_block).
TENANT_BLOCKS = """WITH RECURSIVE b AS (
    (SELECT scope_block FROM memories WHERE tenant_id = %(t)s ORDER BY scope_block LIMIT 1)
    UNION ALL
    SELECT (SELECT scope_block FROM memories WHERE tenant_id = %(t)s
            AND scope_block > b.scope_block ORDER BY scope_block LIMIT 1)
    FROM b WHERE b.scope_block IS NOT NULL)
SELECT scope_block FROM b WHERE scope_block IS NOT NULL"""


def unit_block(unit: Unit) -> str:
    """The scope block holding a unit's rows (block '' holds two: fleet-less and ORG)."""
    return "" if unit == ORG or unit[1] is None else f"f:{unit[1]}"


ROW_COLUMNS = "rowid AS _rowid, " + ", ".join(MEMORY_COLUMNS)
ROW_COLUMNS_M = "m.rowid AS _rowid, " + ", ".join(f"m.{c}" for c in MEMORY_COLUMNS)


# PostgreSQL text cannot hold NUL; SQLite and MemClaw's wire can. Every string crossing the
# driver (parameters and text results alike, so comparisons agree) is escaped reversibly:
# NUL -> ESC "0", ESC -> ESC ESC, with ESC a private-use character.
ESC = "\ue000"
_UNESCAPE = re.compile("\ue000(.)", re.DOTALL)


def _escape_nul(text: str) -> str:
    if "\x00" not in text and ESC not in text:
        return text
    return text.replace(ESC, ESC + ESC).replace("\x00", ESC + "0")


def _unescape_nul(text: str) -> str:
    if ESC not in text:
        return text
    return _UNESCAPE.sub(lambda m: "\x00" if m.group(1) == "0" else m.group(1), text)


class _NulSafeStrDumper(StrDumperUnknown):
    def dump(self, obj: str) -> bytes | bytearray | memoryview:
        return super().dump(_escape_nul(obj))


class _NulSafeStrBinaryDumper(StrBinaryDumper):
    def dump(self, obj: str) -> bytes | bytearray | memoryview:
        return super().dump(_escape_nul(obj))


class _NulSafeTextLoader(TextLoader):
    def load(self, data: Buffer) -> str:
        return _unescape_nul(super().load(data))


class _NulSafeTextBinaryLoader(TextBinaryLoader):
    def load(self, data: Buffer) -> str:
        return _unescape_nul(super().load(data))


def _register_nul_safe_text(conn: psycopg.Connection) -> None:
    conn.adapters.register_dumper(str, _NulSafeStrDumper)
    conn.adapters.register_dumper(str, _NulSafeStrBinaryDumper)
    conn.adapters.register_loader("text", _NulSafeTextLoader)
    conn.adapters.register_loader("text", _NulSafeTextBinaryLoader)


class _RawVectorLoader(Loader):
    """A `vector` in binary as its bytes (int16 dim, int16 unused, dim big-endian float32):
    a block of them becomes one matrix (`_matrix`) without an object per row."""

    format = Format.BINARY

    def load(self, data: Buffer) -> bytes:
        return bytes(data)


def _matrix(blobs: Sequence[bytes], dim: int) -> np.ndarray:
    if not blobs:
        return np.zeros((0, dim), dtype=np.float32)
    raw = np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(len(blobs), 4 + 4 * dim)
    return raw[:, 4:].copy().view(">f4").astype(np.float32)


class PostgresStorage:
    """A pool of connections (autocommit; explicit transactions for multi-statement writes),
    each set up alike: NUL-safe text, pgvector's type, the HNSW search settings."""

    def __init__(self, url: str, dim: int, vector_search: str = "exact",
                 pool_size: int = POOL_MAX) -> None:
        if vector_search not in VECTOR_SEARCH:
            raise ValueError(f"vector_search must be one of {VECTOR_SEARCH}")
        self.url, self.dim, self.vector_search = url, dim, vector_search
        with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
            # Two servers starting on one fresh database race on CREATE EXTENSION / TABLE:
            # an advisory lock makes schema creation one at a time.
            conn.execute("SELECT pg_advisory_lock(8130013)")
            try:
                conn.execute(schema_sql(dim))
                if vector_search == "hnsw":  # only a store searched through it keeps one
                    with conn.transaction(), conn.cursor() as cur:
                        self._build_indexes(cur, hnsw=True)
                # a catch-up (vec_xid >= recent) is a short index range only if the planner
                # knows the column's values: without statistics (a table filled before the
                # column existed) it guesses a third of the table and scans all of it
                if not conn.execute("SELECT EXISTS (SELECT FROM pg_stats WHERE tablename = "
                                    "'memories' AND attname = 'vec_xid') AS x").fetchone()["x"]:
                    conn.execute("ANALYZE memories")
            finally:
                conn.execute("SELECT pg_advisory_unlock(8130013)")
        # Commits stay durable (the server's setting, synchronous_commit on by default): an
        # acknowledged write survives a PostgreSQL or OS crash. A deployment that prefers
        # write latency sets `options=-c synchronous_commit=off` in the URL (README).
        self._settings = {"hnsw.ef_search": str(EF_SEARCH),
                          "hnsw.iterative_scan": ITERATIVE_SCAN,
                          "hnsw.max_scan_tuples": str(MAX_SCAN_TUPLES)}
        self._generation = 0  # bumped by `tune`: a connection set up earlier is set again
        # hnsw: a fleet-scoped search walks the index too (else it is ranked exactly)
        self.scoped_by_index = False
        # the searched blocks' vectors; a tenant's are read and changed under its own lock
        # (`_tenant_lock`: one tenant's first load of 1M rows holds no other tenant's search)
        self.index = VectorIndex(dim)
        self._tenant_locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()
        self._caught_up: dict[str, int] = {}  # tenant -> the xid its catch-ups start from
        self._pool = ConnectionPool(url, min_size=min(POOL_MIN, pool_size), max_size=pool_size,
                                    kwargs={"autocommit": True, "row_factory": dict_row},
                                    configure=self._configure, open=True, name="fleetprobe")
        self._pool.wait()
        with self._conn() as conn:
            info = TypeInfo.fetch(conn, "vector")
            assert info is not None, "pgvector's type"
            self._vector_oid = info.oid

    def _configure(self, conn: psycopg.Connection) -> None:
        _register_nul_safe_text(conn)
        register_vector(conn)
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
    def _tx(self) -> Iterator[psycopg.Cursor]:
        with self._conn() as conn, conn.transaction(), conn.cursor() as cur:
            yield cur

    def _one(self, sql: str, args: Sequence[Any] = ()) -> dict | None:
        with self._conn() as conn:
            return conn.execute(sql, args).fetchone()

    def _all(self, sql: str, args: Sequence[Any] = ()) -> list[dict]:
        with self._conn() as conn:
            return conn.execute(sql, args).fetchall()

    # tenants and keys --------------------------------------------------------------------

    def create_tenant(self, tenant_id: str) -> bool:
        with self._tx() as cur:
            cur.execute("INSERT INTO tenants VALUES (%s, %s) ON CONFLICT DO NOTHING",
                        (tenant_id, now_iso()))
            return cur.rowcount == 1

    def tenant_exists(self, tenant_id: str) -> bool:
        return self._one("SELECT 1 FROM tenants WHERE tenant_id = %s", (tenant_id,)) is not None

    def add_key(self, key_hash: str, row: KeyRow, label: str | None = None) -> None:
        """An agent key replaces every earlier key of the same agent (re-provisioning
        revokes), in the same transaction."""
        with self._tx() as cur:
            if row.agent_id is not None:
                cur.execute("DELETE FROM api_keys WHERE tenant_id = %s AND agent_id = %s",
                            (row.tenant_id, row.agent_id))
            cur.execute(
                "INSERT INTO api_keys VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (key_hash) DO UPDATE SET id = excluded.id, "
                "tenant_id = excluded.tenant_id, agent_id = excluded.agent_id, "
                "kind = excluded.kind, key_prefix = excluded.key_prefix, "
                "label = excluded.label, created_at = excluded.created_at",
                (key_hash, row.id, row.tenant_id, row.agent_id, row.kind, row.key_prefix,
                 label, row.created_at))

    def find_key(self, key_hash: str) -> KeyRow | None:
        r = self._one("SELECT id, tenant_id, agent_id, kind, key_prefix, created_at "
                      "FROM api_keys WHERE key_hash = %s", (key_hash,))
        return KeyRow(**r) if r else None

    # agents ------------------------------------------------------------------------------

    def get_agent(self, tenant_id: str, agent_id: str) -> AgentRow | None:
        r = self._one("SELECT tenant_id, agent_id, fleet_id, trust_level, display_name, "
                      "created_at, updated_at FROM agents WHERE tenant_id = %s "
                      "AND agent_id = %s", (tenant_id, agent_id))
        return AgentRow(**r) if r else None

    def upsert_agent(self, agent: AgentRow) -> None:
        now = now_iso()
        with self._tx() as cur:
            cur.execute(
                "INSERT INTO agents VALUES (%s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (tenant_id, agent_id) DO UPDATE SET fleet_id = excluded.fleet_id, "
                "display_name = excluded.display_name, trust_level = excluded.trust_level, "
                "updated_at = excluded.updated_at",
                (agent.tenant_id, agent.agent_id, agent.fleet_id, agent.display_name,
                 agent.trust_level, agent.created_at or now, now))

    def delete_agent(self, tenant_id: str, agent_id: str,
                     retire_rows_to: str | None = None) -> bool:
        """The agent row and every key of the agent, in one transaction (its memories stay,
        passed to `retire_rows_to` when given). False when there was no such agent."""
        with self._tx() as cur:
            cur.execute("DELETE FROM agents WHERE tenant_id = %s AND agent_id = %s",
                        (tenant_id, agent_id))
            deleted = cur.rowcount == 1
            cur.execute("DELETE FROM api_keys WHERE tenant_id = %s AND agent_id = %s",
                        (tenant_id, agent_id))
            if retire_rows_to is not None and deleted:
                cur.execute("UPDATE memories SET agent_id = %s WHERE tenant_id = %s "
                            "AND agent_id = %s", (retire_rows_to, tenant_id, agent_id))
            return deleted

    # memories ----------------------------------------------------------------------------

    def insert_memory(self, row: dict, embedding: np.ndarray | None,
                      links: Sequence[tuple[str, str]] = (), detection_due_at: float | None = None,
                      idempotency: IdempotencyRecord | None = None) -> None:
        """Row, entity links, detection job and idempotency record commit together."""
        self.insert_memories([NewMemory(row, embedding, links, detection_due_at, idempotency)])

    def insert_memories(self, memories: Sequence[NewMemory]) -> None:
        """Every memory's row, links, job and idempotency record in one transaction, each
        table's rows in one batched statement (psycopg's executemany pipelines them)."""
        if not memories:
            return
        enqueued = now_iso()
        runs: list[tuple[tuple[str, ...], list[tuple]]] = []  # (columns, rows), in order
        for m in memories:  # a row without an embedding names fewer columns
            values = _encode(m.row)
            if m.embedding is not None:
                values["embedding"] = m.embedding.astype(np.float32)
            if not runs or runs[-1][0] != tuple(values):
                runs.append((tuple(values), []))
            runs[-1][1].append(tuple(values.values()))
        links = [(m.row["id"], eid, role) for m in memories for eid, role in m.links]
        jobs = [(m.row["id"], m.row["tenant_id"], m.detection_due_at, enqueued)
                for m in memories if m.detection_due_at is not None]
        records = [(i.tenant_id, i.key, i.request_hash, i.status_code, i.body, enqueued)
                   for m in memories if (i := m.idempotency) is not None]
        # pipelined: BEGIN, the statements and COMMIT go out together, one round trip
        with self._conn() as conn, conn.pipeline(), conn.transaction(), conn.cursor() as cur:
            for cols, rows in runs:
                cur.executemany(f"INSERT INTO memories ({', '.join(cols)}) "
                                f"VALUES ({', '.join('%s' for _ in cols)})", rows)
            if links:
                cur.executemany("INSERT INTO memory_entity_links VALUES (%s, %s, %s) "
                                "ON CONFLICT DO NOTHING", links)
            if jobs:
                cur.executemany("INSERT INTO detection_jobs VALUES (%s, %s, %s, %s) "
                                "ON CONFLICT (memory_id) DO UPDATE SET due_at = excluded.due_at, "
                                "enqueued_at = excluded.enqueued_at", jobs)
            if records:
                cur.executemany("INSERT INTO idempotency VALUES (%s, %s, %s, %s, %s, %s) "
                                "ON CONFLICT (tenant_id, key) DO UPDATE SET "
                                "request_hash = excluded.request_hash, "
                                "status_code = excluded.status_code, body = excluded.body, "
                                "created_at = excluded.created_at", records)

    def insert_many(self, rows: Sequence[dict], embeddings: Sequence[np.ndarray]) -> None:
        """Seeding (benchmarks, fixtures): binary COPY in one transaction, no jobs. A large
        seed drops every index of the table but its keys' and builds each once after the copy
        (a sorted build instead of a million scattered inserts per index), with memory for
        the whole HNSW graph and parallel workers (one build at 1M rows instead of a graph
        that outgrows `maintenance_work_mem` and crawls); then VACUUM (ANALYZE), so the
        planner knows the new rows. This process's blocks of the seeded
        tenants are dropped (reloaded on use) rather than caught up row by row."""
        if not rows:
            return
        cols = [*rows[0], "embedding"]
        with self._tx() as cur:
            # a durable commit: VACUUM below cannot mark pages all-visible (what lets a
            # search skip the heap) while the commit's WAL is not yet on disk
            cur.execute("SET LOCAL synchronous_commit = on")
            hnsw = self.vector_search == "hnsw" or cur.execute(
                "SELECT to_regclass('ix_memories_embedding') IS NOT NULL AS x").fetchone()["x"]  # type: ignore[index]
            types = {r["attname"]: r["typname"] for r in cur.execute(
                "SELECT a.attname, t.typname FROM pg_attribute a JOIN pg_type t "
                "ON t.oid = a.atttypid WHERE a.attrelid = 'memories'::regclass "
                "AND a.attnum > 0").fetchall()}
            stored = cur.execute("SELECT reltuples AS n FROM pg_class "
                                 "WHERE oid = 'memories'::regclass").fetchone()["n"]  # type: ignore[index]
            rebuild = len(rows) >= max(BULK_REBUILD_ROWS, stored // 4)
            dropped: list[str] = []
            if rebuild:
                for r in cur.execute(SECONDARY_INDEXES).fetchall():
                    cur.execute(f'DROP INDEX "{r["name"]}"')
                    dropped.append(r["definition"])
            with cur.copy(f"COPY memories ({', '.join(cols)}) FROM STDIN "
                          "(FORMAT BINARY)") as copy:
                copy.set_types([types[c] for c in cols])
                for row, emb in zip(rows, embeddings, strict=True):
                    copy.write_row([*_encode(row).values(), emb.astype(np.float32)])
            if rebuild:
                self._build_indexes(cur, hnsw, dropped)
        with self._conn() as conn:
            conn.execute("VACUUM (ANALYZE) memories")
        for tenant_id in {r["tenant_id"] for r in rows}:
            with self._tenant_lock(tenant_id):
                self.index.forget(tenant_id)
                self._caught_up.pop(tenant_id, None)

    def _build_indexes(self, cur: psycopg.Cursor, hnsw: bool,
                       definitions: Sequence[str] = ()) -> None:
        """The indexes `definitions` create, the block and vec_xid indexes and (`hnsw`) the
        HNSW index, each built once over the table (if missing) in the caller's transaction:
        `maintenance_work_mem` sized to hold the
        graph of every row (a vector plus its neighbour lists, about dim * 4 + 1 kB a row),
        parallel workers on the machine's other cores."""
        total = cur.execute("SELECT count(*) AS n FROM memories").fetchone()["n"]  # type: ignore[index]
        graph_mb = (total * (self.dim * 4 + 1024)) >> 20
        mem_mb = min(max(256, graph_mb * 5 // 4), HNSW_BUILD_MAX_MB)
        workers = max(1, (os.cpu_count() or 2) - 1)
        cur.execute(f"SET LOCAL maintenance_work_mem = '{mem_mb}MB'")
        cur.execute(f"SET LOCAL max_parallel_maintenance_workers = {workers}")
        for definition in definitions:
            cur.execute(definition.replace("CREATE INDEX ", "CREATE INDEX IF NOT EXISTS ", 1))
        cur.execute(BLOCK_INDEX)
        cur.execute(VEC_XID_INDEX)
        if hnsw:
            cur.execute(HNSW_INDEX)

    def get_memory(self, tenant_id: str, memory_id: str) -> dict | None:
        r = self._one(f"SELECT {ROW_COLUMNS}, embedding FROM memories WHERE tenant_id = %s "
                      "AND id = %s", (tenant_id, memory_id))
        if r is None:
            return None
        emb = r.pop("embedding")
        row = _row(r)
        if emb is not None:
            emb = emb.to_numpy() if hasattr(emb, "to_numpy") else np.asarray(emb)
            emb = emb.astype(np.float32).tobytes()
        row["embedding"] = emb
        return row

    def memories_by_ids(self, tenant_id: str, ids: Sequence[str]) -> list[dict]:
        if not ids:
            return []
        rows = self._all(f"SELECT {ROW_COLUMNS} FROM memories WHERE tenant_id = %s "
                         "AND id = ANY(%s)", (tenant_id, list(ids)))
        return [_row(r) for r in rows]

    def find_exact_duplicate(self, tenant_id: str, fleet_id: str | None, agent_id: str,
                             content_hash: str) -> str | None:
        r = self._one("SELECT id FROM memories WHERE tenant_id = %s AND content_hash = %s "
                      "AND fleet_id IS NOT DISTINCT FROM %s AND agent_id = %s "
                      "AND deleted_at IS NULL LIMIT 1",
                      (tenant_id, content_hash, fleet_id, agent_id))
        return r["id"] if r else None

    def find_client_request(self, tenant_id: str, client_request_id: str) -> str | None:
        r = self._one("SELECT id FROM memories WHERE tenant_id = %s AND client_request_id = %s "
                      "LIMIT 1", (tenant_id, client_request_id))
        return r["id"] if r else None

    def find_client_requests(self, tenant_id: str,
                             client_request_ids: Sequence[str]) -> dict[str, str]:
        """{client_request_id: memory id} for those of the ids a row carries (a bulk chunk's
        replay check in one round trip instead of one per item)."""
        found: dict[str, str] = {}
        for r in self._all("SELECT client_request_id, id FROM memories WHERE tenant_id = %s "
                           "AND client_request_id = ANY(%s)",
                           (tenant_id, list(dict.fromkeys(client_request_ids)))):
            found.setdefault(r["client_request_id"], r["id"])
        return found

    def ranked_by_similarity(self, tenant_id: str, vector: np.ndarray,
                             min_similarity: float) -> tuple[np.ndarray, np.ndarray]:
        if self.vector_search == "hnsw":  # a distance filter would keep the index unused
            pairs = [(row["_rowid"], sim) for row, sim in
                     self.similar_rows(tenant_id, vector, min_similarity)]
            return (np.asarray([r for r, _ in pairs], dtype=np.int64),
                    np.asarray([s for _, s in pairs], dtype=np.float32))
        parts = list(ranked(self._snapshots(tenant_id, None), vector, min_similarity,
                            first=None))
        if not parts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def similar_rows(self, tenant_id: str, vector: np.ndarray, min_similarity: float,
                     visible: RowFilter | None = None,
                     first_page: int = 16) -> Iterator[tuple[dict, float]]:
        """The tenant's rows, most similar first, down to `min_similarity`; with `visible`,
        only rows it admits. Exact (the scope's blocks in memory, see `_snapshots`) unless
        the HNSW index is walked; lazy either way: rows are read in pages of growing size,
        so a consumer that stops early pays for one."""
        if self.vector_search == "hnsw" and (
                self.scoped_by_index or visible is None or visible.fleet_scope is None):
            yield from self._index_walk(tenant_id, vector, min_similarity, visible, first_page)
            return
        yield from ranked_rows(ranked(self._snapshots(tenant_id, visible), vector,
                                      min_similarity),
                               self.rows_by_rowids, tenant_id, visible, first_page, 4)

    def _snapshots(self, tenant_id: str, visible: RowFilter | None) -> list:
        """Snapshots of the units `visible` can admit rows from (every unit without a fleet
        scope), caught up with the table and loaded on first use; `ranked` multiplies them
        outside the lock."""
        with self._tenant_lock(tenant_id), self._conn() as conn:
            self._catch_up(conn, tenant_id)
            fleets = self.index.fleets(tenant_id) or {None}
            scope = visible.fleet_scope if visible is not None else None
            units = (units_in_scope(scope, fleets) if scope is not None
                     else [("fleet", f) for f in fleets] + [ORG])
            missing = [u for u in units if not self.index.loaded(tenant_id, u)]
            if missing:
                self._load_units(conn, tenant_id, missing)
            return self.index.snapshots(tenant_id, units)

    def _tenant_lock(self, tenant_id: str) -> threading.Lock:
        with self._locks_lock:
            return self._tenant_locks.setdefault(tenant_id, threading.Lock())

    def _catch_up(self, conn: psycopg.Connection, tenant_id: str) -> None:
        """Bring the tenant's loaded blocks up to the table, in one round trip: the rows whose
        `vec_xid` is at or above the oldest transaction open at the previous catch-up (all
        older ones had ended, so their rows were read then or before) are put where they now
        belong. A first call (or a long catch-up) starts afresh: the tenant's fleets, no
        block loaded. Both read after the new mark, so nothing committed later is lost."""
        since = self._caught_up.get(tenant_id)
        with conn.pipeline():
            mark = conn.execute(OLDEST_OPEN_XID)
            changed = conn.cursor(binary=True)
            changed.adapters.register_loader(self._vector_oid, _RawVectorLoader)
            if since is not None:
                changed.execute("SELECT rowid, fleet_id, visibility, embedding FROM memories "
                                "WHERE tenant_id = %s AND vec_xid >= %s::xid8 LIMIT %s",
                                (tenant_id, str(since), CATCH_UP_MAX_ROWS + 1))
        low = mark.fetchone()["low"]  # type: ignore[index]
        rows = changed.fetchall() if since is not None else None
        if rows is None or len(rows) > CATCH_UP_MAX_ROWS:
            self.index.forget(tenant_id)
            blocks = conn.execute(TENANT_BLOCKS, {"t": tenant_id}).fetchall()
            self.index.set_fleets(tenant_id, {None, *(r["scope_block"][2:] for r in blocks
                                                      if r["scope_block"])})
        else:
            for r in rows:
                vector = (_matrix([r["embedding"]], self.dim)[0]
                          if r["embedding"] is not None else None)
                self.index.place(tenant_id, unit_of(r["fleet_id"], r["visibility"]),
                                 r["rowid"], vector)
        self._caught_up[tenant_id] = low

    def _load_units(self, conn: psycopg.Connection, tenant_id: str,
                    units: Sequence[Unit]) -> None:
        """The units' vectors, in one statement (a search over many small fleets' units is
        one round trip), each unit in rowid order; a unit with no row loads empty."""
        cur = conn.cursor(binary=True, row_factory=tuple_row)
        cur.adapters.register_loader(self._vector_oid, _RawVectorLoader)
        rows = cur.execute("SELECT rowid, fleet_id, visibility, embedding FROM memories "
                           "WHERE tenant_id = %s AND scope_block = ANY(%s) "
                           "AND embedding IS NOT NULL ORDER BY rowid",
                           (tenant_id, sorted({unit_block(u) for u in units}))).fetchall()
        found: dict[Unit, list[tuple]] = {u: [] for u in units}
        for r in rows:
            held = found.get(unit_of(r[1], r[2]))
            if held is not None:  # block '' also holds the unit not asked for
                held.append(r)
        for unit, unit_rows in found.items():
            self.index.load_matrix(
                tenant_id, unit, np.asarray([r[0] for r in unit_rows], dtype=np.int64),
                _matrix([r[3] for r in unit_rows], self.dim))

    def _index_walk(self, tenant_id: str, vector: np.ndarray, min_similarity: float,
                    visible: RowFilter | None, first_page: int) -> Iterator[tuple[dict, float]]:
        """The HNSW index's order, the scope predicate checked (in the SQL) as it walks."""
        where = ["tenant_id = %s", "embedding IS NOT NULL"]
        args: list[Any] = [tenant_id]
        if visible is not None:
            visible = self._narrowed_to_tenant_fleets(tenant_id, visible)
            clause, clause_args = visible.sql("%s")
            where.append(clause)
            args.extend(clause_args)
        q = vector.astype(np.float32)
        sql = (f"SELECT {ROW_COLUMNS}, -(embedding <#> %s) AS _sim FROM memories "
               f"WHERE {' AND '.join(where)} ORDER BY embedding <#> %s LIMIT %s OFFSET %s")
        offset, page = 0, first_page
        while True:
            rows = self._all(sql, (q, *args, q, page, offset))
            for r in rows:
                sim = float(r.pop("_sim"))
                if sim < min_similarity:
                    return
                yield _row(r), sim
            if len(rows) < page:
                return
            offset += page
            page = min(page * 4, 4096)

    def _narrowed_to_tenant_fleets(self, tenant_id: str, visible: RowFilter) -> RowFilter:
        """A long `fleet_ids` list (a legal request may name 100k) cut to the fleets the tenant
        has rows in: the same rows match, but every page query no longer ships and scans the
        whole list while holding the connection every other request waits for."""
        fleet_ids = visible.fleet_ids
        if len(fleet_ids) <= LONG_FLEET_LIST:
            return visible
        present = {r["fleet_id"] for r in self._all(
            "SELECT DISTINCT fleet_id FROM memories WHERE tenant_id = %s AND fleet_id IS NOT NULL",
            (tenant_id,))}
        # none present: keep one absent id, so the fleet clause stays and matches no fleet
        kept = frozenset(f for f in fleet_ids if f in present) or frozenset([next(iter(fleet_ids))])
        return visible.with_fleet_ids(kept)

    def rows_by_rowids(self, rowids: Sequence[int]) -> dict[int, dict]:
        if len(rowids) == 0:
            return {}
        rows = self._all(f"SELECT {ROW_COLUMNS} FROM memories WHERE rowid = ANY(%s)",
                         ([int(x) for x in rowids],))
        return {r["_rowid"]: _row(r) for r in rows}

    def iter_memories(self, flt: ListFilter, chunk: int = 500) -> Iterator[dict]:
        where, args = list_where(flt, "%s")
        direction = "DESC" if flt.order == "desc" else "ASC"
        # SQLite sorts NULLs first ascending and last descending; PostgreSQL the reverse.
        nulls = "NULLS LAST" if direction == "DESC" else "NULLS FIRST"
        sql = (f"SELECT {ROW_COLUMNS} FROM memories WHERE {' AND '.join(where)} "
               f"ORDER BY {flt.sort} {direction} {nulls}, id {direction} LIMIT %s OFFSET %s")
        offset = 0
        while True:
            rows = self._all(sql, (*args, chunk, offset))
            yield from (_row(r) for r in rows)
            if len(rows) < chunk:
                return
            offset += chunk

    def successors_of(self, tenant_id: str, ids: Sequence[str]) -> list[dict]:
        if not ids:
            return []
        rows = self._all(f"SELECT {ROW_COLUMNS} FROM memories WHERE tenant_id = %s AND "
                         "deleted_at IS NULL AND supersedes_id = ANY(%s)",
                         (tenant_id, list(ids)))
        return [_row(r) for r in rows]

    def update_memory(self, row: dict, changes: dict[str, Any], embedding: np.ndarray | None,
                      links: Sequence[tuple[str, str]] | None) -> None:
        """Column changes (and a new embedding / link set) in one transaction."""
        values = _encode(changes)
        if embedding is not None:
            values["embedding"] = embedding.astype(np.float32)
        assignments = ", ".join(f"{column} = %s" for column in values)
        with self._tx() as cur:
            if values:
                cur.execute(f"UPDATE memories SET {assignments} WHERE id = %s",
                            (*values.values(), row["id"]))
            if links is not None:
                cur.execute("DELETE FROM memory_entity_links WHERE memory_id = %s", (row["id"],))
                if links:
                    cur.executemany("INSERT INTO memory_entity_links VALUES (%s, %s, %s) "
                                    "ON CONFLICT DO NOTHING",
                                    [(row["id"], eid, role) for eid, role in links])

    def update_status(self, tenant_id: str, memory_id: str, status: str) -> None:
        with self._tx() as cur:
            cur.execute("UPDATE memories SET status = %s WHERE tenant_id = %s AND id = %s",
                        (status, tenant_id, memory_id))

    def soft_delete(self, tenant_id: str, memory_id: str) -> None:
        with self._tx() as cur:
            cur.execute("UPDATE memories SET status = 'deleted', deleted_at = %s "
                        "WHERE tenant_id = %s AND id = %s", (now_iso(), tenant_id, memory_id))

    def reassign(self, tenant_id: str, memory_ids: Sequence[str], agent_id: str) -> None:
        """Redistribute: new owner; a private row becomes fleet-visible (MemClaw: promoted)."""
        with self._tx() as cur:
            cur.execute(
                "UPDATE memories SET agent_id = %s, visibility = CASE visibility WHEN "
                "'scope_agent' THEN 'scope_team' ELSE visibility END "
                "WHERE tenant_id = %s AND id = ANY(%s)", (agent_id, tenant_id, list(memory_ids)))

    # contradiction detection -------------------------------------------------------------

    def due_jobs(self, now: float, limit: int = 50) -> list[tuple[str, str]]:
        rows = self._all("SELECT memory_id, tenant_id FROM detection_jobs WHERE due_at <= %s "
                         "ORDER BY due_at LIMIT %s", (now, limit))
        return [(r["memory_id"], r["tenant_id"]) for r in rows]

    def next_due_at(self) -> float | None:
        r = self._one("SELECT min(due_at) AS due FROM detection_jobs")
        return r["due"] if r and r["due"] is not None else None

    def detection_pending(self, memory_id: str) -> bool:
        return self._one("SELECT 1 FROM detection_jobs WHERE memory_id = %s",
                         (memory_id,)) is not None

    def rdf_candidates(self, row: dict) -> list[dict]:
        """Live rows of the same tenant and fleet (strict) asserting another object for the
        same subject and predicate."""
        rows = self._all(
            f"SELECT {ROW_COLUMNS} FROM memories WHERE tenant_id = %s "
            "AND fleet_id IS NOT DISTINCT FROM %s AND subject_entity_id = %s "
            "AND lower(predicate) = lower(%s) AND object_value <> %s "
            "AND status = ANY(%s) AND deleted_at IS NULL AND id <> %s",
            (row["tenant_id"], row["fleet_id"], row["subject_entity_id"], row["predicate"],
             row["object_value"], list(LIVE_STATUSES), row["id"]))
        return [_row(r) for r in rows]

    def complete_detection(self, memory_id: str,
                           supersessions: Sequence[tuple[str, str]]) -> None:
        """Apply (newer_id, older_id) pairs and drop the job, in one transaction. Its commit
        does not wait for the WAL flush (it runs on the event loop, once per written row): a
        crash may lose it whole, job row included, and the job then runs again to the same
        result."""
        with self._tx() as cur:
            cur.execute("SET LOCAL synchronous_commit TO OFF")
            for newer_id, older_id in supersessions:
                cur.execute("UPDATE memories SET status = 'outdated' WHERE id = %s "
                            "AND deleted_at IS NULL", (older_id,))
                cur.execute("UPDATE memories SET supersedes_id = %s WHERE id = %s "
                            "AND supersedes_id IS NULL", (older_id, newer_id))
            cur.execute("DELETE FROM detection_jobs WHERE memory_id = %s", (memory_id,))

    # entities ----------------------------------------------------------------------------

    def find_entity(self, tenant_id: str, entity_type: str, canonical_name: str,
                    fleet_id: str | None) -> dict | None:
        r = self._one("SELECT * FROM entities WHERE tenant_id = %s AND entity_type = %s "
                      "AND canonical_name = %s AND fleet_id IS NOT DISTINCT FROM %s",
                      (tenant_id, entity_type, canonical_name, fleet_id))
        return _entity(r) if r else None

    def get_entity(self, tenant_id: str, entity_id: str) -> dict | None:
        r = self._one("SELECT * FROM entities WHERE tenant_id = %s AND id = %s",
                      (tenant_id, entity_id))
        return _entity(r) if r else None

    def known_entity_ids(self, tenant_id: str, entity_ids: Sequence[str]) -> set[str]:
        wanted = list(dict.fromkeys(entity_ids))
        known: set[str] = set()
        for start in range(0, len(wanted), 500):  # bounded statements, any input size
            chunk = wanted[start:start + 500]
            marks = ", ".join("%s" for _ in chunk)
            rows = self._all(f"SELECT id FROM entities WHERE tenant_id = %s "
                             f"AND id IN ({marks})", [tenant_id, *chunk])
            known.update(r["id"] for r in rows)
        return known

    def save_entity(self, entity: dict) -> None:
        with self._tx() as cur:
            cur.execute(
                "INSERT INTO entities VALUES (%s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (id) DO UPDATE SET tenant_id = excluded.tenant_id, "
                "fleet_id = excluded.fleet_id, entity_type = excluded.entity_type, "
                "canonical_name = excluded.canonical_name, attributes = excluded.attributes, "
                "created_at = excluded.created_at",
                (entity["id"], entity["tenant_id"], entity["fleet_id"], entity["entity_type"],
                 entity["canonical_name"], json.dumps(entity["attributes"]),
                 entity["created_at"]))

    def entity_links_of(self, memory_ids: Sequence[str]) -> dict[str, list[dict]]:
        if not memory_ids:
            return {}
        rows = self._all("SELECT memory_id, entity_id, role FROM memory_entity_links "
                         "WHERE memory_id = ANY(%s)", (list(memory_ids),))
        links: dict[str, list[dict]] = {}
        for r in rows:
            links.setdefault(r["memory_id"], []).append(
                {"entity_id": r["entity_id"], "role": r["role"]})
        return links

    def memories_linked_to(self, tenant_id: str, entity_id: str,
                           visible: RowFilter | None = None) -> list[dict]:
        """Newest first; with `visible`, only the rows its scope predicate admits (SQL)."""
        where, args = "", []
        if visible is not None:
            clause, args = self._narrowed_to_tenant_fleets(tenant_id, visible).sql("%s")
            where = f" AND {clause}"  # its columns are the memories' alone
        rows = self._all(f"SELECT {ROW_COLUMNS_M} FROM memories m JOIN memory_entity_links l "
                         "ON l.memory_id = m.id WHERE m.tenant_id = %s AND l.entity_id = %s "
                         f"AND m.deleted_at IS NULL{where} "
                         "ORDER BY m.created_at DESC, m.id DESC",
                         (tenant_id, entity_id, *args))
        return [_row(r) for r in rows]

    def entities_named_in(self, tenant_id: str, text: str, limit: int = 10) -> list[dict]:
        """Entities whose canonical name (3+ characters) occurs in `text`, case-insensitive:
        the seeds of the search's graph expansion."""
        rows = self._all("SELECT * FROM entities WHERE tenant_id = %s "
                         "AND length(canonical_name) >= 3 "
                         "AND strpos(lower(%s), lower(canonical_name)) > 0 "
                         "ORDER BY length(canonical_name) DESC, id LIMIT %s",
                         (tenant_id, text, limit))
        return [_entity(r) for r in rows]

    # idempotency -------------------------------------------------------------------------

    def get_idempotency(self, tenant_id: str, key: str) -> IdempotencyRecord | None:
        r = self._one("SELECT tenant_id, key, request_hash, status_code, body FROM idempotency "
                      "WHERE tenant_id = %s AND key = %s", (tenant_id, key))
        return IdempotencyRecord(**r) if r else None


def _encode(row: dict) -> dict:
    values = dict(row)
    if values.get("metadata") is not None:
        values["metadata"] = json.dumps(values["metadata"])
    return values


def _row(r: dict) -> dict:
    if r.get("metadata") is not None:
        r["metadata"] = json.loads(r["metadata"])
    return r


def _entity(r: dict) -> dict:
    r["attributes"] = json.loads(r["attributes"])
    return r
