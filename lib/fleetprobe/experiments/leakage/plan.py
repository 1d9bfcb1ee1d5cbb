"""Leakage: the params, the seeded plan (fleets, agents, secrets, probes) and the ground
truth each probe is judged against (who may read which secret under the scope rules)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field, field_validator

from fleetprobe.harness.experiment import ExperimentParams
from fleetprobe.harness.seeding import rng
from fleetprobe.oracle import policy

VariantWrite = Literal["fleet_id", "no_fleet"]
VariantSearch = Literal["fleet_ids", "fleet_id_singular"]
ALL_VARIANTS: tuple[tuple[str, str], ...] = (
    ("fleet_id", "fleet_ids"),
    ("no_fleet", "fleet_ids"),
    ("fleet_id", "fleet_id_singular"),
    ("no_fleet", "fleet_id_singular"),
)
# Status codes that say "this service has no such endpoint": skip, never fake.
ENDPOINT_MISSING = frozenset({404, 405, 501})

# Word banks for substantively distinct prose: each row draws its own template and words, so
# rows share little vocabulary and a search for one row's prose ranks that row first.
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


class LeakageParams(ExperimentParams):
    fleets: int = Field(4, ge=2, description="F: fleets per variant namespace")
    agents_per_fleet: int = Field(6, ge=1, description="K: agents per fleet; the first owns")
    # [[variant_write, variant_search], ...]: each pair runs the bulk matrix in its own
    # namespace. The paper's harness as documented is [fleet_id, fleet_ids].
    variants: list[tuple[VariantWrite, VariantSearch]] = Field(
        default_factory=lambda: [("fleet_id", "fleet_ids")], min_length=1
    )
    search_top_k: int = Field(5, ge=1, le=20)
    # The paper's probes sent no filter_agent_id (that is what yields the 4/28 misses).
    search_filter_agent_id: bool = False
    agent_probe: bool = True  # Table 3
    reprobe: bool = True  # section 9.1 re-probe
    reprobe_fleets: int = Field(4, ge=2)
    reprobe_rows_per_fleet: int = Field(3, ge=1)
    settle_s: float = Field(1.0, ge=0, description="wait between the writes and the probes")
    # Each variant after the first in a fresh tenant of its own (rate limits are per tenant);
    # a target that cannot create tenants (live) runs every variant in its one tenant.
    variant_tenants: bool = True

    @field_validator("variants")
    @classmethod
    def _distinct_variants(cls, value: list[tuple[str, str]]) -> list[tuple[str, str]]:
        duplicates = {tuple(v) for v in value if value.count(v) > 1}
        if duplicates:
            raise ValueError(f"variants listed more than once: {sorted(duplicates)}")
        return value


# ------------------------------------------------------------------------------ plan
# Plan-level names (stable for a seed); `scoped(name, nonce)` makes them run-unique on the wire.


@dataclass(frozen=True)
class PlanAgent:
    agent_id: str
    fleet_id: str
    is_owner: bool


@dataclass(frozen=True)
class PlannedRow:
    """A row to write (a bulk secret, or a Table 3 / re-probe target) and recognise later."""

    row_id: str
    scope: str  # fleet / agent
    writer_agent: str
    writer_fleet: str
    content: str
    variant_write: str = "fleet_id"

    @property
    def visibility(self) -> str:
        return "scope_agent" if self.scope == "agent" else "scope_team"


@dataclass(frozen=True)
class BulkProbe:
    """One (prober, secret) pair, probed once per axis with the tenant key."""

    prober_agent: str
    prober_fleet: str
    row_id: str
    secret_scope: str
    target_fleet: str
    relation: str  # same_agent / same_fleet / cross_fleet
    expected: str  # allow / deny


@dataclass(frozen=True)
class VariantBlock:
    variant_write: str
    variant_search: str
    agents: tuple[PlanAgent, ...]
    rows: tuple[PlannedRow, ...]
    probes: tuple[BulkProbe, ...]


@dataclass(frozen=True)
class KeyedAgent:
    """An agent that gets its own self-provisioned agent key."""

    agent_id: str
    fleet_id: str
    trust: int


@dataclass(frozen=True)
class AgentProbe:
    """A GET-by-id probe: an agent key (Table 3, re-probe) or the tenant key (Table 3)."""

    credential: str  # tenant / agent
    trust: int | None
    prober_agent: str | None
    prober_fleet: str | None
    row_id: str
    target_fleet: str
    relation: str | None  # same_fleet / cross_fleet; None for the fleet-less tenant key
    expected: str


@dataclass(frozen=True)
class AgentBlock:
    rows: tuple[PlannedRow, ...]
    keyed_agents: tuple[KeyedAgent, ...]
    table3: tuple[AgentProbe, ...]
    reprobe: tuple[AgentProbe, ...]


@dataclass(frozen=True)
class LeakagePlan:
    blocks: tuple[VariantBlock, ...]
    agent_block: AgentBlock | None

    def all_rows(self) -> list[PlannedRow]:
        rows = [r for b in self.blocks for r in b.rows]
        return rows + list(self.agent_block.rows if self.agent_block else ())

    def planned_counts(self) -> dict[str, int]:
        """Planned events per EVENTS.md phase (the manifest's `planned`)."""
        counts = {
            "write": len(self.all_rows()),
            "probe": 2 * sum(len(b.probes) for b in self.blocks),  # two axes
        }
        if self.agent_block is not None:
            ab = self.agent_block
            counts["whoami"] = 1 + len(ab.keyed_agents)
            counts["provision"] = len(ab.keyed_agents)
            counts["agent_probe"] = len(ab.table3)
            counts["reprobe"] = len(ab.reprobe)
        return counts


def relation_of(prober_agent: str, prober_fleet: str, writer_agent: str, target_fleet: str) -> str:
    if prober_agent == writer_agent:
        return "same_agent"
    return "same_fleet" if prober_fleet == target_fleet else "cross_fleet"


def expected_bulk(secret_scope: str, relation: str) -> str:
    """Scope rules (the policy's `paper` table): a fleet secret is for its fleet, an agent
    secret for its author only."""
    return policy.paper_expected(secret_scope, relation)


def expected_agent_get(relation: str | None, trust: int | None) -> str:
    """Trust ladder (paper 7.1, the policy's `read` table) for a fleet-scoped row: cross-fleet
    read needs trust >= 2. The tenant key (trust None) carries tenant-wide authority."""
    return policy.fleet_row_read("tenant" if trust is None else "agent", relation, trust)


def prose(seed: int, index: int, row_id: str) -> str:
    """Distinct prose per row, fixed by the seed; `index` picks the template."""
    draw = rng(seed, f"leakage:prose:{row_id}")
    text = _TEMPLATES[index % len(_TEMPLATES)].format(
        p=draw.choice(_PROJECTS),
        a=draw.choice(_NOUNS_A),
        b=draw.choice(_NOUNS_B),
        c=draw.choice(_NOUNS_C),
        n=draw.randint(11, 989),
    )
    return f"{text} Ref {row_id}."


def _variant_block(seed: int, index: int, variant: tuple[str, str], fleets: int,
                   agents_per_fleet: int) -> VariantBlock:
    ns = f"lk-v{index}"
    agents = [
        PlanAgent(f"{ns}-f{f}-a{a}", f"{ns}-fleet-{f}", a == 0)
        for f in range(fleets)
        for a in range(agents_per_fleet)
    ]
    rows: list[PlannedRow] = []
    for owner in (a for a in agents if a.is_owner):
        for scope in ("fleet", "agent"):
            row_id = f"{owner.fleet_id}-{scope}"
            rows.append(PlannedRow(row_id, scope, owner.agent_id, owner.fleet_id,
                                   prose(seed, len(rows), row_id), variant[0]))
    probes = []
    for agent in agents:
        for row in rows:
            rel = relation_of(agent.agent_id, agent.fleet_id, row.writer_agent, row.writer_fleet)
            probes.append(BulkProbe(agent.agent_id, agent.fleet_id, row.row_id, row.scope,
                                    row.writer_fleet, rel, expected_bulk(row.scope, rel)))
    return VariantBlock(variant[0], variant[1], tuple(agents), tuple(rows), tuple(probes))


def _agent_get_probe(agent: KeyedAgent, row: PlannedRow) -> AgentProbe:
    relation = "same_fleet" if row.writer_fleet == agent.fleet_id else "cross_fleet"
    return AgentProbe("agent", agent.trust, agent.agent_id, agent.fleet_id, row.row_id,
                      row.writer_fleet, relation, expected_agent_get(relation, agent.trust))


def _agent_block(seed: int, fleets: int, rows_per_fleet: int, reprobe: bool,
                 agent_probe: bool) -> AgentBlock:
    ns = "lk-keys"
    fleet_ids = [f"{ns}-fleet-{f}" for f in range(fleets)]
    rows = [
        PlannedRow(f"{fid}-row{r}", "fleet", f"{ns}-f{f}-writer", fid,
                   prose(seed, f * rows_per_fleet + r, f"{fid}-row{r}"))
        for f, fid in enumerate(fleet_ids)
        for r in range(rows_per_fleet)
    ]
    key_fleets = fleet_ids if reprobe else fleet_ids[:1]
    keyed = [KeyedAgent(f"{ns}-f{f}-t{t}", fid, t) for f, fid in enumerate(key_fleets)
             for t in (1, 2)]
    table3: list[AgentProbe] = []
    if agent_probe:
        home_row = next(r for r in rows if r.writer_fleet == fleet_ids[0])
        cross_row = next(r for r in rows if r.writer_fleet == fleet_ids[1])
        t1, t2 = keyed[0], keyed[1]
        table3 = [
            AgentProbe("tenant", None, None, None, cross_row.row_id, cross_row.writer_fleet,
                       None, expected_agent_get(None, None)),
            _agent_get_probe(t1, cross_row),
            _agent_get_probe(t2, cross_row),
            _agent_get_probe(t1, home_row),
        ]
    reprobes = [_agent_get_probe(a, row) for a in keyed for row in rows] if reprobe else []
    return AgentBlock(tuple(rows), tuple(keyed), tuple(table3), tuple(reprobes))


def make_plan(params: LeakageParams) -> LeakagePlan:
    """The whole plan from the params and seed (no nonce: that salts the wire only)."""
    blocks = tuple(
        _variant_block(params.seed, index, tuple(variant), params.fleets,
                       params.agents_per_fleet)
        for index, variant in enumerate(params.variants)
    )
    agent_block = None
    if params.agent_probe or params.reprobe:
        agent_block = _agent_block(params.seed, params.reprobe_fleets,
                                   params.reprobe_rows_per_fleet, params.reprobe,
                                   params.agent_probe)
    return LeakagePlan(blocks, agent_block)
