"""The `contradiction` plan: the fact templates, the params, and a seeded plan of facts,
each with its two write pairs (a pure function of the params)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from fleetprobe.harness.experiment import ExperimentParams
from fleetprobe.harness.seeding import rng, salted, scoped, spelled

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
