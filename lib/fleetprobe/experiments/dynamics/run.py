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
How each change kind is applied is `changes`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from pydantic import Field, model_validator

from fleetprobe.client import Credential
from fleetprobe.experiments.dynamics import check
from fleetprobe.experiments.dynamics.changes import CHANGE, PREPARE, generation, now
from fleetprobe.experiments.dynamics.derived import (
    DERIVED_PROBES,
    derived_not_applicable,
)
from fleetprobe.experiments.dynamics.timeline import (
    CHANGES,
    FAMILIES,
    INFLIGHT_CHANGES,
    ChangeSpec,
    DynamicsPlan,
    make_plan,
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
from fleetprobe.world.build import (
    entities,
    principals,
    set_trust,
    setup_tenants,
    write_rows,
)
from fleetprobe.world.census import census
from fleetprobe.world.probes import PROBES
from fleetprobe.world.target import lifted, unpaced_client
from fleetprobe.world.target import not_applicable as world_not_applicable
from fleetprobe.world.wire import Wire, wire

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
        return unpaced_client(params)
