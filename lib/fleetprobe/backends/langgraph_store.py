"""LangGraph's long-term memory store (`BaseStore`): namespaces are the scoping mechanism.

Stores: `memory` (InMemoryStore), `sqlite` (SqliteStore, on a sqlean.py connection: a sqlite3
that loads extensions, for sqlite-vec), `postgres` (PostgresStore on the kit's embedded
PostgreSQL with pgvector, started inside the adapter). Every store gets the same index.

Deployments (docs/backends.md):
- `idiomatic`: one store for every tenant, namespaces by tenant then fleet, an agent's own
  namespace nested in its fleet's, as the docs' `(user_id, "memories")` pattern grows:
      (tenant, "fleet:<F>")  (tenant, "fleet:<F>", "agent:<A>")  (tenant,)  (tenant, "agent:<A>")
  A caller reads under one prefix: tenant key (tenant,), agent key its home fleet's.
- `strict`: one store per tenant (its own database, file or instance) and no nesting: an
  agent's rows live in (tenant, "agent:<A>") beside the fleets' (tenant, "fleet:<F>"), and
  org-wide or fleet-less rows in (tenant, "tenant"). An agent reads its home fleet, its own
  namespace and the tenant's shared one.
Reads are `BaseStore.search(prefix, ...)`: every namespace that starts with the prefix, the
store's documented semantics. GET, PATCH and DELETE by id take no namespace on the wire, so
they find the item by a search for its id under the caller's prefixes (the store's own way to
reach an item whose namespace the caller cannot name), then `get`/`put`/`delete` it there.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Any

from .base import (
    Change,
    Identity,
    NotSupported,
    SearchScope,
    StoredMemory,
    deployment_of,
    segment,
)
from .embedder import DIM
from .langchain_shims import KitEmbeddings

STORES = {"memory": "InMemoryStore", "sqlite": "SqliteStore", "postgres": "PostgresStore"}
Namespace = tuple[str, ...]


def _seg(kind: str, value: str) -> str:
    return f"{kind}:{segment(value, '.')}"  # LangGraph refuses `.` inside a label


def namespace_for(memory: StoredMemory, strict: bool = False) -> Namespace:
    ns: Namespace = (segment(memory.tenant_id, "."),)
    if strict:
        if memory.visibility == "scope_agent" and memory.agent_id:
            return ns + (_seg("agent", memory.agent_id),)
        if memory.visibility == "scope_org" or not memory.fleet_id:
            return ns + ("tenant",)
        return ns + (_seg("fleet", memory.fleet_id),)
    if memory.visibility == "scope_org":
        return ns
    if memory.fleet_id:
        ns += (_seg("fleet", memory.fleet_id),)
    if memory.visibility == "scope_agent" and memory.agent_id:
        ns += (_seg("agent", memory.agent_id),)
    return ns


def caller_prefixes(caller: Identity, strict: bool = False) -> list[Namespace]:
    root: Namespace = (segment(caller.tenant_id, "."),)
    if caller.agent_id is None:
        return [root]
    if strict:
        own = [root + (_seg("agent", caller.agent_id),), root + ("tenant",)]
        return ([root + (_seg("fleet", caller.fleet_id),)] if caller.fleet_id else []) + own
    if caller.fleet_id:
        return [root + (_seg("fleet", caller.fleet_id),)]
    return [root + (_seg("agent", caller.agent_id),)]


class LangGraphBackend:
    name = "langgraph"
    package = "langgraph"

    def __init__(self, data_dir: Path, store: str | None = None,
                 deployment: str | None = None) -> None:
        self.kind = store or "memory"
        if self.kind not in STORES:
            raise ValueError(f"langgraph store {self.kind!r}: use {', '.join(STORES)}")
        self.store = STORES[self.kind]
        # SqliteStore and PostgresStore serialize on their connection's own lock, so the
        # adapter need not; InMemoryStore iterates dicts another thread's put may resize
        self.concurrent = self.kind != "memory"
        self.deployment = deployment_of(deployment)
        self.strict = self.deployment == "strict"
        self._dir = data_dir
        self._index: dict[str, Any] = {"dims": DIM, "embed": KitEmbeddings(),
                                       "fields": ["content"]}
        self._stores: dict[str, Any] = {}
        self._closers: list[Any] = []
        self._pg: Any = None
        self._opening = threading.Lock()

    # -- stores: one shared (idiomatic) or one per tenant (strict), opened on first use
    def _store(self, tenant_id: str) -> Any:
        key = tenant_id if self.strict else ""
        with self._opening:  # concurrent calls open each store (and the server) once
            if key not in self._stores:
                self._stores[key] = self._open(key)
            return self._stores[key]

    def _open(self, key: str) -> Any:
        name = "shared" if not key else "t" + hashlib.sha256(key.encode()).hexdigest()[:16]
        if self.kind == "memory":
            from langgraph.store.memory import InMemoryStore

            return InMemoryStore(index=self._index)
        if self.kind == "sqlite":
            import sqlean  # sqlite3's API, with loadable extensions
            from langgraph.store.sqlite import SqliteStore

            conn = sqlean.connect(str(self._dir / f"langgraph-{name}.sqlite"),
                                  check_same_thread=False, isolation_level=None)
            self._closers.append(conn)
            store = SqliteStore(conn, index=self._index)
        else:
            import psycopg
            from langgraph.store.postgres import PostgresStore
            from psycopg.rows import dict_row

            from reference_server.launch.embedded_pg import EmbeddedPostgres

            if self._pg is None:
                self._pg = EmbeddedPostgres(self._dir / "pg").start()
            conn = psycopg.connect(self._pg.create_database(f"lg_{name}"), autocommit=True,
                                   prepare_threshold=0, row_factory=dict_row)
            self._closers.append(conn)
            store = PostgresStore(conn, index=self._index)
        store.setup()
        return store

    # -- reads and writes
    def write(self, memory: StoredMemory) -> StoredMemory:
        self._store(memory.tenant_id).put(namespace_for(memory, self.strict), memory.id,
                                          memory.payload())
        return memory

    def _find(self, caller: Identity, memory_id: str) -> Any | None:
        store = self._store(caller.tenant_id)
        for prefix in caller_prefixes(caller, self.strict):
            hits = store.search(prefix, filter={"id": memory_id}, limit=1)
            if hits:
                return hits[0]
        return None

    def get(self, caller: Identity, memory_id: str) -> StoredMemory | None:
        hit = self._find(caller, memory_id)
        return StoredMemory.from_payload(hit.value) if hit else None

    def _prefixes(self, caller: Identity, scope: SearchScope
                  ) -> list[tuple[Namespace, dict[str, Any] | None]]:
        """(prefix, value filter) pairs a search or listing reads."""
        if scope.fleet_ids is not None and not scope.fleet_ids:
            raise NotSupported("an empty fleet_ids list names no namespace to search")
        root: Namespace = (segment(caller.tenant_id, "."),)
        if not scope.fleet_ids:
            return [(p, None) for p in caller_prefixes(caller, self.strict)]
        pairs: list[tuple[Namespace, dict[str, Any] | None]] = [
            (root + (_seg("fleet", f),), None) for f in scope.fleet_ids]
        if self.strict and caller.agent_id:  # the caller's own rows of those fleets
            pairs += [(root + (_seg("agent", caller.agent_id),), {"fleet_id": f})
                      for f in scope.fleet_ids]
        return pairs

    def _read(self, caller: Identity, scope: SearchScope, query: str | None,
              limit: int) -> list[StoredMemory]:
        store = self._store(caller.tenant_id)
        hits = []
        for prefix, filt in self._prefixes(caller, scope):
            if scope.author:
                filt = {**(filt or {}), "agent_id": scope.author}
            hits += store.search(prefix, query=query, filter=filt, limit=limit)
        if query is not None:
            hits.sort(key=lambda h: h.score if h.score is not None else 0.0, reverse=True)
        return [StoredMemory.from_payload(h.value, h.score) for h in hits[:limit]]

    def search(self, caller: Identity, query: str, scope: SearchScope,
               top_k: int) -> list[StoredMemory]:
        return self._read(caller, scope, query, top_k)

    def list(self, caller: Identity, scope: SearchScope, limit: int) -> list[StoredMemory]:
        return self._read(caller, scope, None, limit)

    def update(self, caller: Identity, memory_id: str, change: Change
               ) -> StoredMemory | None:
        hit = self._find(caller, memory_id)
        if hit is None:
            return None
        value = dict(hit.value)
        if change.content is not None:
            value["content"] = change.content
        if change.weight is not None:
            value["weight"] = change.weight
        if change.metadata is not None:
            value["metadata"] = change.metadata
        self._store(caller.tenant_id).put(tuple(hit.namespace), hit.key, value)
        return StoredMemory.from_payload(value)

    def delete(self, caller: Identity, memory_id: str) -> bool:
        hit = self._find(caller, memory_id)
        if hit is None:
            return False
        self._store(caller.tenant_id).delete(tuple(hit.namespace), hit.key)
        return True

    def close(self) -> None:
        for conn in self._closers:
            conn.close()
        if self._pg is not None:
            self._pg.stop()
