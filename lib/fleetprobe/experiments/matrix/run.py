"""The matrix run: params, plan, the probe phase, the paper-scale option, the experiment.

A principal whose record a probe can change, by what MemClaw documents (search and recall
with an agent identity register an unknown agent id and give a home-less agent the fleet it
names), has its probes sent in one lane, one after another, so the order in which they were
answered is the order of their events; after each of them its record is read back
(`observe`, step `agent`), and the checker judges that probe and every later one with the
record as the target then held it. Every other
probe is sent on its own, side by side (their principals' records are read again after the
probes, `drift`: a change there is reported too).

Completeness: a run is complete only when every planned probe was sent or is not applicable
for a stated reason of the target (its credential shape, an endpoint it lacks, a link it did
not keep). Probes that could not be sent because a principal or row is missing, or probes
the target rejected as malformed, make the run incomplete, with the reason in the manifest.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from pydantic import Field, model_validator

from fleetprobe.client import Credential, body_field
from fleetprobe.experiments.matrix import check
from fleetprobe.experiments.matrix.probe_plan import (
    PaperPlan,
    enumerate_probes,
    paper_plan,
    random_probes,
)
from fleetprobe.harness.experiment import (
    Checker,
    ClientParams,
    Experiment,
    ExperimentParams,
    Phase,
    RunContext,
    register,
)
from fleetprobe.harness.seeding import rng, salted, scoped
from fleetprobe.world.build import (
    delete_rows,
    entities,
    principals,
    set_trust,
    setup_tenants,
    write_rows,
)
from fleetprobe.world.census import census, census_agents, read_agent
from fleetprobe.world.moved import add_moved_probes
from fleetprobe.world.plan import (
    PrincipalSpec,
    ProbeSpec,
    RowSpec,
    World,
    make_world,
)
from fleetprobe.world.probes import CONTROL_PATHS, PROBES, control, ids
from fleetprobe.world.target import lifted, not_applicable, unpaced_client
from fleetprobe.world.wire import Wire, wire, world


class MatrixParams(ExperimentParams):
    tenants: int = Field(2, ge=1, le=6, description="tenants with the same world")
    moved_agents: bool = Field(True, description="agents moved after writing (moved.py)")
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
        self.target = lifted(self.target)
        return self


@dataclass
class Plan:
    world: World
    paper: PaperPlan | None


def make_plan(params: MatrixParams) -> Plan:
    plan = make_world(params.seed, params.tenants, params.fleets)
    probes = (enumerate_probes(plan, params.seed, tuple(params.enumerate_trusts),
                               params.sweeps) if params.enumerated else [])
    probes += random_probes(plan, params.seed, params.random_probes, params.cross_tenant_share)
    if params.enumerated and params.moved_agents:
        probes += add_moved_probes(plan, params.seed, tuple(params.enumerate_trusts))
    plan.probes = probes
    paper = (paper_plan(params.seed, params.paper_fleets, params.paper_agents_per_fleet)
             if params.paper_fleets else None)
    return Plan(plan, paper)


def follows(plan: World, probe: ProbeSpec) -> bool:
    """A sibling redistribute by an agent is followed by its PATCH of the row it gave away."""
    who, row = plan.principals[probe.who], plan.rows[probe.row]
    return probe.path == "redistribute" and who.kind == "agent" and who.tenant == row.tenant


def sequential(who: PrincipalSpec) -> bool:
    """A principal a probe may change (home-less or unregistered): one lane, observed."""
    return who.kind == "agent" and (who.home is None or not who.registered)


def observed(plan: World, probe: ProbeSpec) -> bool:
    """Every probe of such a principal is followed by a read of its record, so a change is
    laid at the probe that made it (a home-less agent's write into a fleet may home it too)."""
    return sequential(plan.principals[probe.who])


def controls_of(probes: list[ProbeSpec]) -> list[tuple[str, str, str | None]]:
    """(principal, path, variant) for every by-id probe kind a principal sends."""
    return sorted({(p.who, p.path, p.variant) for p in probes if p.path in CONTROL_PATHS},
                  key=lambda c: (c[0], c[1], c[2] or ""))


# -- the probe phase -------------------------------------------------------------------------


async def run_probes(ctx: RunContext) -> None:
    w = wire(ctx)
    plan = world(ctx)
    lanes: dict[str, list[ProbeSpec]] = defaultdict(list)
    missing: Counter[str] = Counter()
    for probe in plan.probes:
        reason = not_applicable(ctx, w, probe)
        if reason is not None:
            record_not_sent(ctx, probe, reason)
        elif (why := _missing(w, probe)) is not None:
            missing[why] += 1
        else:
            lanes[probe.who].append(probe)
    if missing:
        total = sum(missing.values())
        first = "; ".join(f"{n}: {why}" for why, n in missing.most_common(3))
        ctx.trace.shortfall(f"{total} of {len(plan.probes)} planned probes not sent, their "
                            f"principal or row is missing ({first})")
    absent = str(uuid.UUID(int=rng(ctx.params.seed, f"matrix:absent:{ctx.nonce}")
                           .getrandbits(128), version=4))
    await ctx.gather([_control(ctx, w, c, lane, absent) for who, lane in sorted(lanes.items())
                      for c in controls_of(lane)], desc="controls")
    jobs = []
    chains: dict[str, list[ProbeSpec]] = defaultdict(list)
    for who, lane in sorted(lanes.items()):
        if sequential(plan.principals[who]):
            jobs.append(_lane(ctx, w, lane))
            continue
        for probe in lane:
            if probe.path.startswith("dup_"):
                chains[probe.row].append(probe)
            else:
                jobs.append(_probe(ctx, w, probe))
    jobs += [_lane(ctx, w, chain) for _, chain in sorted(chains.items())]
    await ctx.gather(jobs, desc="probes")


def _missing(w: Wire, probe: ProbeSpec) -> str | None:
    if probe.who in w.missing_principals or probe.who not in w.creds:
        return f"principal {probe.who}: {w.missing_principals.get(probe.who, 'no credential')}"
    if probe.row not in w.memory_ids:
        return f"row {probe.row}: {w.missing_rows.get(probe.row, 'not written')}"
    if probe.target and (probe.target not in w.creds or probe.target in w.missing_principals):
        return f"redistribute target {probe.target}: missing"
    return None


def record_not_sent(ctx: RunContext, probe: ProbeSpec, reason: str) -> None:
    """Not applicable, with the reason; counted like a probe, never judged."""
    ctx.record("probe", na=reason, probe_id=probe.probe_id, who=probe.who, path=probe.path,
               row_key=probe.row, variant=probe.variant, target=probe.target)
    if follows(world(ctx), probe):
        ctx.record("probe", na=reason, probe_id=f"{probe.probe_id}a", who=probe.who,
                   path="after_redistribute", row_key=probe.row, target=probe.target)


async def _control(ctx: RunContext, w: Wire, c: tuple[str, str, str | None],
                   lane: list[ProbeSpec], absent: str) -> None:
    """A principal's by-id request of one kind, for an id that does not exist."""
    who, path, variant = c
    first = next(p for p in lane if (p.path, p.variant) == (path, variant))
    cred = _cred(w, world(ctx).principals[who], world(ctx).rows[first.row], variant)
    result = await control(ctx, cred, path, absent, first)
    ctx.record("control", result, who=who, path=path, variant=variant)


async def _lane(ctx: RunContext, w: Wire, lane: list[ProbeSpec]) -> None:
    """Probes one after another: a principal whose record a probe may change, or every
    duplicate probe of one row (they write the row's words into its fleet: sent side by
    side, which copy landed first would decide each answer, and two runs of one world would
    disagree)."""
    for probe in lane:
        await _probe(ctx, w, probe)


def _cred(w: Wire, who: PrincipalSpec, row: RowSpec, variant: str | None) -> Credential:
    cred = w.creds[who.key]
    if variant == "named":
        return dataclasses.replace(cred, tenant_id=w.tenant_ids[row.tenant])
    return cred


async def _probe(ctx: RunContext, w: Wire, probe: ProbeSpec) -> None:
    plan = world(ctx)
    who, row = plan.principals[probe.who], plan.rows[probe.row]
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
    if observed(plan, probe) and "agents" not in w.unsupported:
        result, fields = await read_agent(ctx, w, who)
        ctx.record("observe", result, probe_id=probe.probe_id, step="agent", **fields)
    if follows(plan, probe):
        follow = await PROBES["patch"](ctx, w, cred, who, row, probe)
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
    ctx.record("observe", result, probe_id=probe.probe_id, step="row", row_key=row.key,
               after=after)
    return after, owner_key is not None and owner_key == probe.target


async def drift(ctx: RunContext) -> None:
    """The agents again: did any probe change a principal's trust or home fleet?"""
    await census_agents(ctx, "after")


# -- paper-scale probes (paper 7.1's design at N = 2 F^2 K) ----------------------------------


async def paper_probes(ctx: RunContext) -> None:
    paper: PaperPlan | None = ctx.plan.paper
    if paper is None:
        return
    cred = ctx.tenant
    memory_ids: dict[str, str] = {}

    async def write(secret: Any) -> None:
        owner = scoped(f"p{secret.fleet}-a0", ctx.nonce)
        result = await ctx.client.write(cred, {
            "agent_id": owner, "fleet_id": scoped(f"paper-{secret.fleet}", ctx.nonce),
            "visibility": "scope_agent" if secret.scope == "agent" else "scope_team",
            "content": salted(secret.content, ctx.nonce)})
        ctx.record("setup", result, step="paper_write", who=owner, row_key=secret.key)
        if result.status == 201 and body_field(result.body, "id"):
            memory_ids[secret.key] = result.body["id"]

    await ctx.gather([write(s) for s in paper.secrets], desc="paper secrets")
    await asyncio.sleep(ctx.params.settle_s)
    jobs = []
    n = 0
    for prober, fleet in paper.probers():
        for secret in paper.secrets:
            if secret.key not in memory_ids:
                continue
            rel = ("same_agent" if prober == f"p{secret.fleet}-a0" else
                   "same_fleet" if fleet == secret.fleet else "cross_fleet")
            for axis in ("get", "search"):
                jobs.append(_paper_probe(ctx, cred, f"p{n}", axis, prober, fleet, secret,
                                         memory_ids[secret.key], rel))
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
        returned = r.ok and memory_id in ids(body_field(r.body, "items"))
    ctx.record("paper", r, probe_id=probe_id, axis=axis, who=prober, row_key=secret.key,
               relation=rel, visibility="scope_agent" if secret.scope == "agent"
               else "scope_team", returned=returned)


# -- checker ---------------------------------------------------------------------------------


def judge(ctx: RunContext) -> None:
    verdicts = check.judge(ctx.events())
    for verdict in verdicts:
        ctx.record("verdict", **verdict)
    malformed = [v for v in verdicts if v["verdict"] == "error"
                 and (v["what"] or "").startswith("rejected as malformed")]
    if malformed:
        ctx.trace.shortfall(f"{len(malformed)} probes were rejected as malformed by the "
                            f"target (first: {malformed[0]['path']}, {malformed[0]['what']})")


@register
class Matrix(Experiment):
    name = "matrix"
    Params = MatrixParams

    def make_plan(self, params: MatrixParams) -> Plan:
        return make_plan(params)

    def planned_counts(self, plan: Plan, params: MatrixParams) -> dict[str, int]:
        world_ = plan.world
        probes = len(world_.probes) + sum(follows(world_, p) for p in world_.probes)
        paper = 2 * plan.paper.probes() if plan.paper else 0
        agents = sum(p.kind == "agent" for p in world_.principals.values())
        lanes: dict[str, list[ProbeSpec]] = defaultdict(list)
        for p in world_.probes:
            lanes[p.who].append(p)
        return {"probe": probes, "paper": paper, "verdict": probes + paper,
                "census_agent": 2 * (agents + len(world_.tenants)),
                "control": sum(len(controls_of(lane)) for lane in lanes.values()),
                "observe": sum(p.path.startswith("redistribute") or observed(world_, p)
                               for p in world_.probes)}

    def phases(self) -> list[Phase]:
        return [setup_tenants, principals, entities, write_rows, delete_rows, set_trust,
                census, run_probes, drift, paper_probes]

    def checkers(self) -> list[Checker]:
        return [judge]

    def client_params(self, params: MatrixParams) -> ClientParams:
        return unpaced_client(params)
