"""The `dynamics` plan: the shared seeded world plus a timeline of changes (a pure function
of the params).

The world is `fleetprobe.world.plan.make_world` (tenant `A`; agents at every trust level in
each fleet and home-less; rows of every visibility). Each change gets subjects of its own, so
no change meets a principal or row another change touched: a subject agent `A.d<i>` (its home
and trust as the change needs) with its own rows, or a subject row `A.x<i>` of an existing
agent. Each change names the probes sent before, while and after it: (prober, path, row)
triples over the world's probe paths (`fleetprobe.world.probes`), each on a path that can
still reach what changed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from fleetprobe.harness.seeding import rng
from fleetprobe.world.plan import (
    PrincipalSpec,
    ProbeSpec,
    RowSpec,
    World,
    agent_key,
    make_world,
    row_content,
)

# change kinds, in the order the timeline applies them
AGENT_CHANGES = ("revoke_key", "delete_agent", "recreate_agent", "trust_3_1", "trust_2_0",
                 "trust_1_3", "rehome")
ROW_CHANGES = ("soft_delete", "soft_delete_single", "expire", "redistribute")
INFLIGHT_CHANGES = ("inflight_delete", "inflight_revoke")
# a row stops being current: superseded by a later row (MemClaw's RDF path: same subject and
# single-valued predicate, another object; its semantic path: a contradicting sentence), or
# past its `ts_valid_end` (MemClaw's lifecycle job `archive-expired` outdates it); and a row
# deleted after artefacts were derived from it (a supersession record, a persisted insight)
STALE_CHANGES = ("supersede_rdf", "supersede_semantic", "valid_end")
DERIVED_CHANGES = ("soft_delete_derived",)
CHANGES = AGENT_CHANGES + ROW_CHANGES + INFLIGHT_CHANGES + STALE_CHANGES + DERIVED_CHANGES
# the single-valued predicate (MemClaw's SINGLE_VALUE_PREDICATES) of each change's triples;
# none is the matrix's chain predicate, so no change's rows supersede the world's
PREDICATE = {"supersede_rdf": "version", "soft_delete_derived": "deadline"}

# path families (the timeline figure's rows)
FAMILIES = {
    "get": "by id", "contradictions": "by id", "list": "list", "list_deleted": "list",
    "search": "search", "recall": "search", "entity": "derived", "dup_exact": "derived",
    "bulk_attempt": "derived", "idempotency": "derived", "write": "write",
    "bulk_write": "write", "contradiction_record": "derived", "insight": "derived",
    "recall_summary": "derived",
}
OWN_READS = ("get", "list", "search", "recall")
# what a credential with no grant is tried on: reads of its own private row, writes
GRANT_PATHS = (*OWN_READS, "write", "bulk_write")
DERIVED = ("entity", "dup_exact", "bulk_attempt")


@dataclass(frozen=True)
class ChangeSpec:
    change_id: str
    kind: str
    subject: str  # principal key (agent changes) or row key (row changes)
    probes: tuple[ProbeSpec, ...] = ()
    trust: int | None = None  # trust_*: the new trust; recreate: the trust it is re-made at
    fleet: str | None = None  # rehome: the new home fleet (plan name)
    target: str | None = None  # redistribute: the receiving agent
    # supersede_*: the later row that supersedes the subject; soft_delete_derived: the
    # earlier row the subject superseded (its /contradictions names the subject)
    partner: str | None = None
    # soft_delete_derived: the agent that generates the insight naming the subject (trust 2)
    analyst: str | None = None


@dataclass
class DynamicsPlan:
    world: World
    changes: list[ChangeSpec] = field(default_factory=list)
    # rows written during the timeline (expiring rows), not by the world build
    late_rows: tuple[str, ...] = ()


def make_plan(seed: int, fleets: int, kinds: tuple[str, ...]) -> DynamicsPlan:
    world = make_world(seed, 1, fleets)
    plan = DynamicsPlan(world)
    words = rng(seed, "dynamics:content")
    f0, f1 = world.fleets[0], world.fleets[1]
    a = world.tenants[0]
    sibling, sibling2 = agent_key(a, 0, 1), agent_key(a, 0, 2)
    other_fleet_row = _row_of(world, agent_key(a, 1, 1), "scope_team")
    home_row = _row_of(world, sibling, "scope_team")
    for i, kind in enumerate(k for k in CHANGES if k in kinds):
        cid = f"c{i}"
        if kind in AGENT_CHANGES or kind in INFLIGHT_CHANGES:
            trust = {"trust_3_1": 3, "trust_2_0": 2, "trust_1_3": 1, "rehome": 1,
                     "recreate_agent": 1}.get(kind, 2)
            subject = _subject_agent(plan, i, f0, trust)
            own = _add_row(plan, words, subject, "scope_agent", "single")
            team = _add_row(plan, words, subject, "scope_team", "bulk")
            probes = _agent_probes(kind, cid, subject, own, team, other_fleet_row, home_row)
            new_trust = {"trust_3_1": 1, "trust_2_0": 0, "trust_1_3": 3,
                         "recreate_agent": 1}.get(kind)
            plan.changes.append(ChangeSpec(cid, kind, subject, probes, trust=new_trust,
                                           fleet=f1 if kind == "rehome" else None))
            continue
        if kind in STALE_CHANGES or kind in DERIVED_CHANGES:
            plan.changes.append(_time_change(plan, words, kind, cid, sibling, sibling2,
                                             f"{a}.tk"))
            continue
        via = "single" if kind in ("soft_delete_single", "expire") else "bulk"
        vis = "scope_agent" if kind == "redistribute" else "scope_team"
        # a redistributed row's owner holds trust 3: it may hand its row on under every profile
        owner = _subject_agent(plan, i, f0, 3) if kind == "redistribute" else sibling
        row = _add_row(plan, words, owner, vis, via, linked=kind != "redistribute",
                       late=kind == "expire")
        probes = _row_probes(kind, cid, row, owner, sibling2, f"{a}.tk", via)
        plan.changes.append(ChangeSpec(cid, kind, row, probes,
                                       target=sibling2 if kind == "redistribute" else None))
    plan.late_rows = tuple(k for k, r in world.rows.items() if r.via == "late")
    world.probes = [p for c in plan.changes for p in c.probes]
    return plan


def _time_change(plan: DynamicsPlan, words: random.Random, kind: str, cid: str, owner: str,
                 other: str, tenant: str) -> ChangeSpec:
    """Two late rows of one owner in its fleet: an earlier and a later one. For a stale
    change the subject is the earlier row (the later one supersedes it; for `valid_end` it is
    not written); for `soft_delete_derived` the subject is the later row, deleted once a
    supersession record and an insight name it."""
    first = _add_row(plan, words, owner, "scope_team", "single", late=True)
    second = _add_row(plan, words, owner, "scope_team", "single", late=True)
    if kind in STALE_CHANGES:
        triples = [(owner, p, first) for p in ("get", "contradictions", "list", "search",
                                               "recall", "recall_summary")]
        triples += [(other, p, first) for p in ("get", "search")] + [(tenant, "search", first)]
        return ChangeSpec(cid, kind, first, _probes(cid, triples),
                          partner=None if kind == "valid_end" else second)
    triples = [(owner, p, second) for p in ("get", "search", "recall_summary",
                                            "contradiction_record", "insight")]
    triples += [(other, p, second) for p in ("search", "contradiction_record", "insight")]
    triples += [(tenant, "insight", second)]
    return ChangeSpec(cid, kind, second, _probes(cid, triples), partner=first, analyst=other)


def _row_of(world: World, owner: str, visibility: str) -> str:
    return next(r.key for r in world.world_rows() if r.owner == owner
                and r.visibility == visibility and r.via == "bulk" and r.status == "active"
                and not r.deleted)


def _subject_agent(plan: DynamicsPlan, i: int, home: str, trust: int) -> str:
    tenant = plan.world.tenants[0]
    key = f"{tenant}.d{i}"
    plan.world.principals[key] = PrincipalSpec(key, tenant, "agent", f"{tenant}-d{i}", home,
                                               trust)
    return key


def _add_row(plan: DynamicsPlan, words: random.Random, owner: str, visibility: str,
             via: str, linked: bool = False, late: bool = False) -> str:
    tenant = plan.world.principals[owner].tenant
    key = f"{tenant}.x{sum(k.startswith(f'{tenant}.x') for k in plan.world.rows)}"
    plan.world.rows[key] = RowSpec(key, tenant, owner, visibility, via="late" if late else via,
                                   victim=True, linked=linked, content=row_content(words, key))
    return key


def _probes(cid: str, triples: list[tuple[str, str, str]]) -> tuple[ProbeSpec, ...]:
    return tuple(ProbeSpec(f"{cid}.{n}", who, path, row)
                 for n, (who, path, row) in enumerate(triples))


def _agent_probes(kind: str, cid: str, subject: str, own: str, team: str, other_fleet_row: str,
                  home_row: str) -> tuple[ProbeSpec, ...]:
    """The subject's own paths to what its grant reached, before and after the change."""
    if kind in ("revoke_key", "delete_agent", "recreate_agent") or kind in INFLIGHT_CHANGES:
        triples = [(subject, p, own) for p in GRANT_PATHS]
        triples += [(subject, "get", home_row), (subject, "bulk_attempt", team)]
    elif kind == "rehome":  # from its old fleet's rows to its new fleet's
        triples = [(subject, p, r) for r in (home_row, other_fleet_row)
                   for p in ("get", "search", "write")]
    else:  # trust: another fleet's team row (read rung 2, write rung 3), its own fleet (1)
        triples = [(subject, p, other_fleet_row) for p in ("get", "search", "recall", "write",
                                                           "bulk_write")]
        triples += [(subject, "write", team)]
    return _probes(cid, triples)


def _row_probes(kind: str, cid: str, row: str, owner: str, sibling: str, tenant: str,
                via: str) -> tuple[ProbeSpec, ...]:
    """Every path that can reach the row or what was derived from it, by its owner, a sibling
    of its fleet and the tenant key."""
    if kind == "redistribute":  # a private row handed from its owner to a sibling (list
        # is left out: its probe filters by the planned owner, which the change replaces)
        return _probes(cid, [(w, p, row) for w in (owner, sibling)
                             for p in ("get", "search", "recall")])
    replay = "idempotency" if via == "single" else "bulk_attempt"
    triples = [(owner, p, row) for p in (*OWN_READS, "entity", "dup_exact", replay)]
    triples += [(sibling, p, row) for p in ("get", "search", "entity", "dup_exact")]
    triples += [(tenant, p, row) for p in ("get", "list", "search")]
    return _probes(cid, triples)
