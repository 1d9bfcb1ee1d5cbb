"""The dynamics run: params, the world's phases (`fleetprobe.world`), the episodes, the
experiment.

Each change of the plan is one episode: its probes are sent in rounds (every probe of the
change once per round, side by side), `rounds_before` rounds before the change, rounds
without pause while the change is in flight, then `rounds_after` rounds after its
acknowledgement. Every probe records when it was sent and answered (`sent_at`,
`answered_at`, the client's UTC clock), every change when it was requested and acknowledged.
In-flight episodes start a bulk write of `inflight_items` items with the subject's own key,
delete the agent (or revoke its key) `inflight_delay_s` later, and then list the rows the
bulk left under the agent's id with their `created_at` (the server's clock; on the bundled
server the same host's clock as `answered_at`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import Field, model_validator

from fleetprobe.client import Credential, Result, body_field
from fleetprobe.experiments.dynamics import check
from fleetprobe.experiments.dynamics.derived import (
    DERIVED_PROBES,
    derived_not_applicable,
    prepare_derived,
    triple,
    write_late,
)
from fleetprobe.experiments.dynamics.world import (
    CHANGES,
    DERIVED_CHANGES,
    FAMILIES,
    INFLIGHT_CHANGES,
    STALE_CHANGES,
    ChangeSpec,
    DynamicsPlan,
    make_plan,
)
from fleetprobe.plans import rng, salted, spelled
from fleetprobe.runner import (
    Checker,
    ClientParams,
    Experiment,
    ExperimentParams,
    Phase,
    RunContext,
    register,
)
from fleetprobe.trace import iso, utc_now
from fleetprobe.world.build import (
    entities,
    principals,
    set_trust,
    setup_tenants,
    write_rows,
)
from fleetprobe.world.census import census
from fleetprobe.world.probes import PROBES
from fleetprobe.world.target import lifted
from fleetprobe.world.target import not_applicable as world_not_applicable
from fleetprobe.world.wire import Wire, fleet_id, plan_fleet, wire

NA_KEYS = ("agent identities are asserted (X-Agent-ID) on this target: there is no agent key "
           "to revoke")


class DynamicsParams(ExperimentParams):
    fleets: int = Field(2, ge=2, le=8, description="fleets of the matrix world")
    changes: list[str] = Field(default_factory=lambda: list(CHANGES))
    rounds_before: int = Field(2, ge=1)
    rounds_after: int = Field(4, ge=1)
    expire_s: float = Field(1.5, gt=0, description="an expiring row's life after its write")
    inflight_items: int = Field(100, ge=1, le=100)
    inflight_words: int = Field(400, ge=0, le=1000, description="words per in-flight item")
    inflight_delay_s: float = Field(0.0, ge=0)
    search_top_k: int = Field(10, ge=1, le=20)
    settle_s: float = Field(0.3, ge=0)
    detect_timeout_s: float = Field(3.0, ge=0, description="how long a supersession's "
                                    "detection is watched for after the later write")

    @model_validator(mode="after")
    def _known(self) -> DynamicsParams:
        unknown = sorted(set(self.changes) - set(CHANGES))
        if unknown:
            raise ValueError(f"unknown changes {unknown}; choose from {list(CHANGES)}")
        self.target = lifted(self.target)
        return self


def now() -> str:
    return iso(utc_now())


def generation(ctx: RunContext, who: str) -> int:
    return ctx.state.setdefault("generation", {}).get(who, 0)


# -- probes ----------------------------------------------------------------------------------


async def send(ctx: RunContext, w: Wire, change: ChangeSpec, probe: Any, n: int,
               cred: Credential, gen: int, inflight: bool = False) -> None:
    plan = ctx.plan.world
    who, row = plan.principals[probe.who], plan.rows[probe.row]
    # the matrix's probes salt their own writes by a numeric probe id: one per round
    ci, pi = (int(x.lstrip("c")) for x in probe.probe_id.split("."))
    wire_probe = dataclasses.replace(probe, probe_id=f"e{(ci * 100 + pi) * 1000 + n}")
    sent = now()
    obs = await (DERIVED_PROBES.get(probe.path) or PROBES[probe.path])(ctx, w, cred, who, row,
                                                                        wire_probe)
    answered = now()
    fleets = ",".join(f or "" for f in obs.fleets) if obs.fleets else None
    ctx.record("probe", obs.result, change_id=change.change_id,
               probe_id=f"{probe.probe_id}.{n}", round=n, who=probe.who,
               credential=f"{probe.who}#{gen}", path=probe.path, row_key=probe.row,
               family=FAMILIES[probe.path], fleets=fleets, returned=obs.returned, got=obs.got,
               sent_at=sent, answered_at=answered, inflight=inflight or None)


async def round_(ctx: RunContext, w: Wire, change: ChangeSpec, n: int,
                 creds: dict[str, tuple[Credential, int]]) -> None:
    jobs = []
    for probe in change.probes:
        if probe.row not in w.memory_ids or probe.who not in creds:
            continue
        reason = probe_not_applicable(ctx, w, probe)
        if reason is not None:  # recorded once, in the first round
            if n == 0:
                ctx.record("probe", na=reason, change_id=change.change_id,
                           probe_id=f"{probe.probe_id}.{n}", round=n, who=probe.who,
                           path=probe.path, row_key=probe.row, family=FAMILIES[probe.path])
            continue
        cred, gen = creds[probe.who]
        jobs.append(send(ctx, w, change, probe, n, cred, gen))
    await ctx.gather(jobs, desc=f"{change.change_id} round {n}")


def probe_not_applicable(ctx: RunContext, w: Wire, probe: Any) -> str | None:
    """The world's reasons (a backend's "not supported", a link the target did not keep),
    and a replay probe of a row written without the key it replays."""
    reason = (derived_not_applicable(ctx, w, probe) if probe.path in DERIVED_PROBES
              else world_not_applicable(ctx, w, probe))
    if reason is None and probe.path == "bulk_attempt" and probe.row not in w.attempts:
        reason = "the row was written without a bulk attempt id (no bulk endpoint)"
    if reason is None and probe.path == "idempotency" and probe.row not in w.idempotency:
        reason = "the row was written without an Idempotency-Key"
    return reason


def credentials(ctx: RunContext, w: Wire, change: ChangeSpec) -> dict[str, tuple[Credential, int]]:
    """Each prober's credential as held now (a revoked key stays the one probes send)."""
    return {p.who: (w.creds[p.who], generation(ctx, p.who)) for p in change.probes
            if p.who in w.creds}


async def episode(ctx: RunContext, change: ChangeSpec) -> None:
    w = wire(ctx)
    na = not_applicable(ctx, w, change)
    if na is not None:
        ctx.record("change", na=na, change_id=change.change_id, change=change.kind,
                   subject=change.subject)
        ctx.trace.skip(f"change {change.change_id} {change.kind}", na)
        return
    await PREPARE.get(change.kind, _nothing)(ctx, w, change)
    n = 0
    for _ in range(ctx.params.rounds_before):
        await round_(ctx, w, change, n, credentials(ctx, w, change))
        n += 1
    # reads in flight across the change: the subject's searches and recalls, sent just
    # before the change is requested and answered whenever the server gets to them
    reads = asyncio.gather(*inflight_reads(ctx, w, change))
    task = asyncio.create_task(CHANGE[change.kind](ctx, w, change))
    while not task.done():  # the change is applied while probes run
        await round_(ctx, w, change, n, credentials(ctx, w, change))
        n += 1
    await task
    await reads
    for _ in range(ctx.params.rounds_after):
        await round_(ctx, w, change, n, credentials(ctx, w, change))
        n += 1


INFLIGHT_ROUND = 999  # the in-flight reads' round number (probe ids `<change>.<probe>.999`)
INFLIGHT_READ_PATHS = ("search", "recall")


def inflight_reads(ctx: RunContext, w: Wire, change: ChangeSpec) -> list[Any]:
    creds = credentials(ctx, w, change)
    return [send(ctx, w, change, p, INFLIGHT_ROUND, *creds[p.who], inflight=True)
            for p in change.probes if p.path in INFLIGHT_READ_PATHS
            and p.row in w.memory_ids and p.who in creds
            and probe_not_applicable(ctx, w, p) is None]


async def _nothing(ctx: RunContext, w: Wire, change: ChangeSpec) -> None:
    return None


def not_applicable(ctx: RunContext, w: Wire, change: ChangeSpec) -> str | None:
    if ctx.tenant.asserts_identity and change.kind in ("revoke_key", "inflight_revoke"):
        return NA_KEYS
    if change.kind in INFLIGHT_CHANGES and "bulk" in w.unsupported:
        return f"no bulk write to keep in flight: {w.unsupported['bulk']}"
    if change.subject in w.missing_principals:
        return f"subject missing: {w.missing_principals[change.subject]}"
    if change.subject in w.unbuilt:
        return f"subject row not built: {w.unbuilt[change.subject]}"
    return None


async def timeline(ctx: RunContext) -> None:
    for change in ctx.plan.changes:
        await episode(ctx, change)


# -- changes ---------------------------------------------------------------------------------


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


# -- checker and experiment ------------------------------------------------------------------


def judge(ctx: RunContext) -> None:
    for verdict in check.judge(ctx.events()):
        ctx.record("verdict", **verdict)


@register
class Dynamics(Experiment):
    name = "dynamics"
    Params = DynamicsParams

    def make_plan(self, params: DynamicsParams) -> DynamicsPlan:
        return make_plan(params.seed, params.fleets, tuple(params.changes))

    def planned_counts(self, plan: DynamicsPlan, params: DynamicsParams) -> dict[str, int]:
        steps = {"recreate_agent": 2, "inflight_delete": 1, "inflight_revoke": 1}
        return {"change": sum(steps.get(c.kind, 1) for c in plan.changes),
                "inflight": sum(c.kind in INFLIGHT_CHANGES for c in plan.changes)}

    def phases(self) -> list[Phase]:
        return [setup_tenants, principals, entities, write_rows, set_trust, census, timeline]

    def checkers(self) -> list[Checker]:
        return [judge]

    def client_params(self, params: DynamicsParams) -> ClientParams:
        """Unpaced against the bundled server (limits lifted) and a backend adapter."""
        if params.target.kind not in ("reference", "backend"):
            return params.client
        return params.client.model_copy(update={
            "writes_per_s": None, "bulk_per_s": None, "searches_per_s": None})
