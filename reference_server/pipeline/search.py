"""The search path as a composition (`Profile.search_steps`), following SEARCH-LEAK.md
section 5 (the search as it was on 2026-05-30), rules 1-9.

Ranking is hybrid: similarity = (1 - w) * cosine + w * keyword share, then MemClaw's blend
with the row weight. As on 2026-05-30 the returned `similarity` is the composite score.
Graph expansion (`expand_entity_graph`): from the entities the query names, over entity
links, up to `Profile.graph_max_hops` hops (MemClaw: 2), boosting reached rows by MemClaw's
hop factors; every row it reaches, and every row it walks through, passes the same scope
predicate as the similarity candidates. Not implemented: MemClaw's ENTITY_LOOKUP
short-circuit (a secondary miss source only, SEARCH-LEAK.md section 4), entity relations,
freshness/recall boosts, recall tracking.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from starlette.concurrency import run_in_threadpool

from ..governance.auth import Caller
from ..governance.profiles import Profile
from ..governance.scope import (
    SearchFilter,
    SearchScope,
    Viewer,
    fleet_read_allowed,
    lexical_terms,
    search_row_visible,
)
from ..storage import AgentRow, Storage
from ..wire.errors import ApiError
from ..wire.schemas import SearchRequest
from .embedding import Embedder, keyword_score
from .write import iso

STATUS_PENALTY = {"outdated": 0.5, "conflicted": 0.5}
# MemClaw's graph hop boosts and cap on boosted rows (WIRE.md section 6).
GRAPH_HOP_BOOST = {0: 1.3, 1: 1.2, 2: 1.1, 3: 1.05}
GRAPH_MAX_ROWS = 50


@dataclass
class SearchContext:
    profile: Profile
    storage: Storage
    embedder: Embedder
    caller: Caller
    request: SearchRequest
    recall: bool = False  # /recall (its identity rule may differ: recall_identity_filter_only)
    identity: str | None = None
    agent: AgentRow | None = None
    fleet_ids: tuple[str, ...] = ()
    vector: np.ndarray | None = None
    candidates: Iterator[tuple[dict, float]] = iter(())
    results: list[tuple[dict, float | None]] = field(default_factory=list)
    # memory id -> hop at which the entity graph reached it (0 = linked to a named entity)
    graph_hops: dict[str, int] = field(default_factory=dict)
    graph_rows: list[dict] = field(default_factory=list)

    @property
    def scope(self) -> SearchScope:
        r = self.request
        # a set: membership per candidate row must not grow with a hostile fleet_ids list
        terms = (lexical_terms(r.query) if self.profile.conflicted_exact_match_surfaces
                 else frozenset())
        return SearchScope(Viewer(self.identity, self.agent), frozenset(self.fleet_ids),
                           r.filter_agent_id, r.status_filter, r.memory_type_filter, terms)


def resolve_search_identity(ctx: SearchContext) -> None:
    """Rule 1: 05-30 reads the identity from `filter_agent_id` only; 05-31 falls back to
    the agent key's verified identity; 2.29 refuses a filter_agent_id naming another agent
    than the caller's identity."""
    wanted, own = ctx.request.filter_agent_id, ctx.caller.agent_id
    if ctx.recall and ctx.profile.recall_identity_filter_only:
        ctx.identity = wanted  # the engine's /recall: filter_agent_id is the only identity
        return
    if (ctx.profile.search_filter_agent_must_match and wanted is not None and own is not None
            and wanted != own):
        raise ApiError(403, f"filter_agent_id '{wanted}' does not match the authenticated "
                            f"agent identity '{own}'.")
    ctx.identity = ctx.request.filter_agent_id
    if ctx.identity is None and ctx.profile.search_identity_from_key:
        ctx.identity = ctx.caller.agent_id
    if ctx.profile.hardening.search_identity_key_first and ctx.caller.agent_id is not None:
        ctx.identity = ctx.caller.agent_id  # filter_agent_id still filters (rule 6)


def apply_agent_fleet_rules(ctx: SearchContext) -> None:
    """Rule 2: auto-register the agent, force its home fleet, check a single fleet."""
    ctx.fleet_ids = tuple(ctx.request.fleet_ids or ())
    if ctx.identity is None or ctx.caller.is_admin:
        return
    tenant = ctx.request.tenant_id
    single = ctx.fleet_ids[0] if len(ctx.fleet_ids) == 1 else None
    known = ctx.storage.get_agent(tenant, ctx.identity)
    agent = known
    if not ctx.profile.hardening.search_registers_agents:
        agent = known or AgentRow(tenant, ctx.identity, None, 1)  # read only: nothing stored
    elif agent is None or (agent.fleet_id is None and single is not None):
        agent = AgentRow(tenant, ctx.identity, single,
                         agent.trust_level if agent else 1,
                         agent.display_name if agent else None,
                         agent.created_at if agent else "")
        ctx.storage.upsert_agent(agent)
    ctx.agent = agent
    if not ctx.fleet_ids and agent.fleet_id and agent.trust_level < 2:
        ctx.fleet_ids = (agent.fleet_id,)
    if single is not None and known is not None and not fleet_read_allowed(
            ctx.profile, agent, single):
        home = agent.fleet_id or "none"
        raise ApiError(403, f"fleet-scope policy: fleet '{single}' is not readable by "
                            f"principals of fleet '{home}'.")


def score_candidates(ctx: SearchContext) -> None:
    """Rule 3 and the cosine gate: embedded rows of the tenant, most similar first."""
    ctx.vector = ctx.embedder.embed(ctx.request.query)
    ctx.candidates = ctx.storage.similar_rows(ctx.request.tenant_id, ctx.vector,
                                              ctx.profile.min_similarity)


def filter_visible(ctx: SearchContext) -> None:
    """Rules 4-7 (Inv-Scope, in `governance/scope.py`) plus the `valid_at` hard filter. The store is
    handed the filter so it can apply it in its query (PostgreSQL: in the SQL, as MemClaw
    does); every row it returns is still judged here by the Python rule."""
    visible = SearchFilter(ctx.profile, ctx.scope, iso(ctx.request.valid_at))
    if ctx.vector is not None:
        ctx.candidates = ctx.storage.similar_rows(ctx.request.tenant_id, ctx.vector,
                                                  ctx.profile.min_similarity, visible)
    ctx.candidates = ((row, sim) for row, sim in ctx.candidates if visible.admits(row))


def expand_entity_graph(ctx: SearchContext) -> None:
    """Rows linked to the entities the query names (hop 0), then to the entities those rows
    link (hop 1, 2, ...). A row is reached, and walked through, only if the caller's scope
    admits it, so the graph cannot bridge through a partition the caller may not read."""
    hops = ctx.profile.graph_max_hops
    if hops < 0:
        return
    visible = SearchFilter(ctx.profile, ctx.scope, iso(ctx.request.valid_at))
    tenant = ctx.request.tenant_id
    frontier = [e["id"] for e in ctx.storage.entities_named_in(tenant, ctx.request.query)]
    seen_entities = set(frontier)
    for hop in range(hops + 1):
        reached = []
        for entity_id in frontier:
            for row in ctx.storage.memories_linked_to(tenant, entity_id, visible):
                if len(ctx.graph_rows) >= GRAPH_MAX_ROWS:
                    return
                if row["id"] in ctx.graph_hops or not visible.admits(row):
                    continue
                ctx.graph_hops[row["id"]] = hop
                ctx.graph_rows.append(row)
                reached.append(row["id"])
        links = ctx.storage.entity_links_of(reached)
        frontier = [link["entity_id"] for rid in reached for link in links.get(rid, [])
                    if link["entity_id"] not in seen_entities]
        frontier = list(dict.fromkeys(frontier))
        seen_entities.update(frontier)
        if not frontier:
            return


def rank_and_trim(ctx: SearchContext) -> None:
    """Over-fetch 2k visible rows, add the graph-reached rows (boosted by hop), score them,
    keep the best k."""
    k = ctx.request.top_k
    pool = []
    for row, sim in ctx.candidates:
        if row["id"] in ctx.graph_hops:
            continue  # scored below, with its hop boost
        pool.append((row, _score(ctx.profile, ctx.request.query, row, sim)))
        if len(pool) >= 2 * k:
            break
    if ctx.graph_rows:
        query = ctx.embedder.embed(ctx.request.query)
        for row in ctx.graph_rows:
            cosine = float(np.dot(query, ctx.embedder.embed(row["content"])))
            boost = GRAPH_HOP_BOOST.get(ctx.graph_hops[row["id"]], 1.0)
            pool.append((row, boost * _score(ctx.profile, ctx.request.query, row, cosine)))
    pool.sort(key=lambda rs: (rs[1], rs[0]["created_at"]), reverse=True)
    ctx.results = [(row, round(score, 4)) for row, score in pool[:k]]


def _score(profile: Profile, query: str, row: dict, cosine: float) -> float:
    w = profile.keyword_weight
    similarity = (1 - w) * cosine + w * keyword_score(query, row["content"])
    base = profile.similarity_blend * similarity + (1 - profile.similarity_blend) * row["weight"]
    if (profile.conflicted_exact_match_surfaces and row["status"] == "conflicted"
            and lexical_terms(query) <= lexical_terms(row["content"])):
        return base  # 2.29: a conflicted row the query names is not demoted
    return base * STATUS_PENALTY.get(row["status"], 1.0)


def append_successors(ctx: SearchContext) -> None:
    """Rule 9: successors of returned outdated/conflicted rows, under the same scope."""
    stale = [row["id"] for row, _ in ctx.results if row["status"] in STATUS_PENALTY]
    if not stale:
        return
    seen = {row["id"] for row, _ in ctx.results}
    scope = SearchScope(ctx.scope.viewer, frozenset(ctx.fleet_ids),
                        ctx.request.filter_agent_id, None, None)
    for row in ctx.storage.successors_of(ctx.request.tenant_id, stale):
        if row["id"] not in seen and search_row_visible(ctx.profile, scope, row):
            ctx.results.append((row, None))
            seen.add(row["id"])


STEPS: dict[str, Callable[[SearchContext], Any]] = {
    fn.__name__: fn for fn in (resolve_search_identity, apply_agent_fleet_rules,
                               score_candidates, filter_visible, expand_entity_graph,
                               rank_and_trim, append_successors)
}


def validate_steps(names: tuple[str, ...]) -> None:
    unknown = [n for n in names if n not in STEPS]
    if unknown:
        raise ValueError(f"unknown search steps: {unknown}")


def run_search(ctx: SearchContext) -> list[tuple[dict, float | None]]:
    for name in ctx.profile.search_steps:
        STEPS[name](ctx)
    return ctx.results


async def run_search_off_loop(ctx: SearchContext) -> list[tuple[dict, float | None]]:
    """`run_search` on a worker thread, always: its vector product (SQLite: numpy over the
    scope's blocks, outside the GIL and the store's lock) or its index query (PostgreSQL, on
    a pooled connection) then runs beside other requests instead of holding the loop, so
    concurrent searches use both cores."""
    return await run_in_threadpool(run_search, ctx)
