"""Propagation experiment (paper 7.4, 8.3, 9.3, 9.4): does a fleet-scoped fact reach the
writer's fleet siblings, stay out of other fleets, how fast does it become visible, and can it
be re-homed onto another agent?

Plan (seeded; the nonce salts content and canaries):
- one writer agent and `n_siblings` sibling readers in the writer's fleet; `n_foreign` foreign
  readers, each in its own other fleet of the same tenant;
- rate phase: the writer writes `n_rate_facts` fleet-scoped facts, one per statement of
  `RATE_STATEMENTS`, each with a unique canary in `metadata.canary`; every sibling then polls
  `/search` (its fleet in `fleet_ids`, query = the fact's prose) until the canary appears or
  `sibling_deadline_s` passes; every foreign reader searches once (any hit is a leak);
- window phase: `n_window_facts` dedicated facts (`WINDOW_STATEMENTS`, distinct prose), one at
  a time: write, then one sibling polls from write completion every `window_poll_interval_s`
  until visible or `window_deadline_s`. The first poll's search-pacing slot is taken before
  the write, so it leaves the moment the write returns; later polls still obey the client's
  search pacing (below the server's limit), so under a tight budget they are spaced at
  max(`window_poll_interval_s`, 1 / `client.searches_per_s`);
- redistribute subset: `n_redistribute_sibling` rate facts re-homed onto a sibling and
  `n_redistribute_cross_fleet` onto a foreign reader, requested by the writer at
  `requester_trust`; a GET then shows whether `agent_id` flipped.

Readers search as themselves: `reader_credential="agent"` gives each reader its own agent
identity, a self-provisioned agent key on a managed gateway (the way the paper did) or, on a
self-hosted engine (target auth `gate`/`headers`), an asserted `X-Agent-ID` after the reader
registered by writing as itself (`fleetprobe.identities`); `"tenant"` uses the tenant
credential with the reader's fleet in `fleet_ids` and no `filter_agent_id` (an author filter
that would hide the writer's rows); such readers are registered once by a search that names
them (see `setup_readers`).

Every judgement (`visible`, `leak`, `flipped`) is made by the pure functions at the bottom of
this module from the response it judges, as the event is recorded.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

from pydantic import Field

from fleetprobe.client import Credential, Result, body_field
from fleetprobe.identities import ASSERTED, PROVISIONED, register_asserted_agent
from fleetprobe.plans import rng, salted, scoped
from fleetprobe.runner import Checker, Experiment, ExperimentParams, Phase, RunContext, register

EXPERIMENT = "propagation"
ReaderCredential = Literal["agent", "tenant"]

# Forty substantively distinct operational statements (rate phase) and eight more for the
# window phase, so the two sets never dedup-collide. `{tag}` carries the per-run salt.
RATE_STATEMENTS: tuple[str, ...] = (
    "The checkout service now retries card authorisations twice before failing ({tag}).",
    "Kafka consumer group ledger-sync was rebalanced onto twelve partitions ({tag}).",
    "Nightly backups of the orders database complete at 02:10 UTC and take 37 minutes ({tag}).",
    "The staging cluster autoscaler is capped at forty nodes until the budget review ({tag}).",
    "Customer support escalations for invoices route to the finance desk in Lisbon ({tag}).",
    "TLS certificates for the public API renew automatically fourteen days before expiry ({tag}).",
    "Feature flag smart-reorder is enabled for ten percent of mobile users ({tag}).",
    "The search index rebuild job was moved from Sunday to Wednesday nights ({tag}).",
    "Redis session cache eviction switched from LRU to LFU after the memory incident ({tag}).",
    "Payment webhooks from the acquirer are deduplicated by event id for seven days ({tag}).",
    "The data warehouse loader skips rows with malformed currency codes and logs them ({tag}).",
    "Grafana alert for p99 latency on the cart API fires above 800 milliseconds ({tag}).",
    "Vendor SLA for the CDN guarantees a four hour response for severity two tickets ({tag}).",
    "Onboarding emails are throttled to five hundred per minute to protect sender score ({tag}).",
    "The fraud model is retrained every Tuesday on the trailing ninety days of orders ({tag}).",
    "Database connection pools for reporting replicas were reduced to sixteen each ({tag}).",
    "Mobile release trains leave every second Thursday after the regression suite passes ({tag}).",
    "Shipping label printing falls back to the secondary carrier when the primary times out "
    "({tag}).",
    "Audit logs are retained for 400 days in cold storage to satisfy the compliance review "
    "({tag}).",
    "The recommendation service reads embeddings from the feature store, not from S3 ({tag}).",
    "Warehouse robots in hall B pause for firmware updates at 04:00 local time ({tag}).",
    "Refunds above two thousand euros require approval from a finance lead ({tag}).",
    "The GraphQL gateway rejects queries deeper than nine levels since the outage ({tag}).",
    "Inventory sync with the marketplace runs every five minutes with jittered start ({tag}).",
    "Build agents on the CI farm were upgraded to 32 gigabytes of memory each ({tag}).",
    "The legacy SOAP endpoint for partners will be switched off at the end of the quarter "
    "({tag}).",
    "Pager rotation for the platform team hands over on Mondays at 09:00 Berlin time ({tag}).",
    "Image thumbnails are generated lazily on first request and cached for thirty days ({tag}).",
    "Loyalty points expire eighteen months after the last qualifying purchase ({tag}).",
    "The tax calculation service pins the rules bundle released on the first of the month "
    "({tag}).",
    "Disk usage alerts on log shippers trigger at eighty five percent utilisation ({tag}).",
    "Chat support bots hand over to a human after three failed intent matches ({tag}).",
    "The pricing engine caches competitor prices for twenty minutes before refreshing ({tag}).",
    "Synthetic probes hit the login page from six regions every sixty seconds ({tag}).",
    "Invoice PDFs are rendered by the document service using the 2026 brand template ({tag}).",
    "The message queue dead-letter topic is drained manually by the on-call engineer ({tag}).",
    "Password reset tokens are valid for fifteen minutes and single use only ({tag}).",
    "Quarterly chaos drills target the payments path and are announced one week ahead ({tag}).",
    "The address validation API falls back to postal code checks when the provider is down "
    "({tag}).",
    "Load balancer idle timeouts were raised to 120 seconds for the streaming endpoints ({tag}).",
)
WINDOW_STATEMENTS: tuple[str, ...] = (
    "The airport kiosk fleet downloads menu updates over cellular after midnight ({tag}).",
    "Solar inverter telemetry is sampled every twelve seconds at the Sevilla plant ({tag}).",
    "Library checkout terminals lock after ninety seconds without a badge scan ({tag}).",
    "Greenhouse irrigation valves close when soil moisture exceeds forty one percent ({tag}).",
    "Ferry ticket scanners sync the passenger manifest before each departure ({tag}).",
    "Museum audio guides switch language packs based on the visitor wristband ({tag}).",
    "Vineyard weather stations report frost risk to the growers channel at dawn ({tag}).",
    "Stadium turnstiles reject tickets scanned twice within a ten minute window ({tag}).",
)


class PropagationParams(ExperimentParams):
    """Sizes and knobs; defaults are the paper's (section 7.4)."""

    n_rate_facts: int = Field(40, ge=1, le=len(RATE_STATEMENTS))
    n_window_facts: int = Field(8, ge=0, le=len(WINDOW_STATEMENTS))
    n_siblings: int = Field(3, ge=1)
    n_foreign: int = Field(2, ge=0)
    write_mode: str = "strong"
    reader_credential: ReaderCredential = "agent"
    search_top_k: int = Field(5, ge=1, le=20)
    sibling_deadline_s: float = Field(30.0, gt=0)
    sibling_poll_interval_s: float = Field(1.0, gt=0)
    window_poll_interval_s: float = Field(0.25, gt=0)
    window_deadline_s: float = Field(30.0, gt=0)
    n_redistribute_sibling: int = Field(2, ge=0)
    n_redistribute_cross_fleet: int = Field(1, ge=0)
    requester_trust: int = Field(1, ge=0, le=3)
    reader_trust: int = Field(1, ge=0, le=3)
    fleet_prefix: str = "prop-fleet"


@dataclass(frozen=True)
class Agent:
    agent_id: str
    fleet_id: str
    relation: str  # `writer`, `sibling` or `foreign`


@dataclass(frozen=True)
class PlannedFact:
    fact_id: str
    set: str  # `rate` or `window`
    content: str  # plan-level prose; `salted(content, nonce)` on the wire
    canary: str  # plan-level canary; `wire_canary(canary, nonce)` in metadata


@dataclass(frozen=True)
class PlannedRedistribute:
    fact_id: str
    target_agent: str
    relation: str  # `sibling` or `cross_fleet`


@dataclass(frozen=True)
class PropagationPlan:
    writer: Agent
    siblings: tuple[Agent, ...]
    foreign: tuple[Agent, ...]
    rate_facts: tuple[PlannedFact, ...]
    window_facts: tuple[PlannedFact, ...]
    redistributes: tuple[PlannedRedistribute, ...]

    @property
    def readers(self) -> tuple[Agent, ...]:
        return self.siblings + self.foreign

    @property
    def planned_counts(self) -> dict[str, int]:
        return {
            "reader": len(self.readers),
            "write": len(self.rate_facts) + len(self.window_facts),
            "probe": len(self.rate_facts) * len(self.readers),
            "window": len(self.window_facts),
            "redistribute": len(self.redistributes),
        }


def _facts(statements: tuple[str, ...], n: int, kind: str,
           draws: random.Random) -> tuple[PlannedFact, ...]:
    return tuple(
        PlannedFact(f"{kind}-{i:02d}", kind, statements[i].format(tag=f"{kind}-{i:02d}"),
                    f"canary-{draws.getrandbits(48):012x}")
        for i in range(n)
    )


def make_plan(params: PropagationParams) -> PropagationPlan:
    """Same seed, same plan (agents, facts, canaries, redistribute subset)."""
    home = f"{params.fleet_prefix}-0"
    writer = Agent("prop-writer", home, "writer")
    siblings = tuple(Agent(f"prop-sibling-{i}", home, "sibling")
                     for i in range(params.n_siblings))
    foreign = tuple(Agent(f"prop-foreign-{i}", f"{params.fleet_prefix}-{i + 1}", "foreign")
                    for i in range(params.n_foreign))
    canaries = rng(params.seed, "propagation:canaries")
    rate = _facts(RATE_STATEMENTS, params.n_rate_facts, "rate", canaries)
    window = _facts(WINDOW_STATEMENTS, params.n_window_facts, "window", canaries)
    redistributes = _redistribute_subset(params, rng(params.seed, "propagation:redistribute"),
                                         rate, siblings, foreign)
    return PropagationPlan(writer, siblings, foreign, rate, window, redistributes)


def _redistribute_subset(params: PropagationParams, rng: random.Random,
                         rate: tuple[PlannedFact, ...], siblings: tuple[Agent, ...],
                         foreign: tuple[Agent, ...]) -> tuple[PlannedRedistribute, ...]:
    cases = [("sibling", siblings[i % len(siblings)].agent_id)
             for i in range(params.n_redistribute_sibling)]
    if foreign:
        cases += [("cross_fleet", foreign[i % len(foreign)].agent_id)
                  for i in range(params.n_redistribute_cross_fleet)]
    cases = cases[: len(rate)]
    chosen = sorted(rng.sample(range(len(rate)), len(cases)))
    return tuple(PlannedRedistribute(rate[idx].fact_id, target, relation)
                 for idx, (relation, target) in zip(chosen, cases, strict=True))


def wire_canary(canary: str, nonce: str) -> str:
    return f"{canary}-{nonce}"


def write_body(plan: PropagationPlan, fact: PlannedFact, write_mode: str,
               nonce: str) -> dict[str, Any]:
    """The writer's fleet-scoped `POST /memories` body (tenant_id is added by the client)."""
    return {
        "agent_id": scoped(plan.writer.agent_id, nonce),
        "fleet_id": scoped(plan.writer.fleet_id, nonce),
        "content": salted(fact.content, nonce),
        "memory_type": "fact",
        "write_mode": write_mode,
        "visibility": "scope_team",
        "metadata": {"experiment": EXPERIMENT, "canary": wire_canary(fact.canary, nonce),
                     "fact_id": fact.fact_id},
    }


def search_body(reader: Agent, fact: PlannedFact, top_k: int, nonce: str) -> dict[str, Any]:
    """A reader's search for a fact: its own fleet in `fleet_ids`, the fact's prose as query,
    no `filter_agent_id` (an author filter that would hide the writer's rows)."""
    return {"query": salted(fact.content, nonce), "fleet_ids": [scoped(reader.fleet_id, nonce)],
            "top_k": top_k}


# -- phases ------------------------------------------------------------------------------


@dataclass
class Readers:
    """Per-run reader credentials (keys live here only, never in events or the manifest)."""

    creds: dict[str, Credential] = field(default_factory=dict)

    def credential(self, reader: Agent, fallback: Credential) -> Credential:
        return self.creds.get(reader.agent_id, fallback)

    def kind(self, reader: Agent) -> str:
        return "agent" if reader.agent_id in self.creds else "tenant"

    def identity(self, reader: Agent) -> str | None:
        """`provisioned` agent key, `asserted` X-Agent-ID, or None (tenant credential)."""
        cred = self.creds.get(reader.agent_id)
        if cred is None:
            return None
        return ASSERTED if cred.asserts_identity else PROVISIONED


async def setup_readers(ctx: RunContext, readers: Readers) -> None:
    """Give each reader its own identity: an agent key in its home fleet when asked for and
    the target provisions one (skip reason in the manifest when it does not); otherwise the
    tenant key, with the reader registered as an agent of its fleet by one search naming it
    in `filter_agent_id` (MemClaw auto-registers that agent, home fleet = the one fleet id),
    so it exists as a redistribute target."""
    for reader in ctx.plan.readers:
        agent_id, fleet_id = scoped(reader.agent_id, ctx.nonce), scoped(reader.fleet_id, ctx.nonce)
        if ctx.params.reader_credential == "agent" and ctx.tenant.asserts_identity:
            result, cred = await register_asserted_agent(
                ctx, agent_id, fleet_id, ctx.params.reader_trust, "propagation reader")
            if cred is not None:
                readers.creds[reader.agent_id] = cred
            else:
                ctx.trace.skip(f"asserted-identity reader {reader.agent_id}",
                               f"registering it failed ({result.error}); it searched with "
                               f"the tenant credential ({ctx.tenant.kind}) instead")
        elif ctx.params.reader_credential == "agent":
            result, cred = await ctx.client.provision_agent_key(
                ctx.tenant, agent_id, initial_trust=ctx.params.reader_trust,
                initial_fleet=fleet_id, label="fleetprobe propagation reader")
            if cred is not None:
                readers.creds[reader.agent_id] = cred
            else:
                ctx.trace.skip(f"agent-key reader {reader.agent_id}",
                               f"provisioning failed ({result.error}); it searched with "
                               "the tenant key instead")
        else:
            result = await ctx.client.search(ctx.tenant, {
                "query": f"register {agent_id}", "fleet_ids": [fleet_id],
                "filter_agent_id": agent_id, "top_k": 1})
        kind = readers.kind(reader)
        ctx.record("reader", result, reader_agent=agent_id, reader_fleet=fleet_id,
                   reader_relation=reader.relation, credential=kind,
                   trust=ctx.params.reader_trust if kind == "agent" else None,
                   identity=readers.identity(reader))


async def write_rate_facts(ctx: RunContext) -> None:
    await ctx.gather([_write_fact(ctx, fact) for fact in ctx.plan.rate_facts], desc="write")


async def _write_fact(ctx: RunContext, fact: PlannedFact) -> Result:
    result = await ctx.client.write(
        ctx.tenant, write_body(ctx.plan, fact, ctx.params.write_mode, ctx.nonce))
    ctx.record("write", result, fact_id=fact.fact_id, set=fact.set,
               writer_agent=scoped(ctx.plan.writer.agent_id, ctx.nonce),
               writer_fleet=scoped(ctx.plan.writer.fleet_id, ctx.nonce),
               canary=wire_canary(fact.canary, ctx.nonce),
               memory_id=body_field(result.body, "id") if result.status == 201 else None)
    return result


async def probe_rate_facts(ctx: RunContext, readers: Readers) -> None:
    """Every reader x every fact the server admitted (as recorded)."""
    written = {e["fact_id"] for e in ctx.events("write") if e["status"] == 201}
    probes = [_probe(ctx, readers, fact, reader)
              for fact in ctx.plan.rate_facts if fact.fact_id in written
              for reader in ctx.plan.readers]
    await ctx.gather(probes, desc="probe")


async def _probe(ctx: RunContext, readers: Readers, fact: PlannedFact, reader: Agent) -> None:
    """Siblings poll until the canary shows or the deadline passes; foreign readers try once."""
    cred = readers.credential(reader, ctx.tenant)
    body = search_body(reader, fact, ctx.params.search_top_k, ctx.nonce)
    canary = wire_canary(fact.canary, ctx.nonce)
    started = time.perf_counter()
    polls = 0
    while True:
        polls += 1
        result = await ctx.client.search(cred, body)
        visible = observed_visibility(result, canary)
        elapsed = time.perf_counter() - started
        if visible is not False or reader.relation != "sibling" or not result.ok \
                or elapsed >= ctx.params.sibling_deadline_s:
            break
        await asyncio.sleep(ctx.params.sibling_poll_interval_s)
    ctx.record("probe", result, fact_id=fact.fact_id,
               reader_agent=scoped(reader.agent_id, ctx.nonce),
               reader_relation=reader.relation, credential=readers.kind(reader),
               poll_count=polls, time_to_visible_ms=elapsed * 1000.0 if visible else None,
               **judge_probe(reader.relation, visible))


async def measure_window(ctx: RunContext, readers: Readers) -> None:
    """One fact at a time: write, then poll from write completion at the poll interval."""
    if not ctx.plan.window_facts:
        return
    reader = ctx.plan.siblings[0]
    for fact in ctx.progress(ctx.plan.window_facts, desc="window"):
        await ctx.client.pacers.acquire("search")  # the first poll must not wait for pacing
        write = await _write_fact(ctx, fact)
        if write.status != 201:
            continue
        await _poll_window(ctx, readers, fact, reader, written_at=time.perf_counter())


async def _poll_window(ctx: RunContext, readers: Readers, fact: PlannedFact, reader: Agent,
                       written_at: float) -> None:
    cred = readers.credential(reader, ctx.tenant)
    body = search_body(reader, fact, ctx.params.search_top_k, ctx.nonce)
    canary = wire_canary(fact.canary, ctx.nonce)
    polls = 0
    while True:
        polls += 1
        result = await (_search_unpaced(ctx, cred, body) if polls == 1
                        else ctx.client.search(cred, body))
        now = time.perf_counter()
        visible = observed_visibility(result, canary)
        timed_out = now - written_at >= ctx.params.window_deadline_s
        if visible is not False or not result.ok or timed_out:
            break
        next_tick = written_at + polls * ctx.params.window_poll_interval_s
        await asyncio.sleep(max(0.0, next_tick - now))
    ctx.record("window", result, fact_id=fact.fact_id,
               reader_agent=scoped(reader.agent_id, ctx.nonce), credential=readers.kind(reader),
               visible=visible, poll_count=polls,
               time_to_visible_ms=(now - written_at) * 1000.0 if visible else None)


async def _search_unpaced(ctx: RunContext, cred: Credential, body: dict[str, Any]) -> Result:
    """A search whose pacing slot the caller already reserved."""
    return await ctx.client.request("POST", "/search", cred=cred,
                                    json={"tenant_id": cred.tenant_id, **body})


async def redistribute_subset(ctx: RunContext) -> None:
    """Re-home the planned subset onto siblings / a foreign reader; GET shows the owner."""
    ids = {e["fact_id"]: e["memory_id"] for e in ctx.events("write") if e["memory_id"]}
    requester = scoped(ctx.plan.writer.agent_id, ctx.nonce)
    if not await _ensure_requester_trust(ctx, requester):
        return
    for case in ctx.plan.redistributes:
        memory_id = ids.get(case.fact_id)
        if memory_id is None:
            ctx.trace.skip(f"redistribute {case.fact_id}", "its write was not admitted")
            continue
        target = scoped(case.target_agent, ctx.nonce)
        result = await ctx.client.redistribute(ctx.tenant, [memory_id], target, requester)
        after = await ctx.client.get(ctx.tenant, memory_id)
        agent_after = body_field(after.body, "agent_id") if after.ok else None
        ctx.record("redistribute", result, memory_id=memory_id, requester_agent=requester,
                   requester_trust=ctx.params.requester_trust, target_agent=target,
                   relation=case.relation, moved=moved_count(result.body) if result.ok else None,
                   agent_id_after=agent_after, flipped=judge_flip(agent_after, target))


async def _ensure_requester_trust(ctx: RunContext, requester: str) -> bool:
    """Writers start at trust 1 (auto-created by their first write); any other requester
    trust is set with the tenant key first. False (and a skip reason) when that fails."""
    if ctx.params.requester_trust == 1 or not ctx.plan.redistributes:
        return True
    result = await ctx.client.patch_trust(ctx.tenant, requester, ctx.params.requester_trust,
                                          scoped(ctx.plan.writer.fleet_id, ctx.nonce))
    if result.ok:
        return True
    ctx.trace.skip("redistribute", f"could not set the requester's trust to "
                   f"{ctx.params.requester_trust} ({result.error})")
    return False



# -- checkers: pure functions over recorded responses and events -------------------------


def observed_visibility(result: Result, canary: str) -> bool | None:
    """Visible when a 2xx body carries the canary; a 4xx answer is an observed "not shown";
    a transport error, a 5xx or an unusable body leaves it unknown (None)."""
    if result.ok:
        return canary_seen(result.body, canary)
    if result.status is not None and 400 <= result.status < 500:
        return False
    return None


def canary_seen(search_body_returned: Any, canary: str) -> bool | None:
    """Whether a search response carries the canary (None: no usable body)."""
    if not isinstance(search_body_returned, dict):
        return None
    items = search_body_returned.get("items")
    if not isinstance(items, list):
        return None
    return any(
        isinstance(item, dict) and isinstance(item.get("metadata"), dict)
        and item["metadata"].get("canary") == canary
        for item in items
    )


def judge_probe(relation: str, visible: bool | None) -> dict[str, Any]:
    """A foreign reader that sees the canary is a cross-fleet leak; a sibling never leaks."""
    leak = None if visible is None else (relation == "foreign" and visible)
    return {"visible": visible, "leak": leak}


def moved_count(redistribute_body: Any) -> int | None:
    if isinstance(redistribute_body, dict) and isinstance(redistribute_body.get("moved"), int):
        return redistribute_body["moved"]
    return None


def judge_flip(agent_id_after: str | None, target_agent: str) -> bool | None:
    """Did the GET after redistribute show the row re-homed onto the target?"""
    return None if agent_id_after is None else agent_id_after == target_agent


@register
class Propagation(Experiment):
    name = EXPERIMENT
    Params = PropagationParams

    def make_plan(self, params: PropagationParams) -> PropagationPlan:
        return make_plan(params)

    def planned_counts(self, plan: PropagationPlan, params: PropagationParams) -> dict[str, int]:
        return plan.planned_counts

    def phases(self) -> list[Phase]:
        readers = Readers()  # one per run: phases() is called once per run
        return [partial(setup_readers, readers=readers), write_rate_facts,
                partial(probe_rate_facts, readers=readers),
                partial(measure_window, readers=readers), redistribute_subset]

    def checkers(self) -> list[Checker]:
        return []  # every judgement is made from the response it judges, as it is recorded
