"""The census: the target's own account of every agent (trust, home fleet), row (fleet,
visibility, owner, status) and entity link, recorded as events before any probe, and read
back from those events alone (`world_from`), so a checker judges by what the target held,
never by the plan."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fleetprobe.client import Result, body_field
from fleetprobe.harness.experiment import RunContext
from fleetprobe.oracle import policy
from fleetprobe.oracle.policy import Principal, Row
from fleetprobe.world.answers import endpoint_absent
from fleetprobe.world.plan import PrincipalSpec
from fleetprobe.world.wire import Wire, ids, note_unsupported, plan_fleet, wire, world


async def census(ctx: RunContext) -> None:
    """The target's own account of every agent, row and entity link, before any probe."""
    await census_agents(ctx, "before")
    w = wire(ctx)
    owners = sorted({r.owner for r in world(ctx).rows.values() if r.key in w.memory_ids})
    await ctx.gather([_census_rows(ctx, w, o) for o in owners], desc="census")
    await ctx.gather([_census_entity(ctx, w, t, f) for (t, f) in sorted(
        w.entities, key=lambda k: (k[0], k[1] or ""))], desc="entity census")
    dropped = sorted(w.unlinked)
    if dropped:
        ctx.trace.skip("entity links", f"the target kept no entity link for {len(dropped)} "
                       "rows written with one (entity census); their entity probes are n/a")


async def census_agents(ctx: RunContext, step: str) -> None:
    w = wire(ctx)
    for t in w.tenant_ids:
        ctx.record("census_agent", step=step, who=f"{t}.tk", tenant=t, credential="tenant")
    agents = [a for a in world(ctx).principals.values() if a.kind == "agent" and a.key in w.creds]
    await ctx.gather([_census_agent(ctx, w, a, step) for a in agents], desc=f"agents {step}")


async def read_agent(ctx: RunContext, w: Wire, a: PrincipalSpec) -> tuple[Result, dict[str, Any]]:
    """The agent's record as the target holds it (its tenant's credential, no identity)."""
    cred = w.creds[f"{a.tenant}.tk"]
    result = await ctx.client.request("GET", f"/agents/{w.agent_ids[a.key]}", cred=cred,
                                      params={"tenant_id": cred.tenant_id})
    known = result.ok or (result.status == 404 and "not found" in (result.error or "").lower()
                          and not endpoint_absent({"status": 404, "error": result.error}))
    fields: dict[str, Any] = {"who": a.key, "tenant": a.tenant, "credential": "agent"}
    if result.ok:
        fields.update(trust=body_field(result.body, "trust_level"), registered=True,
                      home=plan_fleet(w, body_field(result.body, "fleet_id")))
    elif known:  # the target answered that there is no such agent
        fields.update(registered=False)
    return result, fields


async def _census_agent(ctx: RunContext, w: Wire, a: PrincipalSpec, step: str) -> None:
    result, fields = await read_agent(ctx, w, a)
    if note_unsupported(w, "agents", result) is not None:
        # No agent records (a backend adapter): the principal is judged at the plan's trust
        # and the home fleet its key was provisioned with, which the backend never sees.
        ctx.record("setup", result, step="census", who=a.key)
        ctx.record("census_agent", step=step, who=a.key, tenant=a.tenant, credential="agent",
                   trust=a.trust, home=a.home, source="plan")
        return
    ctx.record("census_agent", result, step=step, source="target", **fields)
    if step == "before" and a.registered and fields.get("trust") is None:
        w.missing_principals[a.key] = f"the target has no record of the agent: {result.error}"


async def _census_rows(ctx: RunContext, w: Wire, owner: str) -> None:
    """The owner's listing (MemClaw's list reads as the agent it names), then each row it
    left out read back by id with the tenant key (e.g. the owner's row outside its home)."""
    spec = world(ctx).principals[owner]
    cred = w.creds[f"{spec.tenant}.tk"]
    cursor = None
    seen: set[str] = set()
    for _ in range(20):
        query = {"agent_id": w.agent_ids[owner], "include_deleted": "true", "limit": 500}
        if cursor:
            query["cursor"] = cursor
        result = await ctx.client.list_memories(cred, **query)
        ctx.record("setup", result, step="census", who=owner)
        if note_unsupported(w, "list", result) is not None:
            break
        for item in body_field(result.body, "items") or []:
            key = w.row_of.get(item.get("id"))
            if key is None:
                continue
            seen.add(key)
            _census_row(ctx, w, spec.tenant, key, item, "list")
        cursor = body_field(result.body, "next_cursor")
        if not cursor:
            break
    await _census_by_id(ctx, w, owner, seen)


def _census_row(ctx: RunContext, w: Wire, tenant: str, key: str, item: dict[str, Any],
                source: str) -> None:
    owner_key = w.principal_of.get((tenant, item.get("agent_id")), item.get("agent_id"))
    ctx.record("census_row", row_key=key, tenant=tenant, fleet=plan_fleet(w, item.get("fleet_id")),
               visibility=item.get("visibility"), owner=owner_key,
               row_status=item.get("status"), deleted=key in w.deleted, source=source)


async def _census_by_id(ctx: RunContext, w: Wire, owner: str, seen: set[str]) -> None:
    """The owner's rows the listing did not show (all of them where a backend has no
    listing), each read back by id with its tenant key: the target's own account of where
    the row lives. A deleted row is the one read before its delete (no GET returns it now)."""
    spec = world(ctx).principals[owner]
    cred = w.creds[f"{spec.tenant}.tk"]
    keys = [r.key for r in world(ctx).rows.values() if r.owner == owner
            and r.key in w.memory_ids and r.key not in seen and r.key not in w.deleted]
    for key in keys:
        result = await ctx.client.get(cred, w.memory_ids[key])
        ctx.record("setup", result, step="census", who=owner, row_key=key)
        if result.ok and body_field(result.body, "id") == w.memory_ids[key]:
            _census_row(ctx, w, spec.tenant, key, result.body, "get")
    # deleted rows no listing showed (a backend's delete is hard): as read before the delete
    gone = [r.key for r in world(ctx).rows.values() if r.owner == owner
            and r.key in w.deleted and r.key not in seen and r.key in w.before_delete]
    for key in gone:
        _census_row(ctx, w, spec.tenant, key, w.before_delete[key], "get before delete")


async def _census_entity(ctx: RunContext, w: Wire, tenant: str, fleet: str | None) -> None:
    """Which rows the entity links, as the target kept them: a row written with a link the
    target did not keep is left out of the entity probes (n/a) and reported."""
    cred = w.creds[f"{tenant}.tk"]
    result = await ctx.client.request("GET", f"/entities/{w.entities[(tenant, fleet)]}",
                                      cred=cred, params={"tenant_id": cred.tenant_id})
    linked = {w.row_of[i] for i in ids(body_field(result.body, "linked_memories"))
              if i in w.row_of}
    ctx.record("census_entity", result, tenant=tenant, fleet=fleet,
               linked=" ".join(sorted(linked)))
    if not result.ok:
        return
    for r in world(ctx).rows.values():
        if (r.tenant == tenant and r.linked and r.key in w.memory_ids and r.key not in w.deleted
                and world(ctx).principals[r.owner].home == fleet and r.key not in linked):
            w.unlinked[r.key] = (f"the target kept no entity link for this row (written via "
                                 f"{r.via} with one; entity census)")


# -- read back from the events ---------------------------------------------------------


def agent_state(e: dict[str, Any]) -> Principal | None:
    """A principal from a `census_agent` or agent `observe` event (None: not observed)."""
    if e.get("credential") == "tenant":
        return Principal(e["tenant"], "tenant")
    if e.get("registered") is False:
        return policy.unregistered(e["tenant"], e["who"])
    if e.get("trust") is None:
        return None
    return Principal(e["tenant"], "agent", e["who"], e["trust"], e.get("home"))


def world_from(events: Iterable[dict[str, Any]]
               ) -> tuple[dict[str, Principal], dict[str, Row]]:
    """Principals and rows as the census observed them before the probes."""
    principals: dict[str, Principal] = {}
    rows: dict[str, Row] = {}
    for e in events:
        if e["phase"] == "census_agent" and e.get("step") != "after":
            state = agent_state(e)
            if state is not None:
                principals[e["who"]] = state
        elif e["phase"] == "census_row":
            rows[e["row_key"]] = Row(e["tenant"], e.get("fleet"), e["visibility"],
                                     e.get("owner"), e.get("row_status") or "active",
                                     bool(e.get("deleted")))
    return principals, rows
