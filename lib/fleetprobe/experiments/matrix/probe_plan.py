"""Which probes a `matrix` run sends (a pure function of the world and the params).

The enumerated matrix (every principal class x every path x every visibility, a status
sweep, a deleted-row sweep and a sweep over the confusable fleet pairs), `random_probes`
drawn from `rng(seed, "matrix:random")`, and the paper-scale plan (paper section 7.1).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from fleetprobe.harness.seeding import rng
from fleetprobe.oracle.policy import VISIBILITIES
from fleetprobe.world.plan import (
    AWAY_PATHS,
    CHANGE_PATHS,
    CONFUSABLE,
    GHOST_PATHS,
    PROBE_PATHS,
    READ_PATHS,
    STATUSES,
    TRUSTS,
    PrincipalSpec,
    ProbeSpec,
    RowSpec,
    World,
    add_ghost,
    add_victim,
    agent_key,
    redistribute_target,
    row_content,
)


def _subject_for(plan: World, path: str, owner: str, visibility: str,
                 words: random.Random, status: str = "active", deleted: bool = False,
                 away: str | None = None) -> str:
    """A row of `owner` with `visibility` fit for `path` (a fresh victim for changes)."""
    if path in CHANGE_PATHS:
        return add_victim(plan, owner, visibility, words, away)
    via = "single" if path == "idempotency" else "bulk"
    for row in plan.world_rows():
        if (row.owner == owner and row.visibility == visibility and row.status == status
                and row.deleted == deleted and row.via == via):
            return row.key
    raise LookupError(f"no {via} row of {owner} with {visibility}/{status}")


def enumerate_probes(plan: World, seed: int, trusts: tuple[int, ...] = TRUSTS,
                     sweeps: bool = True) -> list[ProbeSpec]:
    """Every (principal class x path x visibility) cell once, plus the sweeps."""
    words = rng(seed, "matrix:victims")
    a = plan.tenants[0]
    other = plan.tenants[1] if len(plan.tenants) > 1 else None
    f0, f1 = 0, 1
    probes: list[ProbeSpec] = []
    cells: list[tuple[str, str, str, str, bool]] = []  # who, owner, visibility, status, deleted

    def sibling_of(trust: int) -> str:
        return agent_key(a, f0, 2 if trust == 1 else 1)

    for trust in trusts:
        me = agent_key(a, f0, trust)
        for vis in VISIBILITIES:
            cells += [
                (me, me, vis, "active", False),                          # own
                (me, sibling_of(trust), vis, "active", False),           # same fleet
                (me, agent_key(a, f1, 1), vis, "active", False),         # other (prefix) fleet
                (me, agent_key(a, None, 1), vis, "active", False),       # NULL fleet
                (agent_key(a, None, trust), agent_key(a, f0, 1), vis, "active", False),  # home-less
            ]
    for vis in VISIBILITIES:
        cells += [(f"{a}.tk", agent_key(a, f0, 1), vis, "active", False),
                  (f"{a}.tk", agent_key(a, None, 1), vis, "active", False)]
        if other:
            cells += [(f"{other}.tk", agent_key(a, f0, 1), vis, "active", False),
                      (agent_key(other, f0, 3), agent_key(a, f0, 1), vis, "active", False)]
    # status sweep (own and same fleet) and deleted rows (own, same fleet at trust 3, tenant)
    for status in STATUSES[1:] if sweeps else ():
        for vis in VISIBILITIES:
            cells += [(agent_key(a, f0, 1), agent_key(a, f0, 1), vis, status, False),
                      (agent_key(a, f0, 2), agent_key(a, f0, 1), vis, status, False)]
    for who in (agent_key(a, f0, 1), agent_key(a, f0, 3), f"{a}.tk") if sweeps else ():
        for vis in VISIBILITIES:
            cells.append((who, agent_key(a, f0, 1), vis, "active", True))
    # confusable fleet names: trust 1 of one fleet against the other's team row, both ways
    index = {name: i for i, name in enumerate(plan.fleets)}
    for x, y in CONFUSABLE if sweeps else ():
        if x in index and y in index:
            cells += [(agent_key(a, index[x], 1), agent_key(a, index[y], 1), "scope_team",
                       "active", False),
                      (agent_key(a, index[y], 1), agent_key(a, index[x], 1), "scope_team",
                       "active", False)]
    n = 0
    for who, owner, vis, status, deleted in cells:
        sweep = status != "active" or deleted
        for path in PROBE_PATHS:
            if sweep and path not in READ_PATHS:
                continue
            if path == "whoami" and plan.principals[who].kind != "agent":
                continue
            row = _subject_for(plan, path, owner, vis, words, status, deleted)
            variant = _variant(plan.principals[who], plan.rows[row], n)
            target = redistribute_target(plan, path, plan.principals[who], owner)
            probes.append(ProbeSpec(f"e{n}", who, path, row, target, variant))
            n += 1
    # an agent's own row outside its home fleet (written there at trust 3)
    away = plan.fleets[f1] if len(plan.fleets) > 1 else None
    for trust in trusts if away else ():
        me = agent_key(a, f0, trust)
        for path in AWAY_PATHS:
            row = _subject_for(plan, path, me, "scope_team", words, away=away)
            probes.append(ProbeSpec(f"e{n}", me, path, row))
            n += 1
    # agent ids nobody registered, a fresh one per probe: a fleet row and a fleet-less row
    for owner in (agent_key(a, f0, 1), agent_key(a, None, 1)):
        for vis in VISIBILITIES:
            for path in GHOST_PATHS:
                ghost = add_ghost(plan, a)
                row = _subject_for(plan, path, owner, vis, words)
                probes.append(ProbeSpec(f"e{n}", ghost, path, row))
                n += 1
    return probes


def _variant(who: PrincipalSpec, row: RowSpec, n: int) -> str | None:
    if who.tenant == row.tenant:
        return None
    return "named" if n % 2 == 0 else "own"


def random_probes(plan: World, seed: int, count: int,
                  cross_tenant_share: float) -> list[ProbeSpec]:
    """`count` probes drawn from the seed: principal, path, subject row, target, variant."""
    draw = rng(seed, "matrix:random")
    words = rng(seed, "matrix:random-victims")
    principals = sorted(k for k, p in plan.principals.items() if p.registered)
    world = {t: [r.key for r in plan.world_rows(t)] for t in plan.tenants}
    probes = []
    for i in range(count):
        who = plan.principals[draw.choice(principals)]
        path = draw.choice(PROBE_PATHS)
        if path == "whoami" and who.kind != "agent":
            path = "get"
        tenant = who.tenant
        if len(plan.tenants) > 1 and draw.random() < cross_tenant_share:
            tenant = draw.choice([t for t in plan.tenants if t != who.tenant])
        if path in CHANGE_PATHS:
            agents = plan.agents(tenant)
            owner = (who.key if who.kind == "agent" and tenant == who.tenant
                     and draw.random() < 0.25 else draw.choice(agents).key)
            row = add_victim(plan, owner, draw.choice(VISIBILITIES), words)
        else:
            pool = world[tenant]
            if path in ("bulk_attempt", "idempotency"):
                via = "bulk" if path == "bulk_attempt" else "single"
                pool = [k for k in pool if plan.rows[k].via == via]
            if who.kind == "agent" and tenant == who.tenant and draw.random() < 0.2:
                pool = [k for k in pool if plan.rows[k].owner == who.key] or pool
            row = draw.choice(pool)
        target = redistribute_target(plan, path, who, plan.rows[row].owner)
        probes.append(ProbeSpec(f"r{i}", who.key, path, row, target,
                                _variant(who, plan.rows[row], i)))
    return probes


# -- the paper's probe design at scale (paper 7.1) -----------------------------------------


@dataclass(frozen=True)
class PaperSecret:
    key: str
    fleet: int
    scope: str  # fleet | agent
    content: str


@dataclass(frozen=True)
class PaperPlan:
    fleets: int
    agents_per_fleet: int
    secrets: tuple[PaperSecret, ...]

    def probers(self) -> list[tuple[str, int]]:
        return [(f"p{f}-a{a}", f) for f in range(self.fleets)
                for a in range(self.agents_per_fleet)]

    def probes(self) -> int:
        return len(self.probers()) * len(self.secrets)


def paper_plan(seed: int, fleets: int, agents_per_fleet: int) -> PaperPlan:
    words = rng(seed, "matrix:paper")
    secrets = tuple(
        PaperSecret(f"s{f}{scope[0]}", f, scope, row_content(words, f"s{f}{scope[0]}"))
        for f in range(fleets) for scope in ("fleet", "agent"))
    return PaperPlan(fleets, agents_per_fleet, secrets)
