"""Graphiti (`graphiti_core.Graphiti`) on its embedded Kuzu graph store: `group_id` graph
partitions are the scoping mechanism ("graph namespacing", docs/backends.md, Graphiti).

A wire memory is an episode: `add_episode(..., group_id=...)` stores it and runs Graphiti's
own ingestion (entity and fact extraction, resolution against the partition's graph) through
its LLM client and embedder, both aimed at the kit's scripted model on loopback
(`FLEETPROBE_MODEL_URL`; docs/scripted-model.md). Graphiti has no metadata on an episode, so
the wire's fields (agent, fleet, visibility, caller metadata) are kept as JSON in the
episode's `name`, never in a field its full-text index reads.

Deployments:
- `idiomatic`: one Kuzu database for every tenant; `group_id` per tenant and fleet (the docs'
  "team collaboration": each team its own graph space); agent-scoped rows stay in their
  fleet's partition (Graphiti has no visibility). Fleet-less rows: the tenant's partition.
- `strict`: one Kuzu database (one Graphiti instance) per tenant, and an agent-scoped row in
  a partition of its own (fleet and agent); an agent key's search names its own partitions
  beside the fleets', never another agent's: the strictest scoping `group_ids` expresses.
Search is `Graphiti.search_` over the named partitions (facts by BM25 and cosine, episodes by
BM25, reciprocal-rank fusion); a fact answers with the episodes it cites. GET and DELETE by
id are `EpisodicNode.get_by_uuid` / `Graphiti.remove_episode`: an id and no partition.
The listing is `retrieve_episodes(group_ids=...)`. Graphiti has no episode update (501).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .base import Change, Identity, NotSupported, SearchScope, StoredMemory, deployment_of
from .embedder import DIM
from .scripted_model import MODEL_URL_ENV

_WIRE = ("tenant_id", "agent_id", "fleet_id", "visibility", "metadata", "memory_type",
         "source_uri", "run_id", "created_at")
_SOURCE = "fleetprobe wire memory"  # every episode's source_description (full-text indexed)


def part(value: str) -> str:
    """`value` as one segment of a group_id, which Graphiti restricts to [A-Za-z0-9_-]
    (`validate_group_id`): every other byte and `_` itself become `_XX`, so distinct ids stay
    distinct, and "__" (the segment separator) never occurs inside a segment."""
    out = []
    for ch in value:
        if ch.isascii() and (ch.isalnum() or ch == "-"):
            out.append(ch)
        else:
            out += [f"_{b:02X}" for b in ch.encode()]
    return "".join(out)


class GraphitiBackend:
    name = "graphiti"
    package = "graphiti-core"
    store = "Graphiti(Kuzu, embedded)"
    concurrent = False  # one Kuzu connection per database, driven from one event loop

    def __init__(self, data_dir: Path, store: str | None = None,
                 deployment: str | None = None) -> None:
        if store not in (None, "kuzu"):
            raise ValueError(f"graphiti store {store!r}: use kuzu")
        self.deployment = deployment_of(deployment)
        self.strict = self.deployment == "strict"
        self._url = os.environ.get(MODEL_URL_ENV)
        if not self._url:
            raise ValueError(f"graphiti needs the scripted model: {MODEL_URL_ENV}")
        import graphiti_core  # noqa: F401  # imported before the adapter reports healthy

        self._dir = data_dir
        self._graphs: dict[str, Any] = {}
        # the partitions written under each tenant: Graphiti has no "list my groups", so a
        # tenant-wide read names the ones this deployment created, as an application would
        self._groups: dict[str, dict[str, tuple[str | None, str | None]]] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    def _run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Graphiti is async: every call runs on the adapter's one event loop."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def _graph(self, tenant_id: str, create: bool = True) -> Any:
        key = tenant_id if self.strict else ""
        if key not in self._graphs and create:
            self._graphs[key] = self._run(self._open(key))
        return self._graphs.get(key)

    async def _open(self, key: str) -> Any:
        from graphiti_core import Graphiti
        from graphiti_core.cross_encoder.openai_reranker_client import OpenAIRerankerClient
        from graphiti_core.driver.kuzu_driver import KuzuDriver
        from graphiti_core.embedder.openai import OpenAIEmbedder, OpenAIEmbedderConfig
        from graphiti_core.llm_client.config import LLMConfig
        from graphiti_core.llm_client.openai_generic_client import OpenAIGenericClient

        name = "shared" if not key else "t-" + part(key)
        driver = KuzuDriver(db=str(self._dir / f"kuzu-{name}"))
        # graphiti-core 0.31.2's KuzuDriver never sets `_database`, which add_episode reads
        # for any group_id; Kuzu has one database, so the default ('') is its only value
        driver._database = ""
        # its `build_indices_and_constraints` is a no-op and the schema has no full-text
        # indices, so the driver's own Kuzu index operation creates them
        await driver.graph_ops.build_indices_and_constraints(driver)
        llm = LLMConfig(api_key="scripted-model-needs-no-key", base_url=self._url,
                        model="fleetprobe-scripted", small_model="fleetprobe-scripted")
        embedder = OpenAIEmbedder(OpenAIEmbedderConfig(
            api_key=llm.api_key, base_url=self._url, embedding_model="fleetprobe-scripted",
            embedding_dim=DIM))
        # OpenAIGenericClient: Graphiti's client for any OpenAI-compatible chat endpoint;
        # the reranker is never called (every search here fuses by reciprocal rank)
        return Graphiti(graph_driver=driver, llm_client=OpenAIGenericClient(config=llm),
                        embedder=embedder, cross_encoder=OpenAIRerankerClient(config=llm))

    # --- partitions ---------------------------------------------------------------------

    def group(self, tenant_id: str, fleet_id: str | None, agent_id: str | None = None) -> str:
        """The row's partition: `idiomatic` (tenant, fleet); `strict` (fleet) in the tenant's
        own database, plus (agent) for an agent-scoped row."""
        parts = [] if self.strict else ["t", part(tenant_id)]
        parts += ["f", part(fleet_id)] if fleet_id is not None else []
        parts += ["a", part(agent_id)] if self.strict and agent_id else []
        return "__".join(parts) or "tenant"

    def _groups_for(self, caller: Identity, scope: SearchScope) -> list[str]:
        """The partitions a read names: the fleets' (the tenant's all when none), and under
        `strict` only the caller's own agent partitions among the private ones (a tenant key
        names every one)."""
        known = self._groups.get(caller.tenant_id, {})
        fleets = set(scope.fleet_ids) if scope.fleet_ids is not None else None
        out = []
        for gid, (fleet, agent) in known.items():
            if fleets is not None and fleet not in fleets:
                continue
            if agent is not None and caller.agent_id is not None and agent != caller.agent_id:
                continue
            out.append(gid)
        if fleets is not None:  # a named fleet is named even before anything was written
            out += [g for g in (self.group(caller.tenant_id, f) for f in sorted(fleets))
                    if g not in out]
        return sorted(out)

    # --- the wire's calls ---------------------------------------------------------------

    def write(self, memory: StoredMemory) -> StoredMemory:
        from graphiti_core.nodes import EpisodeType

        private = memory.visibility == "scope_agent" and memory.agent_id
        agent = memory.agent_id if private and self.strict else None
        gid = self.group(memory.tenant_id, memory.fleet_id, agent)
        graph = self._graph(memory.tenant_id)
        fields = {k: v for k, v in memory.payload().items() if k in _WIRE}
        result = self._run(graph.add_episode(
            name=json.dumps(fields, sort_keys=True), episode_body=memory.content,
            source_description=_SOURCE, reference_time=datetime.now(UTC),
            source=EpisodeType.text, group_id=gid))
        self._groups.setdefault(memory.tenant_id, {})[gid] = (memory.fleet_id, agent)
        memory.id = result.episode.uuid  # Graphiti mints the episode's uuid
        return memory

    def get(self, caller: Identity, memory_id: str) -> StoredMemory | None:
        graph = self._graph(caller.tenant_id, create=False)
        return self._episode(graph, memory_id) if graph is not None else None

    def _episode(self, graph: Any, memory_id: str) -> StoredMemory | None:
        from graphiti_core.errors import NodeNotFoundError
        from graphiti_core.nodes import EpisodicNode

        try:
            return self._to_wire(self._run(EpisodicNode.get_by_uuid(graph.driver, memory_id)))
        except NodeNotFoundError:
            return None

    def search(self, caller: Identity, query: str, scope: SearchScope,
               top_k: int) -> list[StoredMemory]:
        from graphiti_core.nodes import EpisodicNode
        from graphiti_core.search.search_config import (
            EdgeReranker,
            EdgeSearchConfig,
            EdgeSearchMethod,
            EpisodeReranker,
            EpisodeSearchConfig,
            EpisodeSearchMethod,
            SearchConfig,
        )

        if scope.author:
            raise NotSupported("an episode has no author Graphiti can filter on")
        graph = self._graph(caller.tenant_id, create=False)
        groups = self._groups_for(caller, scope)
        if graph is None or not groups:  # group_ids=[] would be no filter at all
            return []
        config = SearchConfig(
            edge_config=EdgeSearchConfig(search_methods=[
                EdgeSearchMethod.bm25, EdgeSearchMethod.cosine_similarity],
                reranker=EdgeReranker.rrf),
            episode_config=EpisodeSearchConfig(search_methods=[EpisodeSearchMethod.bm25],
                                               reranker=EpisodeReranker.rrf),
            limit=top_k)
        found = self._run(graph.search_(query, config=config, group_ids=groups))
        ranked: dict[str, float] = {}  # episode uuid -> best score, in rank order
        for ep, score in zip(found.episodes, found.episode_reranker_scores, strict=False):
            ranked.setdefault(ep.uuid, score)
        for edge, score in zip(found.edges, found.edge_reranker_scores, strict=False):
            for uuid in edge.episodes:  # a fact answers with the episodes it came from
                ranked.setdefault(uuid, score)
        order = sorted(ranked, key=lambda u: -ranked[u])[:top_k]
        nodes = {n.uuid: n for n in found.episodes}
        missing = [u for u in order if u not in nodes]
        if missing:
            nodes.update({n.uuid: n for n in self._run(
                EpisodicNode.get_by_uuids(graph.driver, missing))})
        out = []
        for uuid in order:
            if uuid in nodes:
                memory = self._to_wire(nodes[uuid])
                memory.similarity = float(ranked[uuid])
                out.append(memory)
        return out

    def list(self, caller: Identity, scope: SearchScope, limit: int) -> list[StoredMemory]:
        if scope.author:
            raise NotSupported("an episode has no author Graphiti can filter on")
        graph = self._graph(caller.tenant_id, create=False)
        groups = self._groups_for(caller, scope)
        if graph is None or not groups:
            return []
        episodes = self._run(graph.retrieve_episodes(
            datetime.now(UTC), last_n=limit, group_ids=groups))
        return [self._to_wire(ep) for ep in episodes]

    def update(self, caller: Identity, memory_id: str, change: Change
               ) -> StoredMemory | None:
        raise NotSupported("Graphiti has no episode update: a change is a new episode, and "
                           "facts it contradicts are invalidated by its resolution")

    def delete(self, caller: Identity, memory_id: str) -> bool:
        graph = self._graph(caller.tenant_id, create=False)
        if graph is None or self._episode(graph, memory_id) is None:
            return False
        self._run(graph.remove_episode(memory_id))
        return True

    def _to_wire(self, episode: Any) -> StoredMemory:
        try:
            fields = json.loads(episode.name)
        except (TypeError, ValueError):  # an episode the adapter did not write
            fields = {}
        fields = {k: v for k, v in fields.items() if k in _WIRE and v is not None}
        fields.setdefault("tenant_id", "")
        return StoredMemory(id=episode.uuid, content=episode.content, **fields)

    def close(self) -> None:
        for graph in self._graphs.values():
            try:
                self._run(graph.close())
            except Exception:  # noqa: BLE001  # closing is best effort at shutdown
                pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
