"""Leakage experiment (paper section 7.1, Table 2 leakage rows, Table 3, section 9.1).

Three probe families, each judged only from what the server returned:

- bulk (`probe`): F fleets x K agents; each fleet's owner writes a fleet-scoped and an
  agent-scoped secret (canary in metadata, distinct prose); every agent probes every secret
  by search (its fleet in `fleet_ids`, query = the secret's prose) and by GET-by-id, with
  the tenant key. Run once per search-leak hypothesis variant (`variant_write` x
  `variant_search`, docs/search-leak.md), each variant in a fleet namespace of its own so
  variants cannot see each other's secrets through scope, and (`variant_tenants`, where the
  target can create tenants) in a tenant of its own, so the variants run side by side, each
  within the paper's per-tenant rate limits, instead of one after another.
- Table 3 (`agent_probe`): agents at trust 1 and 2 in fleet-0 GET a fleet-1 row, plus the
  trust-1 same-fleet control and the tenant key. An agent speaks through a self-provisioned
  agent key (managed gateway) or, on a self-hosted engine, through an asserted `X-Agent-ID`
  after registering by writing as itself (`fleetprobe.identities`); the events and the
  manifest (`target.identity_mechanism`) say which.
- remediation re-probe (`reprobe`, paper 9.1): per fleet a trust-1 and a trust-2 agent key,
  each GETs every fleet's target rows (paper: 4 fleets x 3 rows, 96 probes).

Ground truth comes from the scope rules (a fleet secret is for its fleet, an agent secret for
its author; cross-fleet GET needs trust >= 2). `returned` is observed (the probed row, by id
or canary, in the answer); `leak`/`miss` follow from `expected` and `returned` (`judge`).
An answer that never arrived (transport error, 5xx or 429 after retries) stays unjudged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator

from fleetprobe.client import Credential, Result, body_field
from fleetprobe.identities import ASSERTED, PROVISIONED, register_asserted_agent
from fleetprobe.plans import rng, salted, scoped
from fleetprobe.runner import (
    Checker,
    Experiment,
    ExperimentParams,
    Phase,
    RunContext,
    register,
)

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
    """Scope rules: a fleet secret is for its fleet, an agent secret for its author only."""
    if secret_scope == "agent":
        return "allow" if relation == "same_agent" else "deny"
    return "deny" if relation == "cross_fleet" else "allow"


def expected_agent_get(relation: str | None, trust: int | None) -> str:
    """Trust ladder (paper 7.1) for a fleet-scoped row: cross-fleet read needs trust >= 2.
    The tenant key (trust None) carries tenant-wide authority, so it is expected to read."""
    if trust is None or relation == "same_fleet":
        return "allow"
    return "allow" if trust >= 2 else "deny"


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


# ------------------------------------------------------------------------ checkers


def judge(expected: str, returned: bool | None) -> dict[str, bool | None]:
    """leak = returned though expected deny; miss = not returned though expected allow.
    `returned is None` (no answer to judge) leaves both unjudged."""
    if returned is None:
        return {"leak": None, "miss": None}
    return {"leak": returned and expected == "deny", "miss": (not returned) and expected == "allow"}


def _row_matches(row: Mapping[str, Any], memory_id: str | None, canary: str) -> bool:
    metadata = row.get("metadata")
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


def answered(result: Result) -> bool:
    """An answer the probe can be judged on: any status but 429/5xx (after retries)."""
    return result.status is not None and not result.retryable


# -------------------------------------------------------------------------- phases


def canary_for(row_id: str, nonce: str) -> str:
    return f"canary-{nonce}-{row_id}"



async def open_tenants(ctx: RunContext) -> None:
    """One tenant per variant block (the first is the run's own), recorded in the manifest."""
    tenants = [ctx.tenant]
    for _ in ctx.plan.blocks[1:]:
        extra = await asyncio.to_thread(ctx.target.extra_tenant) if (
            ctx.params.variant_tenants) else None
        if extra is None:
            break
        ctx.client.pace_separately(extra.tenant_id)
        tenants.append(extra)
    ctx.state["block_tenants"] = {
        block_index: tenants[block_index] if block_index < len(tenants) else ctx.tenant
        for block_index in range(len(ctx.plan.blocks))}
    ctx.state["row_tenants"] = {row.row_id: ctx.state["block_tenants"][i]
                                for i, block in enumerate(ctx.plan.blocks) for row in block.rows}
    ctx.trace.add_secrets(ctx.target.secrets)
    ctx.trace.manifest.target["variant_tenant_ids"] = [
        ctx.state["block_tenants"][i].tenant_id for i in range(len(ctx.plan.blocks))]
    ctx.trace.write_manifest()


def _tenant_of_row(ctx: RunContext, row_id: str) -> Credential:
    return ctx.state.get("row_tenants", {}).get(row_id, ctx.tenant)


async def write_rows(ctx: RunContext) -> None:
    await ctx.gather([_write_row(ctx, row) for row in ctx.plan.all_rows()], desc="write")


async def _write_row(ctx: RunContext, row: PlannedRow) -> None:
    """`no_fleet`: no fleet_id in the body, and the writer (fresh name) has no home fleet."""
    memory: dict[str, Any] = {
        "agent_id": scoped(row.writer_agent, ctx.nonce),
        "content": salted(row.content, ctx.nonce),
        "visibility": row.visibility,
        "metadata": {"canary": canary_for(row.row_id, ctx.nonce), "secret_id": row.row_id},
    }
    if row.variant_write == "fleet_id":
        memory["fleet_id"] = scoped(row.writer_fleet, ctx.nonce)
    result = await ctx.client.write(_tenant_of_row(ctx, row.row_id), memory)
    ctx.record("write", result, expect=("id", "fleet_id"), secret_id=row.row_id,
               secret_scope=row.scope,
               writer_agent=scoped(row.writer_agent, ctx.nonce),
               writer_fleet=scoped(row.writer_fleet, ctx.nonce),
               memory_id=body_field(result.body, "id") if result.status == 201 else None,
               stored_fleet_id=body_field(result.body, "fleet_id") if result.ok else None,
               variant_write=row.variant_write)


async def settle(ctx: RunContext) -> None:
    await asyncio.sleep(ctx.params.settle_s)


def _written(ctx: RunContext) -> dict[str, str]:
    """row_id -> memory_id of the rows the server admitted, as recorded."""
    return {e["secret_id"]: e["memory_id"] for e in ctx.events("write") if e["memory_id"]}


def _skip_unwritten(ctx: RunContext, probe: str, row_ids: Iterable[str],
                    written: Mapping[str, str]) -> None:
    for row_id in sorted(set(row_ids) - set(written)):
        ctx.trace.skip(probe, f"{row_id}: not probed, its write was not admitted")


async def bulk_probes(ctx: RunContext) -> None:
    written = _written(ctx)
    coros = []
    for block in ctx.plan.blocks:
        _skip_unwritten(ctx, f"probe {block.variant_write}/{block.variant_search}",
                        (r.row_id for r in block.rows), written)
        rows = {r.row_id: r for r in block.rows}
        for probe in block.probes:
            if probe.row_id in written:
                row, memory_id = rows[probe.row_id], written[probe.row_id]
                coros.append(_get_probe(ctx, block, probe, memory_id))
                coros.append(_search_probe(ctx, block, probe, row, memory_id))
    await ctx.gather(coros, desc="probe")


def _probe_fields(ctx: RunContext, block: VariantBlock, probe: BulkProbe) -> dict[str, Any]:
    return {
        "credential": "tenant", "trust": None,
        "prober_agent": scoped(probe.prober_agent, ctx.nonce),
        "prober_fleet": scoped(probe.prober_fleet, ctx.nonce),
        "secret_id": probe.row_id, "secret_scope": probe.secret_scope,
        "target_fleet": scoped(probe.target_fleet, ctx.nonce), "relation": probe.relation,
        "expected": probe.expected, "variant_write": block.variant_write,
        "variant_search": block.variant_search,
    }


def _record_probe(ctx: RunContext, phase: str, result: Result, returned: bool | None,
                  expected: str, **fields: Any) -> None:
    """A 2xx without the field a MemClaw answer always has stops the run (never judged)."""
    expect = ("items",) if fields.get("axis") == "search" else ("id",)
    ctx.record(phase, result, expect=expect, expected=expected, returned=returned,
               **judge(expected, returned), **fields)


async def _get_probe(ctx: RunContext, block: VariantBlock, probe: BulkProbe,
                     memory_id: str) -> None:
    result = await ctx.client.get(_tenant_of_row(ctx, probe.row_id), memory_id)
    canary = canary_for(probe.row_id, ctx.nonce)
    returned = get_returned(result.status, result.body, memory_id, canary) if answered(
        result) else None
    fields = _probe_fields(ctx, block, probe)
    _record_probe(ctx, "probe", result, returned, fields.pop("expected"), axis="get", **fields)


def search_body(probe_fleet: str, variant_search: str, query: str, top_k: int,
                filter_agent_id: str | None) -> dict[str, Any]:
    """The search request of one probe. `fleet_id_singular` sends the probing fleet under a
    key MemClaw's SearchRequest ignores (hypothesis M2 of SEARCH-LEAK.md)."""
    body: dict[str, Any] = {"query": query, "top_k": top_k}
    if variant_search == "fleet_ids":
        body["fleet_ids"] = [probe_fleet]
    else:
        body["fleet_id"] = probe_fleet
    if filter_agent_id is not None:
        body["filter_agent_id"] = filter_agent_id
    return body


async def _search_probe(ctx: RunContext, block: VariantBlock, probe: BulkProbe,
                        row: PlannedRow, memory_id: str) -> None:
    prober = scoped(probe.prober_agent, ctx.nonce)
    body = search_body(scoped(probe.prober_fleet, ctx.nonce), block.variant_search,
                       salted(row.content, ctx.nonce), ctx.params.search_top_k,
                       prober if ctx.params.search_filter_agent_id else None)
    result = await ctx.client.search(_tenant_of_row(ctx, probe.row_id), body)
    canary = canary_for(probe.row_id, ctx.nonce)
    returned = search_returned(result.body, memory_id, canary) if answered(result) else None
    fields = _probe_fields(ctx, block, probe)
    _record_probe(ctx, "probe", result, returned, fields.pop("expected"), axis="search",
                  **fields)


async def agent_probes(ctx: RunContext) -> None:
    """whoami (tenant key), provision agent keys, whoami each, then Table 3 and re-probe."""
    ab: AgentBlock | None = ctx.plan.agent_block
    if ab is None:
        return
    await _whoami(ctx, ctx.tenant, None, None)
    creds = await _provision_all(ctx, ab.keyed_agents)
    for agent in ab.keyed_agents:
        if agent.agent_id in creds:
            await _whoami(ctx, creds[agent.agent_id], agent.trust, agent.agent_id)
    written = _written(ctx)
    _skip_unwritten(ctx, "agent_probe/reprobe", (r.row_id for r in ab.rows), written)
    for phase, probes in (("agent_probe", ab.table3), ("reprobe", ab.reprobe)):
        runnable = []
        for probe in probes:
            cred = ctx.tenant if probe.credential == "tenant" else creds.get(probe.prober_agent)
            if cred is not None and probe.row_id in written:
                runnable.append(_agent_get(ctx, phase, probe, cred, written[probe.row_id]))
        if probes and not runnable:
            ctx.trace.skip(phase, "no probe could run: no agent identity (key or asserted) "
                                  "or no target row")
        await ctx.gather(runnable, desc=phase)


async def _whoami(ctx: RunContext, cred: Credential, trust: int | None,
                  agent: str | None) -> None:
    result = await ctx.client.whoami(cred)
    ctx.record("whoami", result, expect=("agent_id",),
               credential="agent" if agent else "tenant", trust=trust,
               prober_agent=scoped(agent, ctx.nonce) if agent else None,
               whoami_agent_id=body_field(result.body, "agent_id") if result.ok else None)


async def _provision_all(ctx: RunContext, agents: Sequence[KeyedAgent]) -> dict[str, Credential]:
    """One identity per agent: a self-provisioned agent key on a managed gateway; on a
    self-hosted engine whose identity is asserted by header (gate key or header trust), the
    agent registered by writing as it and its trust set by the tenant credential
    (`identities.py`). A key-based target without the provisioning endpoint skips the
    agent-scoped probes with the reason, never fakes them."""
    if ctx.tenant.asserts_identity:
        return await _register_all(ctx, agents)
    creds: dict[str, Credential] = {}
    for agent in agents:
        result, cred = await ctx.client.provision_agent_key(
            ctx.tenant, scoped(agent.agent_id, ctx.nonce), initial_trust=agent.trust,
            initial_fleet=scoped(agent.fleet_id, ctx.nonce), label="fleetprobe leakage",
        )
        ctx.record("provision", result, credential="agent", trust=agent.trust,
                   prober_agent=scoped(agent.agent_id, ctx.nonce),
                   prober_fleet=scoped(agent.fleet_id, ctx.nonce), provisioned=cred is not None,
                   identity=PROVISIONED)
        if cred is not None:
            creds[agent.agent_id] = cred
            continue
        reason = f"agent-key provisioning failed for {agent.agent_id}: {result.error}"
        if result.status in ENDPOINT_MISSING:
            ctx.trace.skip("agent_probe/reprobe", f"target has no agent-key provisioning "
                           f"endpoint ({result.error}) and its credential (auth: "
                           f"{ctx.tenant.kind}) cannot assert an agent identity; agent-scoped "
                           "probes not run (a self-hosted engine: use target.auth gate or "
                           "headers)")
            return creds
        ctx.trace.skip("agent_probe/reprobe", reason)
    return creds


async def _register_all(ctx: RunContext, agents: Sequence[KeyedAgent]) -> dict[str, Credential]:
    creds: dict[str, Credential] = {}
    for agent in agents:
        agent_id, fleet_id = scoped(agent.agent_id, ctx.nonce), scoped(agent.fleet_id, ctx.nonce)
        result, cred = await register_asserted_agent(ctx, agent_id, fleet_id, agent.trust,
                                                     "leakage probe agent")
        ctx.record("provision", result, credential="agent", trust=agent.trust,
                   prober_agent=agent_id, prober_fleet=fleet_id, provisioned=cred is not None,
                   identity=ASSERTED)
        if cred is not None:
            creds[agent.agent_id] = cred
        else:
            ctx.trace.skip("agent_probe/reprobe", f"registering the asserted identity "
                           f"{agent.agent_id} at trust {agent.trust} failed ({result.error})")
    return creds


async def _agent_get(ctx: RunContext, phase: str, probe: AgentProbe, cred: Credential,
                     memory_id: str) -> None:
    result = await ctx.client.get(cred, memory_id)
    canary = canary_for(probe.row_id, ctx.nonce)
    returned = get_returned(result.status, result.body, memory_id, canary) if answered(
        result) else None
    _record_probe(
        ctx, phase, result, returned, probe.expected, credential=probe.credential,
        trust=probe.trust,
        identity=None if probe.credential == "tenant" else
        (ASSERTED if cred.asserts_identity else PROVISIONED),
        prober_agent=scoped(probe.prober_agent, ctx.nonce) if probe.prober_agent else None,
        prober_fleet=scoped(probe.prober_fleet, ctx.nonce) if probe.prober_fleet else None,
        target_fleet=scoped(probe.target_fleet, ctx.nonce), relation=probe.relation,
    )


@register
class Leakage(Experiment):
    name = "leakage"
    Params = LeakageParams

    def make_plan(self, params: LeakageParams) -> LeakagePlan:
        return make_plan(params)

    def planned_counts(self, plan: LeakagePlan, params: LeakageParams) -> dict[str, int]:
        return plan.planned_counts()

    def phases(self) -> list[Phase]:
        return [open_tenants, write_rows, settle, bulk_probes, agent_probes]

    def checkers(self) -> list[Checker]:
        # leak/miss are judged per probe by `judge` from the observed `returned` as each
        # probe event is recorded (EVENTS.md puts them on the probe event itself).
        return []
