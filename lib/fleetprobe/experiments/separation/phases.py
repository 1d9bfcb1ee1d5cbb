"""Separation experiment: storage-level versus prompt-level separation (Vera, Lex, Axis).

One tenant, three agents: Vera (sales; reads `fleet-sales` + `fleet-org-shared`), Lex
(legal; `fleet-legal` + `fleet-org-shared`) and Axis (admin; all three, home
`fleet-org-shared`, trust 2). A seeded population of N accounts, each of one kind:

- `conflict`: Vera's deal and call notes, Lex's GDPR hold, Axis's org-shared profile;
- `cleared`:  Vera's deal and call notes, Lex's clearance, Axis's profile;
- `hold_only`: Lex's GDPR hold and nothing else.

Every record is written by the agent owning its domain, names the account, and talks about
the same deal, contract and DPA, so a flat store's ranking has every chance to mix domains.
Sales deals and legal records carry a triple on the account (`commercial_progression`
proceed / halt), the structure the server's insights route reads.

Measured, without a language model, from what the server returned:

1. contamination: each of Vera's and Lex's recall and search queries about an account, at
   several `top_k`: returned records whose `fleet_id` lies outside the agent's authorised
   set (what would enter the model's context);
2. absence: on hold-only accounts, whether Vera's result says anything about the account
   ("no record in authorized partitions" is all an empty answer means);
3. Axis's fan-out: one recall over all three fleets versus three labelled per-fleet calls,
   for conflict accounts: can Axis name both parties with the right fleet from the response
   fields alone (and from the recall summary text alone);
4. reserved types: client writes of `insight`, `outcome`, `rule` refused with MemClaw's
   envelope (422 `INVALID_ARGUMENTS`) naming the server-side route;
5. insights: Axis runs `POST /insights/generate` (focus `contradictions`); Vera and Lex read
   the insights by id and by search, and try to read the other domain's underlying records;
6. graph reach: searches naming an account with `diagnostic: true`; rows the server says
   its entity-graph expansion reached, and whether any lies outside the caller's partitions.

Observations are recorded as they happen; the checkers judge them from the recorded events
(and the recorded writes as ground truth of which record lives where), never from the plan.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator

from fleetprobe.client import Credential, body_field
from fleetprobe.plans import rng, salted, scoped
from fleetprobe.runner import (
    Checker,
    Experiment,
    ExperimentParams,
    Phase,
    RunContext,
    register,
)

SALES, LEGAL, ORG = "fleet-sales", "fleet-legal", "fleet-org-shared"
RESERVED_TYPES = ("insight", "outcome", "rule")
# The server-side route MemClaw's refusal names for each reserved type (tool or REST path).
ROUTE_NAMES = {"insight": ("memclaw_insights", "/insights/generate"),
               "outcome": ("memclaw_evolve", "/evolve"), "rule": ("memclaw_evolve", "/evolve")}
ENDPOINT_MISSING = frozenset({404, 405, 501})
NO_RECORD = "no record in authorized partitions"
HOLD_VISIBLE = "hold visible"
OTHER_RECORD = "authorized record about the account"
PREDICATE = "commercial_progression"


@dataclass(frozen=True)
class AgentSpec:
    name: str  # plan-level agent id; scoped(name, nonce) on the wire
    role: str
    home: str
    authorized: tuple[str, ...]
    trust: int


AGENTS = (
    AgentSpec("vera", "sales", SALES, (SALES, ORG), 1),
    AgentSpec("lex", "legal", LEGAL, (LEGAL, ORG), 1),
    AgentSpec("axis", "admin", ORG, (SALES, LEGAL, ORG), 2),
)
AGENT = {a.name: a for a in AGENTS}
DOMAIN_OF_FLEET = {SALES: "sales", LEGAL: "legal", ORG: "org"}

_PREFIXES = ("Acme", "Borealis", "Cinder", "Dunmore", "Everly", "Fairhaven", "Glenrock",
             "Hollis", "Ironvale", "Jasper", "Kingsley", "Larkspur", "Marlowe", "Northwind",
             "Oakridge", "Prescott", "Quillon", "Ravensworth", "Stonebridge", "Thornbury",
             "Underhill", "Valemont", "Westbrook", "Yarrow", "Zenith")
_SUFFIXES = ("Corp", "Industries", "Logistics", "Health", "Systems", "Partners", "Foods",
             "Energy")
MAX_ACCOUNTS = len(_PREFIXES) * len(_SUFFIXES)
# 20 accounts: 8 conflict, 7 cleared, 5 hold-only (40/35/25 %), shuffled per seed.
_KIND_PATTERN = ("conflict",) * 8 + ("cleared",) * 7 + ("hold_only",) * 5
_STAGES = ("late", "negotiation", "proposal", "verbal-commit")
_CLOSES = ("next week", "this month", "end of quarter", "in two weeks")
_PRODUCTS = ("analytics", "payments", "fleet tracking", "data platform", "support desk")

TEMPLATES = {
    "deal": "{name} deal status: {stage} stage at ${amount}k, close date {close}; the {name} "
            "contract is with procurement.",
    "call": "{name} call notes: the champion confirmed budget for the {product} rollout; "
            "{name} wants the contract and DPA paperwork before close.",
    "hold": "{name} legal status: GDPR hold, the DPA expired {dpa}; no commercial progression "
            "on the {name} deal or contract until a renewed DPA is signed.",
    "clearance": "{name} legal status: cleared, the DPA was renewed {dpa}; commercial "
                 "progression on the {name} deal and contract may continue.",
    "note": "{name} account profile: enterprise account, {years}-year relationship; deal, "
            "contract and DPA questions for {name} go to the account team.",
}
RECORD_WRITER = {"deal": "vera", "call": "vera", "hold": "lex", "clearance": "lex",
                 "note": "axis"}
RECORD_OBJECT = {"deal": "proceed", "hold": "halt", "clearance": "proceed"}
KIND_RECORDS = {"conflict": ("deal", "call", "hold", "note"),
                "cleared": ("deal", "call", "clearance", "note"),
                "hold_only": ("hold",)}
QUERIES = {  # (agent, op) -> query template
    ("vera", "recall"): "{name} deal status",
    ("vera", "search"): "{name} contract and DPA",
    ("lex", "recall"): "{name} legal status",
    ("lex", "search"): "{name} DPA and contract",
}
FANOUT_QUERY = "{name} deal and legal status"
GRAPH_QUERY = "{name} compliance status"
INSIGHT_QUERY = "{name} conflict insight"


class SeparationParams(ExperimentParams):
    accounts: int = Field(100, ge=1, le=MAX_ACCOUNTS)
    top_k: list[int] = Field(default_factory=lambda: [1, 5, 20])
    fanout_top_k: list[int] = Field(default_factory=lambda: [2, 5])
    graph_top_k: int = Field(10, ge=1, le=20)
    insight_top_k: int = Field(5, ge=1, le=20)
    settle_s: float = Field(0.5, ge=0, description="wait between the writes and the reads")

    @field_validator("top_k", "fanout_top_k")
    @classmethod
    def _valid_top_k(cls, value: list[int]) -> list[int]:
        if not value or any(not 1 <= k <= 20 for k in value) or len(set(value)) != len(value):
            raise ValueError("top_k must be a non-empty list of distinct values in 1..20")
        return sorted(value)


@dataclass(frozen=True)
class Account:
    index: int
    name: str
    kind: Literal["conflict", "cleared", "hold_only"]
    details: tuple[tuple[str, str], ...]

    @property
    def record_kinds(self) -> tuple[str, ...]:
        return KIND_RECORDS[self.kind]

    def content(self, record_kind: str) -> str:
        return TEMPLATES[record_kind].format(name=self.name, **dict(self.details))


@dataclass(frozen=True)
class SeparationPlan:
    accounts: tuple[Account, ...]
    top_k: tuple[int, ...]

    def of_kind(self, *kinds: str) -> list[Account]:
        return [a for a in self.accounts if a.kind in kinds]


def account_name(index: int) -> str:
    return f"{_PREFIXES[index % len(_PREFIXES)]} {_SUFFIXES[index // len(_PREFIXES)]}"


def make_plan(params: SeparationParams) -> SeparationPlan:
    kinds = rng(params.seed, "separation:kinds")
    draws = rng(params.seed, "separation:details")
    accounts = []
    pattern: list[str] = []
    for index in range(params.accounts):
        if not pattern:
            pattern = list(_KIND_PATTERN)
            kinds.shuffle(pattern)
        details = (("stage", draws.choice(_STAGES)), ("amount", str(draws.randint(20, 400))),
                   ("close", draws.choice(_CLOSES)), ("product", draws.choice(_PRODUCTS)),
                   ("dpa", f"2026-{draws.randint(1, 12):02d}-{draws.randint(1, 28):02d}"),
                   ("years", str(draws.randint(1, 9))))
        accounts.append(Account(index, account_name(index), pattern.pop(), details))
    return SeparationPlan(tuple(accounts), tuple(params.top_k))


def planned_counts(plan: SeparationPlan, fanout_ks: Sequence[int]) -> dict[str, int]:
    n = len(plan.accounts)
    conflicts = len(plan.of_kind("conflict"))
    writes = sum(len(a.record_kinds) for a in plan.accounts)
    probes = n * len(QUERIES) * len(plan.top_k)
    return {
        "agent": len(AGENTS), "entity": n + 1, "write": writes, "probe": probes,
        "fanout": conflicts * 4 * len(fanout_ks), "reserved": len(AGENTS) * len(RESERVED_TYPES),
        "insight_generate": 1, "graph_probe": 2 * n,
        # one insight per conflict account, if the server finds them all: Vera and Lex each
        # read it by id and by search and try the other domain's record by id
        "insight_read": conflicts * 2 * 3, "insight_access": conflicts * 2 * 3,
        "contamination": probes, "absence": len(plan.of_kind("hold_only")) * 2 * len(plan.top_k),
        "attribution": conflicts * 2 * len(fanout_ks),
        "reserved_check": len(AGENTS) * len(RESERVED_TYPES),
        "graph_reach": 2 * n,
    }


# -- observation helpers -----------------------------------------------------------------


def compact_items(body: Any, key: str) -> list[dict[str, Any]]:
    """What each returned record carries that the judgement may use: id, partition, author,
    type, visibility, the harness's account tag and, when the server says, the retrieval path."""
    items = body_field(body, key)
    out = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        meta = item.get("metadata") if isinstance(item.get("metadata"), dict) else {}
        retrieval = item.get("retrieval") if isinstance(item.get("retrieval"), dict) else {}
        out.append({"id": item.get("id"), "fleet_id": item.get("fleet_id"),
                    "agent_id": item.get("agent_id"), "memory_type": item.get("memory_type"),
                    "visibility": item.get("visibility"), "account": meta.get("account"),
                    "path": retrieval.get("path"), "graph_hop": retrieval.get("graph_hop")})
    return out


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _loads(value: Any) -> Any:
    if value is None:
        return []
    return json.loads(value) if isinstance(value, str) else value


class Run:
    """Per-run names on the wire (fleets and agents are unique to the run)."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.creds: dict[str, Credential] = {}
        self.entities: dict[str, str] = {}
        self.topic_entity: str | None = None

    def fleet(self, plan_fleet: str) -> str:
        return scoped(plan_fleet, self.ctx.nonce)

    def agent_id(self, name: str) -> str:
        return scoped(name, self.ctx.nonce)

    def authorized(self, name: str) -> list[str]:
        return [self.fleet(f) for f in AGENT[name].authorized]


# -- the scenario ------------------------------------------------------------------------


async def scenario(ctx: RunContext) -> None:
    """One phase: the agents' keys live only in memory, so every step runs in this call."""
    run = Run(ctx)
    await setup_agents(run)
    await upsert_entities(run)
    await write_records(run)
    await asyncio.sleep(ctx.params.settle_s)
    await contamination_probes(run)
    await fanout_probes(run)
    await reserved_writes(run)
    insights = await generate_insights(run)
    await insight_reads(run, insights)
    await graph_probes(run)


async def setup_agents(run: Run) -> None:
    """An agent key per agent (home fleet, trust). Self-hosted MemClaw without a gateway
    speaks as headers; a target without provisioning falls back to the tenant key with
    `agent_id` in writes (recorded: the fleet predicate is then all that scopes reads)."""
    ctx = run.ctx
    for spec in AGENTS:
        agent_id = run.agent_id(spec.name)
        if ctx.tenant.kind == "headers":
            run.creds[spec.name] = Credential("headers", ctx.tenant.tenant_id,
                                              agent_id=agent_id, trust=spec.trust)
            ctx.record("agent", None, agent=spec.name, agent_id=agent_id,
                       home_fleet=run.fleet(spec.home), trust=spec.trust,
                       credential="headers", provisioned=False)
            continue
        result, cred = await ctx.client.provision_agent_key(
            ctx.tenant, agent_id, initial_trust=spec.trust,
            initial_fleet=run.fleet(spec.home), label="fleetprobe separation")
        run.creds[spec.name] = cred or ctx.tenant
        ctx.record("agent", result, agent=spec.name, agent_id=agent_id,
                   home_fleet=run.fleet(spec.home), trust=spec.trust,
                   credential="agent" if cred else "tenant", provisioned=cred is not None)
        if cred is None:
            ctx.trace.skip(f"agent key for {spec.name}",
                           f"provisioning failed ({result.error}); using the tenant key")


async def upsert_entities(run: Run) -> None:
    ctx = run.ctx

    async def one(label: str, entity_type: str, name: str) -> None:
        result = await ctx.client.upsert_entity(ctx.tenant, {
            "entity_type": entity_type, "canonical_name": name})
        entity_id = body_field(result.body, "id") if result.ok else None
        ctx.record("entity", result, account=label, entity_id=entity_id, entity_name=name)
        if entity_id:
            if label == "topic:gdpr":
                run.topic_entity = entity_id
            else:
                run.entities[label] = entity_id

    await one("topic:gdpr", "regulation", "GDPR")
    await ctx.gather([one(a.name, "organization", a.name) for a in ctx.plan.accounts],
                     desc="entities")


async def write_records(run: Run) -> None:
    ctx = run.ctx
    writes = [_write(run, account, kind) for account in ctx.plan.accounts
              for kind in account.record_kinds]
    await ctx.gather(writes, desc="write")


async def _write(run: Run, account: Account, record_kind: str) -> None:
    ctx = run.ctx
    writer = RECORD_WRITER[record_kind]
    spec = AGENT[writer]
    fleet = run.fleet(spec.home)
    entity = run.entities.get(account.name)
    links = [{"entity_id": entity, "role": "subject"}] if entity else []
    if record_kind in ("hold", "clearance") and run.topic_entity:
        links.append({"entity_id": run.topic_entity, "role": "regulation"})
    content = salted(account.content(record_kind), ctx.nonce)
    memory: dict[str, Any] = {
        "agent_id": run.agent_id(writer), "fleet_id": fleet, "content": content,
        "metadata": {"account": account.name, "domain": spec.role,
                     "record_kind": record_kind},
        "entity_links": links,
    }
    if record_kind in RECORD_OBJECT and entity:
        memory |= {"subject_entity_id": entity, "predicate": PREDICATE,
                   "object_value": RECORD_OBJECT[record_kind]}
    result = await ctx.client.write(run.creds[writer], memory)
    ctx.record("write", result, expect=("id",), record_id=f"{account.index}:{record_kind}",
               account=account.name, account_kind=account.kind, domain=spec.role,
               record_kind=record_kind, agent=writer, agent_id=run.agent_id(writer),
               fleet_id=fleet, stored_fleet_id=body_field(result.body, "fleet_id"),
               content=content,
               memory_id=body_field(result.body, "id") if result.status == 201 else None)


async def contamination_probes(run: Run) -> None:
    ctx = run.ctx
    calls = [_probe(run, agent, op, account, k)
             for (agent, op) in QUERIES for account in ctx.plan.accounts for k in ctx.plan.top_k]
    await ctx.gather(calls, desc="probe")


async def _probe(run: Run, agent: str, op: str, account: Account, top_k: int) -> None:
    ctx = run.ctx
    query = {"query": QUERIES[(agent, op)].format(name=account.name), "top_k": top_k,
             "fleet_ids": run.authorized(agent)}
    call = ctx.client.recall if op == "recall" else ctx.client.search
    result = await call(run.creds[agent], query)
    key = "memories" if op == "recall" else "items"
    ctx.record("probe", result, expect=(key,), agent=agent, account=account.name,
               account_kind=account.kind, op_kind=op, top_k=top_k,
               authorized=_json(run.authorized(agent)),
               items=_json(compact_items(result.body, key)) if result.ok else None,
               summary=body_field(result.body, "summary") if result.ok else None)


async def fanout_probes(run: Run) -> None:
    """Axis: one recall over all three fleets, and one labelled recall per fleet."""
    ctx = run.ctx
    calls = []
    for account in ctx.plan.of_kind("conflict"):
        for k in ctx.params.fanout_top_k:
            calls.append(_fanout(run, account, "blended", None, k))
            calls += [_fanout(run, account, "per_fleet", f, k) for f in (SALES, LEGAL, ORG)]
    await ctx.gather(calls, desc="fanout")


async def _fanout(run: Run, account: Account, mode: str, fleet: str | None,
                  top_k: int) -> None:
    ctx = run.ctx
    fleets = [run.fleet(fleet)] if fleet else run.authorized("axis")
    result = await ctx.client.recall(run.creds["axis"], {
        "query": FANOUT_QUERY.format(name=account.name), "top_k": top_k, "fleet_ids": fleets})
    ctx.record("fanout", result, expect=("memories",), account=account.name, mode=mode,
               fleet_label=run.fleet(fleet) if fleet else None, top_k=top_k,
               items=_json(compact_items(result.body, "memories")) if result.ok else None,
               summary=body_field(result.body, "summary") if result.ok else None)


async def reserved_writes(run: Run) -> None:
    ctx = run.ctx
    for spec in AGENTS:
        for memory_type in RESERVED_TYPES:
            result = await ctx.client.write(run.creds[spec.name], {
                "agent_id": run.agent_id(spec.name), "fleet_id": run.fleet(spec.home),
                "memory_type": memory_type,
                "content": salted(f"{spec.name} writes its own {memory_type} about the "
                                  "accounts it covers.", ctx.nonce)})
            envelope = body_field(result.body, "error")
            ctx.record("reserved", result, agent=spec.name, memory_type=memory_type,
                       error_code=body_field(envelope, "code"),
                       error_message=str(body_field(envelope, "message") or
                                         body_field(result.body, "detail") or "")[:400] or None,
                       memory_id=body_field(result.body, "id") if result.ok else None)


async def generate_insights(run: Run) -> list[dict[str, Any]]:
    ctx = run.ctx
    result = await ctx.client.generate_insights(run.creds["axis"], {
        "focus": "contradictions", "scope": "all", "fleet_id": run.fleet(ORG),
        "agent_id": run.agent_id("axis")})
    findings = body_field(result.body, "findings") if result.ok else None
    kept = [{"insight_memory_id": f.get("insight_memory_id"),
             "related_memory_ids": f.get("related_memory_ids") or []}
            for f in findings or [] if isinstance(f, dict)]
    ctx.record("insight_generate", result, expect=("findings",), agent="axis",
               n_findings=len(kept), insight_ids=_json([f["insight_memory_id"] for f in kept]),
               findings=_json(kept))
    if result.status in ENDPOINT_MISSING:
        ctx.trace.skip("insight_read", f"target has no insights route ({result.error})")
    return [f for f in kept if f["insight_memory_id"]]


async def insight_reads(run: Run, insights: list[dict[str, Any]]) -> None:
    """Vera and Lex read each insight (by id and by search) and try, by id, the related
    records outside their own partitions."""
    ctx = run.ctx
    written = _written_by_id(ctx.events("write"))
    calls = []
    for finding in insights:
        related = [written[m] for m in finding["related_memory_ids"] if m in written]
        account = related[0]["account"] if related else None
        for reader in ("vera", "lex"):
            calls.append(_read_by_id(run, reader, "insight", finding["insight_memory_id"],
                                     finding["insight_memory_id"], account, "insight"))
            if account is not None:
                calls.append(_insight_search(run, reader, finding["insight_memory_id"],
                                             account))
            own = {AGENT[reader].home, ORG}
            for w in related:
                if w["plan_fleet"] not in own:
                    calls.append(_read_by_id(run, reader, "underlying", w["memory_id"],
                                             finding["insight_memory_id"], account, w["domain"]))
    await ctx.gather(calls, desc="insight reads")


async def _read_by_id(run: Run, reader: str, target: str, memory_id: str, insight_id: str,
                      account: str | None, domain: str) -> None:
    ctx = run.ctx
    result = await ctx.client.get(run.creds[reader], memory_id)
    returned_id = body_field(result.body, "id") if result.ok else None
    ctx.record("insight_read", result, agent=reader, target=target, axis="get",
               insight_id=insight_id, memory_id=memory_id, account=account, domain=domain,
               items=_json([{"id": returned_id,
                             "fleet_id": body_field(result.body, "fleet_id")}])
               if returned_id else _json([]),
               stored_fleet_id=body_field(result.body, "fleet_id") if result.ok else None)


async def _insight_search(run: Run, reader: str, insight_id: str, account: str) -> None:
    ctx = run.ctx
    result = await ctx.client.search(run.creds[reader], {
        "query": INSIGHT_QUERY.format(name=account), "top_k": ctx.params.insight_top_k,
        "fleet_ids": run.authorized(reader), "memory_type_filter": "insight"})
    ctx.record("insight_read", result, expect=("items",), agent=reader, target="insight",
               axis="search", insight_id=insight_id, memory_id=insight_id, account=account,
               domain="insight",
               items=_json(compact_items(result.body, "items")) if result.ok else None,
               stored_fleet_id=None)


async def graph_probes(run: Run) -> None:
    ctx = run.ctx
    calls = [_graph(run, reader, account) for reader in ("vera", "lex")
             for account in ctx.plan.accounts]
    await ctx.gather(calls, desc="graph")


async def _graph(run: Run, reader: str, account: Account) -> None:
    ctx = run.ctx
    result = await ctx.client.search(run.creds[reader], {
        "query": GRAPH_QUERY.format(name=account.name), "top_k": ctx.params.graph_top_k,
        "fleet_ids": run.authorized(reader), "diagnostic": True})
    ctx.record("graph_probe", result, expect=("items",), agent=reader, account=account.name,
               account_kind=account.kind, top_k=ctx.params.graph_top_k,
               authorized=_json(run.authorized(reader)),
               items=_json(compact_items(result.body, "items")) if result.ok else None)


# -- checkers: pure functions of recorded events -----------------------------------------


def _written_by_id(writes: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """memory_id -> what the write recorded (account, domain, fleet as stored), admitted only."""
    out = {}
    for w in writes:
        if w.get("status") == 201 and w.get("memory_id"):
            stored = w.get("stored_fleet_id") or w.get("fleet_id")
            plan_fleet = next((f for f in (SALES, LEGAL, ORG)
                               if stored and stored.endswith(f)), None)
            out[w["memory_id"]] = {**w, "stored": stored, "plan_fleet": plan_fleet}
    return out


def judge_items(items: Sequence[dict[str, Any]], authorized: Sequence[str]
                ) -> dict[str, int]:
    """Counts over one response: returned, restricted (a partition outside `authorized`),
    unpartitioned (no fleet at all: MemClaw's predicate lets those through by design)."""
    allowed = set(authorized)
    restricted = sum(1 for i in items if i.get("fleet_id") and i["fleet_id"] not in allowed)
    unpartitioned = sum(1 for i in items if not i.get("fleet_id"))
    return {"n_returned": len(items), "n_restricted": restricted,
            "n_unpartitioned": unpartitioned}


def judge_contamination(probe: dict[str, Any]) -> dict[str, Any]:
    """One query's judgement; unanswered queries stay unjudged (contaminated null)."""
    base = {k: probe.get(k) for k in ("agent", "account", "account_kind", "op_kind", "top_k")}
    if probe.get("items") is None:
        return base | {"n_returned": None, "n_restricted": None, "n_unpartitioned": None,
                       "contaminated": None}
    counts = judge_items(_loads(probe["items"]), _loads(probe["authorized"]))
    return base | counts | {"contaminated": counts["n_restricted"] > 0}


def judge_absence(probe: dict[str, Any], written: dict[str, dict[str, Any]]
                  ) -> dict[str, Any]:
    """Vera on a hold-only account: does her answer hold anything about the account?"""
    base = {k: probe.get(k) for k in ("agent", "account", "op_kind", "top_k")}
    if probe.get("items") is None:
        return base | {"n_about_account": None, "hold_returned": None, "absence_verdict": None}
    allowed = set(_loads(probe["authorized"]))
    about = [i for i in _loads(probe["items"])
             if _account_of(i, written) == probe["account"]]
    hold = any(written.get(i["id"], {}).get("record_kind") == "hold" for i in about)
    authorized_about = [i for i in about if i.get("fleet_id") in allowed]
    verdict = HOLD_VISIBLE if hold else (OTHER_RECORD if authorized_about else NO_RECORD)
    return base | {"n_about_account": len(about), "hold_returned": hold,
                   "absence_verdict": verdict}


def _account_of(item: dict[str, Any], written: dict[str, dict[str, Any]]) -> str | None:
    if item.get("id") in written:
        return written[item["id"]]["account"]
    return item.get("account")


def judge_attribution(calls: Sequence[dict[str, Any]], parties: dict[str, str],
                      mode: str, contents: dict[str, str] | None = None) -> dict[str, Any]:
    """Can Axis name each party (memory id -> its true fleet, from the write) with the right
    fleet from what the calls returned? Blended: from each item's `fleet_id`. Per-fleet: from
    the call's own label. Summary: from the summary text alone (the call's label, or a fleet
    id the text itself names). `misattributed`: appearances given a wrong fleet."""
    answered = [c for c in calls if c.get("items") is not None]
    if not calls or len(answered) < len(calls):
        return {"sales_named": None, "legal_named": None, "both_named": None,
                "misattributed": None, "both_named_summary": None}
    contents = contents or {}
    named = dict.fromkeys(parties, False)
    named_summary = dict.fromkeys(parties, False)
    wrong = 0
    for call in answered:
        label = call.get("fleet_label") if mode == "per_fleet" else None
        summary = call.get("summary") or ""
        for item in _loads(call["items"]):
            true_fleet = parties.get(item.get("id"))
            if true_fleet is None:
                continue
            claimed = label if mode == "per_fleet" else item.get("fleet_id")
            if claimed == true_fleet:
                named[item["id"]] = True
            else:
                wrong += 1
        for memory_id, true_fleet in parties.items():
            given = label if mode == "per_fleet" else (true_fleet if true_fleet in summary
                                                        else None)
            if summary_names(summary, contents.get(memory_id), given, true_fleet):
                named_summary[memory_id] = True
    domain_of = {m: DOMAIN_OF_FLEET.get(_plan_fleet(f)) for m, f in parties.items()}

    def all_named(flags: dict[str, bool], domain: str) -> bool:
        wanted = [m for m, d in domain_of.items() if d == domain]
        return bool(wanted) and all(flags[m] for m in wanted)

    sales, legal = all_named(named, "sales"), all_named(named, "legal")
    return {"sales_named": sales, "legal_named": legal, "both_named": sales and legal,
            "misattributed": wrong,
            "both_named_summary": all_named(named_summary, "sales")
            and all_named(named_summary, "legal")}


def summary_names(summary: str, content: str | None, given: str | None,
                  true_fleet: str) -> bool:
    """The summary carries the party (its first clause) and the fleet it is given is right."""
    if not content or given is None:
        return False
    first = content.split(";")[0].split(". ")[0].strip()
    return bool(first) and first in summary and given == true_fleet


def _plan_fleet(fleet: str | None) -> str | None:
    return next((f for f in (SALES, LEGAL, ORG) if fleet and fleet.endswith(f)), None)


def judge_reserved(event: dict[str, Any]) -> dict[str, Any]:
    status, code, message = event.get("status"), event.get("error_code"), event.get(
        "error_message") or ""
    answered = status is not None and status < 500 and status != 429
    names = ROUTE_NAMES[event["memory_type"]]
    return {"agent": event["agent"], "memory_type": event["memory_type"],
            "refused": (status == 422) if answered else None,
            "envelope_ok": (status == 422 and code == "INVALID_ARGUMENTS") if answered
            else None,
            "names_route": any(n in message for n in names) if answered else None,
            "stored": (status == 201) if answered else None}


def judge_insight_read(event: dict[str, Any]) -> dict[str, Any]:
    items = _loads(event.get("items")) if event.get("items") is not None else None
    readable = None if items is None or event.get("status") is None or (
        event["status"] >= 500 or event["status"] == 429) else any(
        i.get("id") == event["memory_id"] for i in items)
    return {k: event.get(k) for k in ("agent", "target", "axis", "insight_id", "memory_id",
                                      "account", "domain")} | {
        "readable": readable,
        "in_org_shared": _plan_fleet(event.get("stored_fleet_id")) == ORG
        if event.get("target") == "insight" and event.get("stored_fleet_id") else None}


def judge_graph(event: dict[str, Any], written: dict[str, dict[str, Any]],
                insight_ids: dict[str, str]) -> dict[str, Any]:
    """Rows the server reports as reached by its entity graph: how many, how many outside
    the caller's partitions, whether Axis's insight on the account was among them."""
    base = {k: event.get(k) for k in ("agent", "account", "account_kind")}
    if event.get("items") is None:
        return base | {"observable": None, "n_graph": None, "n_graph_restricted": None,
                       "insight_reached": None, "restricted_reached": None}
    items = _loads(event["items"])
    allowed = set(_loads(event["authorized"]))
    observable = any(i.get("path") is not None for i in items) if items else None
    graph = [i for i in items if i.get("path") == "graph"]
    restricted = [i for i in graph if i.get("fleet_id") and i["fleet_id"] not in allowed]
    return base | {
        "observable": observable, "n_graph": len(graph), "n_graph_restricted": len(restricted),
        "insight_reached": any(insight_ids.get(i.get("id")) == event["account"] for i in graph),
        "restricted_reached": bool(restricted)}


def check_contamination(ctx: RunContext) -> None:
    written = _written_by_id(ctx.events("write"))
    for probe in ctx.events("probe"):
        ctx.record("contamination", **judge_contamination(probe))
    for probe in ctx.events("probe"):
        if probe["agent"] == "vera" and probe["account_kind"] == "hold_only":
            ctx.record("absence", **judge_absence(probe, written))


def check_attribution(ctx: RunContext) -> None:
    written = _written_by_id(ctx.events("write"))
    by_account: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for call in ctx.events("fanout"):
        by_account[(call["account"], call["top_k"])].append(call)
    contents = {m: w.get("content") for m, w in written.items()}
    for (account, top_k), calls in sorted(by_account.items()):
        parties = {m: w["stored"] for m, w in written.items()
                   if w["account"] == account and w["record_kind"] in ("deal", "hold")}
        for mode in ("blended", "per_fleet"):
            chosen = [c for c in calls if c["mode"] == mode]
            ctx.record("attribution", account=account, mode=mode, top_k=top_k,
                       **judge_attribution(chosen, parties, mode, contents))


def check_reserved(ctx: RunContext) -> None:
    for event in ctx.events("reserved"):
        ctx.record("reserved_check", **judge_reserved(event))


def check_insights(ctx: RunContext) -> None:
    for event in ctx.events("insight_read"):
        ctx.record("insight_access", **judge_insight_read(event))


def check_graph(ctx: RunContext) -> None:
    written = _written_by_id(ctx.events("write"))
    insight_account: dict[str, str] = {}
    for gen in ctx.events("insight_generate"):
        for finding in _loads(gen.get("findings")):
            related = [written[m] for m in finding.get("related_memory_ids", [])
                       if m in written]
            if finding.get("insight_memory_id") and related:
                insight_account[finding["insight_memory_id"]] = related[0]["account"]
    for event in ctx.events("graph_probe"):
        ctx.record("graph_reach", **judge_graph(event, written, insight_account))


@register
class Separation(Experiment):
    name = "separation"
    Params = SeparationParams

    def make_plan(self, params: SeparationParams) -> SeparationPlan:
        return make_plan(params)

    def planned_counts(self, plan: SeparationPlan, params: SeparationParams) -> dict[str, int]:
        return planned_counts(plan, params.fanout_top_k)

    def phases(self) -> list[Phase]:
        return [scenario]

    def checkers(self) -> list[Checker]:
        return [check_contamination, check_attribution, check_reserved, check_insights,
                check_graph]
