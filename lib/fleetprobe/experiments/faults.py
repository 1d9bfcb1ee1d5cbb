"""Faults: the contradiction and provenance workloads under injected faults, judged by
history checkers (a generator / client / nemesis / checker suite, in the manner of Jepsen).

Workloads, run concurrently through a client whose transport injects faults
(`fleetprobe.harness.nemesis.FaultTransport`: added latency, 5xx and 429 answers, connection resets
before the server sees a request or after it answered) while the nemesis kills the bundled
server with SIGKILL and restarts it on the same database (`ServerNemesis`):

- contradiction: `facts` subjects, each asserting `values_per_fact` successive values of a
  single-valued predicate (RDF triple), one after the other, so the server's detector must
  leave exactly one active head per (subject, predicate);
- provenance: `chains` derivation chains of `depth` writes, each naming its parent in
  `metadata.derived_from`.

Every write carries an `Idempotency-Key` (from its request id), so a retry after a lost
answer must replay, not duplicate. Each acknowledged write is read back by id
`read_delay_s` later. After the workloads the harness waits for detection to settle and
audits every stored row with a client no fault touches. The checkers
(`fleetprobe.oracle.checkers`) then judge the recorded events only: no acknowledged write lost,
bounded staleness, an acyclic supersession graph with one active head per subject and
predicate, no duplicate row per write, every chain link stored as written, every 5xx and
reset accounted for.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
from pydantic import Field

from fleetprobe.client import MemClawClient, Result, body_field
from fleetprobe.harness.experiment import (
    Checker,
    ClientParams,
    Experiment,
    ExperimentParams,
    Phase,
    RunContext,
    make_client,
    register,
)
from fleetprobe.harness.nemesis import (
    REQUEST_HEADER,
    Attempt,
    Fault,
    FaultRates,
    FaultSchedule,
    FaultTransport,
    ServerNemesis,
)
from fleetprobe.harness.seeding import rng, salted, scoped
from fleetprobe.harness.trace import iso, utc_now
from fleetprobe.oracle.checkers import check_all

# Single-valued in MemClaw's engine (its SINGLE_VALUE_PREDICATES), so supersession applies and
# the one-active-head checker has something to judge; `owner` is multi-valued there.
PREDICATES = ("region", "maintained_by", "version", "tier", "location", "managed_by")
VALUES = ("Frankfurt", "Dublin", "Oregon", "Tokyo", "Sydney", "Montreal", "Zurich", "Mumbai")
STEPS = ("observation", "hypothesis", "mitigation", "verification")
FLEET = "ops"


class FaultsParams(ExperimentParams):
    facts: int = Field(12, ge=1, le=500)
    values_per_fact: int = Field(3, ge=2, le=len(VALUES))
    chains: int = Field(8, ge=0, le=500)
    depth: int = Field(4, ge=1, le=len(STEPS))
    faults: FaultRates = FaultRates()
    # at most this many injected transport faults in the whole run (bounded nemesis)
    max_faults: int = Field(500, ge=0)
    # SIGKILL + restart of the bundled server at these offsets (s) from the workload start
    kill_at_s: list[float] = Field(default_factory=lambda: [2.0])
    down_s: float = Field(0.3, ge=0, le=10)
    # a kill never comes sooner than this after the previous restart answered health
    min_uptime_s: float = Field(3.0, ge=0)
    pace_writes_per_s: float | None = Field(8.0, gt=0)
    # false = writes carry no Idempotency-Key (an ablation: what retries do without one)
    idempotency_keys: bool = True
    staleness_window_s: float = Field(0.5, ge=0)
    read_delay_s: float = Field(0.6, ge=0)
    # a transport error up to this long after a restart still belongs to the outage
    kill_slack_s: float = Field(2.0, ge=0)
    settle_timeout_s: float = Field(30.0, gt=0)


@dataclass(frozen=True)
class PlannedWrite:
    workload: str
    item_id: str
    step_index: int
    request_id: str
    subject_entity_id: str | None = None
    predicate: str | None = None
    object_value: str | None = None


@dataclass(frozen=True)
class FaultsPlan:
    facts: tuple[tuple[PlannedWrite, ...], ...]
    chains: tuple[tuple[PlannedWrite, ...], ...]


def make_plan(params: FaultsParams) -> FaultsPlan:
    draw = rng(params.seed, "faults:facts")
    facts = []
    for f in range(params.facts):
        subject = str(uuid.UUID(int=draw.getrandbits(128), version=4))
        predicate = PREDICATES[f % len(PREDICATES)]
        values = draw.sample(VALUES, params.values_per_fact)
        facts.append(tuple(
            PlannedWrite("contradiction", f"fact-{f:03d}", i, f"w-fact-{f:03d}-{i}", subject,
                         predicate, value) for i, value in enumerate(values)))
    chains = tuple(
        tuple(PlannedWrite("provenance", f"chain-{c:03d}", hop, f"w-chain-{c:03d}-{hop}")
              for hop in range(params.depth))
        for c in range(params.chains))
    return FaultsPlan(tuple(facts), chains)


def content_for(write: PlannedWrite, nonce: str) -> str:
    if write.workload == "contradiction":
        text = (f"[{write.item_id}] The {write.predicate} of service {write.item_id} is now "
                f"{write.object_value} (revision {write.step_index}).")
    else:
        text = (f"[{write.item_id} {STEPS[write.step_index]}] Incident note {write.step_index} "
                f"of {write.item_id}, derived from the previous step.")
    return salted(text, nonce)


def iso_now() -> str:
    return iso(utc_now())


def _epoch_iso(ts: float) -> str:
    return iso(datetime.fromtimestamp(ts, UTC))


# -- the nemesis, wired to the trace --------------------------------------------------------


@dataclass
class Nemesis:
    client: MemClawClient
    transport: FaultTransport
    server: ServerNemesis | None


def _recorders(ctx: RunContext) -> tuple[Any, Any]:
    def on_fault(fault_id: str, fault: Fault, request_id: str | None,
                 attempt: int | None) -> None:
        ctx.trace.event("fault", fault_id=fault_id, fault_kind=fault.kind,
                        fault_stage=fault.stage, request_id=request_id, attempt=attempt,
                        injected_status=fault.status, delay_ms=fault.delay_ms)

    def on_attempt(a: Attempt) -> None:
        result = Result(a.op, a.status, None, a.latency_ms, a.attempt, a.error)
        ctx.trace.event("attempt", result, request_id=a.request_id, attempt=a.attempt,
                        fault_id=a.fault_id, sent_at=_epoch_iso(a.sent_at),
                        answered_at=_epoch_iso(a.answered_at))

    return on_fault, on_attempt


def build_nemesis(ctx: RunContext) -> Nemesis:
    p: FaultsParams = ctx.params
    on_fault, on_attempt = _recorders(ctx)
    cp = Faults().client_params(p)
    inner = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=cp.max_concurrency * 2))
    transport = FaultTransport(inner, FaultSchedule(p.seed, p.faults), on_fault, on_attempt,
                               max_faults=p.max_faults)
    client = make_client(ctx.target.base_url, cp, transport=transport)
    server = None
    if p.kill_at_s and ctx.target.server is not None:
        server = ServerNemesis(ctx.target.server, p.kill_at_s, p.down_s, on_fault,
                               p.min_uptime_s)
    elif p.kill_at_s:
        ctx.trace.skip("kill", "the target is not a bundled server this run controls")
    return Nemesis(client, transport, server)


# -- phases ------------------------------------------------------------------------------


async def run_workloads(ctx: RunContext) -> None:
    nemesis = build_nemesis(ctx)
    async with nemesis.client:
        killer = asyncio.create_task(nemesis.server.run()) if nemesis.server else None
        try:
            sequences = [*ctx.plan.facts, *ctx.plan.chains]
            await ctx.gather([_sequence(ctx, nemesis.client, seq) for seq in sequences],
                             desc="faults")
        finally:
            if killer is not None:
                nemesis.server.stop()
                await killer


async def _sequence(ctx: RunContext, client: MemClawClient,
                    writes: tuple[PlannedWrite, ...]) -> None:
    """One fact's successive values, or one chain's hops: in order, each after the last
    was acknowledged; an unacknowledged write ends the sequence."""
    parent_id: str | None = None
    reads = []
    for write in writes:
        event = await _write(ctx, client, write, parent_id)
        if not event["acknowledged"]:
            break
        reads.append(asyncio.create_task(_read_back(ctx, client, write, event)))
        if write.workload == "provenance":
            parent_id = event["memory_id"]
    await asyncio.gather(*reads)


async def _write(ctx: RunContext, client: MemClawClient, write: PlannedWrite,
                 parent_id: str | None) -> dict[str, Any]:
    memory: dict[str, Any] = {
        "agent_id": scoped(f"{write.workload}-writer", ctx.nonce),
        "fleet_id": scoped(FLEET, ctx.nonce),
        "content": content_for(write, ctx.nonce),
        "metadata": {"fp_request": write.request_id, "workload": write.workload,
                     "derived_from": parent_id},
    }
    if write.subject_entity_id:
        memory.update(subject_entity_id=write.subject_entity_id, predicate=write.predicate,
                      object_value=write.object_value)
    headers = {REQUEST_HEADER: write.request_id}
    if ctx.params.idempotency_keys:
        headers["Idempotency-Key"] = f"{ctx.nonce}-{write.request_id}"
    sent = iso_now()
    result = await client.write(ctx.tenant, memory, headers=headers)
    memory_id = body_field(result.body, "id") if result.ok else None
    return ctx.record("write", result, expect=("id",), workload=write.workload,
                      request_id=write.request_id, item_id=write.item_id,
                      step_index=write.step_index, subject_entity_id=write.subject_entity_id,
                      predicate=write.predicate, object_value=write.object_value,
                      parent_id=parent_id, memory_id=memory_id,
                      acknowledged=memory_id is not None, sent_at=sent, answered_at=iso_now())


async def _read_back(ctx: RunContext, client: MemClawClient, write: PlannedWrite,
                     written: dict[str, Any]) -> None:
    await asyncio.sleep(ctx.params.read_delay_s)
    request_id = "r" + write.request_id[1:]
    sent = iso_now()
    result = await client.get(ctx.tenant, written["memory_id"],
                              headers={REQUEST_HEADER: request_id})
    ctx.record("read", result, workload=write.workload, request_id=request_id,
               write_request_id=write.request_id, memory_id=written["memory_id"],
               sent_at=sent, answered_at=iso_now(),
               found=result.status == 200 and body_field(result.body, "id") ==
               written["memory_id"])


async def settle(ctx: RunContext) -> None:
    """Wait (bounded) until no acknowledged contradiction write has detection pending."""
    pending = [e["memory_id"] for e in ctx.events("write")
               if e["acknowledged"] and e["workload"] == "contradiction"]
    deadline = time.monotonic() + ctx.params.settle_timeout_s
    while pending and time.monotonic() < deadline:
        answers = await asyncio.gather(*(ctx.client.contradictions(ctx.tenant, m)
                                         for m in pending))
        pending = [m for m, r in zip(pending, answers, strict=True)
                   if body_field(r.body, "detection_status") != "completed"]
        if pending:
            await asyncio.sleep(0.2)
    if pending:
        ctx.trace.skip("settle", f"{len(pending)} writes still had detection pending after "
                                 f"{ctx.params.settle_timeout_s:.0f} s")


async def audit(ctx: RunContext) -> None:
    """Every row of the run's tenant, deleted ones too, through the clean client."""
    cursor: str | None = None
    while True:
        query: dict[str, Any] = {"limit": 500, "include_deleted": "true"}
        if cursor:
            query["cursor"] = cursor
        page = await ctx.client.list_memories(ctx.tenant, **query)
        if not page.ok:
            ctx.record("audit", page)
            raise RuntimeError(f"audit list failed: {page.error}")
        for row in page.body["items"]:
            metadata = row.get("metadata") or {}
            ctx.record("audit", memory_id=row["id"], request_id=metadata.get("fp_request"),
                       workload=metadata.get("workload"),
                       subject_entity_id=row.get("subject_entity_id"),
                       predicate=row.get("predicate"), object_value=row.get("object_value"),
                       row_status=row.get("status"), supersedes_id=row.get("supersedes_id"),
                       parent_id=metadata.get("derived_from"))
        cursor = page.body.get("next_cursor")
        if not cursor:
            return


# -- checkers ----------------------------------------------------------------------------


def judge(ctx: RunContext) -> None:
    events = ctx.events()
    for result in check_all(events, ctx.params.staleness_window_s, ctx.params.kill_slack_s):
        ctx.record("check", **result.as_event())


@register
class Faults(Experiment):
    name = "faults"
    Params = FaultsParams

    def make_plan(self, params: FaultsParams) -> FaultsPlan:
        return make_plan(params)

    def planned_counts(self, plan: FaultsPlan, params: FaultsParams) -> dict[str, int]:
        writes = sum(len(s) for s in (*plan.facts, *plan.chains))
        return {"write": writes, "read": writes, "check": 7}

    def phases(self) -> list[Phase]:
        return [run_workloads, settle, audit]

    def checkers(self) -> list[Checker]:
        return [judge]

    def client_params(self, params: FaultsParams) -> ClientParams:
        return params.client.model_copy(update={"writes_per_s": params.pace_writes_per_s})
