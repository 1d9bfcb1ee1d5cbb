"""`SqlRecords`: the shared statements on everything but memory rows: tenants, keys,
agents, contradiction jobs, entities, idempotency records.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..rows import AgentRow, IdempotencyRecord, KeyRow, now_iso
from .base import (
    IN_LIST_CHUNK,
    UPSERT_AGENT,
    UPSERT_ENTITY,
    UPSERT_KEY,
    SqlBase,
    decode_entity,
)


class SqlRecords(SqlBase):
    # tenants and keys ------------------------------------------------------------------

    def create_tenant(self, tenant_id: str) -> bool:
        with self._tx() as tx:
            return tx.execute("INSERT INTO tenants VALUES (?, ?) ON CONFLICT DO NOTHING",
                              (tenant_id, now_iso())).rowcount == 1

    def tenant_exists(self, tenant_id: str) -> bool:
        return self._one("SELECT 1 AS x FROM tenants WHERE tenant_id = ?",
                         (tenant_id,)) is not None

    def add_key(self, key_hash: str, row: KeyRow, label: str | None = None) -> None:
        """An agent key replaces every earlier key of the same agent (re-provisioning
        revokes), in the same transaction."""
        with self._tx() as tx:
            if row.agent_id is not None:
                tx.execute("DELETE FROM api_keys WHERE tenant_id = ? AND agent_id = ?",
                           (row.tenant_id, row.agent_id))
            tx.execute(UPSERT_KEY, (key_hash, row.id, row.tenant_id, row.agent_id, row.kind,
                                    row.key_prefix, label, row.created_at))

    def find_key(self, key_hash: str) -> KeyRow | None:
        r = self._one("SELECT id, tenant_id, agent_id, kind, key_prefix, created_at "
                      "FROM api_keys WHERE key_hash = ?", (key_hash,))
        return KeyRow(**dict(r)) if r else None

    # agents ----------------------------------------------------------------------------

    def get_agent(self, tenant_id: str, agent_id: str) -> AgentRow | None:
        r = self._one("SELECT tenant_id, agent_id, fleet_id, trust_level, display_name, "
                      "created_at, updated_at FROM agents WHERE tenant_id = ? AND agent_id = ?",
                      (tenant_id, agent_id))
        return AgentRow(**dict(r)) if r else None

    def upsert_agent(self, agent: AgentRow) -> None:
        now = now_iso()
        with self._tx() as tx:
            tx.execute(UPSERT_AGENT, (agent.tenant_id, agent.agent_id, agent.fleet_id,
                                      agent.display_name, agent.trust_level,
                                      agent.created_at or now, now))

    def delete_agent(self, tenant_id: str, agent_id: str,
                     retire_rows_to: str | None = None) -> bool:
        """The agent row and every key of the agent, in one transaction (its memories stay,
        passed to `retire_rows_to` when given). False when there was no such agent."""
        with self._tx() as tx:
            deleted = tx.execute("DELETE FROM agents WHERE tenant_id = ? AND agent_id = ?",
                                 (tenant_id, agent_id)).rowcount == 1
            tx.execute("DELETE FROM api_keys WHERE tenant_id = ? AND agent_id = ?",
                       (tenant_id, agent_id))
            if retire_rows_to is not None and deleted:
                tx.execute("UPDATE memories SET agent_id = ? WHERE tenant_id = ? "
                           "AND agent_id = ?", (retire_rows_to, tenant_id, agent_id))
            return deleted

    # contradiction detection -----------------------------------------------------------

    def due_jobs(self, now: float, limit: int = 50) -> list[tuple[str, str]]:
        rows = self._all("SELECT memory_id, tenant_id FROM detection_jobs WHERE due_at <= ? "
                         "ORDER BY due_at LIMIT ?", (now, limit))
        return [(r["memory_id"], r["tenant_id"]) for r in rows]

    def next_due_at(self) -> float | None:
        r = self._one("SELECT min(due_at) AS due FROM detection_jobs")
        return r["due"] if r and r["due"] is not None else None

    def detection_pending(self, memory_id: str) -> bool:
        return self._one("SELECT 1 AS x FROM detection_jobs WHERE memory_id = ?",
                         (memory_id,)) is not None

    def complete_detection(self, memory_id: str,
                           supersessions: Sequence[tuple[str, str]]) -> None:
        """Apply (newer_id, older_id) pairs and drop the job, in one transaction. Its commit
        need not wait for a flush (it runs once per written row): a crash may lose it whole,
        job row included, and the job then runs again to the same result."""
        with self._tx(durable=False) as tx:
            for newer_id, older_id in supersessions:
                tx.execute("UPDATE memories SET status = 'outdated' WHERE id = ? "
                           "AND deleted_at IS NULL", (older_id,))
                tx.execute("UPDATE memories SET supersedes_id = ? WHERE id = ? "
                           "AND supersedes_id IS NULL", (older_id, newer_id))
            tx.execute("DELETE FROM detection_jobs WHERE memory_id = ?", (memory_id,))

    # entities --------------------------------------------------------------------------

    def find_entity(self, tenant_id: str, entity_type: str, canonical_name: str,
                    fleet_id: str | None) -> dict | None:
        r = self._one("SELECT * FROM entities WHERE tenant_id = ? AND entity_type = ? "
                      f"AND canonical_name = ? AND fleet_id {self.dialect.null_eq} ?",
                      (tenant_id, entity_type, canonical_name, fleet_id))
        return decode_entity(r) if r else None

    def get_entity(self, tenant_id: str, entity_id: str) -> dict | None:
        r = self._one("SELECT * FROM entities WHERE tenant_id = ? AND id = ?",
                      (tenant_id, entity_id))
        return decode_entity(r) if r else None

    def known_entity_ids(self, tenant_id: str, entity_ids: Sequence[str]) -> set[str]:
        wanted = list(dict.fromkeys(entity_ids))
        known: set[str] = set()
        for start in range(0, len(wanted), IN_LIST_CHUNK):  # bounded statements, any size
            chunk = wanted[start:start + IN_LIST_CHUNK]
            marks = ", ".join("?" for _ in chunk)
            rows = self._all(f"SELECT id FROM entities WHERE tenant_id = ? "
                             f"AND id IN ({marks})", [tenant_id, *chunk])
            known.update(r["id"] for r in rows)
        return known

    def save_entity(self, entity: dict) -> None:
        with self._tx() as tx:
            tx.execute(UPSERT_ENTITY, (entity["id"], entity["tenant_id"], entity["fleet_id"],
                                       entity["entity_type"], entity["canonical_name"],
                                       json.dumps(entity["attributes"], allow_nan=False),
                                       entity["created_at"]))

    def entity_links_of(self, memory_ids: Sequence[str]) -> dict[str, list[dict]]:
        if not memory_ids:
            return {}
        clause, args = self._in("memory_id", list(memory_ids))
        rows = self._all(f"SELECT memory_id, entity_id, role FROM memory_entity_links "
                         f"WHERE {clause}", args)
        links: dict[str, list[dict]] = {}
        for r in rows:
            links.setdefault(r["memory_id"], []).append(
                {"entity_id": r["entity_id"], "role": r["role"]})
        return links

    def entities_named_in(self, tenant_id: str, text: str, limit: int = 10) -> list[dict]:
        """Entities whose canonical name (3+ characters) occurs in `text`, case-insensitive:
        the seeds of the search's graph expansion."""
        rows = self._all("SELECT * FROM entities WHERE tenant_id = ? "
                         "AND length(canonical_name) >= 3 "
                         f"AND {self.dialect.substring}(lower(?), lower(canonical_name)) > 0 "
                         "ORDER BY length(canonical_name) DESC, id LIMIT ?",
                         (tenant_id, text, limit))
        return [decode_entity(r) for r in rows]

    # idempotency -----------------------------------------------------------------------

    def get_idempotency(self, tenant_id: str, key: str) -> IdempotencyRecord | None:
        r = self._one("SELECT tenant_id, key, request_hash, status_code, body FROM idempotency "
                      "WHERE tenant_id = ? AND key = ?", (tenant_id, key))
        return IdempotencyRecord(**dict(r)) if r else None
