"""The `propagation` plan: the params, the agents and the seeded facts and redistributes,
and the request bodies built from them (a pure function of the params)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from fleetprobe.harness.experiment import ExperimentParams
from fleetprobe.harness.seeding import rng, salted, scoped

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
