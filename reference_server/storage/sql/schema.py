"""The tables both stores keep, in one text: column types are the dialect's (a float, the
embedding's type, PostgreSQL's explicit `rowid`); each store adds its own indexes and
columns after it (sqlite.py, postgres/schema.py). Timestamps are ISO-8601 text and metadata
JSON text on both, so rows order and compare alike.
"""

from __future__ import annotations

TABLES = """
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
{rowid}    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    fleet_id TEXT,
    agent_id TEXT NOT NULL,
    memory_type TEXT NOT NULL,
    title TEXT,
    content TEXT NOT NULL,
    weight {real} NOT NULL DEFAULT 0.5,
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
    embedding {embedding}
);
CREATE INDEX IF NOT EXISTS ix_memories_tenant_created ON memories (tenant_id, created_at);
CREATE INDEX IF NOT EXISTS ix_memories_hash ON memories (tenant_id, content_hash);
CREATE INDEX IF NOT EXISTS ix_memories_subject ON memories (tenant_id, subject_entity_id);
CREATE INDEX IF NOT EXISTS ix_memories_supersedes ON memories (supersedes_id);
CREATE INDEX IF NOT EXISTS ix_memories_request ON memories (tenant_id, client_request_id);
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
    due_at {real} NOT NULL,
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


def tables_sql(real: str, embedding: str, rowid: str = "") -> str:
    """`real`: the float type; `embedding`: the vector column's type; `rowid`: a column
    definition (with its comma) where the engine has no implicit rowid."""
    return TABLES.format(real=real, embedding=embedding,
                         rowid=f"    {rowid},\n" if rowid else "")
