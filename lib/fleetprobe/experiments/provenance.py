"""Provenance experiment (paper section 7.3, results 8.2, Figure 4).

50 derivation chains of depth 4 (observation -> hypothesis -> mitigation -> verification),
one incident topic per chain from a pool of 25 (cycled), a planned writer per step among the
agents of one fleet. Each write carries `metadata.derived_from` = its parent's id. After the
writes settle, the harness GETs each chain's leaf and walks back through `derived_from`,
recording every fetch. The checker then grades, from the recorded events only:
completeness (every planned ancestor reached by GET), writer accuracy (observed `agent_id`
equals the planned writer at every fetched hop) and depth fidelity (walk length == depth).

Pacing ablation: `pace_writes_per_s` 8 (the paper) keeps writes below a 10/s limit; null
sends them unthrottled with no retry on 429, so a chain whose write is rate limited stops
there and is recorded as lost.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from fleetprobe.client import body_field
from fleetprobe.harness.experiment import (
    Checker,
    ClientParams,
    Experiment,
    ExperimentParams,
    Phase,
    RunContext,
    register,
)
from fleetprobe.harness.seeding import Fleet, fleets, rng, salted, scoped

STEPS = ("observation", "hypothesis", "mitigation", "verification")
TOPICS = (
    "checkout error rate spike",
    "Kafka consumer rebalance loop",
    "payment gateway timeout burst",
    "search index replication lag",
    "TLS certificate expiry on the edge proxy",
    "Redis eviction storm",
    "DNS resolution failures in us-east",
    "memory leak in the recommendation worker",
    "disk pressure on the logging cluster",
    "slow queries after the orders schema migration",
    "CDN cache hit ratio collapse",
    "OAuth token refresh failures",
    "pod crash loop in the billing service",
    "message queue dead-letter growth",
    "clock skew between database replicas",
    "API gateway 502 surge",
    "batch ETL job overrunning its window",
    "feature flag rollout causing login errors",
    "connection pool exhaustion in inventory",
    "elevated p99 latency on the pricing API",
    "object storage throttling on uploads",
    "autoscaler oscillation in the web tier",
    "stale reads from the read replica",
    "webhook delivery backlog to partners",
    "GPU node failures in the inference pool",
)
STEP_SENTENCES = {
    "observation": "Observed {topic}; dashboards show the symptom starting at minute {m}.",
    "hypothesis": "Hypothesis for {topic}: the change deployed {m} minutes earlier is the cause.",
    "mitigation": "Mitigation for {topic}: rolled back that change and drained {m} nodes.",
    "verification": "Verified {topic} resolved: metrics back to baseline for {m} minutes.",
}


class ProvenanceParams(ExperimentParams):
    chains: int = Field(50, ge=1)
    depth: int = Field(4, ge=1, le=len(STEPS))
    topics: int = Field(25, ge=1, le=len(TOPICS))
    agents: int = Field(4, ge=1, description="writers: agents of one fleet")
    # writes/second from the client; null = unthrottled (and no retry on 429)
    pace_writes_per_s: float | None = Field(8.0, gt=0)
    settle_s: float = Field(1.0, ge=0, description="wait between the last write and the walks")


@dataclass(frozen=True)
class PlannedStep:
    hop: int
    step: str
    writer: str  # plan-level agent name; `scoped(writer, nonce)` on the wire


@dataclass(frozen=True)
class Chain:
    chain_id: str
    topic: str
    minute: int
    steps: tuple[PlannedStep, ...]


@dataclass(frozen=True)
class ProvenancePlan:
    fleet: Fleet
    chains: tuple[Chain, ...]


def make_plan(params: ProvenanceParams) -> ProvenancePlan:
    fleet = fleets(1, params.agents)[0]
    writers = rng(params.seed, "provenance:writers")
    minutes = rng(params.seed, "provenance:minutes")
    chains = []
    for index in range(params.chains):
        steps = tuple(
            PlannedStep(hop, STEPS[hop], writers.choice(fleet.agents))
            for hop in range(params.depth)
        )
        topic = TOPICS[index % params.topics]
        chains.append(Chain(f"chain-{index:03d}", topic, minutes.randint(2, 59), steps))
    return ProvenancePlan(fleet, tuple(chains))


def content_for(chain: Chain, step: PlannedStep, nonce: str) -> str:
    sentence = STEP_SENTENCES[step.step].format(topic=chain.topic, m=chain.minute)
    return salted(f"[{chain.chain_id} {step.step}] {sentence}", nonce)


# -- phases ------------------------------------------------------------------------------


async def write_chains(ctx: RunContext) -> None:
    await ctx.gather([_write_chain(ctx, chain) for chain in ctx.plan.chains], desc="write")


async def _write_chain(ctx: RunContext, chain: Chain) -> None:
    """Sequential within a chain: a write needs its parent's id. A rejected write ends it."""
    pacing = "paced" if ctx.params.pace_writes_per_s else "unthrottled"
    fleet_id = scoped(ctx.plan.fleet.fleet_id, ctx.nonce)
    parent_id: str | None = None
    for step in chain.steps:
        writer = scoped(step.writer, ctx.nonce)
        result = await ctx.client.write(ctx.tenant, {
            "agent_id": writer,
            "fleet_id": fleet_id,
            "content": content_for(chain, step, ctx.nonce),
            "metadata": {"derived_from": parent_id, "chain_id": chain.chain_id,
                         "hop": step.hop, "step": step.step},
        })
        memory_id = body_field(result.body, "id") if result.status == 201 else None
        ctx.record("write", result, expect=("id",), chain_id=chain.chain_id,
                   hop=step.hop, step=step.step, writer_expected=writer,
                   memory_id=memory_id, parent_id=parent_id, pacing=pacing)
        if memory_id is None:
            return
        parent_id = memory_id


async def settle(ctx: RunContext) -> None:
    await asyncio.sleep(ctx.params.settle_s)


async def walk_chains(ctx: RunContext) -> None:
    """From each chain's deepest admitted write (as recorded), GET back to the root."""
    written = _admitted_writes(ctx.events("write"))
    walks = [_walk(ctx, chain_id, writes) for chain_id, writes in written.items()]
    await ctx.gather(walks, desc="walk")


async def _walk(ctx: RunContext, chain_id: str, writes: dict[str, dict[str, Any]]) -> None:
    leaf = max(writes.values(), key=lambda w: w["hop"])
    memory_id: str | None = leaf["memory_id"]
    visited: set[str] = set()
    while memory_id and memory_id not in visited and len(visited) <= ctx.params.depth:
        visited.add(memory_id)
        result = await ctx.client.get(ctx.tenant, memory_id)
        planned = writes.get(memory_id, {})
        metadata = body_field(result.body, "metadata") if result.ok else None
        parent = body_field(metadata, "derived_from")
        ctx.record("walk", result, expect=("agent_id", "metadata"), chain_id=chain_id,
                   hop=planned.get("hop"), memory_id=memory_id,
                   writer_expected=planned.get("writer_expected"),
                   writer_observed=body_field(result.body, "agent_id") if result.ok else None,
                   parent_observed=parent)
        memory_id = parent if result.ok else None


# -- checker -----------------------------------------------------------------------------


def grade_chains(ctx: RunContext) -> None:
    """One `chain` judgement per planned chain, from the recorded write and walk events."""
    admitted = _admitted_writes(ctx.events("write"))
    walks: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in ctx.events("walk"):  # file order == seq order
        walks[event["chain_id"]].append(event)
    for chain in ctx.plan.chains:
        ctx.record("chain", **grade_chain(
            chain.chain_id, len(chain.steps), admitted.get(chain.chain_id, {}),
            walks.get(chain.chain_id, []),
        ))


def grade_chain(
    chain_id: str,
    depth_planned: int,
    admitted: dict[str, dict[str, Any]],
    walk: list[dict[str, Any]],
) -> dict[str, Any]:
    """Judge one chain. `admitted`: memory_id -> write event (201); `walk`: walk events in
    order. The reconstructed chain is the run of successful, linked fetches from the leaf."""
    fetched: list[dict[str, Any]] = []
    for event in walk:
        linked = not fetched or fetched[-1]["parent_observed"] == event["memory_id"]
        if event["status"] != 200 or not linked:
            break
        fetched.append(event)
    reached_root = bool(fetched) and fetched[-1]["parent_observed"] is None
    fetched_ids = {e["memory_id"] for e in fetched}
    depth_observed = len(fetched)
    return {
        "chain_id": chain_id,
        "depth_planned": depth_planned,
        "depth_observed": depth_observed,
        "complete": (len(admitted) == depth_planned and reached_root
                     and fetched_ids == set(admitted)),
        "accurate": bool(fetched) and all(
            e["writer_observed"] is not None and e["writer_observed"] == e["writer_expected"]
            for e in fetched
        ),
        "depth_faithful": depth_observed == depth_planned and reached_root,
        "writes_admitted": len(admitted),
    }


def _admitted_writes(events: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """chain_id -> {memory_id: write event} for writes the server admitted (201)."""
    chains: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for event in events:
        if event["status"] == 201 and event["memory_id"]:
            chains[event["chain_id"]][event["memory_id"]] = event
    return dict(chains)



@register
class Provenance(Experiment):
    name = "provenance"
    Params = ProvenanceParams

    def make_plan(self, params: ProvenanceParams) -> ProvenancePlan:
        return make_plan(params)

    def planned_counts(self, plan: ProvenancePlan, params: ProvenanceParams) -> dict[str, int]:
        writes = sum(len(chain.steps) for chain in plan.chains)
        return {"write": writes, "walk": writes, "chain": len(plan.chains)}

    def phases(self) -> list[Phase]:
        return [write_chains, settle, walk_chains]

    def checkers(self) -> list[Checker]:
        return [grade_chains]

    def client_params(self, params: ProvenanceParams) -> ClientParams:
        paced = params.pace_writes_per_s is not None
        return params.client.model_copy(update={
            "writes_per_s": params.pace_writes_per_s,
            "retry_on_429": params.client.retry_on_429 and paced,
        })
