"""Leakage: the phases that write the secrets and run the probes, recording every answer as
it arrives (judged by `check` as each probe event is recorded)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fleetprobe.client import Credential, Result, body_field
from fleetprobe.harness.experiment import RunContext
from fleetprobe.harness.identities import ASSERTED, PROVISIONED, register_asserted_agent
from fleetprobe.harness.seeding import salted, scoped

from .check import answered, get_returned, judge, search_returned
from .plan import (
    ENDPOINT_MISSING,
    AgentBlock,
    AgentProbe,
    BulkProbe,
    KeyedAgent,
    PlannedRow,
    VariantBlock,
)


def canary_for(row_id: str, nonce: str) -> str:
    return f"canary-{nonce}-{row_id}"



async def open_tenants(ctx: RunContext) -> None:
    """One tenant per variant block (the first is the run's own), recorded in the manifest."""
    tenants = [ctx.tenant]
    for _ in ctx.plan.blocks[1:]:
        extra = await asyncio.to_thread(ctx.target.extra_tenant) if (
            ctx.params.variant_tenants) else None
        if extra is None:
            break
        ctx.client.pace_separately(extra.tenant_id)
        tenants.append(extra)
    ctx.state["block_tenants"] = {
        block_index: tenants[block_index] if block_index < len(tenants) else ctx.tenant
        for block_index in range(len(ctx.plan.blocks))}
    ctx.state["row_tenants"] = {row.row_id: ctx.state["block_tenants"][i]
                                for i, block in enumerate(ctx.plan.blocks) for row in block.rows}
    ctx.trace.add_secrets(ctx.target.secrets)
    ctx.trace.manifest.target["variant_tenant_ids"] = [
        ctx.state["block_tenants"][i].tenant_id for i in range(len(ctx.plan.blocks))]
    ctx.trace.write_manifest()


def _tenant_of_row(ctx: RunContext, row_id: str) -> Credential:
    return ctx.state.get("row_tenants", {}).get(row_id, ctx.tenant)


async def write_rows(ctx: RunContext) -> None:
    await ctx.gather([_write_row(ctx, row) for row in ctx.plan.all_rows()], desc="write")


async def _write_row(ctx: RunContext, row: PlannedRow) -> None:
    """`no_fleet`: no fleet_id in the body, and the writer (fresh name) has no home fleet."""
    memory: dict[str, Any] = {
        "agent_id": scoped(row.writer_agent, ctx.nonce),
        "content": salted(row.content, ctx.nonce),
        "visibility": row.visibility,
        "metadata": {"canary": canary_for(row.row_id, ctx.nonce), "secret_id": row.row_id},
    }
    if row.variant_write == "fleet_id":
        memory["fleet_id"] = scoped(row.writer_fleet, ctx.nonce)
    result = await ctx.client.write(_tenant_of_row(ctx, row.row_id), memory)
    ctx.record("write", result, expect=("id", "fleet_id"), secret_id=row.row_id,
               secret_scope=row.scope,
               writer_agent=scoped(row.writer_agent, ctx.nonce),
               writer_fleet=scoped(row.writer_fleet, ctx.nonce),
               memory_id=body_field(result.body, "id") if result.status == 201 else None,
               stored_fleet_id=body_field(result.body, "fleet_id") if result.ok else None,
               variant_write=row.variant_write)


async def settle(ctx: RunContext) -> None:
    await asyncio.sleep(ctx.params.settle_s)


def _written(ctx: RunContext) -> dict[str, str]:
    """row_id -> memory_id of the rows the server admitted, as recorded."""
    return {e["secret_id"]: e["memory_id"] for e in ctx.events("write") if e["memory_id"]}


def _skip_unwritten(ctx: RunContext, probe: str, row_ids: Iterable[str],
                    written: Mapping[str, str]) -> None:
    for row_id in sorted(set(row_ids) - set(written)):
        ctx.trace.skip(probe, f"{row_id}: not probed, its write was not admitted")


async def bulk_probes(ctx: RunContext) -> None:
    written = _written(ctx)
    coros = []
    for block in ctx.plan.blocks:
        _skip_unwritten(ctx, f"probe {block.variant_write}/{block.variant_search}",
                        (r.row_id for r in block.rows), written)
        rows = {r.row_id: r for r in block.rows}
        for probe in block.probes:
            if probe.row_id in written:
                row, memory_id = rows[probe.row_id], written[probe.row_id]
                coros.append(_get_probe(ctx, block, probe, memory_id))
                coros.append(_search_probe(ctx, block, probe, row, memory_id))
    await ctx.gather(coros, desc="probe")


def _probe_fields(ctx: RunContext, block: VariantBlock, probe: BulkProbe) -> dict[str, Any]:
    return {
        "credential": "tenant", "trust": None,
        "prober_agent": scoped(probe.prober_agent, ctx.nonce),
        "prober_fleet": scoped(probe.prober_fleet, ctx.nonce),
        "secret_id": probe.row_id, "secret_scope": probe.secret_scope,
        "target_fleet": scoped(probe.target_fleet, ctx.nonce), "relation": probe.relation,
        "expected": probe.expected, "variant_write": block.variant_write,
        "variant_search": block.variant_search,
    }


def _record_probe(ctx: RunContext, phase: str, result: Result, returned: bool | None,
                  expected: str, **fields: Any) -> None:
    """A 2xx without the field a MemClaw answer always has stops the run (never judged)."""
    expect = ("items",) if fields.get("axis") == "search" else ("id",)
    ctx.record(phase, result, expect=expect, expected=expected, returned=returned,
               **judge(expected, returned), **fields)


async def _get_probe(ctx: RunContext, block: VariantBlock, probe: BulkProbe,
                     memory_id: str) -> None:
    result = await ctx.client.get(_tenant_of_row(ctx, probe.row_id), memory_id)
    canary = canary_for(probe.row_id, ctx.nonce)
    returned = get_returned(result.status, result.body, memory_id, canary) if answered(
        result) else None
    fields = _probe_fields(ctx, block, probe)
    _record_probe(ctx, "probe", result, returned, fields.pop("expected"), axis="get", **fields)


def search_body(probe_fleet: str, variant_search: str, query: str, top_k: int,
                filter_agent_id: str | None) -> dict[str, Any]:
    """The search request of one probe. `fleet_id_singular` sends the probing fleet under a
    key MemClaw's SearchRequest ignores (hypothesis M2 of SEARCH-LEAK.md)."""
    body: dict[str, Any] = {"query": query, "top_k": top_k}
    if variant_search == "fleet_ids":
        body["fleet_ids"] = [probe_fleet]
    else:
        body["fleet_id"] = probe_fleet
    if filter_agent_id is not None:
        body["filter_agent_id"] = filter_agent_id
    return body


async def _search_probe(ctx: RunContext, block: VariantBlock, probe: BulkProbe,
                        row: PlannedRow, memory_id: str) -> None:
    prober = scoped(probe.prober_agent, ctx.nonce)
    body = search_body(scoped(probe.prober_fleet, ctx.nonce), block.variant_search,
                       salted(row.content, ctx.nonce), ctx.params.search_top_k,
                       prober if ctx.params.search_filter_agent_id else None)
    result = await ctx.client.search(_tenant_of_row(ctx, probe.row_id), body)
    canary = canary_for(probe.row_id, ctx.nonce)
    returned = search_returned(result.body, memory_id, canary) if answered(result) else None
    fields = _probe_fields(ctx, block, probe)
    _record_probe(ctx, "probe", result, returned, fields.pop("expected"), axis="search",
                  **fields)


async def agent_probes(ctx: RunContext) -> None:
    """whoami (tenant key), provision agent keys, whoami each, then Table 3 and re-probe."""
    ab: AgentBlock | None = ctx.plan.agent_block
    if ab is None:
        return
    await _whoami(ctx, ctx.tenant, None, None)
    creds = await _provision_all(ctx, ab.keyed_agents)
    for agent in ab.keyed_agents:
        if agent.agent_id in creds:
            await _whoami(ctx, creds[agent.agent_id], agent.trust, agent.agent_id)
    written = _written(ctx)
    _skip_unwritten(ctx, "agent_probe/reprobe", (r.row_id for r in ab.rows), written)
    for phase, probes in (("agent_probe", ab.table3), ("reprobe", ab.reprobe)):
        runnable = []
        for probe in probes:
            cred = ctx.tenant if probe.credential == "tenant" else creds.get(probe.prober_agent)
            if cred is not None and probe.row_id in written:
                runnable.append(_agent_get(ctx, phase, probe, cred, written[probe.row_id]))
        if probes and not runnable:
            ctx.trace.skip(phase, "no probe could run: no agent identity (key or asserted) "
                                  "or no target row")
        await ctx.gather(runnable, desc=phase)


async def _whoami(ctx: RunContext, cred: Credential, trust: int | None,
                  agent: str | None) -> None:
    result = await ctx.client.whoami(cred)
    ctx.record("whoami", result, expect=("agent_id",),
               credential="agent" if agent else "tenant", trust=trust,
               prober_agent=scoped(agent, ctx.nonce) if agent else None,
               whoami_agent_id=body_field(result.body, "agent_id") if result.ok else None)


async def _provision_all(ctx: RunContext, agents: Sequence[KeyedAgent]) -> dict[str, Credential]:
    """One identity per agent: a self-provisioned agent key on a managed gateway; on a
    self-hosted engine whose identity is asserted by header (gate key or header trust), the
    agent registered by writing as it and its trust set by the tenant credential
    (`identities.py`). A key-based target without the provisioning endpoint skips the
    agent-scoped probes with the reason, never fakes them."""
    if ctx.tenant.asserts_identity:
        return await _register_all(ctx, agents)
    creds: dict[str, Credential] = {}
    for agent in agents:
        result, cred = await ctx.client.provision_agent_key(
            ctx.tenant, scoped(agent.agent_id, ctx.nonce), initial_trust=agent.trust,
            initial_fleet=scoped(agent.fleet_id, ctx.nonce), label="fleetprobe leakage",
        )
        ctx.record("provision", result, credential="agent", trust=agent.trust,
                   prober_agent=scoped(agent.agent_id, ctx.nonce),
                   prober_fleet=scoped(agent.fleet_id, ctx.nonce), provisioned=cred is not None,
                   identity=PROVISIONED)
        if cred is not None:
            creds[agent.agent_id] = cred
            continue
        reason = f"agent-key provisioning failed for {agent.agent_id}: {result.error}"
        if result.status in ENDPOINT_MISSING:
            ctx.trace.skip("agent_probe/reprobe", f"target has no agent-key provisioning "
                           f"endpoint ({result.error}) and its credential (auth: "
                           f"{ctx.tenant.kind}) cannot assert an agent identity; agent-scoped "
                           "probes not run (a self-hosted engine: use target.auth gate or "
                           "headers)")
            return creds
        ctx.trace.skip("agent_probe/reprobe", reason)
    return creds


async def _register_all(ctx: RunContext, agents: Sequence[KeyedAgent]) -> dict[str, Credential]:
    creds: dict[str, Credential] = {}
    for agent in agents:
        agent_id, fleet_id = scoped(agent.agent_id, ctx.nonce), scoped(agent.fleet_id, ctx.nonce)
        result, cred = await register_asserted_agent(ctx, agent_id, fleet_id, agent.trust,
                                                     "leakage probe agent")
        ctx.record("provision", result, credential="agent", trust=agent.trust,
                   prober_agent=agent_id, prober_fleet=fleet_id, provisioned=cred is not None,
                   identity=ASSERTED)
        if cred is not None:
            creds[agent.agent_id] = cred
        else:
            ctx.trace.skip("agent_probe/reprobe", f"registering the asserted identity "
                           f"{agent.agent_id} at trust {agent.trust} failed ({result.error})")
    return creds


async def _agent_get(ctx: RunContext, phase: str, probe: AgentProbe, cred: Credential,
                     memory_id: str) -> None:
    result = await ctx.client.get(cred, memory_id)
    canary = canary_for(probe.row_id, ctx.nonce)
    returned = get_returned(result.status, result.body, memory_id, canary) if answered(
        result) else None
    _record_probe(
        ctx, phase, result, returned, probe.expected, credential=probe.credential,
        trust=probe.trust,
        identity=None if probe.credential == "tenant" else
        (ASSERTED if cred.asserts_identity else PROVISIONED),
        prober_agent=scoped(probe.prober_agent, ctx.nonce) if probe.prober_agent else None,
        prober_fleet=scoped(probe.prober_fleet, ctx.nonce) if probe.prober_fleet else None,
        target_fleet=scoped(probe.target_fleet, ctx.nonce), relation=probe.relation,
    )
