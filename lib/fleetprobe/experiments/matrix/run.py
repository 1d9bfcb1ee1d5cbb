"""Governance matrix: every principal x every path x every scope, judged against one policy.

The paper measured two read paths with two credential kinds (section 8.1) and lists the
adversarial matrix as future work (section 10). This experiment builds it for any
MemClaw-compatible target:

1. a seeded world (`matrix_world`): several tenants with the same, deliberately confusable
   fleet names, agents at every trust level in every fleet plus home-less agents, rows of
   every visibility, status, supersession chains, entity links, soft-deleted rows;
2. a census: the target's own account of every agent (trust, home fleet) and row (fleet,
   visibility, owner, status), recorded as events;
3. probes: the enumerated matrix plus `random_probes` seeded ones, each one request (a
   redistribute also records the row's owner afterwards and what the requester can still do);
4. the checker (`matrix_check`): one verdict per probe from the recorded events only, against
   the declarative policy in `fleetprobe.policy`.

Rate limits are lifted for this experiment (the bundled server starts with very high limits
and the client does not pace); the manifest's target entry records the limits the server
reported. Optional paper-scale probes (`paper_fleets`, paper section 7.1's design) restate
the paper's GET and search rates with N = 2 F^2 K probes each.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field, model_validator

from fleetprobe.client import Credential, Result, body_field, not_supported
from fleetprobe.experiments import matrix_check
from fleetprobe.experiments.matrix_world import (
    CHAIN_OBJECTS,
    CHAIN_PREDICATE,
    MatrixPlan,
    PaperPlan,
    PrincipalSpec,
    ProbeSpec,
    RowSpec,
    enumerate_probes,
    make_world,
    named_fleets,
    paper_plan,
    random_probes,
)
from fleetprobe.plans import salted, scoped
from fleetprobe.policy import PATHS
from fleetprobe.runner import (
    Checker,
    ClientParams,
    Experiment,
    ExperimentParams,
    Phase,
    RunContext,
    register,
)

LIFTED_RATE = "1000000/minute"
ENV_OTHER_TENANT = "MEMCLAW_OTHER_TENANT_ID"
ENV_OTHER_KEY = "MEMCLAW_OTHER_API_KEY"
FLEET_PATHS = ("list_fleet", "search_fleet", "search_fleets", "search_singular", "write",
               "bulk_write", "entity_upsert")


class MatrixParams(ExperimentParams):
    tenants: int = Field(2, ge=1, le=6, description="tenants with the same world")
    fleets: int = Field(8, ge=2, le=8, description="fleets per tenant (confusable names)")
    enumerated: bool = True
    # the enumerated matrix's agent trust levels, and whether the status / deleted-row /
    # confusable-fleet sweeps run (the smoke tests trim these; full runs keep them all)
    enumerate_trusts: list[int] = Field(default_factory=lambda: [0, 1, 2, 3])
    sweeps: bool = True
    random_probes: int = Field(10_000, ge=0)
    cross_tenant_share: float = Field(0.2, ge=0, le=1)
    search_top_k: int = Field(10, ge=1, le=20)
    settle_s: float = Field(0.5, ge=0, description="wait for contradiction detection")
    paper_fleets: int = Field(0, ge=0, description="paper-scale probes: F (0 = off)")
    paper_agents_per_fleet: int = Field(10, ge=1, description="paper-scale probes: K")

    @model_validator(mode="after")
    def _lift_rate_limits(self) -> MatrixParams:
        """The bundled server runs this experiment with its rate limits lifted."""
        if self.target.kind == "reference":
            t = self.target
            self.target = t.model_copy(update={
                "write_rate": t.write_rate or LIFTED_RATE,
                "search_rate": t.search_rate or LIFTED_RATE,
                "bulk_rate": t.bulk_rate or LIFTED_RATE})
        return self


@dataclass
class Plan:
    world: MatrixPlan
    paper: PaperPlan | None


def make_plan(params: MatrixParams) -> Plan:
    world = make_world(params.seed, params.tenants, params.fleets)
    probes = (enumerate_probes(world, params.seed, tuple(params.enumerate_trusts),
                               params.sweeps) if params.enumerated else [])
    probes += random_probes(world, params.seed, params.random_probes, params.cross_tenant_share)
    world.probes = probes
    paper = (paper_plan(params.seed, params.paper_fleets, params.paper_agents_per_fleet)
             if params.paper_fleets else None)
    return Plan(world, paper)


# -- run state (wire names and ids, built from recorded responses) -------------------------


@dataclass
class Wire:
    tenant_ids: dict[str, str] = field(default_factory=dict)
    tenant_of_id: dict[str, str] = field(default_factory=dict)
    creds: dict[str, Credential] = field(default_factory=dict)
    agent_ids: dict[str, str] = field(default_factory=dict)
    principal_of: dict[tuple[str, str], str] = field(default_factory=dict)
    fleet_plan: dict[str, str] = field(default_factory=dict)
    memory_ids: dict[str, str] = field(default_factory=dict)
    row_of: dict[str, str] = field(default_factory=dict)
    attempts: dict[str, tuple[str, int]] = field(default_factory=dict)
    idempotency: dict[str, str] = field(default_factory=dict)
    entities: dict[tuple[str, str | None], str] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    bulk_absent: bool = False
    # a backend adapter (docs/backends.md) answers "not supported" where its memory system
    # has no equivalent: per world-building step (entity, bulk, trust, agents, list) and per
    # row it could not build as planned (a status, a deletion), the reason; the probes that
    # need them are recorded not applicable with it, never sent
    unsupported: dict[str, str] = field(default_factory=dict)
    unbuilt: dict[str, str] = field(default_factory=dict)


def wire(ctx: RunContext) -> Wire:
    return ctx.__dict__.setdefault("matrix_wire", Wire())


def fleet_id(ctx: RunContext, fleet: str | None) -> str | None:
    return None if fleet is None else scoped(fleet, ctx.nonce)


def plan_fleet(w: Wire, fleet: str | None) -> str | None:
    return None if fleet is None else w.fleet_plan.get(fleet, fleet)


def entity_name(ctx: RunContext, fleet: str | None) -> str:
    return scoped(f"svc {fleet or 'no fleet'}", ctx.nonce)


# -- setup -----------------------------------------------------------------------------------


async def setup_tenants(ctx: RunContext) -> None:
    """Tenant A is the run's tenant; others are created (bundled server) or read from the
    environment (live: MEMCLAW_OTHER_TENANT_ID / MEMCLAW_OTHER_API_KEY)."""
    w = wire(ctx)
    world: MatrixPlan = ctx.plan.world
    ctx.trace.manifest.target["rate_limits"] = ctx.target.info.get("rate_limits")
    ctx.trace.manifest.target["rate_limits_lifted"] = ctx.params.target.kind == "reference"
    for i, t in enumerate(world.tenants):
        cred: Credential | None = ctx.tenant if i == 0 else None
        if cred is None and ctx.target.server is not None:
            tenant_id, key = ctx.target.server.create_tenant()
            # the same credential shape as the run's tenant (a gate key is shared)
            cred = dataclasses.replace(ctx.tenant, tenant_id=tenant_id,
                                       key=key if ctx.tenant.kind == "tenant" else ctx.tenant.key)
        elif cred is None and i == 1 and os.environ.get(ENV_OTHER_TENANT) and (
                os.environ.get(ENV_OTHER_KEY)):
            cred = Credential(kind="tenant", tenant_id=os.environ[ENV_OTHER_TENANT],
                              key=os.environ[ENV_OTHER_KEY])
        if cred is None:
            ctx.trace.skip(f"tenant {t}", "no credentials for another tenant (set "
                           f"{ENV_OTHER_TENANT} and {ENV_OTHER_KEY}); its probes are skipped")
            continue
        if cred.key:
            ctx.trace.add_secrets({cred.key})
            ctx.client.remember_secret(cred.key)
        w.tenant_ids[t] = cred.tenant_id
        w.tenant_of_id[cred.tenant_id] = t
        w.creds[f"{t}.tk"] = cred
    for fleet in world.fleets:
        w.fleet_plan[scoped(fleet, ctx.nonce)] = fleet


async def provision(ctx: RunContext) -> None:
    w = wire(ctx)
    agents = [a for a in ctx.plan.world.agents() if a.tenant in w.tenant_ids]
    await ctx.gather([_provision(ctx, w, a) for a in agents], desc="provision")


async def _provision(ctx: RunContext, w: Wire, a: PrincipalSpec) -> None:
    agent_id = scoped(a.name or a.key, ctx.nonce)
    result, cred = await ctx.client.provision_agent_key(
        w.creds[f"{a.tenant}.tk"], agent_id, initial_trust=1,
        initial_fleet=fleet_id(ctx, a.home), label="fleetprobe matrix")
    ctx.record("setup", result, step="provision", who=a.key)
    w.agent_ids[a.key] = agent_id
    w.principal_of[(a.tenant, agent_id)] = a.key
    if cred is not None:
        w.creds[a.key] = cred
    elif matrix_check.endpoint_absent({"status": result.status, "error": result.error}):
        ctx.trace.skip(f"agent {a.key}", f"no agent-key provisioning: {result.error}")


async def entities(ctx: RunContext) -> None:
    w = wire(ctx)
    jobs = [_entity(ctx, w, t, f) for t in w.tenant_ids for f in (*ctx.plan.world.fleets, None)]
    await ctx.gather(jobs, desc="entities")


async def _entity(ctx: RunContext, w: Wire, tenant: str, fleet: str | None) -> None:
    result = await ctx.client.upsert_entity(w.creds[f"{tenant}.tk"], {
        "fleet_id": fleet_id(ctx, fleet), "entity_type": "service",
        "canonical_name": entity_name(ctx, fleet)})
    ctx.record("setup", result, step="entity", who=f"{tenant}.tk")
    _note_unsupported(w, "entity", result)
    if result.ok and body_field(result.body, "id"):
        w.entities[(tenant, fleet)] = result.body["id"]


def _item(ctx: RunContext, w: Wire, row: RowSpec, home: str | None) -> dict[str, Any]:
    item: dict[str, Any] = {"content": salted(row.content, ctx.nonce)}
    if row.status != "active":
        item["status"] = row.status
    entity = w.entities.get((row.tenant, home))
    if row.linked and entity:
        item["entity_links"] = [{"entity_id": entity}]
    if row.chain is not None and entity:
        item.update(subject_entity_id=entity, predicate=CHAIN_PREDICATE,
                    object_value=CHAIN_OBJECTS[row.pos])
    return item


async def write_rows(ctx: RunContext) -> None:
    """Bulk per owner and visibility (falling back to single writes when the target has no
    bulk endpoint), single writes with an Idempotency-Key, then the chains in order."""
    w = wire(ctx)
    world: MatrixPlan = ctx.plan.world
    rows = [r for r in world.rows.values() if r.tenant in w.tenant_ids]
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
    await ctx.gather([_single(ctx, w, r, idempotent=r.via == "single") for r in singles],
                     desc="single")
    chains: dict[str, list[RowSpec]] = defaultdict(list)
    for r in rows:
        if r.chain is not None:
            chains[r.chain].append(r)
    await ctx.gather([_chain(ctx, w, sorted(c, key=lambda r: r.pos)) for c in chains.values()],
                     desc="chains")
    await asyncio.sleep(ctx.params.settle_s)


async def _bulk(ctx: RunContext, w: Wire, owner: str, vis: str, chunk: int,
                batch: list[RowSpec]) -> None:
    if w.bulk_absent:
        return
    spec = ctx.plan.world.principals[owner]
    attempt = f"mx-{ctx.nonce}-{owner}-{vis}-{chunk}"
    result = await ctx.client.bulk(w.creds[f"{spec.tenant}.tk"], {
        "agent_id": w.agent_ids[owner], "visibility": vis,
        "items": [_item(ctx, w, r, spec.home) for r in batch]}, attempt)
    ctx.record("setup", result, step="bulk", who=owner)
    _note_unsupported(w, "bulk", result)
    if matrix_check.endpoint_absent({"status": result.status, "error": result.error,
                                     "not_applicable": not_supported(result)}):
        w.bulk_absent = True
        ctx.trace.skip("bulk", f"no bulk endpoint ({result.error}); victim and world rows "
                       "are written one by one, bulk_attempt probes are n/a")
        return
    for item in body_field(result.body, "results") or []:
        index = item.get("index")
        if isinstance(index, int) and index < len(batch) and item.get("id"):
            _remember(w, batch[index], item["id"])
            w.attempts[batch[index].key] = (attempt, index)


def _note_unsupported(w: Wire, step: str, result: Result) -> str | None:
    """Remember a backend's "not supported" answer to a world-building step."""
    reason = not_supported(result)
    if reason is not None:
        w.unsupported.setdefault(step, reason)
    return reason


def _remember(w: Wire, row: RowSpec, memory_id: str) -> None:
    w.memory_ids[row.key] = memory_id
    w.row_of[memory_id] = row.key


async def _single(ctx: RunContext, w: Wire, row: RowSpec, idempotent: bool) -> None:
    spec = ctx.plan.world.principals[row.owner]
    key = f"mx-{ctx.nonce}-{row.key}" if idempotent else None
    result = await ctx.client.write(w.creds[f"{row.tenant}.tk"], {
        "agent_id": w.agent_ids[row.owner], "visibility": row.visibility,
        **_item(ctx, w, row, spec.home)},
        headers={"Idempotency-Key": key} if key else None)
    ctx.record("setup", result, step="write", who=row.owner, row_key=row.key)
    reason = not_supported(result)
    if reason is not None:  # e.g. a status the backend cannot store: the row is not built
        w.unbuilt[row.key] = reason
    if result.status == 201 and body_field(result.body, "id"):
        _remember(w, row, result.body["id"])
        if key:
            w.idempotency[row.key] = key


async def _chain(ctx: RunContext, w: Wire, chain: list[RowSpec]) -> None:
    for row in chain:
        await _single(ctx, w, row, idempotent=False)
        await asyncio.sleep(0.05)


async def delete_rows(ctx: RunContext) -> None:
    w = wire(ctx)
    doomed = [r for r in ctx.plan.world.rows.values() if r.deleted and r.key in w.memory_ids]
    await ctx.gather([_delete(ctx, w, r) for r in doomed], desc="delete")


async def _delete(ctx: RunContext, w: Wire, row: RowSpec) -> None:
    cred = w.creds[f"{row.tenant}.tk"]
    result = await ctx.client.request("DELETE", f"/memories/{w.memory_ids[row.key]}",
                                      cred=cred, params={"tenant_id": cred.tenant_id})
    ctx.record("setup", result, step="delete", who=f"{row.tenant}.tk", row_key=row.key)
    if result.status == 204:
        w.deleted.add(row.key)
    elif (reason := _note_unsupported(w, "delete", result)) is not None:
        w.unbuilt[row.key] = reason  # it stays live: not the deleted row the plan needs


async def set_trust(ctx: RunContext) -> None:
    w = wire(ctx)
    agents = [a for a in ctx.plan.world.agents() if a.key in w.creds and a.trust != 1]
    await ctx.gather([_trust(ctx, w, a) for a in agents], desc="trust")


async def _trust(ctx: RunContext, w: Wire, a: PrincipalSpec) -> None:
    result = await ctx.client.patch_trust(w.creds[f"{a.tenant}.tk"], w.agent_ids[a.key],
                                          a.trust)
    ctx.record("setup", result, step="trust", who=a.key)
    _note_unsupported(w, "trust", result)


async def census(ctx: RunContext) -> None:
    """The target's own account of every agent and row, before any probe."""
    await census_agents(ctx, "before")
    w = wire(ctx)
    owners = sorted({r.owner for r in ctx.plan.world.rows.values() if r.key in w.memory_ids})
    await ctx.gather([_census_rows(ctx, w, o) for o in owners], desc="census")


async def census_agents(ctx: RunContext, step: str) -> None:
    w = wire(ctx)
    for t in w.tenant_ids:
        ctx.record("census_agent", step=step, who=f"{t}.tk", tenant=t, credential="tenant")
    agents = [a for a in ctx.plan.world.agents() if a.key in w.creds]
    await ctx.gather([_census_agent(ctx, w, a, step) for a in agents], desc=f"agents {step}")


async def _census_agent(ctx: RunContext, w: Wire, a: PrincipalSpec, step: str) -> None:
    cred = w.creds[f"{a.tenant}.tk"]
    result = await ctx.client.request("GET", f"/agents/{w.agent_ids[a.key]}", cred=cred,
                                      params={"tenant_id": cred.tenant_id})
    if _note_unsupported(w, "agents", result) is not None:
        # No agent records (a backend adapter): the principal is judged at the plan's trust
        # and the home fleet its key was provisioned with, which the backend never sees.
        ctx.record("setup", result, step="census", who=a.key)
        ctx.record("census_agent", step=step, who=a.key, tenant=a.tenant, credential="agent",
                   trust=a.trust, home=a.home, source="plan")
        return
    trust = body_field(result.body, "trust_level") if result.ok else None
    home = plan_fleet(w, body_field(result.body, "fleet_id")) if result.ok else None
    ctx.record("census_agent", result, step=step, who=a.key, tenant=a.tenant,
               credential="agent", trust=trust, home=home, source="target")


async def _census_rows(ctx: RunContext, w: Wire, owner: str) -> None:
    spec = ctx.plan.world.principals[owner]
    cred = w.creds[f"{spec.tenant}.tk"]
    cursor = None
    for _ in range(20):
        query = {"agent_id": w.agent_ids[owner], "include_deleted": "true", "limit": 500}
        if cursor:
            query["cursor"] = cursor
        result = await ctx.client.list_memories(cred, **query)
        ctx.record("setup", result, step="census", who=owner)
        if _note_unsupported(w, "list", result) is not None:
            await _census_by_id(ctx, w, owner)
            return
        for item in body_field(result.body, "items") or []:
            key = w.row_of.get(item.get("id"))
            if key is None:
                continue
            _census_row(ctx, w, spec.tenant, key, item, "list")
        cursor = body_field(result.body, "next_cursor")
        if not cursor:
            return


def _census_row(ctx: RunContext, w: Wire, tenant: str, key: str, item: dict[str, Any],
                source: str) -> None:
    owner_key = w.principal_of.get((tenant, item.get("agent_id")), item.get("agent_id"))
    ctx.record("census_row", row_key=key, tenant=tenant, fleet=plan_fleet(w, item.get("fleet_id")),
               visibility=item.get("visibility"), owner=owner_key,
               row_status=item.get("status"), deleted=key in w.deleted, source=source)


async def _census_by_id(ctx: RunContext, w: Wire, owner: str) -> None:
    """No listing (a backend adapter): each of the owner's rows read back by id with its
    tenant key, the backend's own account of where the row lives."""
    spec = ctx.plan.world.principals[owner]
    cred = w.creds[f"{spec.tenant}.tk"]
    keys = [r.key for r in ctx.plan.world.rows.values()
            if r.owner == owner and r.key in w.memory_ids]
    for key in keys:
        result = await ctx.client.get(cred, w.memory_ids[key])
        ctx.record("setup", result, step="census", who=owner, row_key=key)
        if result.ok and body_field(result.body, "id") == w.memory_ids[key]:
            _census_row(ctx, w, spec.tenant, key, result.body, "get")


# -- probes ----------------------------------------------------------------------------------


@dataclass
class Obs:
    result: Result
    returned: bool
    got: str | None = None
    fleets: list[str | None] | None = None


async def run_probes(ctx: RunContext) -> None:
    w = wire(ctx)
    world: MatrixPlan = ctx.plan.world
    runnable = []
    for probe in world.probes:
        who, row = world.principals[probe.who], world.rows[probe.row]
        reason = _not_sendable(w, probe) if who.key in w.creds else None
        if reason is not None:
            _record_not_sent(ctx, w, probe, reason)
            continue
        if who.key not in w.creds or row.key not in w.memory_ids:
            continue  # its tenant, key or row is missing: said in the manifest's `skipped`
        if probe.target and probe.target not in w.agent_ids:
            continue
        runnable.append(probe)
    missing = len(world.probes) - len(runnable)
    if missing:
        ctx.trace.skip("probes", f"{missing} probes need a principal or row the target "
                       "did not provide (see the earlier skips)")
    await ctx.gather([_probe(ctx, w, p) for p in runnable], desc="probes")


def _not_sendable(w: Wire, probe: ProbeSpec) -> str | None:
    """Why a probe cannot be sent: its subject needs a world-building step the target
    answered "not supported" (a row it could not build, no bulk attempt id, no entity)."""
    if probe.row in w.unbuilt:
        return f"its row was not built as planned: {w.unbuilt[probe.row]}"
    if probe.path == "bulk_attempt" and probe.row not in w.attempts and "bulk" in w.unsupported:
        return f"no bulk attempt id to replay: {w.unsupported['bulk']}"
    if probe.path == "entity" and "entity" in w.unsupported:
        return f"no entity linked to the row: {w.unsupported['entity']}"
    return None


def _record_not_sent(ctx: RunContext, w: Wire, probe: ProbeSpec, reason: str) -> None:
    """Not applicable, with the reason; counted like a probe, never judged."""
    who, row = ctx.plan.world.principals[probe.who], ctx.plan.world.rows[probe.row]
    ctx.record("probe", na=reason, probe_id=probe.probe_id, who=probe.who, path=probe.path,
               row_key=probe.row, variant=probe.variant, target=probe.target)
    if probe.path == "redistribute" and who.kind == "agent" and who.tenant == row.tenant:
        ctx.record("probe", na=reason, probe_id=f"{probe.probe_id}a", who=probe.who,
                   path="after_redistribute", row_key=probe.row, target=probe.target)


def _cred(w: Wire, who: PrincipalSpec, row: RowSpec, variant: str | None) -> Credential:
    cred = w.creds[who.key]
    if variant == "named":
        return dataclasses.replace(cred, tenant_id=w.tenant_ids[row.tenant])
    return cred


async def _probe(ctx: RunContext, w: Wire, probe: ProbeSpec) -> None:
    world: MatrixPlan = ctx.plan.world
    who, row = world.principals[probe.who], world.rows[probe.row]
    cred = _cred(w, who, row, probe.variant)
    obs = await PROBES[probe.path](ctx, w, cred, who, row, probe)
    fleets = ",".join(f or "" for f in obs.fleets) if obs.fleets else None
    after = None
    if probe.path in ("redistribute", "redistribute_x"):
        after, moved = await _observe_owner(ctx, w, probe, row)
        obs.returned = bool(obs.returned and moved)
    ctx.record("probe", obs.result, probe_id=probe.probe_id, who=probe.who, path=probe.path,
               row_key=probe.row, variant=probe.variant, target=probe.target, fleets=fleets,
               returned=obs.returned, got=obs.got, after=after)
    if probe.path == "redistribute" and who.kind == "agent" and who.tenant == row.tenant:
        follow = await _patch(ctx, w, cred, who, row, probe)
        ctx.record("probe", follow.result, probe_id=f"{probe.probe_id}a", who=probe.who,
                   path="after_redistribute", row_key=probe.row, target=probe.target,
                   returned=follow.returned, after=after)


async def _observe_owner(ctx: RunContext, w: Wire, probe: ProbeSpec,
                         row: RowSpec) -> tuple[str | None, bool]:
    cred = w.creds[f"{row.tenant}.tk"]
    result = await ctx.client.get(cred, w.memory_ids[row.key])
    owner = body_field(result.body, "agent_id") if result.ok else None
    owner_key = w.principal_of.get((row.tenant, owner), owner) if owner else None
    after = f"{owner_key} {body_field(result.body, 'visibility')}" if owner_key else None
    ctx.record("observe", result, probe_id=probe.probe_id, row_key=row.key, after=after)
    return after, owner_key is not None and owner_key == probe.target


def _fleet(ctx: RunContext, row: RowSpec) -> str | None:
    """The fleet the row was written into (its owner's home fleet)."""
    return ctx.plan.world.principals[row.owner].home


def _tid(cred: Credential) -> dict[str, str]:
    return {"tenant_id": cred.tenant_id}


def _ids(items: Any) -> list[str]:
    return [i.get("id") for i in items or [] if isinstance(i, dict)]


def _mid(w: Wire, row: RowSpec) -> str:
    return w.memory_ids[row.key]


def _acting_agent(w: Wire, who: PrincipalSpec, row: RowSpec) -> dict[str, str]:
    """A tenant key must name an agent for writes: it acts as the row's owner."""
    return {} if who.kind == "agent" else {"agent_id": w.agent_ids[row.owner]}


async def _get(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001 - one signature for all
    r = await ctx.client.request("GET", f"/memories/{_mid(w, row)}", cred=cred, params=_tid(cred))
    return Obs(r, r.ok and body_field(r.body, "id") == _mid(w, row))


async def _contradictions(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
    r = await ctx.client.request("GET", f"/memories/{_mid(w, row)}/contradictions", cred=cred,
                                 params=_tid(cred))
    body = r.body if r.ok and isinstance(r.body, dict) else {}
    shown = [body_field(body.get("superseded_by"), "id")]
    shown += _ids(body.get("superseded_memories"))
    shown += [c.get("memory_id") for c in body.get("contradictions") or [] if isinstance(c, dict)]
    keys = sorted({w.row_of[i] for i in shown if i in w.row_of and i != _mid(w, row)})
    return Obs(r, r.ok and body.get("memory_id") == _mid(w, row), " ".join(keys) or None)


def _list_probe(fleet: bool = False, deleted: bool = False):  # noqa: ANN202
    async def run(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
        query: dict[str, Any] = {"agent_id": w.agent_ids[row.owner], "limit": 500}
        named = None
        if fleet:
            named = named_fleets("list_fleet", who.home, _fleet(ctx, row), ctx.plan.world.fleets)
            query["fleet_id"] = fleet_id(ctx, named[0])
        if deleted:
            query["include_deleted"] = "true"
        r = await ctx.client.request("GET", "/memories", cred=cred,
                                     params={**_tid(cred), **query})
        return Obs(r, r.ok and _mid(w, row) in _ids(body_field(r.body, "items")), fleets=named)
    return run


def _search_probe(path: str, endpoint: str = "/search"):  # noqa: ANN202
    async def run(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
        body: dict[str, Any] = {**_tid(cred), "query": salted(row.content, ctx.nonce),
                                "top_k": ctx.params.search_top_k}
        named = None
        if path in ("search_fleet", "search_fleets", "search_singular"):
            named = named_fleets(path, who.home, _fleet(ctx, row), ctx.plan.world.fleets)
            wire_ids = [fleet_id(ctx, f) for f in named]
            if path == "search_singular":
                body["fleet_id"] = wire_ids[0]
                named = None  # ignored by MemClaw: nothing is named as far as scope goes
            else:
                body["fleet_ids"] = wire_ids
        if path == "search_agent":
            body["filter_agent_id"] = w.agent_ids[row.owner]
        r = await ctx.client.request("POST", endpoint, cred=cred, json=body,
                                     request_class="search")
        items = body_field(r.body, "memories" if endpoint == "/recall" else "items")
        return Obs(r, r.ok and _mid(w, row) in _ids(items), fleets=named)
    return run


async def _entity_read(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
    home = ctx.plan.world.principals[row.owner].home
    entity = w.entities.get((row.tenant, home))
    if entity is None:
        return Obs(Result("GET /api/v1/entities/{id}", None, None, None, 0,
                          "no entity for the row's fleet"), False)
    r = await ctx.client.request("GET", f"/entities/{entity}", cred=cred, params=_tid(cred))
    linked = _ids(body_field(r.body, "linked_memories")) if r.ok else []
    return Obs(r, _mid(w, row) in linked, "entity" if r.ok else None)


async def _agent_read(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
    r = await ctx.client.request("GET", f"/agents/{w.agent_ids[row.owner]}", cred=cred,
                                 params=_tid(cred))
    same = body_field(r.body, "tenant_id") == w.tenant_ids[row.tenant]
    return Obs(r, r.ok and same and body_field(r.body, "agent_id") == w.agent_ids[row.owner])


async def _whoami(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
    spoof = w.agent_ids[row.owner]
    r = await ctx.client.request("GET", "/whoami", cred=cred, headers={"X-Agent-ID": spoof})
    seen = body_field(r.body, "agent_id") if r.ok else None
    own = w.agent_ids.get(who.key)
    return Obs(r, seen == spoof and spoof != own,
               w.principal_of.get((who.tenant, seen), seen) if seen else None)


def _reveals(w: Wire, row: RowSpec, r: Result) -> bool:
    mid = _mid(w, row)
    return mid in (r.error or "") or body_field(r.body, "id") == mid


def _dup_probe(near: bool):  # noqa: ANN202
    async def run(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
        content = salted(row.content, ctx.nonce) + (" again" if near else "")
        body = {**_acting_agent(w, who, row), "content": content, "visibility": row.visibility}
        if near:
            body["write_mode"] = "strong"
        r = await ctx.client.request("POST", "/memories", cred=cred,
                                     json={**_tid(cred), **body}, request_class="write")
        return Obs(r, _reveals(w, row, r))
    return run


async def _bulk_attempt(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
    attempt, index = w.attempts[row.key]
    items = [{"content": salted(f"Matrix filler {probe.probe_id} item {i} for the audit",
                                ctx.nonce)} for i in range(index + 1)]
    body = {**_tid(cred), **_acting_agent(w, who, row), "visibility": row.visibility,
            "items": items}
    r = await ctx.client.request("POST", "/memories/bulk", cred=cred, json=body,
                                 headers={"X-Bulk-Attempt-Id": attempt}, request_class="bulk")
    results = body_field(r.body, "results") or []
    shown = {x.get("id") for x in results if isinstance(x, dict)}
    shown |= {x.get("duplicate_of") for x in results if isinstance(x, dict)}
    return Obs(r, _mid(w, row) in shown)


async def _idempotency(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
    body = {**_tid(cred), **_acting_agent(w, who, row),
            "content": salted(f"Matrix replay of the key of {row.key} by {who.key}", ctx.nonce)}
    r = await ctx.client.request("POST", "/memories", cred=cred, json=body,
                                 headers={"Idempotency-Key": w.idempotency[row.key]},
                                 request_class="write")
    # a 422 "reused" says the key exists in the tenant asked: a reveal only in the row's own
    reused = (r.status == 422 and "idempotency" in (r.error or "").lower()
              and w.tenant_of_id.get(cred.tenant_id) == row.tenant)
    return Obs(r, reused or _reveals(w, row, r))


async def _patch(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
    r = await ctx.client.request("PATCH", f"/memories/{_mid(w, row)}", cred=cred,
                                 params=_tid(cred), json={"weight": 0.42})
    return Obs(r, r.ok)


async def _patch_status(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
    r = await ctx.client.request("PATCH", f"/memories/{_mid(w, row)}/status", cred=cred,
                                 params=_tid(cred), json={"status": "archived"})
    return Obs(r, r.ok)


async def _delete_probe(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
    r = await ctx.client.request("DELETE", f"/memories/{_mid(w, row)}", cred=cred,
                                 params=_tid(cred))
    return Obs(r, r.status == 204)


async def _redistribute(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
    requester = w.agent_ids[who.key] if who.kind == "agent" else w.agent_ids[row.owner]
    r = await ctx.client.request(
        "POST", "/memories/redistribute", cred=cred,
        params={**_tid(cred), "agent_id": requester},
        json={"memory_ids": [_mid(w, row)], "target_agent_id": w.agent_ids[probe.target]})
    moved = body_field(r.body, "moved") if r.ok else None
    return Obs(r, bool(moved))


def _write_probe(bulk: bool):  # noqa: ANN202
    async def run(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
        acting_home = who.home if who.kind == "agent" else \
            ctx.plan.world.principals[row.owner].home
        named = [_fleet(ctx, row)] if _fleet(ctx, row) is not None else [acting_home]
        fields: dict[str, Any] = {**_acting_agent(w, who, row)}
        if named[0] is not None:
            fields["fleet_id"] = fleet_id(ctx, named[0])
        content = salted(f"Matrix write {probe.probe_id} into a fleet for the audit", ctx.nonce)
        if bulk:
            r = await ctx.client.request(
                "POST", "/memories/bulk", cred=cred,
                json={**_tid(cred), **fields, "items": [{"content": content}]},
                headers={"X-Bulk-Attempt-Id": f"mx-{ctx.nonce}-{probe.probe_id}"},
                request_class="bulk")
            created = [x for x in body_field(r.body, "results") or []
                       if isinstance(x, dict) and x.get("status") == "created"]
            stored = None
            if created:  # the bulk answer has no fleet: the request's fleet, else the home
                stored = named[0]
            landed = bool(created)
        else:
            r = await ctx.client.request("POST", "/memories", cred=cred,
                                         json={**_tid(cred), **fields, "content": content},
                                         request_class="write")
            stored = plan_fleet(w, body_field(r.body, "fleet_id")) if r.status == 201 else None
            landed = r.status == 201
        landed = landed and w.tenant_of_id.get(cred.tenant_id) == row.tenant
        return Obs(r, landed, stored if landed else None, fleets=named)
    return run


async def _entity_upsert(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
    r = await ctx.client.request("POST", "/entities/upsert", cred=cred, json={
        **_tid(cred), "fleet_id": fleet_id(ctx, _fleet(ctx, row)), "entity_type": "service",
        "canonical_name": entity_name(ctx, _fleet(ctx, row)),
        "attributes": {"probe": probe.probe_id}})
    landed = r.ok and w.tenant_of_id.get(cred.tenant_id) == row.tenant
    return Obs(r, landed, _fleet(ctx, row) if landed else None, fleets=[_fleet(ctx, row)])


PROBES = {
    "get": _get, "contradictions": _contradictions, "list": _list_probe(),
    "list_fleet": _list_probe(fleet=True), "list_deleted": _list_probe(deleted=True),
    "search": _search_probe("search"), "search_fleet": _search_probe("search_fleet"),
    "search_fleets": _search_probe("search_fleets"),
    "search_singular": _search_probe("search_singular"),
    "search_agent": _search_probe("search_agent"), "recall": _search_probe("recall", "/recall"),
    "entity": _entity_read, "agent_read": _agent_read, "whoami": _whoami,
    "dup_exact": _dup_probe(near=False), "dup_near": _dup_probe(near=True),
    "bulk_attempt": _bulk_attempt, "idempotency": _idempotency, "patch": _patch,
    "patch_status": _patch_status, "delete": _delete_probe, "redistribute": _redistribute,
    "redistribute_x": _redistribute, "write": _write_probe(bulk=False),
    "bulk_write": _write_probe(bulk=True), "entity_upsert": _entity_upsert,
}
assert set(PROBES) | {"after_redistribute"} == set(PATHS), "every policy path has a probe"


async def drift(ctx: RunContext) -> None:
    """The agents again: did any probe change a principal's trust or home fleet?"""
    await census_agents(ctx, "after")


# -- paper-scale probes (paper 7.1's design at N = 2 F^2 K) ----------------------------------


async def paper_probes(ctx: RunContext) -> None:
    paper: PaperPlan | None = ctx.plan.paper
    if paper is None:
        return
    cred = ctx.tenant
    ids: dict[str, str] = {}

    async def write(secret: Any) -> None:
        owner = scoped(f"p{secret.fleet}-a0", ctx.nonce)
        result = await ctx.client.write(cred, {
            "agent_id": owner, "fleet_id": scoped(f"paper-{secret.fleet}", ctx.nonce),
            "visibility": "scope_agent" if secret.scope == "agent" else "scope_team",
            "content": salted(secret.content, ctx.nonce)})
        ctx.record("setup", result, step="paper_write", who=owner, row_key=secret.key)
        if result.status == 201 and body_field(result.body, "id"):
            ids[secret.key] = result.body["id"]

    await ctx.gather([write(s) for s in paper.secrets], desc="paper secrets")
    await asyncio.sleep(ctx.params.settle_s)
    jobs = []
    n = 0
    for prober, fleet in paper.probers():
        for secret in paper.secrets:
            if secret.key not in ids:
                continue
            rel = ("same_agent" if prober == f"p{secret.fleet}-a0" else
                   "same_fleet" if fleet == secret.fleet else "cross_fleet")
            for axis in ("get", "search"):
                jobs.append(_paper_probe(ctx, cred, f"p{n}", axis, prober, fleet, secret,
                                         ids[secret.key], rel))
                n += 1
    await ctx.gather(jobs, desc="paper probes")


async def _paper_probe(ctx: RunContext, cred: Credential, probe_id: str, axis: str,
                       prober: str, fleet: int, secret: Any, memory_id: str, rel: str) -> None:
    if axis == "get":
        r = await ctx.client.get(cred, memory_id)
        returned = r.ok and body_field(r.body, "id") == memory_id
    else:
        r = await ctx.client.search(cred, {"query": salted(secret.content, ctx.nonce),
                                           "fleet_ids": [scoped(f"paper-{fleet}", ctx.nonce)],
                                           "top_k": 5})
        returned = r.ok and memory_id in _ids(body_field(r.body, "items"))
    ctx.record("paper", r, probe_id=probe_id, axis=axis, who=prober, row_key=secret.key,
               relation=rel, visibility="scope_agent" if secret.scope == "agent"
               else "scope_team", returned=returned)


# -- checker ---------------------------------------------------------------------------------


def judge(ctx: RunContext) -> None:
    for verdict in matrix_check.judge(ctx.events()):
        ctx.record("verdict", **verdict)


@register
class Matrix(Experiment):
    name = "matrix"
    Params = MatrixParams

    def make_plan(self, params: MatrixParams) -> Plan:
        return make_plan(params)

    def planned_counts(self, plan: Plan, params: MatrixParams) -> dict[str, int]:
        world = plan.world
        follow = sum(p.path == "redistribute" and world.principals[p.who].kind == "agent"
                     and world.principals[p.who].tenant == world.rows[p.row].tenant
                     for p in world.probes)
        probes = len(world.probes) + follow
        paper = 2 * plan.paper.probes() if plan.paper else 0
        return {"probe": probes, "paper": paper, "verdict": probes + paper,
                "census_agent": 2 * len(world.principals),
                "observe": sum(p.path.startswith("redistribute") for p in world.probes)}

    def phases(self) -> list[Phase]:
        return [setup_tenants, provision, entities, write_rows, delete_rows, set_trust,
                census, run_probes, drift, paper_probes]

    def checkers(self) -> list[Checker]:
        return [judge]

    def client_params(self, params: MatrixParams) -> ClientParams:
        """Unpaced against the bundled server (its limits are lifted) and a backend adapter
        (no rate limits); a live target keeps
        the params' pacing, below its rate limits."""
        if params.target.kind not in ("reference", "backend"):  # backends: no rate limits
            return params.client
        return params.client.model_copy(update={
            "writes_per_s": None, "bulk_per_s": None, "searches_per_s": None})
