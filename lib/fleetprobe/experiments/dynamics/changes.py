"""How each change kind of the `dynamics` timeline is applied on the target (by the tenant
key, or by time passing), and what an episode writes before its first round: one function
per kind in `CHANGE` and `PREPARE`, each recording a `change` event with when it was sent and
answered, so the checker can judge every probe by the policy at the moment it was answered.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from fleetprobe.client import Credential, Result, body_field
from fleetprobe.experiments.dynamics import check
from fleetprobe.experiments.dynamics.derived import prepare_derived, triple, write_late
from fleetprobe.experiments.dynamics.timeline import (
    CHANGES,
    DERIVED_CHANGES,
    INFLIGHT_CHANGES,
    STALE_CHANGES,
    ChangeSpec,
)
from fleetprobe.harness.experiment import RunContext
from fleetprobe.harness.seeding import rng, salted, spelled
from fleetprobe.harness.trace import iso, utc_now
from fleetprobe.world.wire import Wire, fleet_id, plan_fleet


def now() -> str:
    return iso(utc_now())


def generation(ctx: RunContext, who: str) -> int:
    return ctx.state.setdefault("generation", {}).get(who, 0)


def tenant_cred(ctx: RunContext, w: Wire, key: str) -> Credential:
    return w.creds[f"{ctx.plan.world.principals[key].tenant}.tk"]


def record_change(ctx: RunContext, change: ChangeSpec, result: Result | None, sent: str,
                  answered: str, applied: bool, **fields: Any) -> None:
    ctx.record("change", result, change_id=change.change_id, change=change.kind,
               subject=change.subject, sent_at=sent, answered_at=answered, applied=applied,
               **fields)


async def delete_agent(ctx: RunContext, w: Wire, change: ChangeSpec, step: str = "delete"
                       ) -> None:
    cred = tenant_cred(ctx, w, change.subject)
    sent = now()
    r = await ctx.client.request("DELETE", f"/agents/{w.agent_ids[change.subject]}", cred=cred,
                                 params={"tenant_id": cred.tenant_id})
    record_change(ctx, change, r, sent, now(), r.status == 204, step=step, who=change.subject,
                  credential=f"{change.subject}#{generation(ctx, change.subject)}")


async def revoke_key(ctx: RunContext, w: Wire, change: ChangeSpec) -> None:
    """A new key for the agent: the gateway replaces (revokes) its earlier keys."""
    await reissue(ctx, w, change, "revoke")


async def reissue(ctx: RunContext, w: Wire, change: ChangeSpec, step: str) -> None:
    spec = ctx.plan.world.principals[change.subject]
    tenant = tenant_cred(ctx, w, change.subject)
    agent_id = w.agent_ids[change.subject]
    old = f"{change.subject}#{generation(ctx, change.subject)}"
    sent = now()
    if tenant.asserts_identity:  # re-created by a write asserting it (trust 1, its home)
        r = await ctx.client.write(tenant.as_agent(agent_id), {
            "agent_id": agent_id, "fleet_id": fleet_id(ctx, spec.home), "visibility":
            "scope_agent", "content": salted(f"Dynamics re-created {change.change_id}",
                                             ctx.nonce)})
        cred = tenant.as_agent(agent_id) if r.ok else None
    else:
        r, cred = await ctx.client.provision_agent_key(
            tenant, agent_id, initial_trust=change.trust or 1,
            initial_fleet=fleet_id(ctx, spec.home), label="fleetprobe dynamics")
    answered = now()
    applied = cred is not None
    if applied and step == "recreate":
        gen = generation(ctx, change.subject) + 1
        ctx.state["generation"][change.subject] = gen
        w.creds[change.subject] = cred
    record_change(ctx, change, r, sent, answered, applied, step=step, who=change.subject,
                  credential=old, trust=change.trust or 1, home=spec.home,
                  agent_created=body_field(r.body, "agent_row_created"))


async def recreate_agent(ctx: RunContext, w: Wire, change: ChangeSpec) -> None:
    await delete_agent(ctx, w, change)
    await reissue(ctx, w, change, "recreate")


async def set_agent_trust(ctx: RunContext, w: Wire, change: ChangeSpec) -> None:
    cred = tenant_cred(ctx, w, change.subject)
    home = change.fleet or ctx.plan.world.principals[change.subject].home
    trust = change.trust if change.trust is not None else \
        ctx.plan.world.principals[change.subject].trust
    sent = now()
    r = await ctx.client.patch_trust(cred, w.agent_ids[change.subject], trust,
                                     fleet_id(ctx, change.fleet) if change.fleet else None)
    answered = now()
    ctx.record("change", r, change_id=change.change_id, change=change.kind,
               subject=change.subject, sent_at=sent, answered_at=answered, applied=r.ok,
               step="trust", who=change.subject, trust=body_field(r.body, "trust_level"),
               home=plan_fleet(w, body_field(r.body, "fleet_id")) if r.ok else home)


async def soft_delete(ctx: RunContext, w: Wire, change: ChangeSpec) -> None:
    cred = tenant_cred(ctx, w, ctx.plan.world.rows[change.subject].owner)
    sent = now()
    r = await ctx.client.request("DELETE", f"/memories/{w.memory_ids[change.subject]}",
                                 cred=cred, params={"tenant_id": cred.tenant_id})
    record_change(ctx, change, r, sent, now(), r.status == 204, step="delete",
                  row_key=change.subject)


async def expire(ctx: RunContext, w: Wire, change: ChangeSpec) -> None:
    """No request: the change is the row's own `expires_at` passing."""
    at = ctx.state["expires_at"][change.subject]
    wait = (datetime.fromisoformat(at.replace("Z", "+00:00")) - utc_now()).total_seconds()
    await asyncio.sleep(max(wait, 0))
    record_change(ctx, change, None, at, at, True, step="expire", row_key=change.subject)


async def redistribute(ctx: RunContext, w: Wire, change: ChangeSpec) -> None:
    """By the tenant key, for a trust-3 agent of the row's fleet (every profile's rung)."""
    row = ctx.plan.world.rows[change.subject]
    cred = tenant_cred(ctx, w, row.owner)
    sent = now()
    r = await ctx.client.request(
        "POST", "/memories/redistribute", cred=cred,
        params={"tenant_id": cred.tenant_id, "agent_id": w.agent_ids[row.owner]},
        json={"memory_ids": [w.memory_ids[row.key]],
              "target_agent_id": w.agent_ids[change.target]})
    answered = now()
    moved = bool(body_field(r.body, "moved")) if r.ok else False
    after = await ctx.client.get(cred, w.memory_ids[row.key])  # owner and visibility after
    owner = w.principal_of.get((row.tenant, body_field(after.body, "agent_id")))
    record_change(ctx, change, r, sent, answered, moved, step="redistribute", row_key=row.key,
                  who=owner if after.ok else change.target,
                  visibility=body_field(after.body, "visibility") if after.ok else None)


async def write_expiring(ctx: RunContext, w: Wire, change: ChangeSpec) -> None:
    """The expiring row, written just before its episode so it expires while probes run."""
    expires = now_plus(ctx.params.expire_s)
    if await write_late(ctx, w, ctx.plan.world.rows[change.subject], {"expires_at": expires},
                        idempotent=True):
        ctx.state.setdefault("expires_at", {})[change.subject] = expires


async def write_valid_end(ctx: RunContext, w: Wire, change: ChangeSpec) -> None:
    """A row current until `ts_valid_end` a moment ahead (MemClaw's lifecycle job then
    outdates it), written just before its episode."""
    until = now_plus(ctx.params.expire_s)
    if await write_late(ctx, w, ctx.plan.world.rows[change.subject], {"ts_valid_end": until}):
        ctx.state.setdefault("expires_at", {})[change.subject] = until


async def write_superseded(ctx: RunContext, w: Wire, change: ChangeSpec) -> None:
    """The row a later write will supersede, written just before its episode."""
    await write_late(ctx, w, ctx.plan.world.rows[change.subject],
                     triple(ctx, w, change, change.subject))


async def supersede(ctx: RunContext, w: Wire, change: ChangeSpec) -> None:
    """The owner writes the later row (RDF: the same subject and predicate, another object;
    semantic: a sentence denying the earlier one); acknowledged by its 201. Then the earlier
    row's status is watched until the target marks it (`detected_ms`, or never)."""
    later = ctx.plan.world.rows[change.partner]
    earlier = ctx.plan.world.rows[change.subject]
    extra = triple(ctx, w, change, later.key)
    if change.kind == "supersede_semantic":
        extra = {"content": salted("Correction: it is not true that "
                                   + earlier.content[0].lower() + earlier.content[1:],
                                   ctx.nonce)}
    sent = now()
    r = await write_late(ctx, w, later, extra)
    answered = now()
    record_change(ctx, change, r, sent, answered, r.status == 201, step="supersede",
                  row_key=change.subject,
                  row_status="outdated" if change.kind == "supersede_rdf" else "conflicted")
    if r.status == 201:
        await watch_detection(ctx, w, change, answered)


async def watch_detection(ctx: RunContext, w: Wire, change: ChangeSpec, since: str) -> None:
    cred = tenant_cred(ctx, w, ctx.plan.world.rows[change.subject].owner)
    deadline = asyncio.get_running_loop().time() + ctx.params.detect_timeout_s
    status = None
    while asyncio.get_running_loop().time() < deadline:
        r = await ctx.client.get(cred, w.memory_ids[change.subject])
        status = body_field(r.body, "status") if r.ok else None
        if status not in (None, "active"):
            break
        await asyncio.sleep(0.02)
    at = now()
    detected = status not in (None, "active")
    ctx.record("change_observed", change_id=change.change_id, change=change.kind,
               row_key=change.subject, detected=detected, row_status=status,
               detected_ms=check._ms(at, since) if detected else None,
               watched_s=ctx.params.detect_timeout_s)


async def valid_end(ctx: RunContext, w: Wire, change: ChangeSpec) -> None:
    """No request: the change is the row's own `ts_valid_end` passing."""
    at = ctx.state["expires_at"][change.subject]
    wait = (datetime.fromisoformat(at.replace("Z", "+00:00")) - utc_now()).total_seconds()
    await asyncio.sleep(max(wait, 0))
    record_change(ctx, change, None, at, at, True, step="valid_end", row_key=change.subject)


def now_plus(seconds: float) -> str:
    return iso(datetime.now(UTC) + timedelta(seconds=seconds))


async def inflight(ctx: RunContext, w: Wire, change: ChangeSpec) -> None:
    """A bulk write with the subject's own key, then the grant withdrawn while it runs."""
    subject = change.subject
    spec = ctx.plan.world.principals[subject]
    cred = w.creds[subject]
    # long items of words of their own: a server that embeds a bulk in chunks off its event
    # loop (the bundled one) can take the change between two chunks
    words = rng(ctx.params.seed, f"dynamics:inflight:{change.change_id}")
    items = [{"content": salted(f"Dynamics in flight {change.change_id} item {spelled(i, 3)} "
                                f"of {spec.name} " + " ".join(
                                    spelled(words.getrandbits(24), 6)
                                    for _ in range(ctx.params.inflight_words)), ctx.nonce)}
             for i in range(ctx.params.inflight_items)]
    body = {"tenant_id": cred.tenant_id, "agent_id": w.agent_ids[subject],
            "fleet_id": fleet_id(ctx, spec.home), "visibility": "scope_team", "items": items}
    sent = now()
    bulk = asyncio.create_task(ctx.client.request(
        "POST", "/memories/bulk", cred=cred, json=body, request_class="bulk",
        headers={"X-Bulk-Attempt-Id": f"dy-{ctx.nonce}-{change.change_id}"}))
    started = await first_row(ctx, w, subject, bulk)
    await asyncio.sleep(ctx.params.inflight_delay_s)
    if change.kind == "inflight_delete":
        await delete_agent(ctx, w, change)
    else:
        await reissue(ctx, w, change, "revoke")
    r = await bulk
    answered = now()
    results = [x for x in body_field(r.body, "results") or [] if isinstance(x, dict)]
    created = sum(x.get("status") == "created" for x in results)
    stamps = await created_at_of(ctx, w, subject)
    if not started:
        ctx.trace.shortfall(f"{change.change_id}: the bulk wrote no row before it ended; the "
                            "change met no bulk in flight")
    ctx.record("inflight", r, change_id=change.change_id, who=subject,
               credential=f"{subject}#0", op_kind="bulk", sent_at=sent, answered_at=answered,
               planned_items=len(items), created=created, written=len(stamps),
               written_at=" ".join(sorted(stamps)), written_count=body_field(r.body, "written"))


async def first_row(ctx: RunContext, w: Wire, subject: str, bulk: asyncio.Task) -> bool:
    """Wait until the bulk has written its first row (tenant key listing), so the change
    meets a bulk in flight; False if the bulk ended first."""
    cred = tenant_cred(ctx, w, subject)
    while not bulk.done():
        r = await ctx.client.list_memories(cred, agent_id=w.agent_ids[subject], limit=500)
        if any("in flight" in (i.get("content") or "") for i in body_field(r.body, "items") or []
               if isinstance(i, dict)):
            return True
        await asyncio.sleep(0.002)
    return False


async def created_at_of(ctx: RunContext, w: Wire, subject: str) -> list[str]:
    """`created_at` of the in-flight bulk's rows under the subject's id (tenant key)."""
    cred = tenant_cred(ctx, w, subject)
    r = await ctx.client.list_memories(cred, agent_id=w.agent_ids[subject], limit=500)
    ctx.record("setup", r, step="census", who=subject)
    return [i.get("created_at") or "" for i in body_field(r.body, "items") or []
            if isinstance(i, dict) and "in flight" in (i.get("content") or "")]


CHANGE = {
    "revoke_key": revoke_key, "delete_agent": delete_agent, "recreate_agent": recreate_agent,
    "trust_3_1": set_agent_trust, "trust_2_0": set_agent_trust, "trust_1_3": set_agent_trust,
    "rehome": set_agent_trust, "soft_delete": soft_delete, "soft_delete_single": soft_delete,
    "expire": expire, "redistribute": redistribute,
    **{k: inflight for k in INFLIGHT_CHANGES},
    "supersede_rdf": supersede, "supersede_semantic": supersede, "valid_end": valid_end,
    **{k: soft_delete for k in DERIVED_CHANGES},
}
# what an episode writes or builds before its first round
PREPARE = {"expire": write_expiring, "valid_end": write_valid_end,
           "supersede_rdf": write_superseded, "supersede_semantic": write_superseded,
           **{k: prepare_derived for k in DERIVED_CHANGES}}
assert set(PREPARE) <= set(CHANGES)
assert all(k in PREPARE for k in STALE_CHANGES)
assert set(CHANGE) == set(CHANGES), "every change kind is applied by a function"
