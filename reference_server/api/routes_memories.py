"""Memory writes: write, bulk, update, status, delete, redistribute (WIRE.md section 2).
Each route parses the request, runs its pipeline (pipeline/), and serializes the answer."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Body, Depends, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from ..governance import scope
from ..governance.auth import Caller, caller_from
from ..pipeline.bulk import BulkWrite, run_bulk
from ..pipeline.byid import live_row, query_viewer_of
from ..pipeline.delete import DeleteContext, run_delete
from ..pipeline.redistribute import RedistributeContext, run_redistribute
from ..pipeline.update import UpdateContext, run_update
from ..pipeline.write import WriteContext, run_write
from ..storage import AgentRow
from ..wire.errors import ApiError
from ..wire.schemas import (
    RESERVED_MEMORY_TYPES,
    STATUSES,
    BulkMemoryCreate,
    MemoryCreate,
    MemoryFields,
    MemoryUpdate,
    RedistributeRequest,
    Text,
    reserved_type_message,
)
from ..wire.serialize import memory_out
from .state import ServerState, state_of

router = APIRouter(prefix="/api/v1")
CallerDep = Annotated[Caller, Depends(caller_from)]
StateDep = Annotated[ServerState, Depends(state_of)]


# writes ----------------------------------------------------------------------------------

def _require_agent_id(state: ServerState, caller: Caller, body_agent_id: str | None) -> str:
    """Agent keys write as their own agent; a tenant key must name one (and so must an
    asserted agent identity, under `asserted_writer_named_in_body`)."""
    asserted = caller.kind != "agent_key" and state.profile.asserted_writer_named_in_body
    if caller.agent_id is not None and not (asserted and body_agent_id is None):
        if body_agent_id is not None and body_agent_id != caller.agent_id:
            raise ApiError(403, f"agent_id '{body_agent_id}' does not match the authenticated "
                                f"agent identity '{caller.agent_id}'.")
        return caller.agent_id
    if body_agent_id is None:
        raise RequestValidationError([{
            "type": "missing", "loc": ["body", "agent_id"], "input": None,
            "msg": "agent_id is required; only the standalone single-tenant deployment "
                   "may omit it."}])
    return body_agent_id


def _require_link_roles(state: ServerState, links: Sequence[Any] | None,
                        loc: tuple[Any, ...]) -> None:
    """MemClaw's engine requires `role` on every entity link (`entity_link_role_required`):
    a link without one is a 422 `Field required`, as its request model answers."""
    missing = [i for i, link in enumerate(links or []) if "role" not in link.model_fields_set]
    if missing and state.profile.entity_link_role_required:
        raise RequestValidationError([{
            "type": "missing", "loc": [*loc, "entity_links", i, "role"], "msg": "Field required",
            "input": {"entity_id": str(links[i].entity_id)}} for i in missing])


def _resolve_writer(state: ServerState, caller: Caller, tenant_id: str, agent_id: str,
                    fleet_id: str | None, approval_gate: bool = True
                    ) -> tuple[AgentRow, str | None]:
    """`resolve_write_agent`, trust 0 (unless the route skips the approval gate), fleet
    default and `enforce_fleet_write`."""
    agent = state.storage.get_agent(tenant_id, agent_id)
    if agent is None:  # auto-created at trust 1, home fleet = the first write's fleet
        agent = AgentRow(tenant_id, agent_id, fleet_id, 1)
        state.storage.upsert_agent(agent)
    elif agent.fleet_id is None and fleet_id is not None and state.profile.write_homes_agent:
        # the engine's get_or_create_agent backfills a home-less agent's fleet before any
        # check, so even a write it then refuses gives the agent that home
        agent = replace(agent, fleet_id=fleet_id)
        state.storage.upsert_agent(agent)
    if approval_gate and not scope.write_approved(state.profile, agent):
        raise ApiError(403, f"Agent '{agent_id}' is not approved. Contact tenant admin to set "
                            "trust_level >= 1.")
    fleet = fleet_id if fleet_id is not None else agent.fleet_id
    if not caller.is_admin and not scope.fleet_write_allowed(state.profile, agent, fleet):
        raise ApiError(403, f"fleet-scope policy: fleet '{fleet}' is not writable by "
                            f"principals of fleet '{agent.fleet_id or 'none'}'.")
    return agent, fleet


def _idempotency_key(header: str | None, metadata: dict | None) -> str | None:
    key = header
    if key is None and metadata:
        key = metadata.get("idempotency_key") or metadata.get("client_idempotency_key")
        key = key if isinstance(key, str) else None
    if key is None:
        return None
    if not key.strip():
        raise ApiError(400, "Idempotency-Key must not be blank")
    if len(key) > 255:
        raise ApiError(400, "Idempotency-Key must be at most 255 characters")
    return key


def _write_context(state: ServerState, tenant_id: str, agent: AgentRow, fleet: str | None,
                   visibility: str | None, fields: MemoryFields, **extra: Any) -> WriteContext:
    return WriteContext(
        profile=state.profile, storage=state.storage, embedder=state.embedder,
        latency=state.latency, tenant_id=tenant_id, agent=agent, fleet_id=fleet,
        visibility=visibility or "scope_team", fields=fields,
        on_detection_scheduled=state.detector.wake.set, **extra)


@router.post("/memories", status_code=201)
async def write_memory(body: MemoryCreate, request: Request, caller: CallerDep,
                       state: StateDep,
                       idempotency_header: Annotated[str | None,
                                                     Header(alias="Idempotency-Key")] = None
                       ) -> JSONResponse:
    _require_link_roles(state, body.entity_links, ("body",))
    headers = state.rate_limit("write", caller, request.headers.get("x-api-key"))
    caller.enforce_tenant(body.tenant_id)
    if body.memory_type in RESERVED_MEMORY_TYPES:
        raise ApiError(422, reserved_type_message(body.memory_type))
    agent_id = _require_agent_id(state, caller, body.agent_id)
    key = _idempotency_key(idempotency_header, body.metadata)
    if key is not None and state.profile.hardening.idempotency_per_agent:
        key = f"{agent_id}\x1f{key}"  # hardened: one agent's key is not another's oracle
    request_hash = None
    if key is not None:
        request_hash = hashlib.sha256(
            json.dumps(body.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()
        cached = state.storage.get_idempotency(body.tenant_id, key)
        if cached is not None:
            if cached.request_hash != request_hash:
                raise ApiError(422, "Idempotency-Key reused with a different request body")
            return _write_response(json.loads(cached.body), headers, cached.status_code)
    agent, fleet = _resolve_writer(state, caller, body.tenant_id, agent_id, body.fleet_id)
    ctx = _write_context(state, body.tenant_id, agent, fleet, body.visibility, body,
                         persist=body.persist, idempotency_key=key, request_hash=request_hash)
    if key is None:
        return _write_response(await run_write(ctx), headers)
    holder = (body.tenant_id, key)
    if holder in state.idempotency_in_flight:  # only possible while a write awaits latency
        raise ApiError(409, "Idempotency-Key still in progress; retry shortly")
    state.idempotency_in_flight.add(holder)
    try:
        return _write_response(await run_write(ctx), headers)
    finally:
        state.idempotency_in_flight.discard(holder)


def _write_response(body: dict, headers: dict[str, str], status_code: int = 201
                    ) -> JSONResponse:
    """MemClaw's write route sets `X-RateLimit-Limit` / `-Remaining` from its usage meter
    (WIRE.md 2.2; `ServerState.rate_limit` says what each profile sends)."""
    return JSONResponse(body, status_code=status_code, headers=headers)


@router.post("/memories/bulk", status_code=200)
async def write_bulk(body: BulkMemoryCreate, request: Request, caller: CallerDep,
                     state: StateDep,
                     attempt_id: Annotated[str | None, Header(alias="X-Bulk-Attempt-Id")] = None
                     ) -> JSONResponse:
    started = time.perf_counter()
    for i, item in enumerate(body.items):
        _require_link_roles(state, item.entity_links, ("body", "items", i))
    headers = state.rate_limit("bulk", caller, request.headers.get("x-api-key"))
    caller.enforce_tenant(body.tenant_id)
    if not attempt_id:
        raise ApiError(400, "Missing required X-Bulk-Attempt-Id header")
    if not _valid_attempt_id(attempt_id):
        raise ApiError(400, "Invalid X-Bulk-Attempt-Id header")
    agent_id = _require_agent_id(state, caller, body.agent_id)
    agent, fleet = _resolve_writer(state, caller, body.tenant_id, agent_id, body.fleet_id,
                                   approval_gate=state.profile.bulk_write_approval_gate)
    bulk = BulkWrite(
        profile=state.profile, storage=state.storage, embedder=state.embedder,
        tenant_id=body.tenant_id, agent=agent, fleet_id=fleet, attempt_id=attempt_id,
        make_context=lambda item, request_id: _write_context(
            state, body.tenant_id, agent, fleet, body.visibility, item,
            client_request_id=request_id),
        on_detection_scheduled=state.detector.wake.set,
        grant_withdrawn=(lambda: state.keys.grant_withdrawn(
            caller, request.headers.get("x-api-key"), body.tenant_id, agent.agent_id))
        if state.profile.hardening.bulk_stops_at_revocation else None)
    results = await run_bulk(bulk, body.items)
    counts = {s: sum(r["status"] == s for r in results)
              for s in ("created", "error")}
    duplicates = len(results) - counts["created"] - counts["error"]
    mixed = 0 < counts["error"] < len(results)
    out = {"created": counts["created"], "duplicates": duplicates, "errors": counts["error"],
           "bulk_ms": int((time.perf_counter() - started) * 1000), "results": results}
    if bulk.stopped:  # hardened: the bulk stopped at a revocation; how far it got, and why
        out |= {"written": counts["created"], "stopped": bulk.stopped}
    return JSONResponse(out, status_code=207 if mixed else 200, headers=headers)


def _valid_attempt_id(value: str) -> bool:
    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-")
    return 1 <= len(value) <= 128 and set(value) <= allowed


# by id ---------------------------------------------------------------------------------

@router.patch("/memories/{memory_id}/status")
async def patch_status(memory_id: UUID, tenant_id: Annotated[Text, Query()],
                       caller: CallerDep, state: StateDep,
                       body: Annotated[dict[str, Any], Body()]) -> dict:
    caller.enforce_tenant(tenant_id)
    status = body.get("status")
    if status not in STATUSES:
        raise ApiError(400, "Invalid status. Must be one of: " + ", ".join(STATUSES))
    row = live_row(state.storage, tenant_id, str(memory_id))
    viewer = query_viewer_of(state.profile, state.storage, caller)
    denial = scope.status_change_denial(state.profile, viewer, row)
    if denial:
        raise ApiError(403, denial)
    state.storage.update_status(tenant_id, row["id"], status)
    return {"memory_id": row["id"], "old_status": row["status"], "new_status": status}


NOT_NULL_COLUMNS = frozenset({"content", "memory_type", "weight", "status", "visibility"})


@router.patch("/memories/{memory_id}")
async def update_memory(memory_id: UUID, body: MemoryUpdate,
                        tenant_id: Annotated[Text, Query()], caller: CallerDep,
                        state: StateDep, agent_id: Annotated[Text | None, Query()] = None
                        ) -> dict:
    _require_link_roles(state, body.entity_links, ("body",))
    caller.enforce_tenant(tenant_id)
    given = {k: v for k, v in body.model_dump(exclude_unset=True).items()
             if v is not None or k not in NOT_NULL_COLUMNS}  # a null there means "unchanged"
    given.pop("metadata_mode", None)
    if not given:
        raise ApiError(400, "No fields to update")
    if body.memory_type in RESERVED_MEMORY_TYPES:
        raise ApiError(422, reserved_type_message(body.memory_type))
    updated = run_update(UpdateContext(
        state.profile, state.storage, state.embedder, tenant_id, str(memory_id),
        query_viewer_of(state.profile, state.storage, caller, agent_id), body, given))
    return memory_out(updated, state.storage.entity_links_of([updated["id"]]).get(updated["id"]))


@router.delete("/memories/{memory_id}", status_code=204)
async def delete_memory(memory_id: UUID, tenant_id: Annotated[Text, Query()],
                        caller: CallerDep, state: StateDep,
                        agent_id: Annotated[Text | None, Query()] = None) -> Response:
    caller.enforce_tenant(tenant_id)
    run_delete(DeleteContext(state.profile, state.storage, tenant_id, str(memory_id),
                             query_viewer_of(state.profile, state.storage, caller,
                                              agent_id)))
    return Response(status_code=204)


# redistribute ----------------------------------------------------------------------------

@router.post("/memories/redistribute")
async def redistribute(body: RedistributeRequest, tenant_id: Annotated[Text, Query()],
                       agent_id: Annotated[Text, Query()], caller: CallerDep,
                       state: StateDep) -> dict:
    caller.enforce_tenant(tenant_id)
    return run_redistribute(RedistributeContext(
        state.profile, state.storage, caller, tenant_id, agent_id, body.target_agent_id,
        list(dict.fromkeys(str(i) for i in body.memory_ids))))
