"""mem0 OSS (`mem0.Memory`, infer=False): user/agent/run ids and metadata filters are the
scoping mechanism. Stores: `qdrant` (default: mem0's local Qdrant on disk) and `pgvector`
(mem0's pgvector store on the kit's embedded PostgreSQL with pgvector, started inside the
adapter on a Unix socket in its own data directory: no port, nothing shared).

Mapping (docs/backends.md): `user_id` = the tenant (mem0's top-level owner of memories),
`agent_id` = the writing agent, `run_id` = the wire's `run_id` when sent, as mem0's
multi-agent docs partition memories. mem0 has no group or visibility concept, so the fleet and
the visibility are top-level metadata keys the filters can name; the wire's own metadata is
kept beside them under `wire`, so a caller's metadata can never override a row's scope.

Deployments:
- `idiomatic`: one collection for every tenant; a search filters `user_id` and, when a fleet
  scope is named, `fleet_id in [...]`; `agent_id` only for the wire's author filter.
- `strict`: one collection (a Qdrant directory, or a pgvector table) per tenant, and an
  agent's search adds mem0's `OR` filter "not agent-scoped, or written by me": the strictest
  scoping mem0's filter language expresses.
- `infer`: the `idiomatic` layout with mem0's default `add(..., infer=True)`: its model
  (the kit's scripted model on loopback, `FLEETPROBE_MODEL_URL`; docs/scripted-model.md)
  extracts facts from the write and sees the memories mem0 retrieved for it; the embedder is
  mem0's `openai` provider on the same server (the kit's vectors). A write answers with the
  first memory mem0 added; one that mem0 added nothing for answers "not supported".
GET, PATCH and DELETE by id are `Memory.get` / `update` / `delete`, which take an id and no
identity (in `strict`, within the caller's tenant's collection).
"""

from __future__ import annotations

import hashlib
import inspect
import os
import threading
from pathlib import Path
from typing import Any

from .base import Change, Identity, NotSupported, SearchScope, StoredMemory, deployment_of
from .embedder import DIM
from .langchain_shims import KitEmbeddings, NoLLM
from .scripted_model import MODEL_URL_ENV

# Wire fields kept under metadata["wire"] (mem0 promotes user_id/agent_id/run_id itself).
_WIRE_FIELDS = ("id", "memory_type", "source_uri", "created_at")


def _scoped(method: Any, filters: dict[str, Any], n: int) -> dict[str, Any]:
    """The filters and the result count as this mem0 takes them: 2.x takes `filters` and
    `top_k`; 1.x (the `mem0-1.0.11` environment of the scripted-model probes) wants the
    owner as the `user_id` argument (its filters alone are refused) and `limit`."""
    if "top_k" in inspect.signature(method).parameters:
        return {"filters": filters, "top_k": n}
    rest = dict(filters)
    return {"user_id": rest.pop("user_id"), "filters": rest or None, "limit": n}


STORES = {"qdrant": "Memory(qdrant local, on disk)",
          "pgvector": "Memory(pgvector on PostgreSQL)"}


class Mem0Backend:
    name = "mem0"
    package = "mem0ai"

    def __init__(self, data_dir: Path, store: str | None = None,
                 deployment: str | None = None) -> None:
        self.kind = store or "qdrant"
        if self.kind not in STORES:
            raise ValueError(f"mem0 store {self.kind!r}: use {', '.join(STORES)}")
        self.store = STORES[self.kind]
        import mem0  # noqa: F401  # imported before the adapter reports healthy (as CrewAI)
        self.deployment = deployment_of(deployment, extra=("infer",))
        self.strict = self.deployment == "strict"
        self.infer = self.deployment == "infer"
        self._model_url = os.environ.get(MODEL_URL_ENV) if self.infer else None
        if self.infer and not self._model_url:
            raise ValueError(f"mem0 deployment infer needs the scripted model: {MODEL_URL_ENV}")
        # mem0's pgvector store draws connections from a pool per collection, and its history
        # database serializes on its own lock; local Qdrant keeps one unguarded client
        self.concurrent = self.kind == "pgvector"
        self._dir = data_dir
        self._memories: dict[str, Any] = {}
        self._pg: Any = None
        self._opening = threading.Lock()

    def _memory(self, tenant_id: str) -> Any:
        key = tenant_id if self.strict else ""
        with self._opening:  # concurrent calls open each collection (and the server) once
            if key not in self._memories:
                self._memories[key] = self._open(key)
            return self._memories[key]

    def _open(self, key: str) -> Any:
        from mem0 import Memory

        name = "fleetprobe" if not key else "t" + hashlib.sha256(key.encode()).hexdigest()[:16]
        return Memory.from_config({
            "vector_store": self._vector_store(name),
            **self._models(),
            "history_db_path": str(self._dir / f"mem0-history-{name}.db"),
        })

    def _models(self) -> dict[str, Any]:
        """The kit's embedder and no LLM; under `infer`, mem0's own `openai` providers aimed
        at the scripted model (its key is a placeholder: the server checks none)."""
        if not self.infer:
            return {"embedder": {"provider": "langchain", "config": {"model": KitEmbeddings()}},
                    "llm": {"provider": "langchain", "config": {"model": NoLLM()}}}
        common = {"api_key": "scripted-model-needs-no-key", "openai_base_url": self._model_url}
        return {"embedder": {"provider": "openai", "config": {
                    **common, "model": "fleetprobe-scripted", "embedding_dims": DIM}},
                "llm": {"provider": "openai", "config": {
                    **common, "model": "fleetprobe-scripted", "temperature": 0.0}}}

    def _vector_store(self, name: str) -> dict[str, Any]:
        if self.kind == "qdrant":
            return {"provider": "qdrant", "config": {
                "path": str(self._dir / f"qdrant-{name}"), "on_disk": True,
                "embedding_model_dims": DIM, "collection_name": name}}
        if self._pg is None:
            from reference_server.launch.embedded_pg import EmbeddedPostgres

            self._pg = EmbeddedPostgres(self._dir / "pg").start()
            self._pg_url = self._pg.create_database("mem0")
        # mem0's own defaults (HNSW index, pool of 1-5), one table per collection
        return {"provider": "pgvector", "config": {
            "connection_string": self._pg_url, "collection_name": name,
            "embedding_model_dims": DIM}}

    def write(self, memory: StoredMemory) -> StoredMemory:
        wire = {k: v for k, v in memory.payload().items() if k in _WIRE_FIELDS}
        meta = {"wire": {**wire, "metadata": memory.metadata or {}},
                "fleet_id": memory.fleet_id, "visibility": memory.visibility}
        result = self._memory(memory.tenant_id).add(
            memory.content, user_id=memory.tenant_id, agent_id=memory.agent_id or None,
            run_id=memory.run_id or None, metadata=meta, infer=self.infer)
        added = [r for r in result.get("results", []) if r.get("event") == "ADD"]
        changed = [f"{r.get('event')} {r.get('id')}" for r in result.get("results", [])]
        if not added and changed:  # mem0 1.x: the model's decision changed stored memories
            raise NotSupported("mem0 added no memory for this write; its model's decision "
                               f"changed stored ones instead: {', '.join(changed)}")
        if not added:
            raise NotSupported("mem0 stored nothing for this write" + (
                " (its model extracted no fact it judged new against the memories mem0 "
                "retrieved for the writer)" if self.infer else ""))
        memory.id = str(added[0]["id"])  # mem0 mints the id; the wire returns mem0's
        memory.content = str(added[0].get("memory") or memory.content)  # as stored (infer:
        # the first fact the model extracted)
        return memory

    def get(self, caller: Identity, memory_id: str) -> StoredMemory | None:
        item = self._memory(caller.tenant_id).get(memory_id)
        return self._to_wire(item) if item else None

    def _filters(self, caller: Identity, scope: SearchScope) -> dict[str, Any]:
        filters: dict[str, Any] = {"user_id": caller.tenant_id}
        if scope.fleet_ids is not None:
            if not scope.fleet_ids:
                raise NotSupported("an empty fleet_ids list names no fleet to filter on")
            filters["fleet_id"] = {"in": list(scope.fleet_ids)}
        if scope.author:
            filters["agent_id"] = scope.author
        if self.strict and caller.agent_id:
            filters["OR"] = [{"visibility": {"ne": "scope_agent"}},
                             {"agent_id": caller.agent_id}]
        return filters

    def search(self, caller: Identity, query: str, scope: SearchScope,
               top_k: int) -> list[StoredMemory]:
        memory = self._memory(caller.tenant_id)
        found = memory.search(query, **_scoped(memory.search, self._filters(caller, scope),
                                                top_k))
        return [self._to_wire(item) for item in found.get("results", [])]

    def list(self, caller: Identity, scope: SearchScope, limit: int) -> list[StoredMemory]:
        memory = self._memory(caller.tenant_id)
        found = memory.get_all(**_scoped(memory.get_all, self._filters(caller, scope),
                                         limit))
        return [self._to_wire(item) for item in found.get("results", [])]

    def update(self, caller: Identity, memory_id: str, change: Change
               ) -> StoredMemory | None:
        memory = self._memory(caller.tenant_id)
        item = memory.get(memory_id)
        if not item:
            return None
        meta = dict(item.get("metadata") or {})
        wire = dict(meta.get("wire") or {})
        if change.weight is not None:
            wire["weight"] = change.weight
        if change.metadata is not None:
            wire["metadata"] = change.metadata
        meta["wire"] = wire
        memory.update(memory_id, text=change.content, metadata=meta)
        return self.get(caller, memory_id)

    def delete(self, caller: Identity, memory_id: str) -> bool:
        memory = self._memory(caller.tenant_id)
        if not memory.get(memory_id):
            return False
        memory.delete(memory_id)
        return True

    def _to_wire(self, item: dict[str, Any]) -> StoredMemory:
        meta = dict(item.get("metadata") or {})
        wire = meta.get("wire") or {}
        return StoredMemory(
            id=str(item["id"]), tenant_id=item.get("user_id") or "", content=item["memory"],
            agent_id=item.get("agent_id"), fleet_id=meta.get("fleet_id"),
            visibility=meta.get("visibility") or "scope_team",
            metadata=dict(wire.get("metadata") or {}),
            memory_type=wire.get("memory_type") or "fact",
            source_uri=wire.get("source_uri"), run_id=item.get("run_id"),
            created_at=item.get("created_at") or wire.get("created_at") or "",
            similarity=item.get("score"))

    def close(self) -> None:
        for memory in self._memories.values():
            store = getattr(memory, "vector_store", None)
            client = getattr(store, "client", None) or getattr(store, "connection_pool", None)
            if client is not None and hasattr(client, "close"):
                client.close()
        if self._pg is not None:
            self._pg.stop()
