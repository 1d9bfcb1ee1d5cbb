"""Contradiction experiment (paper 7.2, 8.4, 9.2): does the server supersede a fact when two
writes assert different values for the same single-valued predicate, and how many such writes
does it admit in the first place?

Plan. `n_facts` facts cycle through `TEMPLATES` (20 subject-predicate pairs on predicates in
MemClaw's `SINGLE_VALUE_PREDICATES`, the list its engine ships). Fact `i` uses template
`i % 20` and its own subject entity (`<stem>-<a word spelled from i>`, run-scoped by the
nonce, upserted once); content is
salted by the nonce. Every fact runs two scenarios, `sequential` (write 0,
`sequential_delay_s`, write 1) then `concurrent` (writes 0 and 1 dispatched together), each
pair asserting two different `object_value`s (`A` then `B`, drawn per fact from the template's
pool by the seed). Both scenarios assert the same `A`, `B`.

Prose (what each write's `content` says; the triple fields are the same in every mode):
- `prose_diversity="low"`: write `i` of both scenarios uses sentence frame `i`, so the concurrent
  pair repeats the sequential pair's sentences verbatim. This is the generator the paper's
  "dominated by exact-content duplicates" suggests: with one writer per fact the concurrent pair
  meets MemClaw's exact-duplicate check (tenant + fleet + agent + content hash).
- `prose_diversity="high"`: the four writes use four different frames, so no two writes of a
  fact share a sentence apart from the subject, predicate phrase and value.
- `pair_prose="frames"` (default): the frames above are short, distinct sentences, so the two
  writes of a pair are not near-duplicates of each other.
- `pair_prose="value_only"`: both writes of a pair use one long shared paragraph that differs
  only in the object value (scenario `s` uses long frame `s` under `high`, frame 0 under `low`),
  so their cosine sits above a strong-mode near-duplicate gate: the paper's 9.2 case, "X is A"
  then "X is B".

Writers. `writer_assignment="per_fact"` (default): one agent writes all four writes of a fact
(the paper does not say; one writer per fact is the simplest reading), agents cycle through a
pool of `n_writer_agents` in one fleet. `per_scenario`: the two scenarios of a fact use two
different agents, which takes MemClaw's agent-scoped exact-duplicate check out of play; under
`prose_diversity="low"` the repeated sentences then meet the strong-mode near-duplicate gate
(which compares across agents) instead, so the paper's "dominated by exact-content duplicates"
fits one writer per fact.

Schedule. Entities first; then each fact writes its two pairs (`fact_concurrency` facts at a
time), waits `settle_s` and runs its two stale reads (an active-only search per fact-run), so
the searches of early facts overlap the writes of later ones; then one GET re-fetch of every
admitted row, by which time every fact's settle window has passed.

Checkers judge the recorded events only: a fact-run is `detected` when a post-settle GET of one
of its admitted rows shows `supersedes_id` set or a status other than `active`.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from fleetprobe.client import body_field
from fleetprobe.plans import rng, salted, scoped, spelled
from fleetprobe.runner import Checker, Experiment, ExperimentParams, Phase, RunContext, register

EXPERIMENT = "contradiction"
SCENARIOS = ("sequential", "concurrent")
CONTRADICTION_FLEET = "contradiction-fleet"
ProseDiversity = Literal["low", "high"]
PairProse = Literal["frames", "value_only"]
WriterAssignment = Literal["per_fact", "per_scenario"]


@dataclass(frozen=True)
class FactTemplate:
    """A subject-predicate pair: `phrase` names the predicate in prose."""

    template_id: str
    entity_type: str
    subject_stem: str
    predicate: str
    phrase: str
    values: tuple[str, ...]


TEMPLATES: tuple[FactTemplate, ...] = (
    FactTemplate("t00", "service", "billing-service", "region", "primary region",
                 ("frankfurt", "virginia", "oregon", "singapore", "dublin", "tokyo")),
    FactTemplate("t01", "service", "checkout-api", "runs_on", "runtime platform",
                 ("kubernetes", "nomad", "fargate", "lambda", "baremetal", "openshift")),
    FactTemplate("t02", "service", "search-indexer", "maintained_by", "maintaining team",
                 ("atlas", "borealis", "cobalt", "meridian", "ember", "quasar")),
    FactTemplate("t03", "incident", "incident", "status", "current status",
                 ("open", "mitigated", "resolved", "escalated", "monitoring", "closed")),
    FactTemplate("t04", "library", "payments-sdk", "version", "pinned release",
                 ("aurora", "bluejay", "cedar", "dunlin", "egret", "fennec")),
    FactTemplate("t05", "database", "orders-db-primary", "located_in", "hosting datacenter",
                 ("fra1", "iad2", "pdx3", "sin1", "dub2", "nrt1")),
    FactTemplate("t06", "person", "oncall-engineer", "reports_to", "reporting manager",
                 ("okafor", "lindqvist", "tanaka", "moreau", "haddad", "kowalski")),
    FactTemplate("t07", "project", "ledger-migration", "deadline", "delivery deadline",
                 ("2026-07-01", "2026-08-15", "2026-09-30", "2026-10-31", "2026-12-01",
                  "2027-01-15")),
    FactTemplate("t08", "vendor", "cdn-vendor", "email", "escalation contact",
                 ("noc@fastedge.example", "ops@cloudveil.example", "desk@arcnet.example",
                  "support@lumen.example", "sre@nimbus.example", "help@orbit.example")),
    FactTemplate("t09", "plan", "enterprise-plan", "price", "monthly list price",
                 ("usd-1200", "usd-1350", "usd-1500", "usd-1650", "usd-1800", "usd-1950")),
    FactTemplate("t10", "person", "staff-engineer", "role", "assigned role",
                 ("architect", "tech-lead", "incident-commander", "reviewer", "mentor",
                  "release-captain")),
    FactTemplate("t11", "service", "auth-gateway", "status", "rollout status",
                 ("canary", "staged", "live", "paused", "rolled-back", "frozen")),
    FactTemplate("t12", "cluster", "analytics-cluster", "region", "home region",
                 ("eu-north", "us-central", "ap-southeast", "sa-east", "me-central",
                  "af-south")),
    FactTemplate("t13", "job", "nightly-etl", "runs_on", "scheduler",
                 ("airflow", "dagster", "prefect", "cron", "argo", "temporal")),
    FactTemplate("t14", "repository", "mobile-app-repo", "managed_by", "managing team",
                 ("apollo", "helios", "orion", "vega", "lyra", "draco")),
    FactTemplate("t15", "service", "notification-service", "version", "deployed build",
                 ("build-481", "build-502", "build-517", "build-533", "build-548",
                  "build-561")),
    FactTemplate("t16", "office", "support-hub", "located_in", "office city",
                 ("lisbon", "krakow", "austin", "manila", "nairobi", "montreal")),
    FactTemplate("t17", "team", "platform-team", "owned_by", "budget owner",
                 ("engineering", "operations", "finance", "security", "product", "research")),
    FactTemplate("t18", "person", "release-manager", "title", "job title",
                 ("director", "principal", "senior-manager", "vp", "head", "lead")),
    FactTemplate("t19", "feature", "dark-mode-flag", "status", "flag state",
                 ("enabled", "disabled", "ramping", "archived", "experimental", "blocked")),
)

# Short frames: four distinct sentences around the same triple.
FRAMES: tuple[str, ...] = (
    "Update from the platform log: the {phrase} of {subject} is {value}.",
    "As of this morning's change review, {subject} has {value} as its {phrase}.",
    "Operators confirmed on the bridge call that {subject} now lists {value} for {phrase}.",
    "Per the latest runbook entry, the {phrase} recorded for {subject} is set to {value}.",
)

# Long frames: a paragraph that the two writes of a pair share verbatim apart from the value,
# so that a strong-mode near-duplicate gate (MemClaw: cosine >= 0.97) sees the pair as
# near-identical. The subject is repeated throughout, so paragraphs about different facts stay
# well apart and the gate only ever pairs a write with its own fact.
LONG_FRAMES: tuple[str, ...] = (
    "Knowledge base entry for {subject}: every agent of the fleet consults the {subject} "
    "record before acting on {subject}. The {subject} record was compiled from the weekly "
    "infrastructure review of {subject}, the change advisory minutes about {subject} and the "
    "{subject} incident retrospective, and was cross checked against the {subject} "
    "configuration history. Treat it as the authoritative statement on {subject} for planning "
    "and escalation until a later {subject} record replaces it. According to that review "
    "the {phrase} of {subject} is {value}.",
    "Quarterly architecture audit of {subject}, carried over verbatim: auditors interviewed "
    "the {subject} owners, sampled {subject} dashboards, replayed {subject} alert histories "
    "and reconciled {subject} invoices with the asset register. Reviewers of {subject} signed "
    "off the closing workshop notes on {subject}, so tooling and roadmaps touching {subject} "
    "may rely on this {subject} entry without further confirmation. The audit states that "
    "{subject} has {value} as its {phrase}.",
)


class ContradictionParams(ExperimentParams):
    """Sizes and knobs; defaults are the paper's (section 7.2)."""

    n_facts: int = Field(100, ge=1, le=16**3)  # subjects are spelled from 3 hex digits
    n_templates: int = Field(20, ge=1, le=len(TEMPLATES))
    write_mode: str = "strong"
    prose_diversity: ProseDiversity = "low"
    pair_prose: PairProse = "frames"
    writer_assignment: WriterAssignment = "per_fact"
    n_writer_agents: int = Field(10, ge=1)
    sequential_delay_s: float = Field(0.5, ge=0, description="gap inside the sequential pair")
    settle_s: float = Field(20.0, ge=0, description="wait after a fact's last write, before its "
                           "stale reads (so also before the re-fetch of every row)")
    fact_concurrency: int = Field(4, ge=1, description="facts whose pairs run at once")
    stale_read_top_k: int = Field(20, ge=1, le=20)


@dataclass(frozen=True)
class PlannedWrite:
    scenario: str
    write_index: int
    object_value: str
    content: str  # plan-level prose; `salted(content, nonce)` on the wire
    writer: str  # plan-level agent name; `scoped(writer, nonce)` on the wire


@dataclass(frozen=True)
class PlannedFact:
    fact_id: str
    template_id: str
    entity_type: str
    subject: str  # plan-level subject name; `scoped(subject, nonce)` is the entity
    predicate: str
    phrase: str
    writes: tuple[PlannedWrite, ...]

    def scenario_writes(self, scenario: str) -> tuple[PlannedWrite, ...]:
        return tuple(w for w in self.writes if w.scenario == scenario)


@dataclass(frozen=True)
class ContradictionPlan:
    facts: tuple[PlannedFact, ...]

    @property
    def planned_counts(self) -> dict[str, int]:
        n = len(self.facts)
        runs = n * len(SCENARIOS)
        return {"entity": n, "write": 4 * n, "check": runs, "stale_read": runs}


def writer_for(params: ContradictionParams, fact_index: int, scenario_index: int) -> str:
    slot = fact_index if params.writer_assignment == "per_fact" else 2 * fact_index + scenario_index
    return f"contradiction-writer-{slot % params.n_writer_agents:02d}"


def frame_for(params: ContradictionParams, scenario_index: int, write_index: int) -> str:
    """The sentence frame of one write; see the module docstring for what each knob does."""
    if params.pair_prose == "value_only":
        return LONG_FRAMES[scenario_index if params.prose_diversity == "high" else 0]
    if params.prose_diversity == "high":
        return FRAMES[2 * scenario_index + write_index]
    return FRAMES[write_index]


def make_plan(params: ContradictionParams) -> ContradictionPlan:
    """Same seed, same plan (subjects, templates, values, writers, prose)."""
    values_rng = rng(params.seed, "contradiction:values")
    templates = TEMPLATES[: params.n_templates]
    facts = []
    for i in range(params.n_facts):
        template = templates[i % len(templates)]
        values = values_rng.sample(template.values, 2)
        subject = f"{template.subject_stem}-{spelled(i, 3)}"  # a word unique to the fact
        writes = tuple(
            PlannedWrite(
                scenario=scenario,
                write_index=w,
                object_value=values[w],
                content=frame_for(params, s, w).format(
                    phrase=template.phrase, subject=subject, value=values[w]
                ),
                writer=writer_for(params, i, s),
            )
            for s, scenario in enumerate(SCENARIOS)
            for w in range(2)
        )
        facts.append(PlannedFact(f"fact-{i:03d}", template.template_id, template.entity_type,
                                 subject, template.predicate, template.phrase, writes))
    return ContradictionPlan(tuple(facts))


def stale_read_query(fact: PlannedFact, nonce: str) -> str:
    """Names the fact, not one phrasing of it: every row of the fact carries all of these
    words and rows of other facts lack the subject's own word, so the fact's rows rank first."""
    return salted(f"the {fact.phrase} of {fact.subject}", nonce)


def fact_key(fact_id: str, nonce: str) -> str:
    """The fact's identifier in each row's metadata (run-unique, found again by search)."""
    return f"{nonce}-{fact_id}"


def write_body(fact: PlannedFact, write: PlannedWrite, subject_entity_id: str | None,
               params: ContradictionParams, nonce: str) -> dict[str, Any]:
    """The `POST /memories` body of one planned write (tenant_id is added by the client)."""
    return {
        "agent_id": scoped(write.writer, nonce),
        "fleet_id": scoped(CONTRADICTION_FLEET, nonce),
        "content": salted(write.content, nonce),
        "memory_type": "fact",
        "write_mode": params.write_mode,
        "visibility": "scope_team",
        "subject_entity_id": subject_entity_id,
        "predicate": fact.predicate,
        "object_value": write.object_value,
        "metadata": {
            "experiment": EXPERIMENT,
            "fact_key": fact_key(fact.fact_id, nonce),
            "scenario": write.scenario,
            "write_index": write.write_index,
        },
    }


# -- phases ------------------------------------------------------------------------------


async def upsert_subjects(ctx: RunContext) -> None:
    """One subject entity per fact; its id becomes the writes' `subject_entity_id`."""
    await ctx.gather([_upsert_subject(ctx, fact) for fact in ctx.plan.facts], desc="entities")


async def _upsert_subject(ctx: RunContext, fact: PlannedFact) -> None:
    result = await ctx.client.upsert_entity(ctx.tenant, {
        "fleet_id": scoped(CONTRADICTION_FLEET, ctx.nonce),
        "entity_type": fact.entity_type,
        "canonical_name": scoped(fact.subject, ctx.nonce),
    })
    ctx.record("entity", result, fact_id=fact.fact_id,
               subject_entity_id=body_field(result.body, "id") if result.ok else None)


async def write_pairs(ctx: RunContext) -> None:
    """Per fact: the sequential pair, then the concurrent pair (facts overlap up to a cap);
    then, once the fact's own settle window has passed, its stale reads. Facts have their own
    subjects, so a fact's rows are final when its detection has run: reading it while later
    facts are still being written lets the searches (100 a minute) overlap the writes instead
    of queueing behind them all."""
    entities = {e["fact_id"]: e["subject_entity_id"] for e in ctx.events("entity")}
    gate = asyncio.Semaphore(ctx.params.fact_concurrency)
    await ctx.gather(
        [_fact_run(ctx, fact, entities.get(fact.fact_id), gate) for fact in ctx.plan.facts],
        desc="write, settle, stale read",
    )


async def _fact_run(ctx: RunContext, fact: PlannedFact, entity_id: str | None,
                    gate: asyncio.Semaphore) -> None:
    async with gate:
        first, second = fact.scenario_writes("sequential")
        await _write(ctx, fact, first, entity_id)
        await asyncio.sleep(ctx.params.sequential_delay_s)
        await _write(ctx, fact, second, entity_id)
        pair = fact.scenario_writes("concurrent")
        await _reserve_write_slots(ctx, len(pair))
        await asyncio.gather(*(_write(ctx, fact, w, entity_id, paced=False) for w in pair))
    await asyncio.sleep(ctx.params.settle_s)  # detection runs after commit, asynchronously
    for scenario in SCENARIOS:
        await _stale_read(ctx, fact, scenario)


async def _reserve_write_slots(ctx: RunContext, n: int) -> None:
    """Take `n` write-pacing slots up front, so the concurrent pair can then leave together
    (the client's pacer would otherwise space them `1/writes_per_s` apart)."""
    for _ in range(n):
        await ctx.client.pacers.acquire("write")


async def _write(ctx: RunContext, fact: PlannedFact, write: PlannedWrite,
                 entity_id: str | None, *, paced: bool = True) -> None:
    body = write_body(fact, write, entity_id, ctx.params, ctx.nonce)
    if paced:
        result = await ctx.client.write(ctx.tenant, body)
    else:  # the slot was reserved by the caller
        result = await ctx.client.request(
            "POST", "/memories", cred=ctx.tenant,
            json={"tenant_id": ctx.tenant.tenant_id, **body},
        )
    answered = result.status is not None
    ctx.record(
        "write", result, fact_id=fact.fact_id, scenario=write.scenario,
        write_index=write.write_index, template_id=fact.template_id, predicate=fact.predicate,
        object_value=write.object_value,
        memory_id=body_field(result.body, "id") if result.status == 201 else None,
        admitted=(result.status == 201) if answered else None,
        reject_reason=reject_reason(result.status, result.error) if answered else None,
        prose_diversity=ctx.params.prose_diversity,
    )


async def refetch_admitted(ctx: RunContext) -> None:
    """GET every admitted row (as recorded) to observe its status and supersession edge; every
    fact's settle window has passed by now (the last fact's stale reads waited for it)."""
    admitted = [w for w in ctx.events("write") if w["status"] == 201 and w["memory_id"]]
    await ctx.gather([_refetch(ctx, w) for w in admitted], desc="refetch")


async def _refetch(ctx: RunContext, write: dict[str, Any]) -> None:
    result = await ctx.client.get(ctx.tenant, write["memory_id"])
    ctx.record(
        "refetch", result, fact_id=write["fact_id"], scenario=write["scenario"],
        write_index=write["write_index"], memory_id=write["memory_id"],
        observed_status=body_field(result.body, "status") if result.ok else None,
        observed_supersedes_id=body_field(result.body, "supersedes_id") if result.ok else None,
    )


async def _stale_read(ctx: RunContext, fact: PlannedFact, scenario: str) -> None:
    result = await ctx.client.search(ctx.tenant, {
        "query": stale_read_query(fact, ctx.nonce),
        "fleet_ids": [scoped(CONTRADICTION_FLEET, ctx.nonce)],
        "status_filter": "active",
        "top_k": ctx.params.stale_read_top_k,
    })
    active = active_rows_of(result.body, fact_key(fact.fact_id, ctx.nonce), scenario) \
        if result.ok else None
    ctx.record("stale_read", result, fact_id=fact.fact_id, scenario=scenario,
               active_rows=active, stale=is_stale(active))


def check_fact_runs(ctx: RunContext) -> None:
    """One `check` judgement per planned fact-run, from recorded write and refetch events."""
    writes: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    refetches: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for event in ctx.events("write"):
        writes[(event["fact_id"], event["scenario"])].append(event)
    for event in ctx.events("refetch"):
        refetches[(event["fact_id"], event["scenario"])].append(event)
    for fact in ctx.plan.facts:
        for scenario in SCENARIOS:
            key = (fact.fact_id, scenario)
            ctx.record("check", fact_id=fact.fact_id, scenario=scenario,
                       **judge_fact_run(writes[key], refetches[key]))



# -- checkers: pure functions over recorded events ---------------------------------------

REJECT_MESSAGES = (
    ("Near-duplicate memory exists", "near_duplicate"),
    ("Duplicate memory exists", "exact_duplicate"),
)


def reject_reason(status: int | None, error: str | None) -> str | None:
    """Why a write was not admitted, from its status and the server's message."""
    if status == 201:
        return None
    if status == 429:
        return "rate_limited"
    if status == 409 and error:
        for message, reason in REJECT_MESSAGES:
            if message in error:
                return reason
    return "other"


def judge_fact_run(writes: list[dict[str, Any]], refetches: list[dict[str, Any]]) -> dict[str, Any]:
    """The `check` fields of one fact-run from its `write` and `refetch` events.

    Detected when a re-fetched admitted row of this run carries `supersedes_id` (it is the newer
    row of a supersession) or has left `active` (it is the older row). A run with one admitted
    write can still be detected when that row was superseded by, or superseded, a row of the
    fact's other scenario (the paper's cross-scenario detections).
    """
    n_admitted = sum(1 for w in writes if w.get("admitted"))
    seen = [r for r in refetches if r.get("status") == 200]
    newer = [r for r in seen if r.get("observed_supersedes_id")]
    older = [r for r in seen if r.get("observed_status") not in (None, "active")]
    triggered = newer or older
    return {
        "both_admitted": n_admitted == 2,
        "n_admitted": n_admitted,
        "detected": bool(triggered),
        "triggered_memory_id": triggered[0]["memory_id"] if triggered else None,
    }


def active_rows_of(search_body: Any, fact_key: str, scenario: str) -> int | None:
    """How many returned rows carry this fact-run's identifier (None: no usable body)."""
    if not isinstance(search_body, dict) or not isinstance(search_body.get("items"), list):
        return None
    count = 0
    for item in search_body["items"]:
        meta = item.get("metadata") if isinstance(item, dict) else None
        if isinstance(meta, dict) and meta.get("fact_key") == fact_key \
                and meta.get("scenario") == scenario:
            count += 1
    return count


def is_stale(active_rows: int | None) -> bool | None:
    """A fact-run reads stale when an active-only search still returns both of its rows."""
    return None if active_rows is None else active_rows > 1


@register
class Contradiction(Experiment):
    name = EXPERIMENT
    Params = ContradictionParams

    def make_plan(self, params: ContradictionParams) -> ContradictionPlan:
        return make_plan(params)

    def planned_counts(self, plan: ContradictionPlan,
                       params: ContradictionParams) -> dict[str, int]:
        return plan.planned_counts

    def phases(self) -> list[Phase]:
        return [upsert_subjects, write_pairs, refetch_admitted]

    def checkers(self) -> list[Checker]:
        return [check_fact_runs]
