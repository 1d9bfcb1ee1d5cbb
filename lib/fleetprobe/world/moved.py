"""Agents that moved: rows an agent wrote in its home fleet before the tenant moved it to
another fleet, so its own rows now sit outside its current home (issue 34).

Per trust level, one agent of the first tenant (`A.m<trust>`) is registered in the first
fleet, writes one fresh row per probe there (a victim: no other probe touches it), and is
then re-homed to the second fleet at its planned trust (`PATCH /agents/{id}/trust` with a
`fleet_id`, the wire's move). Each of its rows is probed on GET and on every change path.
The policy (`policy.OWN_OUTSIDE_WRITE_SCOPE`) says whether an agent may still change its own
row outside its home; the checker judges by what the target's census says the agent's home
and the row's fleet were, never by this plan.

Added after the random probes are drawn, so a seed's other probes are what they were before
movers existed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace

from fleetprobe.harness.experiment import RunContext
from fleetprobe.harness.seeding import rng
from fleetprobe.world.plan import (
    CHANGE_PATHS,
    TRUSTS,
    PrincipalSpec,
    ProbeSpec,
    RowSpec,
    World,
    add_victim,
    redistribute_target,
)
from fleetprobe.world.wire import Wire, fleet_id, note_unsupported, world

MOVED_PATHS = ("get", *CHANGE_PATHS)


def mover_key(tenant: str, trust: int) -> str:
    return f"{tenant}.m{trust}"


def add_moved_probes(plan: World, seed: int,
                     trusts: tuple[int, ...] = TRUSTS) -> list[ProbeSpec]:
    """The movers, their rows in the fleet they left, and a probe per row."""
    if len(plan.fleets) < 2:
        return []
    words = rng(seed, "matrix:moved")
    tenant, (old, new) = plan.tenants[0], plan.fleets[:2]
    probes: list[ProbeSpec] = []
    for trust in trusts:
        me = mover_key(tenant, trust)
        plan.principals[me] = PrincipalSpec(me, tenant, "agent", f"{tenant}-m-t{trust}", new,
                                            trust, moved_from=old)
        for path in MOVED_PATHS:
            key = add_victim(plan, me, "scope_team", words, away=old)
            plan.rows[key] = replace(plan.rows[key], via="moved")
            target = redistribute_target(plan, path, plan.principals[me], me)
            probes.append(ProbeSpec(f"m{len(probes)}", me, path, key, target))
    return probes


def first_home(a: PrincipalSpec) -> str | None:
    """Where the agent is registered: a mover in the fleet it will leave."""
    return a.moved_from or a.home


async def write_then_move(ctx: RunContext, w: Wire, rows: list[RowSpec],
                          write: Callable[..., Awaitable[None]]) -> None:
    """Movers write their rows in the fleet they are registered in; then the tenant re-homes
    each (the wire's move: a trust PATCH naming a fleet) at its planned trust."""
    await ctx.gather([write(ctx, w, r, idempotent=False) for r in rows], desc="moved")
    owners = sorted({r.owner for r in rows})
    await ctx.gather([_move(ctx, w, world(ctx).principals[o]) for o in owners], desc="move")


async def _move(ctx: RunContext, w: Wire, a: PrincipalSpec) -> None:
    if a.key not in w.creds:
        return
    result = await ctx.client.patch_trust(w.creds[f"{a.tenant}.tk"], w.agent_ids[a.key],
                                          a.trust, fleet_id(ctx, a.home))
    ctx.record("setup", result, step="move", who=a.key)
    note_unsupported(w, "move", result)
