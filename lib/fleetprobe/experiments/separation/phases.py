"""Separation: the one scenario phase (agent keys, entities, records, then every probe),
recording what the server returned as it happens."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fleetprobe.client import Credential, body_field
from fleetprobe.harness.experiment import RunContext
from fleetprobe.harness.seeding import salted, scoped

from .check import written_by_id
from .plan import (
    AGENT,
    AGENTS,
    ENDPOINT_MISSING,
    FANOUT_QUERY,
    GRAPH_QUERY,
    INSIGHT_QUERY,
    LEGAL,
    ORG,
    PREDICATE,
    QUERIES,
    RECORD_OBJECT,
    RECORD_WRITER,
    RESERVED_TYPES,
    SALES,
    Account,
)


def compact_items(body: Any, key: str) -> list[dict[str, Any]]:
    """What each returned record carries that the judgement may use: id, partition, author,
    type, visibility, the harness's account tag and, when the server says, the retrieval path."""
    items = body_field(body, key)
    out = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        meta = item.get("metadata") if isinstance(item.get("metadata"), dict) else {}
        retrieval = item.get("retrieval") if isinstance(item.get("retrieval"), dict) else {}
        out.append({"id": item.get("id"), "fleet_id": item.get("fleet_id"),
                    "agent_id": item.get("agent_id"), "memory_type": item.get("memory_type"),
                    "visibility": item.get("visibility"), "account": meta.get("account"),
                    "path": retrieval.get("path"), "graph_hop": retrieval.get("graph_hop")})
    return out


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class Run:
    """Per-run names on the wire (fleets and agents are unique to the run)."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.creds: dict[str, Credential] = {}
        self.entities: dict[str, str] = {}
        self.topic_entity: str | None = None

    def fleet(self, plan_fleet: str) -> str:
        return scoped(plan_fleet, self.ctx.nonce)

    def agent_id(self, name: str) -> str:
        return scoped(name, self.ctx.nonce)

    def authorized(self, name: str) -> list[str]:
        return [self.fleet(f) for f in AGENT[name].authorized]


# -- the scenario ------------------------------------------------------------------------


async def scenario(ctx: RunContext) -> None:
    """One phase: the agents' keys live only in memory, so every step runs in this call."""
    run = Run(ctx)
    await setup_agents(run)
    await upsert_entities(run)
    await write_records(run)
    await asyncio.sleep(ctx.params.settle_s)
    await contamination_probes(run)
    await fanout_probes(run)
    await reserved_writes(run)
    insights = await generate_insights(run)
    await insight_reads(run, insights)
    await graph_probes(run)


async def setup_agents(run: Run) -> None:
    """An agent key per agent (home fleet, trust). Self-hosted MemClaw without a gateway
    speaks as headers; a target without provisioning falls back to the tenant key with
    `agent_id` in writes (recorded: the fleet predicate is then all that scopes reads)."""
    ctx = run.ctx
    for spec in AGENTS:
        agent_id = run.agent_id(spec.name)
        if ctx.tenant.kind == "headers":
            run.creds[spec.name] = Credential("headers", ctx.tenant.tenant_id,
                                              agent_id=agent_id, trust=spec.trust)
            ctx.record("agent", None, agent=spec.name, agent_id=agent_id,
                       home_fleet=run.fleet(spec.home), trust=spec.trust,
                       credential="headers", provisioned=False)
            continue
        result, cred = await ctx.client.provision_agent_key(
            ctx.tenant, agent_id, initial_trust=spec.trust,
            initial_fleet=run.fleet(spec.home), label="fleetprobe separation")
        run.creds[spec.name] = cred or ctx.tenant
        ctx.record("agent", result, agent=spec.name, agent_id=agent_id,
                   home_fleet=run.fleet(spec.home), trust=spec.trust,
                   credential="agent" if cred else "tenant", provisioned=cred is not None)
        if cred is None:
            ctx.trace.skip(f"agent key for {spec.name}",
                           f"provisioning failed ({result.error}); using the tenant key")


async def upsert_entities(run: Run) -> None:
    ctx = run.ctx

    async def one(label: str, entity_type: str, name: str) -> None:
        result = await ctx.client.upsert_entity(ctx.tenant, {
            "entity_type": entity_type, "canonical_name": name})
        entity_id = body_field(result.body, "id") if result.ok else None
        ctx.record("entity", result, account=label, entity_id=entity_id, entity_name=name)
        if entity_id:
            if label == "topic:gdpr":
                run.topic_entity = entity_id
            else:
                run.entities[label] = entity_id

    await one("topic:gdpr", "regulation", "GDPR")
    await ctx.gather([one(a.name, "organization", a.name) for a in ctx.plan.accounts],
                     desc="entities")


async def write_records(run: Run) -> None:
    ctx = run.ctx
    writes = [_write(run, account, kind) for account in ctx.plan.accounts
              for kind in account.record_kinds]
    await ctx.gather(writes, desc="write")


async def _write(run: Run, account: Account, record_kind: str) -> None:
    ctx = run.ctx
    writer = RECORD_WRITER[record_kind]
    spec = AGENT[writer]
    fleet = run.fleet(spec.home)
    entity = run.entities.get(account.name)
    links = [{"entity_id": entity, "role": "subject"}] if entity else []
    if record_kind in ("hold", "clearance") and run.topic_entity:
        links.append({"entity_id": run.topic_entity, "role": "regulation"})
    content = salted(account.content(record_kind), ctx.nonce)
    memory: dict[str, Any] = {
        "agent_id": run.agent_id(writer), "fleet_id": fleet, "content": content,
        "metadata": {"account": account.name, "domain": spec.role,
                     "record_kind": record_kind},
        "entity_links": links,
    }
    if record_kind in RECORD_OBJECT and entity:
        memory |= {"subject_entity_id": entity, "predicate": PREDICATE,
                   "object_value": RECORD_OBJECT[record_kind]}
    result = await ctx.client.write(run.creds[writer], memory)
    ctx.record("write", result, expect=("id",), record_id=f"{account.index}:{record_kind}",
               account=account.name, account_kind=account.kind, domain=spec.role,
               record_kind=record_kind, agent=writer, agent_id=run.agent_id(writer),
               fleet_id=fleet, stored_fleet_id=body_field(result.body, "fleet_id"),
               content=content,
               memory_id=body_field(result.body, "id") if result.status == 201 else None)


async def contamination_probes(run: Run) -> None:
    ctx = run.ctx
    calls = [_probe(run, agent, op, account, k)
             for (agent, op) in QUERIES for account in ctx.plan.accounts for k in ctx.plan.top_k]
    await ctx.gather(calls, desc="probe")


async def _probe(run: Run, agent: str, op: str, account: Account, top_k: int) -> None:
    ctx = run.ctx
    query = {"query": QUERIES[(agent, op)].format(name=account.name), "top_k": top_k,
             "fleet_ids": run.authorized(agent)}
    call = ctx.client.recall if op == "recall" else ctx.client.search
    result = await call(run.creds[agent], query)
    key = "memories" if op == "recall" else "items"
    ctx.record("probe", result, expect=(key,), agent=agent, account=account.name,
               account_kind=account.kind, op_kind=op, top_k=top_k,
               authorized=_json(run.authorized(agent)),
               items=_json(compact_items(result.body, key)) if result.ok else None,
               summary=body_field(result.body, "summary") if result.ok else None)


async def fanout_probes(run: Run) -> None:
    """Axis: one recall over all three fleets, and one labelled recall per fleet."""
    ctx = run.ctx
    calls = []
    for account in ctx.plan.of_kind("conflict"):
        for k in ctx.params.fanout_top_k:
            calls.append(_fanout(run, account, "blended", None, k))
            calls += [_fanout(run, account, "per_fleet", f, k) for f in (SALES, LEGAL, ORG)]
    await ctx.gather(calls, desc="fanout")


async def _fanout(run: Run, account: Account, mode: str, fleet: str | None,
                  top_k: int) -> None:
    ctx = run.ctx
    fleets = [run.fleet(fleet)] if fleet else run.authorized("axis")
    result = await ctx.client.recall(run.creds["axis"], {
        "query": FANOUT_QUERY.format(name=account.name), "top_k": top_k, "fleet_ids": fleets})
    ctx.record("fanout", result, expect=("memories",), account=account.name, mode=mode,
               fleet_label=run.fleet(fleet) if fleet else None, top_k=top_k,
               items=_json(compact_items(result.body, "memories")) if result.ok else None,
               summary=body_field(result.body, "summary") if result.ok else None)


async def reserved_writes(run: Run) -> None:
    ctx = run.ctx
    for spec in AGENTS:
        for memory_type in RESERVED_TYPES:
            result = await ctx.client.write(run.creds[spec.name], {
                "agent_id": run.agent_id(spec.name), "fleet_id": run.fleet(spec.home),
                "memory_type": memory_type,
                "content": salted(f"{spec.name} writes its own {memory_type} about the "
                                  "accounts it covers.", ctx.nonce)})
            envelope = body_field(result.body, "error")
            ctx.record("reserved", result, agent=spec.name, memory_type=memory_type,
                       error_code=body_field(envelope, "code"),
                       error_message=str(body_field(envelope, "message") or
                                         body_field(result.body, "detail") or "")[:400] or None,
                       memory_id=body_field(result.body, "id") if result.ok else None)


async def generate_insights(run: Run) -> list[dict[str, Any]]:
    ctx = run.ctx
    result = await ctx.client.generate_insights(run.creds["axis"], {
        "focus": "contradictions", "scope": "all", "fleet_id": run.fleet(ORG),
        "agent_id": run.agent_id("axis")})
    findings = body_field(result.body, "findings") if result.ok else None
    kept = [{"insight_memory_id": f.get("insight_memory_id"),
             "related_memory_ids": f.get("related_memory_ids") or []}
            for f in findings or [] if isinstance(f, dict)]
    ctx.record("insight_generate", result, expect=("findings",), agent="axis",
               n_findings=len(kept), insight_ids=_json([f["insight_memory_id"] for f in kept]),
               findings=_json(kept))
    if result.status in ENDPOINT_MISSING:
        ctx.trace.skip("insight_read", f"target has no insights route ({result.error})")
    return [f for f in kept if f["insight_memory_id"]]


async def insight_reads(run: Run, insights: list[dict[str, Any]]) -> None:
    """Vera and Lex read each insight (by id and by search) and try, by id, the related
    records outside their own partitions."""
    ctx = run.ctx
    written = written_by_id(ctx.events("write"))
    calls = []
    for finding in insights:
        related = [written[m] for m in finding["related_memory_ids"] if m in written]
        account = related[0]["account"] if related else None
        for reader in ("vera", "lex"):
            calls.append(_read_by_id(run, reader, "insight", finding["insight_memory_id"],
                                     finding["insight_memory_id"], account, "insight"))
            if account is not None:
                calls.append(_insight_search(run, reader, finding["insight_memory_id"],
                                             account))
            own = {AGENT[reader].home, ORG}
            for w in related:
                if w["plan_fleet"] not in own:
                    calls.append(_read_by_id(run, reader, "underlying", w["memory_id"],
                                             finding["insight_memory_id"], account, w["domain"]))
    await ctx.gather(calls, desc="insight reads")


async def _read_by_id(run: Run, reader: str, target: str, memory_id: str, insight_id: str,
                      account: str | None, domain: str) -> None:
    ctx = run.ctx
    result = await ctx.client.get(run.creds[reader], memory_id)
    returned_id = body_field(result.body, "id") if result.ok else None
    ctx.record("insight_read", result, agent=reader, target=target, axis="get",
               insight_id=insight_id, memory_id=memory_id, account=account, domain=domain,
               items=_json([{"id": returned_id,
                             "fleet_id": body_field(result.body, "fleet_id")}])
               if returned_id else _json([]),
               stored_fleet_id=body_field(result.body, "fleet_id") if result.ok else None)


async def _insight_search(run: Run, reader: str, insight_id: str, account: str) -> None:
    ctx = run.ctx
    result = await ctx.client.search(run.creds[reader], {
        "query": INSIGHT_QUERY.format(name=account), "top_k": ctx.params.insight_top_k,
        "fleet_ids": run.authorized(reader), "memory_type_filter": "insight"})
    ctx.record("insight_read", result, expect=("items",), agent=reader, target="insight",
               axis="search", insight_id=insight_id, memory_id=insight_id, account=account,
               domain="insight",
               items=_json(compact_items(result.body, "items")) if result.ok else None,
               stored_fleet_id=None)


async def graph_probes(run: Run) -> None:
    ctx = run.ctx
    calls = [_graph(run, reader, account) for reader in ("vera", "lex")
             for account in ctx.plan.accounts]
    await ctx.gather(calls, desc="graph")


async def _graph(run: Run, reader: str, account: Account) -> None:
    ctx = run.ctx
    result = await ctx.client.search(run.creds[reader], {
        "query": GRAPH_QUERY.format(name=account.name), "top_k": ctx.params.graph_top_k,
        "fleet_ids": run.authorized(reader), "diagnostic": True})
    ctx.record("graph_probe", result, expect=("items",), agent=reader, account=account.name,
               account_kind=account.kind, top_k=ctx.params.graph_top_k,
               authorized=_json(run.authorized(reader)),
               items=_json(compact_items(result.body, "items")) if result.ok else None)
