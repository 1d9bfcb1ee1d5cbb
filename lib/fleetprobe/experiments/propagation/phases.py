"""The `propagation` phases: the readers set up, the rate facts written and probed, the
visibility window polled, and the redistributes."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from fleetprobe.client import Credential, Result, body_field
from fleetprobe.experiments.propagation.check import (
    judge_flip,
    judge_probe,
    moved_count,
    observed_visibility,
)
from fleetprobe.experiments.propagation.plan import (
    Agent,
    PlannedFact,
    search_body,
    wire_canary,
    write_body,
)
from fleetprobe.harness.experiment import RunContext
from fleetprobe.harness.identities import ASSERTED, PROVISIONED, register_asserted_agent
from fleetprobe.harness.seeding import scoped


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
