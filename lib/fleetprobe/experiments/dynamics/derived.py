"""Rows written during the timeline, and artefacts derived from a row that may outlive it.

`write_late` writes one of the plan's late rows (a single write by the tenant key acting as
its owner) and records its census line, so the timed policy knows it from its first answer.
`prepare_derived` builds what `soft_delete_derived` deletes the source of: an earlier and a
later row asserting different objects for one subject and single-valued predicate (the later
supersedes the earlier once the target's detector runs; the pair is a disagreement for
MemClaw's insights either way), then an insight generated over the fleet by a trust-2 agent.
The probes read what was derived from the later row:

- `contradiction_record`: `GET /memories/{earlier}/contradictions` names the later row;
- `insight`: `GET /memories/{insight}` answers a live insight naming the later row;
- `recall_summary`: `POST /recall`'s `summary` quotes the later row's first sentence.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fleetprobe.client import Credential, Result, body_field
from fleetprobe.experiments.dynamics.timeline import PREDICATE
from fleetprobe.harness.experiment import RunContext
from fleetprobe.harness.seeding import salted, spelled
from fleetprobe.world.build import row_item
from fleetprobe.world.plan import PrincipalSpec, ProbeSpec, RowSpec
from fleetprobe.world.probes import Obs, Probe, ids, mid, tid
from fleetprobe.world.wire import Wire, fleet_id, plan_fleet, remember

NO_INSIGHT = "no insight names the row (the target generated none: {})"


async def write_late(ctx: RunContext, w: Wire, row: RowSpec, extra: dict[str, Any],
                     idempotent: bool = False) -> Result:
    """Write a late row as its owner (tenant key, `agent_id` in the body) with `extra`
    fields; its census line records what the policy needs of them."""
    body = {"agent_id": w.agent_ids[row.owner], "visibility": row.visibility,
            **row_item(ctx, w, row), **extra}
    key = f"dy-{ctx.nonce}-{row.key}" if idempotent else None
    r = await ctx.client.write(w.creds[f"{row.tenant}.tk"], body,
                               headers={"Idempotency-Key": key} if key else None)
    ctx.record("setup", r, step="write", who=row.owner, row_key=row.key)
    if r.status == 201 and body_field(r.body, "id"):
        remember(w, row, r.body["id"])
        if key:
            w.idempotency[row.key] = key
        w.missing_rows.pop(row.key, None)
        ctx.record("census_row", row_key=row.key, tenant=row.tenant,
                   fleet=plan_fleet(w, body_field(r.body, "fleet_id")),
                   visibility=body_field(r.body, "visibility"), owner=row.owner,
                   row_status=body_field(r.body, "status"), deleted=False, source="write",
                   expires_at=extra.get("expires_at"), valid_end=extra.get("ts_valid_end"))
    else:
        w.missing_rows[row.key] = f"write: {r.error}"
        ctx.trace.shortfall(f"the late row {row.key} was not written: {r.error}")
    return r


async def prepare_derived(ctx: RunContext, w: Wire, change: Any) -> None:
    """The earlier and later rows (RDF pair), the detector's turn, then one insight."""
    for key in (change.partner, change.subject):
        await write_late(ctx, w, ctx.plan.world.rows[key], triple(ctx, w, change, key))
        await asyncio.sleep(0.05)
    await asyncio.sleep(ctx.params.settle_s)  # the detector's turn (asynchronous, post-commit)
    analyst = w.creds.get(change.analyst)
    home = ctx.plan.world.principals[change.analyst].home
    if analyst is None or change.subject not in w.memory_ids:
        return
    r = await ctx.client.request("POST", "/insights/generate", cred=analyst, json={
        **tid(analyst), "focus": "contradictions", "scope": "fleet",
        "fleet_id": fleet_id(ctx, home), "agent_id": w.agent_ids[change.analyst]})
    subject = w.memory_ids[change.subject]
    named = [f.get("insight_memory_id") for f in body_field(r.body, "findings") or []
             if isinstance(f, dict) and subject in (f.get("related_memory_ids") or [])]
    ctx.record("setup", r, step="insight", who=change.analyst, row_key=change.subject,
               insight_ids=" ".join(i for i in named if i) or None)
    insights = ctx.state.setdefault("insight", {})
    if r.ok and named and named[0]:
        insights[change.subject] = named[0]
    else:
        insights[change.subject] = None
        ctx.state.setdefault("insight_absent", {})[change.subject] = (
            r.error or "no finding names the row")


def triple(ctx: RunContext, w: Wire, change: Any, row_key: str) -> dict[str, Any]:
    """The subject/predicate/object of one of the change's rows (RDF changes only): the
    owner's fleet entity, the change's single-valued predicate, an object per row."""
    predicate = PREDICATE.get(change.kind)
    row = ctx.plan.world.rows[row_key]
    entity = w.entities.get((row.tenant, ctx.plan.world.principals[row.owner].home))
    if predicate is None or entity is None:
        return {}
    return {"subject_entity_id": entity, "predicate": predicate,
            "object_value": salted(f"{row_key} {spelled(len(row_key), 4)}", ctx.nonce)}



def derived_not_applicable(ctx: RunContext, w: Wire, probe: ProbeSpec) -> str | None:
    if probe.path == "insight" and not ctx.state.get("insight", {}).get(probe.row):
        return NO_INSIGHT.format(ctx.state.get("insight_absent", {}).get(probe.row, "none"))
    if probe.path == "contradiction_record" and partner(ctx, probe) not in w.memory_ids:
        return "the earlier row was not written"
    return None


def partner(ctx: RunContext, probe: ProbeSpec) -> str | None:
    """The other row of the change whose subject the probe reads."""
    return next((c.partner for c in ctx.plan.changes if c.subject == probe.row), None)


async def _contradiction_record(ctx: RunContext, w: Wire, cred: Credential,
                                who: PrincipalSpec, row: RowSpec, probe: ProbeSpec) -> Obs:
    earlier = w.memory_ids[partner(ctx, probe)]
    r = await ctx.client.request("GET", f"/memories/{earlier}/contradictions", cred=cred,
                                 params=tid(cred))
    body = r.body if r.ok and isinstance(r.body, dict) else {}
    shown = [body_field(body.get("superseded_by"), "id"), *ids(body.get("superseded_memories"))]
    shown += [c.get("memory_id") for c in body.get("contradictions") or [] if isinstance(c, dict)]
    return Obs(r, mid(w, row) in shown)


async def _insight(ctx: RunContext, w: Wire, cred: Credential, who: PrincipalSpec,
                   row: RowSpec, probe: ProbeSpec) -> Obs:
    insight = ctx.state["insight"][row.key]
    r = await ctx.client.request("GET", f"/memories/{insight}", cred=cred, params=tid(cred))
    related = (body_field(r.body, "metadata") or {}).get("related_memory_ids") or [] \
        if r.ok else []
    live = body_field(r.body, "status") not in ("deleted", "outdated") if r.ok else False
    return Obs(r, r.ok and live and mid(w, row) in related, got=insight)


async def _recall_summary(ctx: RunContext, w: Wire, cred: Credential, who: PrincipalSpec,
                          row: RowSpec, probe: ProbeSpec) -> Obs:
    content = salted(row.content, ctx.nonce)
    r = await ctx.client.request("POST", "/recall", cred=cred, request_class="search", json={
        **tid(cred), "query": content, "top_k": ctx.params.search_top_k})
    summary = body_field(r.body, "summary") if r.ok else None
    first = content.split(". ")[0].strip().rstrip(".")
    return Obs(r, isinstance(summary, str) and bool(first) and first in summary)


DERIVED_PROBES: dict[str, Probe] = {
    "contradiction_record": _contradiction_record,
    "insight": _insight,
    "recall_summary": _recall_summary,
}
