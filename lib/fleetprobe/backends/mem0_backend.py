"""mem0 OSS (`mem0.Memory`, infer=False, local Qdrant on disk): user/agent/run ids and
metadata filters are the scoping mechanism.

Mapping (docs/backends.md): `user_id` = the tenant (mem0's top-level owner of memories),
`agent_id` = the writing agent, `run_id` = the wire's `run_id` when sent; the fleet and the
visibility go into `metadata` (mem0 has no group or visibility concept), beside the wire's
own metadata. A search passes `filters={"user_id": tenant, "fleet_id": {"in": fleets}}` when
a fleet scope is named (request `fleet_ids`, else the caller's home fleet) and adds
`agent_id` only for the wire's `filter_agent_id` author filter: mem0's read API takes the
entity filters a caller chooses, never the reader's identity. GET by id is `Memory.get(id)`,
which takes no identity at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .base import Identity, NotSupported, SearchScope, StoredMemory
from .embedder import DIM
from .langchain_shims import KitEmbeddings, NoLLM

# Wire fields kept in mem0's metadata (mem0 promotes user_id/agent_id/run_id itself).
_META_FIELDS = ("id", "fleet_id", "visibility", "memory_type", "source_uri", "created_at")


class Mem0Backend:
    name = "mem0"
    package = "mem0ai"
    store = "Memory(qdrant local, on disk)"

    def __init__(self, data_dir: Path, store: str | None = None) -> None:
        from mem0 import Memory

        if store not in (None, "qdrant"):
            raise ValueError(f"mem0 store {store!r}: only the local qdrant store is measured")
        self._memory = Memory.from_config({
            "vector_store": {"provider": "qdrant", "config": {
                "path": str(data_dir / "qdrant"), "on_disk": True,
                "embedding_model_dims": DIM, "collection_name": "fleetprobe"}},
            "embedder": {"provider": "langchain", "config": {"model": KitEmbeddings()}},
            "llm": {"provider": "langchain", "config": {"model": NoLLM()}},
            "history_db_path": str(data_dir / "mem0-history.db"),
        })

    def write(self, memory: StoredMemory) -> StoredMemory:
        meta = {"wire": {k: v for k, v in memory.payload().items() if k in _META_FIELDS},
                "fleet_id": memory.fleet_id, "visibility": memory.visibility,
                **(memory.metadata or {})}
        result = self._memory.add(memory.content, user_id=memory.tenant_id,
                                  agent_id=memory.agent_id or None,
                                  run_id=memory.run_id or None, metadata=meta, infer=False)
        added = [r for r in result.get("results", []) if r.get("event") == "ADD"]
        if not added:
            raise NotSupported("mem0 stored nothing for this write")
        memory.id = str(added[0]["id"])  # mem0 mints the id; the wire returns mem0's
        return memory

    def get(self, caller: Identity, memory_id: str) -> StoredMemory | None:
        item = self._memory.get(memory_id)
        return self._to_wire(item) if item else None

    def search(self, caller: Identity, query: str, scope: SearchScope,
               top_k: int) -> list[StoredMemory]:
        filters: dict[str, Any] = {"user_id": caller.tenant_id}
        if scope.fleet_ids is not None:
            if not scope.fleet_ids:
                raise NotSupported("an empty fleet_ids list names no fleet to filter on")
            filters["fleet_id"] = {"in": list(scope.fleet_ids)}
        if scope.author:
            filters["agent_id"] = scope.author
        found = self._memory.search(query, filters=filters, top_k=top_k)
        return [self._to_wire(item) for item in found.get("results", [])]

    def _to_wire(self, item: dict[str, Any]) -> StoredMemory:
        meta = dict(item.get("metadata") or {})
        wire = meta.pop("wire", {}) or {}
        fleet_id = meta.pop("fleet_id", wire.get("fleet_id"))
        visibility = meta.pop("visibility", wire.get("visibility")) or "scope_team"
        return StoredMemory(
            id=str(item["id"]), tenant_id=item.get("user_id") or "", content=item["memory"],
            agent_id=item.get("agent_id"), fleet_id=fleet_id, visibility=visibility,
            metadata=meta, memory_type=wire.get("memory_type") or "fact",
            source_uri=wire.get("source_uri"), run_id=item.get("run_id"),
            created_at=item.get("created_at") or wire.get("created_at") or "",
            similarity=item.get("score"))

    def close(self) -> None:
        close = getattr(getattr(self._memory, "vector_store", None), "client", None)
        if close is not None and hasattr(close, "close"):
            close.close()
