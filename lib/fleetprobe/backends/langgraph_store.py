"""LangGraph's long-term memory store (`BaseStore`): namespaces are the scoping mechanism.

Namespace layout (docs/backends.md): a row lives at
    (tenant, "fleet:<fleet_id>")                      fleet-scoped (`scope_team`)
    (tenant, "fleet:<fleet_id>", "agent:<agent_id>")  agent-scoped (`scope_agent`)
    (tenant,) / (tenant, "agent:<agent_id>")          the same without a fleet; `scope_org` at
                                                      (tenant,)
with the row's key = its memory id and its value = the wire fields; `content` is indexed.
Reads go through `BaseStore.search(namespace_prefix, ...)`, which matches every namespace
that starts with the prefix (LangGraph's documented semantics): a search in a fleet sees that
fleet's agent namespaces too. A search names the prefix from the request's `fleet_ids` (one
search per fleet, merged by score), else the caller's home fleet, else the tenant root; the
`filter_agent_id` author filter is a value filter. GET by id has no namespace on the wire, so
it is a search under the caller's prefix (tenant key: the tenant root; agent key: its home
fleet) filtered on the stored id: the store's own way to find an item whose namespace the
caller does not name.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from .base import Identity, NotSupported, SearchScope, StoredMemory
from .embedder import DIM
from .langchain_shims import KitEmbeddings


def namespace_for(memory: StoredMemory) -> tuple[str, ...]:
    ns: tuple[str, ...] = (memory.tenant_id,)
    if memory.visibility == "scope_org":
        return ns
    if memory.fleet_id:
        ns += (f"fleet:{memory.fleet_id}",)
    if memory.visibility == "scope_agent" and memory.agent_id:
        ns += (f"agent:{memory.agent_id}",)
    return ns


def caller_prefix(caller: Identity) -> tuple[str, ...]:
    if caller.agent_id is None:
        return (caller.tenant_id,)
    if caller.fleet_id:
        return (caller.tenant_id, f"fleet:{caller.fleet_id}")
    return (caller.tenant_id, f"agent:{caller.agent_id}")


class LangGraphBackend:
    name = "langgraph"
    package = "langgraph"

    def __init__(self, data_dir: Path, store: str = "memory") -> None:
        index: dict[str, Any] = {"dims": DIM, "embed": KitEmbeddings(), "fields": ["content"]}
        self._conn: sqlite3.Connection | None = None
        if store == "memory":
            from langgraph.store.memory import InMemoryStore

            self.store = "InMemoryStore"
            self._store: Any = InMemoryStore(index=index)
        elif store == "sqlite":
            from langgraph.store.sqlite import SqliteStore

            self.store = "SqliteStore"
            self._conn = sqlite3.connect(str(data_dir / "langgraph.sqlite"),
                                         check_same_thread=False, isolation_level=None)
            if not hasattr(self._conn, "enable_load_extension"):
                raise RuntimeError(
                    "langgraph SqliteStore with a vector index loads the sqlite-vec extension, "
                    "and this Python's sqlite3 was built without loadable extensions; use "
                    "target.backend_store=memory (InMemoryStore) here")
            self._store = SqliteStore(self._conn, index=index)
            self._store.setup()
        else:
            raise ValueError(f"langgraph store {store!r}: use memory or sqlite")

    def write(self, memory: StoredMemory) -> StoredMemory:
        self._store.put(namespace_for(memory), memory.id, memory.payload())
        return memory

    def get(self, caller: Identity, memory_id: str) -> StoredMemory | None:
        hits = self._store.search(caller_prefix(caller), filter={"id": memory_id}, limit=1)
        return StoredMemory.from_payload(hits[0].value) if hits else None

    def search(self, caller: Identity, query: str, scope: SearchScope,
               top_k: int) -> list[StoredMemory]:
        if scope.fleet_ids is not None and not scope.fleet_ids:
            raise NotSupported("an empty fleet_ids list names no namespace to search")
        prefixes = ([(caller.tenant_id, f"fleet:{f}") for f in scope.fleet_ids]
                    if scope.fleet_ids else [caller_prefix(caller)])
        filt = {"agent_id": scope.author} if scope.author else None
        hits = [h for p in prefixes
                for h in self._store.search(p, query=query, filter=filt, limit=top_k)]
        hits.sort(key=lambda h: h.score if h.score is not None else 0.0, reverse=True)
        return [StoredMemory.from_payload(h.value, h.score) for h in hits[:top_k]]

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
