"""One coroutine per policy path: it sends the probe and says what the answer showed.

Each probe is one request (a redistribute also records the row's owner afterwards). What an
answer shows is read narrowly: `returned` = the row itself came back, its id was revealed or
the change took; `got` = what else it showed (neighbour rows, the entity record, the fleet a
write landed in, the identity reported, or `exists` when an answer only reveals that a key
exists). Agent writes always carry the acting agent's id in the body (MemClaw's engine
answers 422 without it).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fleetprobe.client import Credential, Result, body_field
from fleetprobe.harness.experiment import RunContext
from fleetprobe.harness.seeding import salted, scoped, spelled
from fleetprobe.oracle.policy import PATHS
from fleetprobe.world.answers import EXISTS
from fleetprobe.world.plan import (
    PrincipalSpec,
    ProbeSpec,
    RowSpec,
    named_fleets,
)
from fleetprobe.world.wire import (
    Wire,
    entity_name,
    fleet_id,
    ids,
    plan_fleet,
    row_fleet,
)

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@dataclass
class Obs:
    result: Result
    returned: bool
    got: str | None = None
    fleets: list[str | None] | None = None


Probe = Callable[[RunContext, Wire, Credential, PrincipalSpec, RowSpec, ProbeSpec],
                 Awaitable[Obs]]


def tid(cred: Credential) -> dict[str, str]:
    return {"tenant_id": cred.tenant_id}


def mid(w: Wire, row: RowSpec) -> str:
    return w.memory_ids[row.key]


def acting_agent(w: Wire, who: PrincipalSpec, row: RowSpec) -> dict[str, str]:
    """The agent a write acts as: the caller itself, or for a tenant key the row's owner."""
    return {"agent_id": w.agent_ids[who.key if who.kind == "agent" else row.owner]}


MOVED_WORDS_OFFSET = 500_000  # movers' probes (m0, m1, ...) share no tag with e/r probes


def fresh_words(probe: ProbeSpec, what: str) -> str:
    """Content of a probe's own, sharing no word with any row (so it near-duplicates none)."""
    n = int(probe.probe_id.lstrip("erm").split("+")[0] or 0)
    n += MOVED_WORDS_OFFSET if probe.probe_id.startswith("m") else 0
    tag = " ".join(spelled(n * 7 + k, 5) for k in range(3))
    return f"Matrix {what} {probe.probe_id} {tag}"


async def _get(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001 - one signature for all
    r = await ctx.client.request("GET", f"/memories/{mid(w, row)}", cred=cred, params=tid(cred))
    return Obs(r, r.ok and body_field(r.body, "id") == mid(w, row))


async def _contradictions(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
    r = await ctx.client.request("GET", f"/memories/{mid(w, row)}/contradictions", cred=cred,
                                 params=tid(cred))
    body = r.body if r.ok and isinstance(r.body, dict) else {}
    shown = [body_field(body.get("superseded_by"), "id")]
    shown += ids(body.get("superseded_memories"))
    shown += [c.get("memory_id") for c in body.get("contradictions") or [] if isinstance(c, dict)]
    keys = sorted({w.row_of[i] for i in shown if i in w.row_of and i != mid(w, row)})
    return Obs(r, r.ok and body.get("memory_id") == mid(w, row), " ".join(keys) or None)


def _list_probe(fleet: bool = False, deleted: bool = False) -> Probe:
    async def run(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
        query: dict[str, Any] = {"agent_id": w.agent_ids[row.owner], "limit": 500}
        named = None
        if fleet:
            named = named_fleets("list_fleet", who.home, row_fleet(ctx, row),
                                 ctx.plan.world.fleets)
            query["fleet_id"] = fleet_id(ctx, named[0])
        if deleted:
            query["include_deleted"] = "true"
        r = await ctx.client.request("GET", "/memories", cred=cred,
                                     params={**tid(cred), **query})
        return Obs(r, r.ok and mid(w, row) in ids(body_field(r.body, "items")), fleets=named)
    return run


def _search_probe(path: str) -> Probe:
    """search / recall, plain or with `filter_agent_id` (`_agent`), one named fleet
    (`_fleet`), two (`_fleets`) or the singular `fleet_id` MemClaw ignores (`_singular`)."""
    endpoint = "/recall" if path.startswith("recall") else "/search"

    async def run(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
        body: dict[str, Any] = {**tid(cred), "query": salted(row.content, ctx.nonce),
                                "top_k": ctx.params.search_top_k}
        named = None
        if path.endswith(("_fleet", "_fleets", "_singular")):
            named = named_fleets(path, who.home, row_fleet(ctx, row), ctx.plan.world.fleets)
            wire_ids = [fleet_id(ctx, f) for f in named]
            if path.endswith("_singular"):
                body["fleet_id"] = wire_ids[0]
                named = None  # ignored by MemClaw: nothing is named as far as scope goes
            else:
                body["fleet_ids"] = wire_ids
        if path.endswith("_agent"):
            body["filter_agent_id"] = w.agent_ids[row.owner]
        r = await ctx.client.request("POST", endpoint, cred=cred, json=body,
                                     request_class="search")
        items = body_field(r.body, "memories" if endpoint == "/recall" else "items")
        return Obs(r, r.ok and mid(w, row) in ids(items), fleets=named)
    return run


async def _entity_read(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
    home = ctx.plan.world.principals[row.owner].home
    entity = w.entities.get((row.tenant, home))
    if entity is None:
        return Obs(Result("GET /api/v1/entities/{id}", None, None, None, 0,
                          "no entity for the row's fleet"), False)
    r = await ctx.client.request("GET", f"/entities/{entity}", cred=cred, params=tid(cred))
    linked = ids(body_field(r.body, "linked_memories")) if r.ok else []
    return Obs(r, mid(w, row) in linked, "entity" if r.ok else None)


async def _agent_read(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
    r = await ctx.client.request("GET", f"/agents/{w.agent_ids[row.owner]}", cred=cred,
                                 params=tid(cred))
    same = body_field(r.body, "tenant_id") == w.tenant_ids[row.tenant]
    return Obs(r, r.ok and same and body_field(r.body, "agent_id") == w.agent_ids[row.owner])


async def _whoami(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
    spoof = w.agent_ids[row.owner]
    r = await ctx.client.request("GET", "/whoami", cred=cred, headers={"X-Agent-ID": spoof})
    seen = body_field(r.body, "agent_id") if r.ok else None
    own = w.agent_ids.get(who.key)
    return Obs(r, seen == spoof and spoof != own,
               w.principal_of.get((who.tenant, seen), seen) if seen else None)


def _reveals(w: Wire, row: RowSpec, r: Result) -> bool:
    memory_id = mid(w, row)
    return memory_id in (r.error or "") or body_field(r.body, "id") == memory_id


def _dup_probe(near: bool, into_fleet: bool = False, mode: str | None = None) -> Probe:
    """The row's content again (`near`: plus one word) as the caller; `into_fleet` names the
    row's fleet in the write; `mode` fast: the answer's `metadata.near_duplicate_of`."""
    async def run(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
        content = salted(row.content, ctx.nonce) + (" again" if near else "")
        body: dict[str, Any] = {**acting_agent(w, who, row), "content": content,
                                "visibility": row.visibility}
        if near:
            body["write_mode"] = mode or "strong"
        fleet = row_fleet(ctx, row)
        if into_fleet and fleet is not None:
            body["fleet_id"] = fleet_id(ctx, fleet)
        r = await ctx.client.request("POST", "/memories", cred=cred,
                                     json={**tid(cred), **body}, request_class="write")
        named = body_field(body_field(r.body, "metadata"), "near_duplicate_of") if r.ok else None
        shown = sorted({w.row_of[i] for i in [named, *UUID.findall(r.error or "")]
                        if i in w.row_of and i != mid(w, row)})
        return Obs(r, _reveals(w, row, r) or named == mid(w, row), " ".join(shown) or None,
                   fleets=[fleet] if into_fleet and fleet is not None else None)
    return run


async def _bulk_attempt(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
    attempt, index = w.attempts[row.key]
    items = [{"content": salted(fresh_words(probe, f"filler {i}"), ctx.nonce)}
             for i in range(index + 1)]
    body = {**tid(cred), **acting_agent(w, who, row), "visibility": row.visibility,
            "items": items}
    r = await ctx.client.request("POST", "/memories/bulk", cred=cred, json=body,
                                 headers={"X-Bulk-Attempt-Id": attempt}, request_class="bulk")
    results = [x for x in body_field(r.body, "results") or [] if isinstance(x, dict)]
    shown = {x.get("id") for x in results} | {x.get("duplicate_of") for x in results}
    replayed = any(x.get("status") == "duplicate_attempt" for x in results)
    revealed = mid(w, row) in shown
    return Obs(r, revealed, EXISTS if replayed and not revealed else None)


async def _idempotency(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
    body = {**tid(cred), **acting_agent(w, who, row),
            "content": salted(fresh_words(probe, f"replay of the key of {row.key}"), ctx.nonce)}
    r = await ctx.client.request("POST", "/memories", cred=cred, json=body,
                                 headers={"Idempotency-Key": w.idempotency[row.key]},
                                 request_class="write")
    # a 422 "reused" says only that the key exists; a replayed answer names the row
    reused = r.status == 422 and "idempotency" in (r.error or "").lower()
    return Obs(r, _reveals(w, row, r), EXISTS if reused else None)


def _patch_probe(content: bool) -> Probe:
    async def run(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
        change = ({"content": salted(fresh_words(probe, "patched content"), ctx.nonce)}
                  if content else {"weight": 0.42})
        r = await ctx.client.request("PATCH", f"/memories/{mid(w, row)}", cred=cred,
                                     params=tid(cred), json=change)
        return Obs(r, r.ok)
    return run


async def _patch_status(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
    r = await ctx.client.request("PATCH", f"/memories/{mid(w, row)}/status", cred=cred,
                                 params=tid(cred), json={"status": "archived"})
    return Obs(r, r.ok)


async def _delete_probe(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
    r = await ctx.client.request("DELETE", f"/memories/{mid(w, row)}", cred=cred,
                                 params=tid(cred))
    return Obs(r, r.status == 204)


async def _redistribute(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
    requester = w.agent_ids[who.key] if who.kind == "agent" else w.agent_ids[row.owner]
    r = await ctx.client.request(
        "POST", "/memories/redistribute", cred=cred,
        params={**tid(cred), "agent_id": requester},
        json={"memory_ids": [mid(w, row)], "target_agent_id": w.agent_ids[probe.target]})
    moved = body_field(r.body, "moved") if r.ok else None
    return Obs(r, bool(moved))


def _write_probe(bulk: bool) -> Probe:
    async def run(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
        acting_home = who.home if who.kind == "agent" else \
            ctx.plan.world.principals[row.owner].home
        fleet = row_fleet(ctx, row)
        named = [fleet] if fleet is not None else [acting_home]
        fields: dict[str, Any] = {**acting_agent(w, who, row)}
        if named[0] is not None:
            fields["fleet_id"] = fleet_id(ctx, named[0])
        content = salted(fresh_words(probe, "write into a fleet"), ctx.nonce)
        if bulk:
            r = await ctx.client.request(
                "POST", "/memories/bulk", cred=cred,
                json={**tid(cred), **fields, "items": [{"content": content}]},
                headers={"X-Bulk-Attempt-Id": f"mx-{ctx.nonce}-{probe.probe_id}"},
                request_class="bulk")
            created = [x for x in body_field(r.body, "results") or []
                       if isinstance(x, dict) and x.get("status") == "created"]
            # the bulk answer has no fleet: the request's fleet, else the home
            stored = named[0] if created else None
            landed = bool(created)
        else:
            r = await ctx.client.request("POST", "/memories", cred=cred,
                                         json={**tid(cred), **fields, "content": content},
                                         request_class="write")
            stored = plan_fleet(w, body_field(r.body, "fleet_id")) if r.status == 201 else None
            landed = r.status == 201
        landed = landed and w.tenant_of_id.get(cred.tenant_id) == row.tenant
        return Obs(r, landed, stored if landed else None, fleets=named)
    return run


async def _entity_upsert(ctx, w, cred, who, row, probe) -> Obs:  # noqa: ANN001
    fleet = row_fleet(ctx, row)
    r = await ctx.client.request("POST", "/entities/upsert", cred=cred, json={
        **tid(cred), "fleet_id": fleet_id(ctx, fleet), "entity_type": "service",
        "canonical_name": entity_name(ctx, fleet), "attributes": {"probe": probe.probe_id}})
    landed = r.ok and w.tenant_of_id.get(cred.tenant_id) == row.tenant
    return Obs(r, landed, fleet if landed else None, fleets=[fleet])


PROBES: dict[str, Probe] = {
    "get": _get, "contradictions": _contradictions, "list": _list_probe(),
    "list_fleet": _list_probe(fleet=True), "list_deleted": _list_probe(deleted=True),
    **{path: _search_probe(path) for path in (
        "search", "search_fleet", "search_fleets", "search_singular", "search_agent",
        "recall", "recall_agent", "recall_fleet", "recall_fleets")},
    "entity": _entity_read, "agent_read": _agent_read, "whoami": _whoami,
    "dup_exact": _dup_probe(near=False), "dup_near": _dup_probe(near=True),
    "dup_fast": _dup_probe(near=True, mode="fast"),
    "dup_exact_fleet": _dup_probe(near=False, into_fleet=True),
    "dup_near_fleet": _dup_probe(near=True, into_fleet=True),
    "bulk_attempt": _bulk_attempt, "idempotency": _idempotency,
    "patch": _patch_probe(content=False), "patch_content": _patch_probe(content=True),
    "patch_status": _patch_status, "delete": _delete_probe, "redistribute": _redistribute,
    "redistribute_x": _redistribute, "write": _write_probe(bulk=False),
    "bulk_write": _write_probe(bulk=True), "entity_upsert": _entity_upsert,
}
assert set(PROBES) | {"after_redistribute"} == set(PATHS), "every policy path has a probe"

# By-id paths whose answer for a row the caller may not touch is compared with the answer
# for an id that does not exist (an existence oracle when they differ): one control request
# per principal, path and variant, to a fresh id.
CONTROL_PATHS = ("get", "contradictions", "patch", "patch_content", "patch_status", "delete",
                 "agent_read")


async def control(ctx: RunContext, cred: Credential, path: str, absent: str,
                  probe: ProbeSpec) -> Result:
    """The probe's request shape with an id that does not exist (`absent`, a fresh UUID)."""
    memory = f"/memories/{absent}"
    if path == "agent_read":
        return await ctx.client.request("GET", f"/agents/{scoped('absent-agent', ctx.nonce)}",
                                        cred=cred, params=tid(cred))
    if path == "contradictions":
        return await ctx.client.request("GET", f"{memory}/contradictions", cred=cred,
                                        params=tid(cred))
    if path == "patch_status":
        return await ctx.client.request("PATCH", f"{memory}/status", cred=cred, params=tid(cred),
                                        json={"status": "archived"})
    if path in ("patch", "patch_content"):
        change = ({"content": salted(fresh_words(probe, "patched content"), ctx.nonce)}
                  if path == "patch_content" else {"weight": 0.42})
        return await ctx.client.request("PATCH", memory, cred=cred, params=tid(cred),
                                        json=change)
    method = "DELETE" if path == "delete" else "GET"
    return await ctx.client.request(method, memory, cred=cred, params=tid(cred))
