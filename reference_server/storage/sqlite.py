"""The SQLite store (WAL, one file), an implementation of `Storage` (protocol.py).

Every acknowledged write is committed before the response is sent; the contradiction job
for a memory is inserted in the same transaction as the memory row, so a restart or a
`kill -9` loses neither. Vector scores come from in-memory blocks per tenant and fleet
(vectors.py), loaded lazily from the stored embeddings; a scoped search multiplies only the
blocks its scope can admit, and the ranking is exact (PostgreSQL + pgvector: postgres.py).
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

SCHEMA = """
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
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    fleet_id TEXT,
    agent_id TEXT NOT NULL,
    memory_type TEXT NOT NULL,
    title TEXT,
    content TEXT NOT NULL,
    weight REAL NOT NULL DEFAULT 0.5,
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
    embedding BLOB
);
CREATE INDEX IF NOT EXISTS ix_memories_tenant_created ON memories (tenant_id, created_at);
CREATE INDEX IF NOT EXISTS ix_memories_hash ON memories (tenant_id, content_hash);
CREATE INDEX IF NOT EXISTS ix_memories_subject ON memories (tenant_id, subject_entity_id);
CREATE INDEX IF NOT EXISTS ix_memories_supersedes ON memories (supersedes_id);
CREATE INDEX IF NOT EXISTS ix_memories_request ON memories (tenant_id, client_request_id);
CREATE INDEX IF NOT EXISTS ix_memories_unit ON memories
    (tenant_id, visibility = 'scope_org', fleet_id);
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
    due_at REAL NOT NULL,
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


# Everything but the embedding blob (only the by-id detail shows it).
SQL_FLEET_IDS_MAX = 500  # longer fleet_ids lists stay out of SQL (one parameter per id)
ROW_CACHE_MAX = 50_000  # decoded rows kept per store (a 10x-scale tenant is ~20,000)
ROW_COLUMNS = "rowid AS _rowid, " + ", ".join(MEMORY_COLUMNS)
ROW_COLUMNS_M = "m.rowid AS _rowid, " + ", ".join(f"m.{c}" for c in MEMORY_COLUMNS)


class SqliteStorage:
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
    def _tx(self) -> Iterator[sqlite3.Connection]:
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
            return [_decoded(dict(zip(names, r, strict=True))) for r in rows]
        cache = self._row_cache
        if len(cache) > ROW_CACHE_MAX:
            cache.clear()
        out = []
        for r in rows:
            hit = cache.get(r[0])
            if hit is None or hit[0] != r:
                hit = cache[r[0]] = (r, _decoded(dict(zip(names, r, strict=True))))
            out.append(hit[1])
        return out

    def _pages(self, sql: str, args: Sequence[Any], first: int, last: int) -> Iterator[dict]:
        """The memory rows of `sql` (ending in `LIMIT ? OFFSET ?`), read lazily in pages of
        `first` rows, each four times the last, up to `last`: a reader that stops early
        reads little, one that reads everything makes few queries."""
        offset, size = 0, first
        while True:
            rows = self._memory_rows(sql, (*args, size, offset))
            yield from rows
            if len(rows) < size:
                return
            offset, size = offset + size, min(size * 4, last)

    # tenants and keys --------------------------------------------------------------------

    def create_tenant(self, tenant_id: str) -> bool:
        with self._tx() as db:
            cur = db.execute("INSERT OR IGNORE INTO tenants VALUES (?, ?)", (tenant_id, now_iso()))
            return cur.rowcount == 1

    def tenant_exists(self, tenant_id: str) -> bool:
        return self._one("SELECT 1 FROM tenants WHERE tenant_id = ?", (tenant_id,)) is not None

    def add_key(self, key_hash: str, row: KeyRow, label: str | None = None) -> None:
        """An agent key replaces every earlier key of the same agent (re-provisioning
        revokes), in the same transaction."""
        with self._tx() as db:
            if row.agent_id is not None:
                db.execute("DELETE FROM api_keys WHERE tenant_id = ? AND agent_id = ?",
                           (row.tenant_id, row.agent_id))
            db.execute(
                "INSERT OR REPLACE INTO api_keys VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (key_hash, row.id, row.tenant_id, row.agent_id, row.kind, row.key_prefix,
                 label, row.created_at),
            )

    def find_key(self, key_hash: str) -> KeyRow | None:
        r = self._one("SELECT id, tenant_id, agent_id, kind, key_prefix, created_at "
                      "FROM api_keys WHERE key_hash = ?", (key_hash,))
        return KeyRow(**dict(r)) if r else None

    # agents ------------------------------------------------------------------------------

    def get_agent(self, tenant_id: str, agent_id: str) -> AgentRow | None:
        r = self._one("SELECT tenant_id, agent_id, fleet_id, trust_level, display_name, "
                      "created_at, updated_at FROM agents WHERE tenant_id = ? AND agent_id = ?",
                      (tenant_id, agent_id))
        return AgentRow(**dict(r)) if r else None

    def upsert_agent(self, agent: AgentRow) -> None:
        now = now_iso()
        with self._tx() as db:
            db.execute(
                "INSERT INTO agents VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (tenant_id, agent_id) DO UPDATE SET fleet_id = excluded.fleet_id, "
                "display_name = excluded.display_name, trust_level = excluded.trust_level, "
                "updated_at = excluded.updated_at",
                (agent.tenant_id, agent.agent_id, agent.fleet_id, agent.display_name,
                 agent.trust_level, agent.created_at or now, now),
            )

    def delete_agent(self, tenant_id: str, agent_id: str,
                     retire_rows_to: str | None = None) -> bool:
        """The agent row and every key of the agent, in one transaction (its memories stay,
        passed to `retire_rows_to` when given). False when there was no such agent."""
        with self._tx() as db:
            cur = db.execute("DELETE FROM agents WHERE tenant_id = ? AND agent_id = ?",
                             (tenant_id, agent_id))
            db.execute("DELETE FROM api_keys WHERE tenant_id = ? AND agent_id = ?",
                       (tenant_id, agent_id))
            if retire_rows_to is not None and cur.rowcount == 1:
                db.execute("UPDATE memories SET agent_id = ? WHERE tenant_id = ? "
                           "AND agent_id = ?", (retire_rows_to, tenant_id, agent_id))
            return cur.rowcount == 1

    # memories ----------------------------------------------------------------------------

    def insert_memory(self, row: dict, embedding: np.ndarray | None,
                      links: Sequence[tuple[str, str]] = (), detection_due_at: float | None = None,
                      idempotency: IdempotencyRecord | None = None) -> None:
        """Row, entity links, detection job and idempotency record commit together."""
        self.insert_memories([NewMemory(row, embedding, links, detection_due_at, idempotency)])

    def insert_memories(self, memories: Sequence[NewMemory]) -> None:
        """Every memory's row, links, job and idempotency record in one transaction."""
        if not memories:
            return
        rowids = []
        enqueued = now_iso()
        with self._tx() as db:
            for m in memories:  # one statement a row: each row's rowid for the vector index
                values = dict(m.row)
                if values.get("metadata") is not None:
                    values["metadata"] = json.dumps(values["metadata"], allow_nan=False)
                if m.embedding is not None:
                    values["embedding"] = m.embedding.astype(np.float32).tobytes()
                cur = db.execute(f"INSERT INTO memories ({', '.join(values)}) "
                                 f"VALUES ({', '.join('?' for _ in values)})",
                                 tuple(values.values()))
                rowids.append(cur.lastrowid)
            db.executemany("INSERT OR IGNORE INTO memory_entity_links VALUES (?, ?, ?)",
                           [(m.row["id"], eid, role) for m in memories for eid, role in m.links])
            db.executemany("INSERT OR REPLACE INTO detection_jobs VALUES (?, ?, ?, ?)",
                           [(m.row["id"], m.row["tenant_id"], m.detection_due_at, enqueued)
                            for m in memories if m.detection_due_at is not None])
            db.executemany("INSERT OR REPLACE INTO idempotency VALUES (?, ?, ?, ?, ?, ?)",
                           [(i.tenant_id, i.key, i.request_hash, i.status_code, i.body, enqueued)
                            for m in memories if (i := m.idempotency) is not None])
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
                     for k, v in row.items()), emb.astype(np.float32).tobytes())
                  for row, emb in zip(rows, embeddings, strict=True)]
        with self._tx() as db:
            db.executemany(sql, values)
            for tenant_id in {row["tenant_id"] for row in rows}:  # reloaded on first use
                self.index.forget(tenant_id)

    def get_memory(self, tenant_id: str, memory_id: str) -> dict | None:
        rows = self._memory_rows("SELECT rowid AS _rowid, * FROM memories "
                                 "WHERE tenant_id = ? AND id = ?", (tenant_id, memory_id))
        return rows[0] if rows else None

    def memories_by_ids(self, tenant_id: str, ids: Sequence[str]) -> list[dict]:
        if not ids:
            return []
        marks = ", ".join("?" for _ in ids)
        return self._memory_rows(f"SELECT {ROW_COLUMNS} FROM memories WHERE tenant_id = ? "
                                 f"AND id IN ({marks})", (tenant_id, *ids))

    def find_exact_duplicate(self, tenant_id: str, fleet_id: str | None, agent_id: str,
                             content_hash: str) -> str | None:
        r = self._one("SELECT id FROM memories WHERE tenant_id = ? AND content_hash = ? "
                      "AND fleet_id IS ? AND agent_id = ? AND deleted_at IS NULL LIMIT 1",
                      (tenant_id, content_hash, fleet_id, agent_id))
        return r["id"] if r else None

    def find_client_request(self, tenant_id: str, client_request_id: str) -> str | None:
        r = self._one("SELECT id FROM memories WHERE tenant_id = ? AND client_request_id = ? "
                      "LIMIT 1", (tenant_id, client_request_id))
        return r["id"] if r else None

    def find_client_requests(self, tenant_id: str,
                             client_request_ids: Sequence[str]) -> dict[str, str]:
        """{client_request_id: memory id} for those of the ids a row carries (a bulk chunk's
        replay check in one statement per 500 ids instead of one per item)."""
        wanted, found = list(dict.fromkeys(client_request_ids)), {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            for r in self._all(f"SELECT client_request_id, id FROM memories WHERE tenant_id = ? "
                               f"AND client_request_id IN ({', '.join('?' for _ in chunk)})",
                               (tenant_id, *chunk)):
                found.setdefault(r[0], r[1])
        return found

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

    def ranked_by_similarity(self, tenant_id: str, vector: np.ndarray,
                             min_similarity: float) -> tuple[np.ndarray, np.ndarray]:
        parts = list(ranked(self._snapshots(tenant_id, None), vector, min_similarity,
                            first=None))
        if not parts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def similar_rows(self, tenant_id: str, vector: np.ndarray, min_similarity: float,
                     visible: RowFilter | None = None) -> Iterator[tuple[dict, float]]:
        """The tenant's rows, most similar first (exact, over the in-memory blocks of the
        fleets `visible` can admit), down to `min_similarity`; with `visible`, only the rows
        it admits. Lazy: rows are read in growing chunks, so a search that stops after a few
        dozen rows reads a few dozen."""
        yield from ranked_rows(ranked(self._snapshots(tenant_id, visible), vector,
                                      min_similarity),
                               self.rows_by_rowids, tenant_id, visible, 64, 2)

    def rows_by_rowids(self, rowids: Sequence[int]) -> dict[int, dict]:
        if len(rowids) == 0:
            return {}
        marks = ", ".join("?" for _ in rowids)
        rows = self._memory_rows(f"SELECT {ROW_COLUMNS} FROM memories WHERE rowid IN ({marks})",
                                 [int(x) for x in rowids])
        return {r["_rowid"]: r for r in rows}

    def iter_memories(self, flt: ListFilter, chunk: int = 500) -> Iterator[dict]:
        where, args = list_where(flt)
        direction = "DESC" if flt.order == "desc" else "ASC"
        sql = (f"SELECT {ROW_COLUMNS} FROM memories WHERE {' AND '.join(where)} "
               f"ORDER BY {flt.sort} {direction}, id {direction} LIMIT ? OFFSET ?")
        return self._pages(sql, args, first=chunk, last=chunk)

    def successors_of(self, tenant_id: str, ids: Sequence[str]) -> list[dict]:
        if not ids:
            return []
        marks = ", ".join("?" for _ in ids)
        return self._memory_rows(f"SELECT {ROW_COLUMNS} FROM memories WHERE tenant_id = ? AND "
                                 f"deleted_at IS NULL AND supersedes_id IN ({marks})",
                                 (tenant_id, *ids))

    def update_memory(self, row: dict, changes: dict[str, Any], embedding: np.ndarray | None,
                      links: Sequence[tuple[str, str]] | None) -> None:
        """Column changes (and a new embedding / link set) in one transaction."""
        values = dict(changes)
        if "metadata" in values and values["metadata"] is not None:
            values["metadata"] = json.dumps(values["metadata"], allow_nan=False)
        if embedding is not None:
            values["embedding"] = embedding.astype(np.float32).tobytes()
        assignments = ", ".join(f"{column} = ?" for column in values)
        with self._tx() as db:
            if values:
                db.execute(f"UPDATE memories SET {assignments} WHERE id = ?",
                           (*values.values(), row["id"]))
            if links is not None:
                db.execute("DELETE FROM memory_entity_links WHERE memory_id = ?", (row["id"],))
                db.executemany("INSERT OR IGNORE INTO memory_entity_links VALUES (?, ?, ?)",
                               [(row["id"], eid, role) for eid, role in links])
        was = unit_of(row["fleet_id"], row["visibility"])
        unit = unit_of(row["fleet_id"], changes.get("visibility", row["visibility"]))
        with self._lock:
            if embedding is not None:
                self.index.put(row["tenant_id"], unit, row["_rowid"], embedding, was)
            elif unit != was:
                self.index.move(row["tenant_id"], row["_rowid"], was, unit)

    def update_status(self, tenant_id: str, memory_id: str, status: str) -> None:
        with self._tx() as db:
            db.execute("UPDATE memories SET status = ? WHERE tenant_id = ? AND id = ?",
                       (status, tenant_id, memory_id))

    def soft_delete(self, tenant_id: str, memory_id: str) -> None:
        with self._tx() as db:
            db.execute("UPDATE memories SET status = 'deleted', deleted_at = ? "
                       "WHERE tenant_id = ? AND id = ?", (now_iso(), tenant_id, memory_id))

    def reassign(self, tenant_id: str, memory_ids: Sequence[str], agent_id: str) -> None:
        """Redistribute: new owner; a private row becomes fleet-visible (MemClaw: promoted)."""
        with self._tx() as db:
            db.executemany(
                "UPDATE memories SET agent_id = ?, visibility = CASE visibility WHEN "
                "'scope_agent' THEN 'scope_team' ELSE visibility END "
                "WHERE tenant_id = ? AND id = ?",
                [(agent_id, tenant_id, mid) for mid in memory_ids])

    # contradiction detection -------------------------------------------------------------

    def due_jobs(self, now: float, limit: int = 50) -> list[tuple[str, str]]:
        rows = self._all("SELECT memory_id, tenant_id FROM detection_jobs WHERE due_at <= ? "
                         "ORDER BY due_at LIMIT ?", (now, limit))
        return [(r[0], r[1]) for r in rows]

    def next_due_at(self) -> float | None:
        r = self._one("SELECT min(due_at) FROM detection_jobs")
        return r[0] if r and r[0] is not None else None

    def detection_pending(self, memory_id: str) -> bool:
        return self._one("SELECT 1 FROM detection_jobs WHERE memory_id = ?",
                         (memory_id,)) is not None

    def rdf_candidates(self, row: dict) -> list[dict]:
        """Live rows of the same tenant and fleet (strict) asserting another object for the
        same subject and predicate."""
        marks = ", ".join("?" for _ in LIVE_STATUSES)
        return self._memory_rows(
            f"SELECT {ROW_COLUMNS} FROM memories WHERE tenant_id = ? AND fleet_id IS ? "
            f"AND subject_entity_id = ? AND lower(predicate) = lower(?) AND object_value <> ? "
            f"AND status IN ({marks}) AND deleted_at IS NULL AND id <> ?",
            (row["tenant_id"], row["fleet_id"], row["subject_entity_id"], row["predicate"],
             row["object_value"], *LIVE_STATUSES, row["id"]))

    def complete_detection(self, memory_id: str,
                           supersessions: Sequence[tuple[str, str]]) -> None:
        """Apply (newer_id, older_id) pairs and drop the job, in one transaction."""
        with self._tx() as db:
            for newer_id, older_id in supersessions:
                db.execute("UPDATE memories SET status = 'outdated' WHERE id = ? "
                           "AND deleted_at IS NULL", (older_id,))
                db.execute("UPDATE memories SET supersedes_id = ? WHERE id = ? "
                           "AND supersedes_id IS NULL", (older_id, newer_id))
            db.execute("DELETE FROM detection_jobs WHERE memory_id = ?", (memory_id,))

    # entities ----------------------------------------------------------------------------

    def find_entity(self, tenant_id: str, entity_type: str, canonical_name: str,
                    fleet_id: str | None) -> dict | None:
        r = self._one("SELECT * FROM entities WHERE tenant_id = ? AND entity_type = ? "
                      "AND canonical_name = ? AND fleet_id IS ?",
                      (tenant_id, entity_type, canonical_name, fleet_id))
        return _entity(r) if r else None

    def get_entity(self, tenant_id: str, entity_id: str) -> dict | None:
        r = self._one("SELECT * FROM entities WHERE tenant_id = ? AND id = ?",
                      (tenant_id, entity_id))
        return _entity(r) if r else None

    def known_entity_ids(self, tenant_id: str, entity_ids: Sequence[str]) -> set[str]:
        wanted = list(dict.fromkeys(entity_ids))
        known: set[str] = set()
        for start in range(0, len(wanted), 500):  # bounded statements, any input size
            chunk = wanted[start:start + 500]
            marks = ", ".join("?" for _ in chunk)
            rows = self._all(f"SELECT id FROM entities WHERE tenant_id = ? "
                             f"AND id IN ({marks})", [tenant_id, *chunk])
            known.update(r["id"] for r in rows)
        return known

    def save_entity(self, entity: dict) -> None:
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO entities VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (entity["id"], entity["tenant_id"], entity["fleet_id"],
                        entity["entity_type"], entity["canonical_name"],
                        json.dumps(entity["attributes"], allow_nan=False),
                        entity["created_at"]))

    def entity_links_of(self, memory_ids: Sequence[str]) -> dict[str, list[dict]]:
        if not memory_ids:
            return {}
        marks = ", ".join("?" for _ in memory_ids)
        rows = self._all(f"SELECT memory_id, entity_id, role FROM memory_entity_links "
                         f"WHERE memory_id IN ({marks})", list(memory_ids))
        links: dict[str, list[dict]] = {}
        for r in rows:
            links.setdefault(r["memory_id"], []).append(
                {"entity_id": r["entity_id"], "role": r["role"]})
        return links

    def memories_linked_to(self, tenant_id: str, entity_id: str,
                           visible: RowFilter | None = None) -> Iterator[dict]:
        """Newest first, read in growing pages: the graph walk stops at its row cap, so a
        hub entity linked to hundreds of rows costs the few dozen the walk takes. With
        `visible`, only rows its scope predicate admits, in the SQL: a hub whose rows the
        caller may not read is otherwise read whole by every search that names it (a
        fleet list too long for SQLite's parameters is judged by the caller alone)."""
        where, args = "", ()
        if visible is not None and len(visible.fleet_ids) <= SQL_FLEET_IDS_MAX:
            clause, clause_args = visible.sql("?")  # its columns are the memories' alone
            where, args = f" AND {clause}", tuple(clause_args)
        sql = (f"SELECT {ROW_COLUMNS_M} FROM memories m JOIN memory_entity_links l "
               "ON l.memory_id = m.id WHERE m.tenant_id = ? AND l.entity_id = ? "
               f"AND m.deleted_at IS NULL{where} ORDER BY m.created_at DESC, m.id DESC "
               "LIMIT ? OFFSET ?")
        return self._pages(sql, (tenant_id, entity_id, *args), first=32, last=1024)

    def entities_named_in(self, tenant_id: str, text: str, limit: int = 10) -> list[dict]:
        """Entities whose canonical name (3+ characters) occurs in `text`, case-insensitive:
        the seeds of the search's graph expansion."""
        rows = self._all("SELECT * FROM entities WHERE tenant_id = ? "
                         "AND length(canonical_name) >= 3 "
                         "AND instr(lower(?), lower(canonical_name)) > 0 "
                         "ORDER BY length(canonical_name) DESC, id LIMIT ?",
                         (tenant_id, text, limit))
        return [_entity(r) for r in rows]

    # idempotency -------------------------------------------------------------------------

    def get_idempotency(self, tenant_id: str, key: str) -> IdempotencyRecord | None:
        r = self._one("SELECT tenant_id, key, request_hash, status_code, body FROM idempotency "
                      "WHERE tenant_id = ? AND key = ?", (tenant_id, key))
        return IdempotencyRecord(**dict(r)) if r else None


def _decoded(d: dict) -> dict:
    if d.get("metadata") is not None:
        d["metadata"] = json.loads(d["metadata"])
    return d


def _entity(r: sqlite3.Row) -> dict:
    d = dict(r)
    d["attributes"] = json.loads(d["attributes"])
    return d
