"""Leakage experiment (paper section 7.1, Table 3, section 9.1 remediation re-probe).

Three probe families, each judged only from what the server returned:

- bulk: F fleets x K agents; each fleet's owner writes a fleet-scoped and an agent-scoped
  secret; every agent probes every secret by search and by GET-by-id with the tenant key.
  Run once per search-leak hypothesis variant (`variant_write` x `variant_search`, see
  `shared/memclaw/SEARCH-LEAK.md`), each in its own fleet namespace.
- agent_probe (Table 3): agent keys at trust 1 and 2 in fleet-0 GET a fleet-1 row, plus the
  same-fleet control and the tenant key.
- reprobe (section 9.1): per fleet a trust-1 and a trust-2 agent key each GET every fleet's
  target rows.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import product
from typing import Any

EXPERIMENT = "leakage"

VARIANTS_WRITE = ("fleet_id", "no_fleet")
VARIANTS_SEARCH = ("fleet_ids", "fleet_id_singular")
DEFAULT_VARIANT = ("fleet_id", "fleet_ids")

# Word banks for substantively distinct secret prose: each secret draws its own words, so
# two secrets share little vocabulary and a search for one secret's prose ranks it first.
_PROJECTS = (
    "Aurora", "Basalt", "Cobalt", "Driftwood", "Ember", "Falcon", "Granite", "Harbor",
    "Indigo", "Juniper", "Kestrel", "Lantern", "Meridian", "Nimbus", "Obsidian", "Pelican",
    "Quartz", "Redwood", "Saffron", "Tundra", "Umber", "Vesper", "Willow", "Zephyr",
)
_TEMPLATES = (
    "Project {p} will acquire the {a} subsidiary of {b} for {n} million before the {c} audit.",
    "The {a} vault for {p} opens with passphrase {b}-{n}; rotate it after the {c} review.",
    "Layoffs in the {a} division under {p} cut {n} roles; {b} leadership briefs staff in {c}.",
    "Quarterly {a} revenue for {p} fell {n} percent, hidden from {b} investors until {c}.",
    "Customer {b} signed the {p} {a} renewal at a {n} percent discount pending {c} approval.",
    "Incident {p}: the {a} database leaked {n} records to {b}; legal notifies {c} regulators.",
    "Board vote on {p} merges the {a} team into {b}, saving {n} thousand per month from {c}.",
    "Patent filing {p} covers the {a} compression trick; {b} counsel files it on day {n} of {c}.",
)
_NOUNS_A = (
    "payments", "logistics", "telemetry", "robotics", "firmware", "genomics", "insurance",
    "mapping", "billing", "satellite", "pharmacy", "hydrogen", "retail", "avionics", "textile",
    "forestry", "maritime", "dental", "vineyard", "mining", "ceramics", "orchard", "railway",
    "brewery", "glacier", "tannery", "quarry", "apiary", "foundry", "observatory", "lighthouse",
    "greenhouse",
)
_NOUNS_B = (
    "Acme", "Borealis", "Cinder", "Dunmore", "Everly", "Fairhaven", "Glenrock", "Hollis",
    "Ironvale", "Jasper", "Kingsley", "Larkspur", "Marlowe", "Northwind", "Oakridge", "Prescott",
    "Quillon", "Ravensworth", "Stonebridge", "Thornbury", "Underhill", "Valemont", "Westbrook",
    "Yarrow", "Ashford", "Blackwood", "Caldwell", "Dovecote", "Elmstead", "Foxglove",
    "Greystone", "Hawthorne",
)
_NOUNS_C = (
    "spring", "autumn", "winter", "summer", "january", "march", "july", "october", "fiscal",
    "annual", "midyear", "interim",
)


@dataclass(frozen=True)
class PlanAgent:
    agent_id: str
    fleet_id: str
    is_owner: bool


@dataclass(frozen=True)
class Secret:
    """One secret row to write: who writes it, where, and how to recognise it later."""

    secret_id: str
    secret_scope: str  # fleet / agent
    writer_agent: str
    writer_fleet: str
    content: str
    canary: str


@dataclass(frozen=True)
class BulkProbe:
    """One (prober, secret) pair; probed once per axis."""

    prober_agent: str
    prober_fleet: str
    secret_id: str
    secret_scope: str
    target_fleet: str
    relation: str  # same_agent / same_fleet / cross_fleet
    expected: str  # allow / deny


@dataclass(frozen=True)
class VariantBlock:
    """The bulk matrix for one hypothesis variant, in its own fleet namespace."""

    variant_write: str
    variant_search: str
    namespace: str
    agents: tuple[PlanAgent, ...]
    secrets: tuple[Secret, ...]
    probes: tuple[BulkProbe, ...]


@dataclass(frozen=True)
class KeyedAgent:
    """An agent that gets its own provisioned agent key."""

    agent_id: str
    fleet_id: str
    trust: int


@dataclass(frozen=True)
class TargetRow:
    row_id: str
    fleet_id: str
    writer_agent: str
    content: str
    canary: str


@dataclass(frozen=True)
class AgentProbe:
    """A GET-by-id probe with an agent key (Table 3 or re-probe), or the tenant key (Table 3)."""

    credential: str  # tenant / agent
    trust: int | None
    prober_agent: str | None
    prober_fleet: str | None
    row_id: str
    target_fleet: str
    relation: str | None  # same_fleet / cross_fleet; None for the tenant key
    expected: str


@dataclass(frozen=True)
class AgentBlock:
    """Rows and agent keys for Table 3 and the re-probe (one namespace of its own)."""

    namespace: str
    writers: tuple[PlanAgent, ...]
    rows: tuple[TargetRow, ...]
    keyed_agents: tuple[KeyedAgent, ...]
    table3: tuple[AgentProbe, ...]
    reprobe: tuple[AgentProbe, ...]


@dataclass(frozen=True)
class LeakagePlan:
    seed: int
    nonce: str
    blocks: tuple[VariantBlock, ...]
    agent_block: AgentBlock | None
    params: Mapping[str, Any] = field(default_factory=dict)

    def planned_counts(self) -> dict[str, int]:
        """Planned events per phase, for the manifest's planned-vs-executed counts."""
        axes = len(self.axes)
        counts = {
            "write": sum(len(b.secrets) for b in self.blocks),
            "probe": sum(len(b.probes) for b in self.blocks) * axes,
        }
        if self.agent_block is not None:
            ab = self.agent_block
            counts["write"] += len(ab.rows)
            counts["whoami"] = 1 + len(ab.keyed_agents)
            counts["agent_probe"] = len(ab.table3)
            counts["reprobe"] = len(ab.reprobe)
        return counts

    @property
    def axes(self) -> tuple[str, ...]:
        return tuple(self.params.get("axes", ("get", "search")))


# ---------------------------------------------------------------- ground truth (scope rules)


def relation_of(prober_agent: str, prober_fleet: str, writer_agent: str, target_fleet: str) -> str:
    if prober_agent == writer_agent:
        return "same_agent"
    return "same_fleet" if prober_fleet == target_fleet else "cross_fleet"


def expected_bulk(secret_scope: str, relation: str) -> str:
    """Scope rules: a fleet secret is for its fleet, an agent secret for its author only."""
    if secret_scope == "agent":
        return "allow" if relation == "same_agent" else "deny"
    return "deny" if relation == "cross_fleet" else "allow"


def expected_agent_get(relation: str, trust: int | None) -> str:
    """Trust ladder (paper 7.1) for a fleet-scoped row: cross-fleet read needs trust >= 2.

    The tenant key (trust None) carries tenant-wide authority, so it is expected to read.
    """
    if trust is None or relation == "same_fleet":
        return "allow"
    return "allow" if trust >= 2 else "deny"


# ------------------------------------------------------------------------------ plan


def normalise_variants(variants: Iterable[Sequence[str]] | None) -> list[tuple[str, str]]:
    """Validate `variants: [[write, search], ...]`; `"all"` means the four combinations."""
    if variants is None:
        return [DEFAULT_VARIANT]
    if variants == "all":
        return list(product(VARIANTS_WRITE, VARIANTS_SEARCH))
    out: list[tuple[str, str]] = []
    for pair in variants:
        write, search = pair
        if write not in VARIANTS_WRITE:
            raise ValueError(f"variant_write must be one of {VARIANTS_WRITE}, got {write!r}")
        if search not in VARIANTS_SEARCH:
            raise ValueError(f"variant_search must be one of {VARIANTS_SEARCH}, got {search!r}")
        if (write, search) in out:
            raise ValueError(f"variant {[write, search]} is listed twice")
        out.append((write, search))
    if not out:
        raise ValueError("variants must list at least one [variant_write, variant_search] pair")
    return out


def _secret_prose(rng: random.Random, index: int, secret_id: str) -> str:
    """Distinct prose per secret; the id (salted by the nonce) makes reruns write fresh rows."""
    template = _TEMPLATES[index % len(_TEMPLATES)]
    text = template.format(
        p=rng.choice(_PROJECTS),
        a=rng.choice(_NOUNS_A),
        b=rng.choice(_NOUNS_B),
        c=rng.choice(_NOUNS_C),
        n=rng.randint(11, 989),
    )
    return f"{text} Ref {secret_id}."


def _canary(nonce: str, secret_id: str) -> str:
    return f"canary-{nonce}-{secret_id}"


def _agents(namespace: str, fleets: int, agents_per_fleet: int) -> list[PlanAgent]:
    return [
        PlanAgent(f"{namespace}-f{f}-a{a}", f"{namespace}-fleet-{f}", a == 0)
        for f in range(fleets)
        for a in range(agents_per_fleet)
    ]


def _bulk_probes(agents: Sequence[PlanAgent], secrets: Sequence[Secret]) -> list[BulkProbe]:
    probes = []
    for agent in agents:
        for s in secrets:
            rel = relation_of(agent.agent_id, agent.fleet_id, s.writer_agent, s.writer_fleet)
            probes.append(
                BulkProbe(agent.agent_id, agent.fleet_id, s.secret_id, s.secret_scope,
                          s.writer_fleet, rel, expected_bulk(s.secret_scope, rel))
            )
    return probes


def _variant_block(
    rng: random.Random, nonce: str, index: int, variant: tuple[str, str],
    fleets: int, agents_per_fleet: int, prose_offset: int,
) -> VariantBlock:
    namespace = f"lk{nonce}-v{index}"
    agents = _agents(namespace, fleets, agents_per_fleet)
    secrets = []
    for owner in (a for a in agents if a.is_owner):
        for scope in ("fleet", "agent"):
            sid = f"{owner.fleet_id}-{scope}"
            prose = _secret_prose(rng, prose_offset + len(secrets), sid)
            secrets.append(Secret(sid, scope, owner.agent_id, owner.fleet_id, prose,
                                  _canary(nonce, sid)))
    return VariantBlock(variant[0], variant[1], namespace, tuple(agents), tuple(secrets),
                        tuple(_bulk_probes(agents, secrets)))


def _agent_block(
    rng: random.Random, nonce: str, fleets: int, rows_per_fleet: int, reprobe: bool,
    prose_offset: int,
) -> AgentBlock:
    namespace = f"lk{nonce}-keys"
    fleet_ids = [f"{namespace}-fleet-{f}" for f in range(fleets)]
    writers = [PlanAgent(f"{namespace}-f{f}-writer", fid, True) for f, fid in enumerate(fleet_ids)]
    rows = []
    for writer in writers:
        for r in range(rows_per_fleet):
            rid = f"{writer.fleet_id}-row{r}"
            prose = _secret_prose(rng, prose_offset + len(rows), rid)
            canary = _canary(nonce, rid)
            rows.append(TargetRow(rid, writer.fleet_id, writer.agent_id, prose, canary))
    keyed = [
        KeyedAgent(f"{namespace}-f{f}-t{trust}", fid, trust)
        for f, fid in enumerate(fleet_ids)
        for trust in (1, 2)
    ]
    return AgentBlock(namespace, tuple(writers), tuple(rows), tuple(keyed),
                      tuple(_table3_probes(rows, keyed, fleet_ids)),
                      tuple(_reprobe_probes(rows, keyed)) if reprobe else ())


def _agent_get_probe(agent: KeyedAgent, row: TargetRow) -> AgentProbe:
    relation = "same_fleet" if row.fleet_id == agent.fleet_id else "cross_fleet"
    return AgentProbe("agent", agent.trust, agent.agent_id, agent.fleet_id, row.row_id,
                      row.fleet_id, relation, expected_agent_get(relation, agent.trust))


def _tenant_get_probe(row: TargetRow) -> AgentProbe:
    """The tenant key has no fleet, so no relation; its authority is tenant-wide (allow)."""
    return AgentProbe("tenant", None, None, None, row.row_id, row.fleet_id, None,
                      expected_agent_get("cross_fleet", None))


def _table3_probes(
    rows: Sequence[TargetRow], keyed: Sequence[KeyedAgent], fleet_ids: Sequence[str]
) -> list[AgentProbe]:
    """Table 3: tenant key, trust-1 and trust-2 fleet-0 agents on a fleet-1 row; t1 control."""
    home, other = fleet_ids[0], fleet_ids[1]
    cross_row = next(r for r in rows if r.fleet_id == other)
    home_row = next(r for r in rows if r.fleet_id == home)
    t1 = next(a for a in keyed if a.fleet_id == home and a.trust == 1)
    t2 = next(a for a in keyed if a.fleet_id == home and a.trust == 2)
    return [
        _tenant_get_probe(cross_row),
        _agent_get_probe(t1, cross_row),
        _agent_get_probe(t2, cross_row),
        _agent_get_probe(t1, home_row),
    ]


def _reprobe_probes(rows: Sequence[TargetRow], keyed: Sequence[KeyedAgent]) -> list[AgentProbe]:
    return [_agent_get_probe(agent, row) for agent in keyed for row in rows]


def build_plan(params: Mapping[str, Any], seed: int, nonce: str) -> LeakagePlan:
    """The whole plan from params and seed; the nonce only salts names and content."""
    fleets = int(params.get("fleets", 4))
    agents_per_fleet = int(params.get("agents_per_fleet", 6))
    if fleets < 2 or agents_per_fleet < 1:
        raise ValueError("leakage needs fleets >= 2 and agents_per_fleet >= 1")
    rng = random.Random(seed)
    blocks = []
    for index, variant in enumerate(normalise_variants(params.get("variants"))):
        blocks.append(_variant_block(rng, nonce, index, variant, fleets, agents_per_fleet,
                                     prose_offset=index * 2 * fleets))
    agent_block = None
    if params.get("agent_probe", True) or params.get("reprobe", True):
        agent_block = _agent_block(
            rng, nonce, int(params.get("reprobe_fleets", 4)),
            int(params.get("reprobe_rows_per_fleet", 3)), bool(params.get("reprobe", True)),
            prose_offset=len(blocks) * 2 * fleets,
        )
    return LeakagePlan(seed, nonce, tuple(blocks), agent_block, dict(params))


# --------------------------------------------------------------------------- checkers


def judge(expected: str, returned: bool) -> dict[str, bool]:
    """leak = returned though expected deny; miss = not returned though expected allow."""
    return {"leak": returned and expected == "deny", "miss": (not returned) and expected == "allow"}


def _row_matches(row: Mapping[str, Any], memory_id: str | None, canary: str) -> bool:
    metadata = row.get("metadata") or {}
    return (memory_id is not None and row.get("id") == memory_id) or (
        isinstance(metadata, Mapping) and metadata.get("canary") == canary
    )


def search_returned(body: Any, memory_id: str | None, canary: str) -> bool:
    """The probed row is among the search items (matched by id or by its canary)."""
    items = body.get("items") if isinstance(body, Mapping) else None
    if not isinstance(items, list):
        return False
    return any(isinstance(row, Mapping) and _row_matches(row, memory_id, canary) for row in items)


def get_returned(status: int | None, body: Any, memory_id: str | None, canary: str) -> bool:
    """A GET-by-id returned the probed row: 200 and the body is that row."""
    return status == 200 and isinstance(body, Mapping) and _row_matches(body, memory_id, canary)


def tally(events: Iterable[Mapping[str, Any]], phase: str, **where: Any) -> dict[str, int]:
    """Counts of a phase's judged probes, optionally filtered on event fields."""
    out = {"probes": 0, "deny": 0, "allow": 0, "leaks": 0, "misses": 0, "returned": 0}
    for e in events:
        if e.get("phase") != phase or any(e.get(k) != v for k, v in where.items()):
            continue
        out["probes"] += 1
        out["deny"] += e.get("expected") == "deny"
        out["allow"] += e.get("expected") == "allow"
        out["leaks"] += bool(e.get("leak"))
        out["misses"] += bool(e.get("miss"))
        out["returned"] += bool(e.get("returned"))
    return out
