"""CrewAI's unified `Memory` (LanceDB on disk, no LLM): hierarchical scope paths, plus the
`private` / `source` pair for records only their source may recall.

Mapping (docs/backends.md): a row is remembered at scope
    /<tenant>/fleet/<fleet_id>                   (fleet-scoped, or /<tenant> with no fleet)
with `source` = the writing agent and `private=True` when agent-scoped (`scope_agent`):
CrewAI's own "only visible to recall from the same source". scope, categories and importance
are always passed and `consolidation_threshold` is 1.0 (CrewAI's documented "disable"), so
remember() calls no LLM (should a stored neighbour ever score 1.0, CrewAI would ask the LLM
to consolidate: the adapter's LLM refuses and that write answers "not supported"); recall uses
`depth="shallow"` (one vector search, no LLM). A search recalls under the scope of each
requested fleet (request `fleet_ids`, else the caller's home fleet, else the
tenant root) with `source` = the caller's agent (none for a tenant key). CrewAI matches
a scope as a string prefix (`scope LIKE '<prefix>%'`). `filter_agent_id` has no equivalent
in recall (source only unlocks private records) and answers "not supported". CrewAI's
Memory has no read by id; its storage backend's `get_record(id)` (the documented storage
protocol Memory is built on) takes an id only, and is what GET by id uses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .base import Identity, NotSupported, SearchScope, StoredMemory
from .embedder import LLMCalled, embed_texts


class _NoLLM:
    """Passed as Memory(llm=...): any analysis call raises instead of reaching a model."""

    stream = False

    def call(self, *args: Any, **kwargs: Any) -> Any:
        raise LLMCalled("fleetprobe's CrewAI adapter runs with no LLM")

    def __getattr__(self, name: str) -> Any:
        raise LLMCalled(f"fleetprobe's CrewAI adapter runs with no LLM (asked for {name})")


def scope_for(tenant_id: str, fleet_id: str | None) -> str:
    return f"/{tenant_id}/fleet/{fleet_id}" if fleet_id else f"/{tenant_id}"


class CrewAIBackend:
    name = "crewai"
    package = "crewai"
    store = "Memory(LanceDBStorage, on disk)"

    def __init__(self, data_dir: Path, store: str | None = None) -> None:
        from crewai import Memory
        from crewai.memory.storage.lancedb_storage import LanceDBStorage

        if store not in (None, "lancedb"):
            raise ValueError(f"crewai store {store!r}: only LanceDB is measured")
        self._storage = LanceDBStorage(path=str(data_dir / "lancedb"))
        self._memory = Memory(storage=self._storage, embedder=embed_texts, llm=_NoLLM(),
                              consolidation_threshold=1.0)

    def write(self, memory: StoredMemory) -> StoredMemory:
        private = memory.visibility == "scope_agent"
        try:
            record = self._memory.remember(
                memory.content, scope=scope_for(memory.tenant_id, memory.fleet_id),
                categories=[memory.memory_type], importance=0.5,
                metadata={"wire": memory.payload() | {"content": None}},
                source=memory.agent_id, private=private)
        except LLMCalled as exc:
            raise NotSupported("CrewAI asked its LLM to consolidate this write with a stored "
                               "record (similarity 1.0 reaches the 1.0 threshold); the "
                               "adapter runs with no LLM") from exc
        if record is None:
            raise NotSupported("CrewAI's Memory stored nothing (read-only memory)")
        memory.id = str(record.id)
        return memory

    def get(self, caller: Identity, memory_id: str) -> StoredMemory | None:
        record = self._storage.get_record(memory_id)
        return self._to_wire(record) if record is not None else None

    def search(self, caller: Identity, query: str, scope: SearchScope,
               top_k: int) -> list[StoredMemory]:
        if scope.author:
            raise NotSupported("CrewAI's recall has no author filter (filter_agent_id): "
                               "`source` only unlocks private records")
        if scope.fleet_ids is not None and not scope.fleet_ids:
            raise NotSupported("an empty fleet_ids list names no scope to recall from")
        scopes = ([scope_for(caller.tenant_id, f) for f in scope.fleet_ids]
                  if scope.fleet_ids else [scope_for(caller.tenant_id, caller.fleet_id)])
        matches = [m for s in scopes for m in self._memory.recall(
            query, scope=s, limit=top_k, depth="shallow", source=caller.agent_id)]
        matches.sort(key=lambda m: m.score, reverse=True)
        return [self._to_wire(m.record, m.score) for m in matches[:top_k]]

    def _to_wire(self, record: Any, score: float | None = None) -> StoredMemory:
        meta = dict(record.metadata or {})
        wire = dict(meta.pop("wire", {}) or {})
        wire["content"] = record.content
        wire["id"] = str(record.id)
        memory = StoredMemory.from_payload(wire, score)
        memory.agent_id = record.source or memory.agent_id
        return memory

    def close(self) -> None:
        self._memory.close()
