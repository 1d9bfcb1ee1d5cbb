"""`POST /api/v1/insights/generate`: MemClaw's insights route, deterministic and LLM-free.

Request and response follow MemClaw's `routes/insights.py` and `insights_service.py`
(`InsightsRequest`: tenant_id, focus, scope agent|fleet|all, fleet_id, agent_id; response:
focus, scope, memories_analyzed, findings, summary, insight_memory_ids, insights_ms). MemClaw
asks a language model to read the candidate rows; here only focus `contradictions` is served,
by structure alone, from the conflicts MemClaw's query already selects:

- supersession pairs (a row with `supersedes_id`, or `outdated`/`conflicted`, and its other
  side), and
- rows about the same `subject_entity_id` and predicate asserting different `object_value`s
  (MemClaw groups by subject with more than one distinct object), across fleets.

Only rows the caller may read are analysed (`scope.insight_source_visible`). Each finding
names every party with its fleet and agent (attribution) and is persisted, server-side, as
an `insight` memory in `fleet_id` (visibility from the scope, as MemClaw maps it), linked to
the entities of the rows it summarises. Prior active insights of the same agent, focus, scope
and fleet become `outdated` first. The other focus modes need a model: 501, never faked.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field, model_validator

from ..governance import scope
from ..governance.auth import Caller, caller_from
from ..pipeline.write import content_hash
from ..storage import AgentRow, ListFilter, now_iso
from ..wire.errors import ApiError
from ..wire.schemas import Text
from .state import ServerState, state_of

router = APIRouter(prefix="/api/v1")

INSIGHTS_FOCUS_MODES = ("contradictions", "failures", "stale", "divergence", "patterns",
                        "discover")
SERVED_FOCUS = ("contradictions",)
VALID_SCOPES = ("agent", "fleet", "all")
SCOPE_TO_VISIBILITY = {"agent": "scope_agent", "fleet": "scope_team", "all": "scope_org"}
INSIGHTS_MAX_MEMORIES = 50
DEFAULT_AGENT_ID = "mcp-agent"


class InsightsRequest(BaseModel):
    tenant_id: Text
    focus: Text
    scope: Text = "agent"
    fleet_id: Text | None = None
    agent_id: Annotated[Text, Field(min_length=1, max_length=256)] | None = None

    @model_validator(mode="after")
    def _scope_rules(self) -> InsightsRequest:
        if self.scope not in VALID_SCOPES:
            raise ValueError(f"Invalid scope '{self.scope}'. Must be: {', '.join(VALID_SCOPES)}.")
        if self.scope == "fleet" and not self.fleet_id:
            raise ValueError("fleet_id is required when scope is 'fleet'.")
        if self.focus == "divergence" and self.scope == "agent":
            raise ValueError("Focus 'divergence' requires scope='fleet' or scope='all'.")
        return self


@router.post("/insights/generate")
async def generate_insights(body: InsightsRequest,
                            caller: Annotated[Caller, Depends(caller_from)],
                            state: Annotated[ServerState, Depends(state_of)]) -> dict:
    started = time.perf_counter()
    caller.enforce_tenant(body.tenant_id)
    if body.focus not in INSIGHTS_FOCUS_MODES:
        raise ApiError(422, f"Invalid focus '{body.focus}'. Must be one of: "
                            f"{', '.join(INSIGHTS_FOCUS_MODES)}")
    if body.focus not in SERVED_FOCUS:
        raise ApiError(501, f"focus '{body.focus}' needs a language model; this server "
                            f"serves {', '.join(SERVED_FOCUS)} only (deterministic, no LLM)")
    agent_id = caller.agent_id or body.agent_id or DEFAULT_AGENT_ID
    agent = _authorized_agent(state, caller, body, agent_id)
    viewer = scope.Viewer(agent_id, agent)
    rows = [r for r in state.storage.iter_memories(ListFilter(
                tenant_id=body.tenant_id, exclude_memory_types=("insight",)))
            if scope.insight_source_visible(state.profile, viewer, r, body.scope,
                                            body.fleet_id)]
    findings, analysed = contradiction_findings(state, body.tenant_id, rows)
    ids = _persist(state, body, agent, findings) if findings else []
    return {
        "focus": body.focus, "scope": body.scope, "memories_analyzed": analysed,
        "findings": [{**f, "insight_memory_id": i} for f, i in zip(findings, ids, strict=True)]
        if ids else findings,
        "summary": _summary(findings),
        "insight_memory_ids": ids,
        "insights_ms": int((time.perf_counter() - started) * 1000),
    }


def _authorized_agent(state: ServerState, caller: Caller, body: InsightsRequest,
                      agent_id: str) -> AgentRow:
    """MemClaw: scope agent needs trust 1, fleet/all trust 2; the insight is a write, so an
    unregistered agent is refused; the target fleet must be writable by the agent."""
    agent = state.storage.get_agent(body.tenant_id, agent_id)
    if caller.is_admin or not state.profile.governed:
        return agent or AgentRow(body.tenant_id, agent_id, body.fleet_id, 3)
    if agent is None:
        raise ApiError(403, f"Agent '{agent_id}' is not registered in tenant "
                            f"'{body.tenant_id}'.")
    needed = 1 if body.scope == "agent" else scope.CROSS_FLEET_READ_TRUST
    if agent.trust_level < needed:
        raise ApiError(403, f"Agent '{agent_id}' requires trust_level >= {needed} for "
                            f"scope='{body.scope}' (current: {agent.trust_level}).")
    if not scope.fleet_write_allowed(state.profile, agent, body.fleet_id):
        raise ApiError(403, f"fleet-scope policy: fleet '{body.fleet_id}' is not writable by "
                            f"principals of fleet '{agent.fleet_id or 'none'}'.")
    return agent


def contradiction_findings(state: ServerState, tenant_id: str, rows: list[dict],
                           ) -> tuple[list[dict[str, Any]], int]:
    """Findings over the visible rows, and how many rows they drew on (capped like MemClaw's
    INSIGHTS_MAX_MEMORIES per finding set)."""
    by_id = {r["id"]: r for r in rows}
    findings: list[dict[str, Any]] = []
    used: set[str] = set()
    for row in rows:
        older = by_id.get(row["supersedes_id"] or "")
        if older is not None:
            findings.append(_finding(state, tenant_id, "supersession", row["subject_entity_id"],
                                     row["predicate"], [older, row]))
            used.update((row["id"], older["id"]))
    claims: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in rows:
        if row["subject_entity_id"] and row["predicate"] and row["object_value"] is not None:
            claims[(row["subject_entity_id"], row["predicate"].lower())].append(row)
    for (subject, predicate), group in sorted(claims.items()):
        if len({r["object_value"] for r in group}) < 2:
            continue
        group = sorted(group, key=lambda r: (r["created_at"], r["id"]))[:INSIGHTS_MAX_MEMORIES]
        findings.append(_finding(state, tenant_id, "disagreement", subject, predicate, group))
        used.update(r["id"] for r in group)
    return findings, len(used)


def _finding(state: ServerState, tenant_id: str, kind: str, subject: str | None,
             predicate: str | None, parties: list[dict]) -> dict[str, Any]:
    entity = state.storage.get_entity(tenant_id, subject) if subject else None
    about = entity["canonical_name"] if entity else (subject or "an unnamed subject")
    sides = "; ".join(f"[{r['fleet_id'] or 'no fleet'}] {r['agent_id']} asserts "
                      f"{r['object_value'] if r['object_value'] is not None else r['status']}"
                      for r in parties)
    return {
        "type": "contradictions",
        "title": f"Conflict on {about}: {predicate or kind}"[:80],
        "description": f"{kind}: {sides}.",
        "confidence": 1.0,
        "related_memory_ids": [r["id"] for r in parties],
        "recommendation": "Escalate to a human decision-maker; the conflict is surfaced with "
                          "attribution, not resolved.",
        "parties": [{"memory_id": r["id"], "fleet_id": r["fleet_id"], "agent_id": r["agent_id"],
                     "object_value": r["object_value"]} for r in parties],
        "subject_entity_id": subject,
    }


def _summary(findings: list[dict]) -> str:
    if not findings:
        return "No relevant memories found for this analysis."
    return f"{len(findings)} conflict(s) found among the memories visible to the caller."


def _persist(state: ServerState, body: InsightsRequest, agent: AgentRow,
             findings: list[dict]) -> list[str]:
    """One insight memory per finding; prior active insights of the same agent, focus,
    scope and fleet are outdated first (MemClaw's supersede-then-create)."""
    prior = state.storage.iter_memories(ListFilter(
        tenant_id=body.tenant_id, agent_id=agent.agent_id, memory_type="insight",
        status="active", fleet_id=body.fleet_id))
    for row in list(prior):
        meta = row["metadata"] or {}
        if (row["fleet_id"] == body.fleet_id and meta.get("insight_focus") == body.focus
                and meta.get("insight_scope") == body.scope):
            state.storage.update_status(body.tenant_id, row["id"], "outdated")
    ids = []
    for finding in findings:
        content = (f"[Insight/{finding['type']}] {finding['title']}: "
                   f"{finding['description']} Recommendation: {finding['recommendation']}")
        row = {
            "id": str(uuid.uuid4()), "tenant_id": body.tenant_id, "fleet_id": body.fleet_id,
            "agent_id": agent.agent_id, "memory_type": "insight", "title": None,
            "content": content, "weight": finding["confidence"], "source_uri": None,
            "run_id": None, "metadata": {
                "insight_focus": body.focus, "insight_scope": body.scope,
                "insight_type": finding["type"],
                "related_memory_ids": finding["related_memory_ids"],
                "recommendation": finding["recommendation"],
                "confidence": finding["confidence"], "parties": finding["parties"],
                "generator": "deterministic (no LLM)"},
            "content_hash": content_hash(body.tenant_id, body.fleet_id, content),
            "client_request_id": None, "created_at": now_iso(), "expires_at": None,
            "deleted_at": None, "ts_valid_start": None, "ts_valid_end": None,
            "subject_entity_id": None, "predicate": None, "object_value": None,
            "status": "active", "visibility": SCOPE_TO_VISIBILITY[body.scope],
            "recall_count": 0, "last_recalled_at": None, "supersedes_id": None,
        }
        entities = [finding["subject_entity_id"]] if finding["subject_entity_id"] else []
        linked = state.storage.entity_links_of(finding["related_memory_ids"])
        entities += [link["entity_id"] for rid in finding["related_memory_ids"]
                     for link in linked.get(rid, [])]
        links = [(e, "about") for e in dict.fromkeys(entities)]
        state.storage.insert_memory(row, state.embedder.embed(content), links, None, None)
        ids.append(row["id"])
    return ids
