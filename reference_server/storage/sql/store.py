"""`SqlStore`: the statements the SQLite and PostgreSQL stores share, written once.

A subclass brings its connection (`_tx`, `_one`, `_all`, `_memory_rows`), its vectors
(`_snapshots`, `_vector_param`, `_vector_bytes`, `_vectors_changed`) and its bulk insert
(base.py says what each must do); the rest is here (memory rows) and in records.py
(tenants, keys, agents, jobs, entities, idempotency records), in `?`-placeholder SQL that
`Dialect.sql` adapts to the driver.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..protocol import RowFilter
from ..rows import (
    LIVE_STATUSES,
    IdempotencyRecord,
    ListFilter,
    NewMemory,
    list_where,
    now_iso,
)
from ..vectors import ranked, ranked_rows
from .base import INSERT_LINK, ROW_COLUMNS, ROW_COLUMNS_M, encode_columns
from .records import SqlRecords


class SqlStore(SqlRecords):
    # memories --------------------------------------------------------------------------

    def insert_memories(self, memories: Sequence[NewMemory]) -> None:
        raise NotImplementedError

    def insert_memory(self, row: dict, embedding: np.ndarray | None,
                      links: Sequence[tuple[str, str]] = (), detection_due_at: float | None = None,
                      idempotency: IdempotencyRecord | None = None) -> None:
        """Row, entity links, detection job and idempotency record commit together."""
        self.insert_memories([NewMemory(row, embedding, links, detection_due_at, idempotency)])

    def get_memory(self, tenant_id: str, memory_id: str) -> dict | None:
        rows = self._memory_rows(f"SELECT {ROW_COLUMNS}, embedding FROM memories "
                                 "WHERE tenant_id = ? AND id = ?", (tenant_id, memory_id))
        if not rows:
            return None
        row = rows[0]
        stored = row["embedding"]
        as_bytes = self._vector_bytes(stored)
        if as_bytes is not stored:  # SQLite's blob is already the bytes (a shared dict)
            row = {**row, "embedding": as_bytes}
        return row

    def memories_by_ids(self, tenant_id: str, ids: Sequence[str]) -> list[dict]:
        if not ids:
            return []
        clause, args = self._in("id", list(ids))
        return self._memory_rows(f"SELECT {ROW_COLUMNS} FROM memories WHERE tenant_id = ? "
                                 f"AND {clause}", (tenant_id, *args))

    def find_exact_duplicate(self, tenant_id: str, fleet_id: str | None, agent_id: str,
                             content_hash: str) -> str | None:
        r = self._one("SELECT id FROM memories WHERE tenant_id = ? AND content_hash = ? "
                      f"AND fleet_id {self.dialect.null_eq} ? AND agent_id = ? "
                      "AND deleted_at IS NULL LIMIT 1",
                      (tenant_id, content_hash, fleet_id, agent_id))
        return r["id"] if r else None

    def find_client_request(self, tenant_id: str, client_request_id: str) -> str | None:
        r = self._one("SELECT id FROM memories WHERE tenant_id = ? AND client_request_id = ? "
                      "LIMIT 1", (tenant_id, client_request_id))
        return r["id"] if r else None

    def find_client_requests(self, tenant_id: str,
                             client_request_ids: Sequence[str]) -> dict[str, str]:
        """{client_request_id: memory id} for those of the ids a row carries (a bulk chunk's
        replay check in one statement instead of one per item)."""
        found: dict[str, str] = {}
        for chunk in self._chunks(list(dict.fromkeys(client_request_ids))):
            clause, args = self._in("client_request_id", chunk)
            for r in self._all("SELECT client_request_id, id FROM memories "
                               f"WHERE tenant_id = ? AND {clause}", (tenant_id, *args)):
                found.setdefault(r["client_request_id"], r["id"])
        return found

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
                               self.rows_by_rowids, tenant_id, visible, *self.RANK_PAGES)

    def rows_by_rowids(self, rowids: Sequence[int]) -> dict[int, dict]:
        if len(rowids) == 0:
            return {}
        clause, args = self._in("rowid", [int(x) for x in rowids])
        rows = self._memory_rows(f"SELECT {ROW_COLUMNS} FROM memories WHERE {clause}", args)
        return {r["_rowid"]: r for r in rows}

    def iter_memories(self, flt: ListFilter, chunk: int = 500) -> Iterator[dict]:
        where, args = list_where(flt)
        order = self.dialect.order("DESC" if flt.order == "desc" else "ASC")
        direction = order.split()[0]
        sql = (f"SELECT {ROW_COLUMNS} FROM memories WHERE {' AND '.join(where)} "
               f"ORDER BY {flt.sort} {order}, id {direction} LIMIT ? OFFSET ?")
        return self._pages(sql, args, first=chunk, last=chunk)

    def successors_of(self, tenant_id: str, ids: Sequence[str]) -> list[dict]:
        if not ids:
            return []
        clause, args = self._in("supersedes_id", list(ids))
        return self._memory_rows(f"SELECT {ROW_COLUMNS} FROM memories WHERE tenant_id = ? AND "
                                 f"deleted_at IS NULL AND {clause}", (tenant_id, *args))

    def update_memory(self, row: dict, changes: dict[str, Any], embedding: np.ndarray | None,
                      links: Sequence[tuple[str, str]] | None) -> None:
        """Column changes (and a new embedding / link set) in one transaction."""
        values = encode_columns(changes)
        if embedding is not None:
            values["embedding"] = self._vector_param(embedding)
        assignments = ", ".join(f"{column} = ?" for column in values)
        with self._tx() as tx:
            if values:
                tx.execute(f"UPDATE memories SET {assignments} WHERE id = ?",
                           (*values.values(), row["id"]))
            if links is not None:
                tx.execute("DELETE FROM memory_entity_links WHERE memory_id = ?", (row["id"],))
                if links:
                    tx.executemany(INSERT_LINK, [(row["id"], eid, role) for eid, role in links])
        self._vectors_changed(row, changes, embedding)

    def update_status(self, tenant_id: str, memory_id: str, status: str) -> None:
        with self._tx() as tx:
            tx.execute("UPDATE memories SET status = ? WHERE tenant_id = ? AND id = ?",
                       (status, tenant_id, memory_id))

    def soft_delete(self, tenant_id: str, memory_id: str) -> None:
        with self._tx() as tx:
            tx.execute("UPDATE memories SET status = 'deleted', deleted_at = ? "
                       "WHERE tenant_id = ? AND id = ?", (now_iso(), tenant_id, memory_id))

    def reassign(self, tenant_id: str, memory_ids: Sequence[str], agent_id: str) -> None:
        """Redistribute: new owner; a private row becomes fleet-visible (MemClaw: promoted)."""
        with self._tx() as tx:
            for chunk in self._chunks(list(memory_ids)):
                clause, args = self._in("id", chunk)
                tx.execute("UPDATE memories SET agent_id = ?, visibility = CASE visibility "
                           "WHEN 'scope_agent' THEN 'scope_team' ELSE visibility END "
                           f"WHERE tenant_id = ? AND {clause}", (agent_id, tenant_id, *args))

    def rdf_candidates(self, row: dict) -> list[dict]:
        """Live rows of the same tenant and fleet (strict) asserting another object for the
        same subject and predicate."""
        live, live_args = self._in("status", list(LIVE_STATUSES))
        return self._memory_rows(
            f"SELECT {ROW_COLUMNS} FROM memories WHERE tenant_id = ? "
            f"AND fleet_id {self.dialect.null_eq} ? AND subject_entity_id = ? "
            f"AND lower(predicate) = lower(?) AND object_value <> ? AND {live} "
            "AND deleted_at IS NULL AND id <> ?",
            (row["tenant_id"], row["fleet_id"], row["subject_entity_id"], row["predicate"],
             row["object_value"], *live_args, row["id"]))

    def memories_linked_to(self, tenant_id: str, entity_id: str,
                           visible: RowFilter | None = None) -> Iterator[dict]:
        """Newest first, read in growing pages: the graph walk stops at its row cap, so a
        hub entity linked to hundreds of rows costs the few dozen the walk takes. With
        `visible`, only rows its scope predicate admits, in the SQL: a hub whose rows the
        caller may not read is otherwise read whole by every search that names it."""
        where, args = "", ()
        clause = self._visible_clause(tenant_id, visible) if visible is not None else None
        if clause is not None:  # its columns are the memories' alone
            where, args = f" AND {clause[0]}", tuple(clause[1])
        sql = (f"SELECT {ROW_COLUMNS_M} FROM memories m JOIN memory_entity_links l "
               "ON l.memory_id = m.id WHERE m.tenant_id = ? AND l.entity_id = ? "
               f"AND m.deleted_at IS NULL{where} ORDER BY m.created_at DESC, m.id DESC "
               "LIMIT ? OFFSET ?")
        return self._pages(sql, (tenant_id, entity_id, *args), first=32, last=1024)

