"""The `contradiction` phases: subject entities, the write pairs with their stale reads,
and the re-fetch of every admitted row."""

from __future__ import annotations

import asyncio
from typing import Any

from fleetprobe.client import body_field
from fleetprobe.experiments.contradiction.check import active_rows_of, is_stale, reject_reason
from fleetprobe.experiments.contradiction.plan import (
    CONTRADICTION_FLEET,
    SCENARIOS,
    PlannedFact,
    PlannedWrite,
    fact_key,
    stale_read_query,
    write_body,
)
from fleetprobe.harness.experiment import RunContext
from fleetprobe.harness.seeding import scoped


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
