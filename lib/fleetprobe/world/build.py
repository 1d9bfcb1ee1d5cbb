"""World building: the phases before the census and the probes.

Principals come into existence the way the target makes them: on a managed gateway a
self-provisioned agent key per agent; where identity is asserted (`X-Agent-ID`, a gate key
or header trust: MemClaw's open engine) a write that asserts the agent, which creates it at
trust 1 with that write's fleet as its home. Tenant B is an identity of the same shape as
tenant A (a fresh tenant on the bundled server, another `X-Tenant-ID` where the tenant is
asserted, else the environment's second key). Trust is set afterwards by the tenant
credential. The census (`census.py`) then reads back the target's own account of the world.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
from collections import defaultdict
from typing import Any

from fleetprobe.client import Credential, MemClawClient, Result, body_field, not_supported
from fleetprobe.harness.experiment import RunContext
from fleetprobe.harness.identities import registration_body
from fleetprobe.harness.seeding import salted, scoped
from fleetprobe.world.answers import endpoint_absent
from fleetprobe.world.census import read_agent
from fleetprobe.world.moved import first_home, write_then_move
from fleetprobe.world.plan import (
    CHAIN_OBJECTS,
    CHAIN_PREDICATE,
    PrincipalSpec,
    RowSpec,
)
from fleetprobe.world.wire import (
    Wire,
    entity_name,
    fleet_id,
    note_unsupported,
    remember,
    row_fleet,
    wire,
    world,
)

ENV_OTHER_TENANT = "MEMCLAW_OTHER_TENANT_ID"
ENV_OTHER_KEY = "MEMCLAW_OTHER_API_KEY"
LINK_ROLE = "mentioned"  # MemClaw's engine requires a role on every entity link
AWAY_TRUST = 3  # the rung that writes into another fleet: held while writing `away` rows
# MemClaw's exact-duplicate answer names the stored row (WIRE.md, write errors)
DUPLICATE_OF = re.compile(r"Duplicate memory exists: ([0-9A-Za-z-]+)")


async def setup_tenants(ctx: RunContext) -> None:
    """Tenant A is the run's tenant; the others are identities of the same shape."""
    w = wire(ctx)
    ctx.trace.manifest.target["rate_limits"] = ctx.target.info.get("rate_limits")
    ctx.trace.manifest.target["rate_limits_lifted"] = ctx.params.target.kind == "reference"
    for i, t in enumerate(world(ctx).tenants):
        cred = ctx.tenant if i == 0 else _other_tenant(ctx, t, i)
        if cred is None:
            reason = (f"no credential for tenant {t}: set {ENV_OTHER_TENANT} and "
                      f"{ENV_OTHER_KEY} (a managed gateway has one key per tenant)")
            ctx.trace.skip(f"tenant {t}", reason)
            for p in world(ctx).principals.values():
                if p.tenant == t:
                    w.missing_principals[p.key] = reason
            continue
        if cred.key:
            ctx.trace.add_secrets({cred.key})
            ctx.client.remember_secret(cred.key)
        w.tenant_ids[t] = cred.tenant_id
        w.tenant_of_id[cred.tenant_id] = t
        w.creds[f"{t}.tk"] = cred
    for fleet in world(ctx).fleets:
        w.fleet_plan[scoped(fleet, ctx.nonce)] = fleet


def _other_tenant(ctx: RunContext, t: str, i: int) -> Credential | None:
    tenant: Credential = ctx.tenant
    if ctx.target.server is not None:
        tenant_id, key = ctx.target.server.create_tenant()
        # the same credential shape as the run's tenant (a gate key is shared)
        return dataclasses.replace(tenant, tenant_id=tenant_id,
                                   key=key if tenant.kind == "tenant" else tenant.key)
    if tenant.asserts_identity:  # the tenant is a header: a fresh one is another tenant
        return dataclasses.replace(tenant, tenant_id=scoped(f"tenant-{t}", ctx.nonce))
    if i == 1 and os.environ.get(ENV_OTHER_TENANT) and os.environ.get(ENV_OTHER_KEY):
        return Credential(kind="tenant", tenant_id=os.environ[ENV_OTHER_TENANT],
                          key=os.environ[ENV_OTHER_KEY])
    return None


async def principals(ctx: RunContext) -> None:
    w = wire(ctx)
    agents = [a for a in world(ctx).principals.values()
              if a.kind == "agent" and a.tenant in w.tenant_ids]
    await ctx.gather([_principal(ctx, w, a) for a in agents], desc="principals")


async def _principal(ctx: RunContext, w: Wire, a: PrincipalSpec) -> None:
    agent_id = scoped(a.name or a.key, ctx.nonce)
    tenant: Credential = w.creds[f"{a.tenant}.tk"]
    w.agent_ids[a.key] = agent_id
    w.principal_of[(a.tenant, agent_id)] = a.key
    if not a.registered:  # spoken as only where identity is asserted; never registered
        if tenant.asserts_identity:
            w.creds[a.key] = tenant.as_agent(agent_id)
        return
    if tenant.asserts_identity:
        await _register(ctx, w, a, tenant.as_agent(agent_id))
        return
    result, cred = await ctx.client.provision_agent_key(
        tenant, agent_id, initial_trust=1, initial_fleet=fleet_id(ctx, first_home(a)),
        label="fleetprobe matrix")
    ctx.record("setup", result, step="provision", who=a.key)
    if cred is not None:
        w.creds[a.key] = cred
        return
    if endpoint_absent({"status": result.status, "error": result.error}):
        reason = (f"no agent-key provisioning ({result.error}) and the credential "
                  f"({tenant.kind}) cannot assert an agent identity: use target.auth gate or "
                  "headers for a self-hosted engine")
    else:
        reason = f"agent-key provisioning failed: {result.error}"
    w.missing_principals[a.key] = reason
    ctx.trace.skip(f"agent {a.key}", reason)


async def _register(ctx: RunContext, w: Wire, a: PrincipalSpec, cred: Credential) -> None:
    """The agent exists once a write asserts it (trust 1, home = the write's fleet)."""
    body = registration_body(cred.agent_id or "", fleet_id(ctx, first_home(a)) or "",
                             ctx.nonce)
    if first_home(a) is None:
        body.pop("fleet_id")  # home-less: a fleet-less first write leaves it without a home
    result = await ctx.client.write(cred, body)
    ctx.record("setup", result, step="register", who=a.key)
    if result.ok or await _landed_before_retry(ctx, w, a, result):
        w.creds[a.key] = cred
        return
    reason = f"registering the asserted agent by a write failed: {result.error}"
    w.missing_principals[a.key] = reason
    ctx.trace.skip(f"agent {a.key}", reason)


async def _landed_before_retry(ctx: RunContext, w: Wire, a: PrincipalSpec,
                               result: Result) -> bool:
    """A registration write retried after a transport error may find its own first attempt
    stored (409 duplicate): the agent exists if the target says so."""
    if result.status != 409 or result.attempts < 2 or f"{a.tenant}.tk" not in w.creds:
        return False
    answer, fields = await read_agent(ctx, w, a)
    ctx.record("setup", answer, step="register_check", who=a.key)
    return bool(fields.get("registered"))


async def entities(ctx: RunContext) -> None:
    w = wire(ctx)
    jobs = [_entity(ctx, w, t, f) for t in w.tenant_ids for f in (*world(ctx).fleets, None)]
    await ctx.gather(jobs, desc="entities")


async def _entity(ctx: RunContext, w: Wire, tenant: str, fleet: str | None) -> None:
    result = await ctx.client.upsert_entity(w.creds[f"{tenant}.tk"], {
        "fleet_id": fleet_id(ctx, fleet), "entity_type": "service",
        "canonical_name": entity_name(ctx, fleet)})
    ctx.record("setup", result, step="entity", who=f"{tenant}.tk")
    note_unsupported(w, "entity", result)
    if result.ok and body_field(result.body, "id"):
        w.entities[(tenant, fleet)] = result.body["id"]


def row_item(ctx: RunContext, w: Wire, row: RowSpec) -> dict[str, Any]:
    item: dict[str, Any] = {"content": salted(row.content, ctx.nonce)}
    if row.status != "active":
        item["status"] = row.status
    entity = w.entities.get((row.tenant, ctx.plan.world.principals[row.owner].home))
    if row.linked and entity:
        item["entity_links"] = [{"entity_id": entity, "role": LINK_ROLE}]
    if row.chain is not None and entity:
        item.update(subject_entity_id=entity, predicate=CHAIN_PREDICATE,
                    object_value=CHAIN_OBJECTS[row.pos])
    return item


async def write_rows(ctx: RunContext) -> None:
    """Bulk per owner and visibility (falling back to single writes when the target has no
    bulk endpoint), single writes with an Idempotency-Key, `away` rows with their owner at
    trust 3, then the chains in order."""
    w = wire(ctx)
    rows = [r for r in world(ctx).rows.values()
            if r.tenant in w.tenant_ids and r.owner in w.agent_ids
            and r.owner not in w.missing_principals]
    batches: dict[tuple[str, str], list[RowSpec]] = defaultdict(list)
    for r in rows:
        if r.via == "bulk":
            batches[(r.owner, r.visibility)].append(r)
    jobs = []
    for (owner, vis), batch in sorted(batches.items()):
        for start in range(0, len(batch), 100):
            jobs.append(_bulk(ctx, w, owner, vis, start // 100, batch[start:start + 100]))
    await ctx.gather(jobs, desc="bulk")
    singles = [r for r in rows if r.via == "single" or (r.via == "bulk" and w.bulk_absent)]
    await ctx.gather([write_single(ctx, w, r, idempotent=r.via == "single") for r in singles],
                     desc="single")
    away = [r for r in rows if r.via == "away"]
    owners = sorted({r.owner for r in away})
    await ctx.gather([_trust(ctx, w, world(ctx).principals[o], AWAY_TRUST) for o in owners],
                     desc="away trust")
    await ctx.gather([write_single(ctx, w, r, idempotent=False) for r in away], desc="away")
    await write_then_move(ctx, w, [r for r in rows if r.via == "moved"], write_single)
    chains: dict[str, list[RowSpec]] = defaultdict(list)
    for r in rows:
        if r.chain is not None:
            chains[r.chain].append(r)
    await ctx.gather([_chain(ctx, w, sorted(c, key=lambda r: r.pos)) for c in chains.values()],
                     desc="chains")
    for r in rows:
        if r.key not in w.memory_ids and r.key not in w.unbuilt:
            w.missing_rows.setdefault(r.key, "not written (no answer)")
    await asyncio.sleep(ctx.params.settle_s)


async def _bulk(ctx: RunContext, w: Wire, owner: str, vis: str, chunk: int,
                batch: list[RowSpec]) -> None:
    if w.bulk_absent:
        return
    spec = world(ctx).principals[owner]
    attempt = f"mx-{ctx.nonce}-{owner}-{vis}-{chunk}"
    result = await ctx.client.bulk(w.creds[f"{spec.tenant}.tk"], {
        "agent_id": w.agent_ids[owner], "visibility": vis,
        "items": [row_item(ctx, w, r) for r in batch]}, attempt)
    ctx.record("setup", result, step="bulk", who=owner)
    note_unsupported(w, "bulk", result)
    if endpoint_absent({"status": result.status, "error": result.error,
                        "not_applicable": not_supported(result)}):
        w.bulk_absent = True
        ctx.trace.skip("bulk", f"no bulk endpoint ({result.error}); victim and world rows "
                       "are written one by one, bulk_attempt probes are n/a")
        return
    for item in body_field(result.body, "results") or []:
        index = item.get("index")
        if isinstance(index, int) and index < len(batch) and item.get("id"):
            remember(w, batch[index], item["id"])
            w.attempts[batch[index].key] = (attempt, index)
    for r in batch:
        if r.key not in w.memory_ids:
            w.missing_rows[r.key] = f"bulk write: {result.error or 'no id for the item'}"


async def write_single(ctx: RunContext, w: Wire, row: RowSpec, idempotent: bool) -> None:
    key = f"mx-{ctx.nonce}-{row.key}" if idempotent else None
    body: dict[str, Any] = {"agent_id": w.agent_ids[row.owner], "visibility": row.visibility,
                            **row_item(ctx, w, row)}
    if row.away:
        body["fleet_id"] = fleet_id(ctx, row_fleet(ctx, row))
    result = await ctx.client.write(w.creds[f"{row.tenant}.tk"], body,
                                    headers={"Idempotency-Key": key} if key else None)
    ctx.record("setup", result, step="write", who=row.owner, row_key=row.key)
    reason = not_supported(result)
    if reason is not None:  # e.g. a status the backend cannot store: the row is not built
        w.unbuilt[row.key] = reason
    memory_id = body_field(result.body, "id") if result.status == 201 else None
    if memory_id is None:
        memory_id, check = await landed_first_attempt(ctx.client, w.creds[f"{row.tenant}.tk"],
                                                      body, result)
        if check is not None:
            ctx.record("setup", check, step="write_check", who=row.owner, row_key=row.key)
    if memory_id:
        remember(w, row, memory_id)
        w.missing_rows.pop(row.key, None)
        if key:  # a recovered first attempt carried the same key
            w.idempotency[row.key] = key
    elif reason is None:
        w.missing_rows[row.key] = f"write: {result.error}"


async def landed_first_attempt(client: MemClawClient, cred: Credential, body: dict[str, Any],
                               result: Result) -> tuple[str | None, Result | None]:
    """A write retried after its answer was lost may meet its own first attempt: an exact
    duplicate 409 naming the stored row. That row is this write's when the target reads it
    back with this write's content and agent (the world's rows are lexically distinct).
    Returns the row's id (None when it is not this write's) and the read-back, if any."""
    match = DUPLICATE_OF.search(result.error or "")
    if result.status != 409 or result.attempts < 2 or match is None:
        return None, None
    check = await client.get(cred, match.group(1))
    mine = (check.ok and body_field(check.body, "content") == body.get("content")
            and body_field(check.body, "agent_id") == body.get("agent_id"))
    return (match.group(1) if mine else None), check


async def _chain(ctx: RunContext, w: Wire, chain: list[RowSpec]) -> None:
    for row in chain:
        await write_single(ctx, w, row, idempotent=False)
        await asyncio.sleep(0.05)


async def delete_rows(ctx: RunContext) -> None:
    w = wire(ctx)
    doomed = [r for r in world(ctx).rows.values() if r.deleted and r.key in w.memory_ids]
    await ctx.gather([_delete(ctx, w, r) for r in doomed], desc="delete")


async def _delete(ctx: RunContext, w: Wire, row: RowSpec) -> None:
    """The row read back by id first (the target's account of it while it lives: a hard
    delete leaves nothing for the census to list), then deleted with the tenant key."""
    cred = w.creds[f"{row.tenant}.tk"]
    before = await ctx.client.get(cred, w.memory_ids[row.key])
    ctx.record("setup", before, step="census", who=row.owner, row_key=row.key)
    if before.ok and body_field(before.body, "id") == w.memory_ids[row.key]:
        w.before_delete[row.key] = before.body
    result = await ctx.client.request("DELETE", f"/memories/{w.memory_ids[row.key]}",
                                      cred=cred, params={"tenant_id": cred.tenant_id})
    ctx.record("setup", result, step="delete", who=f"{row.tenant}.tk", row_key=row.key)
    if result.status == 204:
        w.deleted.add(row.key)
    elif (reason := note_unsupported(w, "delete", result)) is not None:
        w.unbuilt[row.key] = reason  # it stays live: not the deleted row the plan needs
    else:
        w.missing_rows[row.key] = f"delete: {result.error}"


async def set_trust(ctx: RunContext) -> None:
    """Every registered agent at its planned trust (those raised for `away` rows too)."""
    w = wire(ctx)
    raised = {r.owner for r in world(ctx).rows.values() if r.via == "away"}
    agents = [a for a in world(ctx).agents() if a.key in w.creds and a.moved_from is None
              and (a.trust != 1 or a.key in raised)]
    await ctx.gather([_trust(ctx, w, a, a.trust) for a in agents], desc="trust")


async def _trust(ctx: RunContext, w: Wire, a: PrincipalSpec, trust: int) -> None:
    if a.key not in w.creds:
        return
    result = await ctx.client.patch_trust(w.creds[f"{a.tenant}.tk"], w.agent_ids[a.key], trust)
    ctx.record("setup", result, step="trust", who=a.key)
    note_unsupported(w, "trust", result)
