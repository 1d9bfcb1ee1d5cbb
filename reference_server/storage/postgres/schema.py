"""The PostgreSQL store's schema: tables (the same columns as SQLite's, timestamps as ISO
text, metadata as JSON text, so both order and compare alike), the scope-block column and
`vec_xid` the vector blocks follow (blocks.py), and the indexes, built one way at start and
another after a large COPY (`build_indexes`).
"""

from __future__ import annotations

import os

import psycopg
from psycopg.rows import dict_row

from ..sql.schema import tables_sql

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


def schema_sql(dim: int) -> str:
    """The shared tables (sql/schema.py) with pgvector's type, then what the vector blocks
    follow: each row's scope block and `vec_xid` (a trigger keeps it), and their indexes.
    An older database gains the newer columns here."""
    tables = tables_sql(real="DOUBLE PRECISION", embedding=f"vector({dim})",
                        rowid="rowid BIGSERIAL UNIQUE")
    return "CREATE EXTENSION IF NOT EXISTS vector;\n" + tables + f"""
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
"""


# Two servers starting on one fresh database race on CREATE EXTENSION / TABLE: an advisory
# lock makes schema creation one at a time.
SCHEMA_LOCK = 8130013


def create_schema(url: str, dim: int, hnsw: bool) -> None:
    """Tables and indexes (idempotent; an older database gains the newer columns), on a
    connection of its own before the pool opens."""
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK,))
        try:
            conn.execute(schema_sql(dim))
            if hnsw:  # only a store searched through it keeps one
                with conn.transaction(), conn.cursor() as cur:
                    build_indexes(cur, dim, hnsw=True)
            # a catch-up (vec_xid >= recent) is a short index range only if the planner
            # knows the column's values: without statistics (a table filled before the
            # column existed) it guesses a third of the table and scans all of it
            if not conn.execute("SELECT EXISTS (SELECT FROM pg_stats WHERE tablename = "
                                "'memories' AND attname = 'vec_xid') AS x").fetchone()["x"]:  # type: ignore[index]
                conn.execute("ANALYZE memories")
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK,))


def build_indexes(cur: psycopg.Cursor, dim: int, hnsw: bool,
                  definitions: tuple[str, ...] | list[str] = ()) -> None:
    """The indexes `definitions` create, the block and vec_xid indexes and (`hnsw`) the
    HNSW index, each built once over the table (if missing) in the caller's transaction:
    `maintenance_work_mem` sized to hold the graph of every row (a vector plus its
    neighbour lists, about dim * 4 + 1 kB a row), parallel workers on the machine's other
    cores."""
    total = cur.execute("SELECT count(*) AS n FROM memories").fetchone()["n"]  # type: ignore[index]
    graph_mb = (total * (dim * 4 + 1024)) >> 20
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
