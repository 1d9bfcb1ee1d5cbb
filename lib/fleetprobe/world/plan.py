"""The seeded world the `matrix` and `dynamics` experiments probe (a pure function of the
seed and the sizes).

World, per tenant (tenants `A`, `B`, ... share the same fleet names, so a name collision
across tenants is part of the test):

- fleets whose names are prefixes of one another (`fleet-1`/`fleet-10`, `acme`/`acme-corp`),
  carry characters that are wildcards somewhere (`fleet_1` for SQL `_`, `fleet%` for `%`),
  differ only by case (`FLEET-1`) or by a Cyrillic look-alike (`асme`);
- one agent per trust level 0-3 homed in every fleet, plus four home-less agents;
- per agent, one row of every visibility written through bulk and one through a single write
  carrying an Idempotency-Key; per fleet (and for the fleet-less rows) the trust-1 agent also
  owns a row of every other status, soft-deleted rows and a three-row supersession chain on
  its fleet's entity; every non-victim row is linked to its fleet's entity;
- per agent of the first fleet, one row it wrote into the second fleet while it held trust 3
  (`away`): its own row outside its home fleet;
- agents that moved (`A.m<trust>`, moved.py): rows written in the fleet an agent left;
- victim rows: one fresh row per probe that changes a row, so every change meets a row no
  other probe has touched;
- every row's content is its own words (no template shared between rows), so a search for a
  row's content can only miss it for a governance reason, never for ranking;
- unregistered agents (`A.g0`, ...): agent ids nobody ever registered, one per probe that
  speaks as one, so each such probe meets an id the target has never seen.

Which probes a matrix run sends is `fleetprobe.experiments.matrix.probe_plan`; the rng
streams keep their `matrix:` names so a seed draws the world it always drew.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from fleetprobe.harness.seeding import rng, spelled
from fleetprobe.oracle.policy import PATHS, VISIBILITIES

FLEET_NAMES = ("fleet-1", "fleet-10", "acme", "acme-corp", "fleet_1", "fleet%", "FLEET-1",
               "\u0430\u0441me")  # the last is Cyrillic a + es + Latin "me": looks like acme
CONFUSABLE = (("fleet-1", "fleet-10"), ("acme", "acme-corp"), ("fleet-1", "fleet_1"),
              ("fleet-10", "fleet%"), ("fleet-1", "FLEET-1"), ("acme", "\u0430\u0441me"))
STATUSES = ("active", "pending", "confirmed", "cancelled", "outdated", "conflicted",
            "archived", "deleted")
CHAIN_OBJECTS = ("alpha", "bravo", "charlie")
CHAIN_PREDICATE = "runs_on"  # single-valued: a later object supersedes the earlier row
TRUSTS = (0, 1, 2, 3)

READ_PATHS = tuple(p for p, r in PATHS.items() if r.kind in ("read", "identity"))
REVEAL_PATHS = tuple(p for p, r in PATHS.items() if r.kind == "reveal")
CHANGE_PATHS = ("patch", "patch_content", "patch_status", "delete", "redistribute",
                "redistribute_x")
# an agent's own row outside its home fleet: the change paths that meet one
AWAY_PATHS = ("patch", "patch_content", "patch_status", "delete")
# what an agent id nobody registered is sent on
GHOST_PATHS = ("get", "list", "search", "search_fleet", "recall", "recall_fleet", "write",
               "bulk_write")
WRITE_PATHS = tuple(p for p, r in PATHS.items() if r.kind == "write")
# after_redistribute is a follow-up of each sibling redistribute, never drawn on its own
PROBE_PATHS = READ_PATHS + REVEAL_PATHS + CHANGE_PATHS + WRITE_PATHS


@dataclass(frozen=True)
class PrincipalSpec:
    key: str  # "A.tk" (tenant key), "A.f1t2" (fleet 1, trust 2), "A.ht0" (home-less, trust 0)
    tenant: str
    kind: str  # tenant | agent
    name: str | None = None  # plan-level agent name (scoped with the nonce on the wire)
    home: str | None = None  # plan-level fleet name
    trust: int = 0
    registered: bool = True  # False: an agent id the run never registers ("A.g3")
    moved_from: str | None = None  # registered in this fleet, then moved to `home` (moved.py)


@dataclass(frozen=True)
class RowSpec:
    key: str
    tenant: str
    owner: str  # principal key
    visibility: str
    status: str = "active"
    deleted: bool = False
    via: str = "bulk"  # bulk | single | chain
    victim: bool = False
    linked: bool = True
    chain: str | None = None
    pos: int = 0
    content: str = ""
    away: str | None = None  # written into this fleet, not the owner's home (at trust 3, or
    # before the owner moved: via "moved")


@dataclass(frozen=True)
class ProbeSpec:
    probe_id: str
    who: str
    path: str
    row: str
    target: str | None = None  # redistribute: the receiving agent (principal key)
    variant: str | None = None  # cross-tenant: "named" (victim's tenant_id) or "own"


@dataclass
class World:
    tenants: tuple[str, ...]
    fleets: tuple[str, ...]
    principals: dict[str, PrincipalSpec]
    rows: dict[str, RowSpec]
    probes: list[ProbeSpec] = field(default_factory=list)
    victims: dict[str, int] = field(default_factory=dict)  # tenant -> victims so far
    ghosts: dict[str, int] = field(default_factory=dict)  # tenant -> unregistered ids so far

    def agents(self, tenant: str | None = None) -> list[PrincipalSpec]:
        """The registered agents (an unregistered id is never a redistribute target)."""
        return [p for p in self.principals.values() if p.kind == "agent" and p.registered
                and (tenant is None or p.tenant == tenant)]

    def world_rows(self, tenant: str | None = None) -> list[RowSpec]:
        return [r for r in self.rows.values()
                if not r.victim and (tenant is None or r.tenant == tenant)]


def tenant_names(n: int) -> tuple[str, ...]:
    return tuple(chr(ord("A") + i) for i in range(n))


def agent_key(tenant: str, fleet_index: int | None, trust: int) -> str:
    return f"{tenant}.ht{trust}" if fleet_index is None else f"{tenant}.f{fleet_index}t{trust}"


def named_fleets(path: str, home: str | None, row_fleet: str | None,
                 fleets: tuple[str, ...]) -> list[str]:
    """The fleets a fleet-scoped probe names (shared by the phase and the checker)."""
    first = row_fleet or home or fleets[0]
    if not path.endswith("_fleets"):
        return [first]
    own = home or fleets[0]
    if own == first:
        own = next(f for f in fleets if f != first)
    return [own, first]


def make_world(seed: int, n_tenants: int, n_fleets: int) -> World:
    tenants = tenant_names(n_tenants)
    fleets = FLEET_NAMES[:n_fleets]
    principals: dict[str, PrincipalSpec] = {}
    rows: dict[str, RowSpec] = {}
    words = rng(seed, "matrix:content")
    for t in tenants:
        principals[f"{t}.tk"] = PrincipalSpec(f"{t}.tk", t, "tenant")
        for fi, fleet in enumerate((*fleets, None)):
            for trust in TRUSTS:
                key = agent_key(t, None if fleet is None else fi, trust)
                name = f"{t}-h-t{trust}" if fleet is None else f"{t}-f{fi}-t{trust}"
                principals[key] = PrincipalSpec(key, t, "agent", name, fleet, trust)
        def add(owner: str, visibility: str, t: str = t, **kw: object) -> None:
            key = f"{t}.r{sum(r.tenant == t for r in rows.values())}"
            rows[key] = RowSpec(key, t, owner, visibility, content=row_content(words, key), **kw)

        for p in [p for p in principals.values() if p.tenant == t and p.kind == "agent"]:
            for vis in VISIBILITIES:
                add(p.key, vis)
                add(p.key, vis, via="single")
            if p.home == fleets[0] and len(fleets) > 1:
                add(p.key, "scope_team", via="away", away=fleets[1], linked=False)
            if p.trust != 1:
                continue
            for status in STATUSES[1:]:
                for vis in VISIBILITIES:
                    add(p.key, vis, status=status)
            for vis in VISIBILITIES:
                add(p.key, vis, deleted=True)
            chain = f"{p.key}.c"
            for pos, vis in enumerate(("scope_team", "scope_agent", "scope_org")):
                add(p.key, vis, via="chain", chain=chain, pos=pos)
    return World(tenants, fleets, principals, rows)


CONTENT_WORDS = 24


def row_content(words: random.Random, key: str) -> str:
    """A row's own words: 24 letters-only pseudo-words drawn for it (no identifier-like token
    that would switch off MemClaw's near-duplicate gate), so no two rows share more than the
    opening word and the run's salt. A search for a row's content then finds that row first
    under any word-based embedder or keyword ranking: a miss can only be governance. 24 words
    keep one extra word above the 0.97 near-duplicate threshold."""
    return "Matrix " + " ".join(spelled(words.getrandbits(16), 4)
                                for _ in range(CONTENT_WORDS))


def add_victim(plan: World, owner: str, visibility: str, words: random.Random,
               away: str | None = None) -> str:
    tenant = plan.principals[owner].tenant
    n = plan.victims.get(tenant, 0)
    plan.victims[tenant] = n + 1
    key = f"{tenant}.v{n}"
    plan.rows[key] = RowSpec(key, tenant, owner, visibility, victim=True, linked=False,
                             content=row_content(words, key), away=away,
                             via="away" if away else "bulk")
    return key


def add_ghost(plan: World, tenant: str) -> str:
    """A fresh agent id nobody registers: judged as an unapproved agent (trust 0, no home)."""
    n = plan.ghosts.get(tenant, 0)
    plan.ghosts[tenant] = n + 1
    key = f"{tenant}.g{n}"
    plan.principals[key] = PrincipalSpec(key, tenant, "agent", f"{tenant}-ghost-{n}", None, 0,
                                         registered=False)
    return key


def redistribute_target(plan: World, path: str, who: PrincipalSpec, row_owner: str) -> str | None:
    """Redistribute: a sibling of the requester (same home), or an agent of another fleet."""
    if path not in ("redistribute", "redistribute_x"):
        return None
    requester = who if who.kind == "agent" else plan.principals[row_owner]
    agents = plan.agents(requester.tenant)
    if path == "redistribute":
        pool = [a for a in agents if a.home == requester.home and a.key != requester.key
                and a.trust >= 1]
    else:
        pool = [a for a in agents if a.home != requester.home and a.home is not None
                and a.trust >= 1]
    return sorted(pool, key=lambda a: (a.trust != 1, a.key))[0].key
