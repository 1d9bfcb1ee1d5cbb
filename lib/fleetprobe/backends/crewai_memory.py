"""CrewAI's unified `Memory` (no LLM): hierarchical scope paths, plus the `private` / `source`
pair for records only their source may recall. Stores, the two CrewAI ships: `lancedb` (its
default, `LanceDBStorage` on disk) and `qdrant-edge` (`QdrantEdgeStorage`, CrewAI's
`Memory(storage="qdrant-edge")`, on disk), each built the way `Memory` builds it, in a
directory of the adapter's.

Deployments (docs/backends.md):
- `idiomatic`: what `Crew(memory=True)` does. A crew's memory is rooted at `/crew/<name>` and
  each agent's saves land under `.../agent/<role>`; crew-level recall reads every subscope.
  A fleet is a crew: rows at `/<tenant>/crew/<F>` (fleet-scoped) and
  `/<tenant>/crew/<F>/agent/<A>` (agent-scoped), `/<tenant>` without a fleet (an agent-scoped
  row without a fleet at `/<tenant>/agent/<A>`). No record is private; one LanceDB table
  holds every tenant. A recall reads the requested crews' scopes (else the caller's home crew).
- `strict`: one LanceDB directory per tenant; rows at `/<tenant>/fleet/<F>` with
  `source` = the writer and `private=True` when agent-scoped (CrewAI's "only visible to
  recall from the same source"); a recall passes `source` = the caller's agent.
- `analysis` / `strict-analysis`: the same layouts with CrewAI's LLM on (the kit's scripted
  model on loopback, `FLEETPROBE_MODEL_URL`, as `LLM(model="openai/...", base_url=...)`;
  docs/scripted-model.md) and what `Crew(memory=True)` leaves to it: the row's layout path is
  the `root_scope`, `scope`, `categories` and `importance` are not passed (the save
  analysis infers them under the root), and `consolidation_threshold` is CrewAI's default
  (0.85), so a write similar to a stored record asks the model to keep, update or delete it.
  A write the model merged into a stored record answers with that record, as remember() does.
Outside the analysis deployments `scope`, `categories` and `importance` are always passed and
`consolidation_threshold` is 1.0 (CrewAI's documented "disable"), so remember() calls no LLM
(should a stored neighbour ever score 1.0, CrewAI would ask the LLM to consolidate: the
adapter's LLM refuses and that write answers "not supported"); recall uses `depth="shallow"`.
LanceDB matches a scope as a string prefix (`scope LIKE '<prefix>%'`, crewAIInc/crewAI#7543);
Qdrant Edge matches one of the record's ancestor scopes exactly (`scope_ancestors`).
A fleet or agent id is one path segment (`/` escaped), so an id never nests under another.
GET by id is the storage's `get_record(id)`, PATCH `Memory.update(record_id, ...)`, DELETE
`Memory.forget(record_ids=[id])`, the listing `Memory.list_records(scope)`: each takes no
identity. `filter_agent_id` has no equivalent in recall and answers "not supported"; in a
listing it keeps the records whose `source` is that agent (the listing has no filter at all).
"""

from __future__ import annotations

import hashlib
import os
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
from .embedder import DIM, LLMCalled, embed_texts
from .scripted_model import MODEL_URL_ENV

ANALYSIS = ("analysis", "strict-analysis")


class _NoLLM:
    """Passed as Memory(llm=...): any analysis call raises instead of reaching a model."""

    stream = False

    def call(self, *args: Any, **kwargs: Any) -> Any:
        raise LLMCalled("fleetprobe's CrewAI adapter runs with no LLM")

    def __getattr__(self, name: str) -> Any:
        raise LLMCalled(f"fleetprobe's CrewAI adapter runs with no LLM (asked for {name})")


def _seg(value: str) -> str:
    return segment(value, "/")


def scope_for(tenant_id: str, fleet_id: str | None, agent_id: str | None = None,
              idiomatic: bool = False) -> str:
    """The row's scope path (agent_id: an agent-scoped row, in the idiomatic layout only)."""
    base = f"/{_seg(tenant_id)}"
    if not idiomatic:
        return f"{base}/fleet/{_seg(fleet_id)}" if fleet_id else base
    crew = f"{base}/crew/{_seg(fleet_id)}" if fleet_id else base
    return f"{crew}/agent/{_seg(agent_id)}" if agent_id else crew


STORES = {"lancedb": "Memory(LanceDBStorage, on disk)",
          "qdrant-edge": "Memory(QdrantEdgeStorage, on disk)"}


class CrewAIBackend:
    name = "crewai"
    package = "crewai"
    # Memory hands saves to a background pool and its storages take writes from one caller:
    # the adapter keeps calls one at a time (app.AdapterState.lock)
    concurrent = False

    def __init__(self, data_dir: Path, store: str | None = None,
                 deployment: str | None = None) -> None:
        self.kind = store or "lancedb"
        if self.kind not in STORES:
            raise ValueError(f"crewai store {self.kind!r}: use {', '.join(STORES)}")
        self.store = STORES[self.kind]
        # import CrewAI now, before the adapter reports healthy: its first request otherwise
        # pays the import (tens of seconds on a loaded machine) and the harness's first call
        # times out
        import crewai  # noqa: F401
        self.deployment = deployment_of(deployment, extra=ANALYSIS)
        self.idiomatic = self.deployment in ("idiomatic", "analysis")
        self.analysis = self.deployment in ANALYSIS
        self._model_url = os.environ.get(MODEL_URL_ENV) if self.analysis else None
        if self.analysis and not self._model_url:
            raise ValueError(f"crewai deployment {self.deployment} needs the scripted model: "
                             f"{MODEL_URL_ENV}")
        self._dir = data_dir
        self._memories: dict[str, tuple[Any, Any]] = {}

    def _open(self, tenant_id: str) -> tuple[Any, Any]:
        """(Memory, LanceDBStorage): one shared (idiomatic), one per tenant (strict)."""
        key = "" if self.idiomatic else tenant_id
        if key not in self._memories:
            from crewai import Memory

            name = "shared" if not key else "t" + hashlib.sha256(key.encode()).hexdigest()[:16]
            storage = self._storage(name)
            if self.analysis:
                from crewai import LLM

                llm = LLM(model="openai/fleetprobe-scripted", base_url=self._model_url,
                          api_key="scripted-model-needs-no-key", temperature=0.0)
                memory = Memory(storage=storage, embedder=embed_texts, llm=llm)
            else:
                memory = Memory(storage=storage, embedder=embed_texts, llm=_NoLLM(),
                                consolidation_threshold=1.0)
            self._memories[key] = (memory, storage)
        return self._memories[key]

    def _storage(self, name: str) -> Any:
        if self.kind == "qdrant-edge":
            from crewai.memory.storage.qdrant_edge_storage import QdrantEdgeStorage

            return QdrantEdgeStorage(path=str(self._dir / f"qdrant-edge-{name}"), vector_dim=DIM)
        from crewai.memory.storage.lancedb_storage import LanceDBStorage

        return LanceDBStorage(path=str(self._dir / f"lancedb-{name}"))

    def write(self, memory: StoredMemory) -> StoredMemory:
        agent_scoped = memory.visibility == "scope_agent"
        owner = memory.agent_id if agent_scoped and self.idiomatic else None
        mem, _ = self._open(memory.tenant_id)
        path = scope_for(memory.tenant_id, memory.fleet_id, owner, self.idiomatic)
        # analysis: the layout path is the root, the rest is the model's (Crew(memory=True))
        placed = ({"root_scope": path} if self.analysis else
                  {"scope": path, "categories": [memory.memory_type], "importance": 0.5})
        try:
            record = mem.remember(
                memory.content, **placed,
                metadata={"wire": memory.payload() | {"content": None}},
                source=memory.agent_id, private=agent_scoped and not self.idiomatic)
        except LLMCalled as exc:
            raise NotSupported("CrewAI asked its LLM to consolidate this write with a stored "
                               "record (similarity 1.0 reaches the 1.0 threshold); the "
                               "adapter runs with no LLM") from exc
        if record is None:
            raise NotSupported("CrewAI's Memory stored nothing (read-only memory)")
        if self.analysis:  # what remember() returned: the new record, or the one merged into
            return self._to_wire(record)
        memory.id = str(record.id)
        return memory

    def get(self, caller: Identity, memory_id: str) -> StoredMemory | None:
        record = self._open(caller.tenant_id)[1].get_record(memory_id)
        return self._to_wire(record) if record is not None else None

    def _scopes(self, caller: Identity, scope: SearchScope) -> list[str]:
        if scope.fleet_ids is not None and not scope.fleet_ids:
            raise NotSupported("an empty fleet_ids list names no scope to recall from")
        if scope.fleet_ids:
            return [scope_for(caller.tenant_id, f, idiomatic=self.idiomatic)
                    for f in scope.fleet_ids]
        if self.idiomatic and caller.agent_id and not caller.fleet_id:
            return [scope_for(caller.tenant_id, None, caller.agent_id, idiomatic=True)]
        return [scope_for(caller.tenant_id, caller.fleet_id, idiomatic=self.idiomatic)]

    def search(self, caller: Identity, query: str, scope: SearchScope,
               top_k: int) -> list[StoredMemory]:
        if scope.author:
            raise NotSupported("CrewAI's recall has no author filter (filter_agent_id): "
                               "`source` only unlocks private records")
        mem, _ = self._open(caller.tenant_id)
        matches = [m for s in self._scopes(caller, scope) for m in mem.recall(
            query, scope=s, limit=top_k, depth="shallow", source=caller.agent_id)]
        matches.sort(key=lambda m: m.score, reverse=True)
        return [self._to_wire(m.record, m.score) for m in matches[:top_k]]

    def list(self, caller: Identity, scope: SearchScope, limit: int) -> list[StoredMemory]:
        mem, _ = self._open(caller.tenant_id)
        records = [r for s in self._scopes(caller, scope)
                   for r in mem.list_records(scope=s, limit=limit)]
        if scope.author:
            records = [r for r in records if r.source == scope.author]
        return [self._to_wire(r) for r in records[:limit]]

    def update(self, caller: Identity, memory_id: str, change: Change
               ) -> StoredMemory | None:
        mem, storage = self._open(caller.tenant_id)
        record = storage.get_record(memory_id)
        if record is None:
            return None
        metadata = None
        if change.metadata is not None:
            meta = dict(record.metadata or {})
            meta["wire"] = {**(meta.get("wire") or {}), "metadata": change.metadata}
            metadata = meta
        updated = mem.update(memory_id, content=change.content, metadata=metadata,
                             importance=change.weight)
        return self._to_wire(updated)

    def delete(self, caller: Identity, memory_id: str) -> bool:
        return self._open(caller.tenant_id)[0].forget(record_ids=[memory_id]) > 0

    def _to_wire(self, record: Any, score: float | None = None) -> StoredMemory:
        meta = dict(record.metadata or {})
        wire = dict(meta.pop("wire", {}) or {})
        wire["content"] = record.content
        wire["id"] = str(record.id)
        memory = StoredMemory.from_payload(wire, score)
        memory.agent_id = record.source or memory.agent_id
        if self.analysis:  # where the model's analysis filed it, and whether it is private
            memory.metadata = {**memory.metadata, "crewai_scope": record.scope,
                               "crewai_private": bool(record.private),
                               "crewai_source": record.source}
        return memory

    def close(self) -> None:
        for memory, _ in self._memories.values():
            memory.close()
