"""System, identity, agent and entity endpoints, plus the reference-server-only
`POST /api/v1/admin/tenants` (MemClaw has no such route; the harness uses it to get a
fresh tenant per run)."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Body, Depends, Query, Request
from fastapi.responses import JSONResponse, Response

from .. import __version__
from ..governance import scope
from ..governance.auth import Caller, caller_from
from ..storage import AgentRow, now_iso
from ..wire.errors import ApiError
from ..wire.schemas import EntityUpsert, ProvisionRequest, TenantCreate, Text, TrustUpdate
from ..wire.serialize import memory_out
from .state import ServerState, state_of

router = APIRouter(prefix="/api/v1")
CallerDep = Annotated[Caller, Depends(caller_from)]
StateDep = Annotated[ServerState, Depends(state_of)]


@router.get("/health")
async def health(state: StateDep) -> dict:
    state.storage.tenant_exists("")  # touches the store: a broken file fails here
    return {"status": "ok", "storage": "connected", "redis": "not configured",
            "event_bus": "ok"}


@router.get("/version")
async def version(state: StateDep) -> dict:
    rates = state.limiter.rates
    return {"version": __version__, "engine": "fleetprobe-reference",
            "profile": state.profile.name, "latency_simulated": state.latency is not None,
            "embedder": state.embedder.name,
            "rate_limits": {b: rates[b].spec for b in ("write", "search", "bulk")}}


@router.get("/whoami")
async def whoami(request: Request, state: StateDep) -> dict:
    """Always 200; reports the identity the server resolved from the key, never a header."""
    caller = state.keys.peek(request.headers)
    if caller is None or caller.is_admin or caller.tenant_id is None:
        return {"tenant_id": None, "agent_id": None, "auth_source": "anonymous" if caller is
                None or not caller.is_admin else "admin-key", "via_gateway": False,
                "readable_tenant_ids": [], "capabilities": None,
                "auth_mode": "admin" if caller is not None and caller.is_admin else None}
    return {"tenant_id": caller.tenant_id, "agent_id": caller.agent_id,
            "auth_source": "gateway-header", "via_gateway": True,
            "readable_tenant_ids": [caller.tenant_id], "capabilities": None,
            "auth_mode": caller.kind}


def new_tenant(caller: Caller | None, storage, keys, body: TenantCreate | None) -> dict:
    """The tenant-creation extension (admin only): a tenant and its first key. Shared with the
    backend adapters, whose state has the same storage and key registry."""
    if caller is None or not caller.is_admin:
        raise ApiError(403, "Admin credential required.")
    tenant_id = (body.tenant_id if body else None) or f"t-{uuid.uuid4().hex[:12]}"
    if not storage.create_tenant(tenant_id):
        raise ApiError(409, f"Tenant '{tenant_id}' already exists")
    raw_key, _ = keys.mint(tenant_id, label="tenant key")
    return {"tenant_id": tenant_id, "raw_key": raw_key}


@router.post("/admin/tenants", status_code=201)
async def create_tenant(caller: CallerDep, state: StateDep,
                        body: Annotated[TenantCreate | None, Body()] = None) -> dict:
    return new_tenant(caller, state.storage, state.keys, body)


@router.post("/admin/agent-keys/provision", status_code=201)
async def provision_agent_key(body: ProvisionRequest, caller: CallerDep,
                              state: StateDep) -> dict:
    if state.keys.mode != "gateway":  # a self-hosted engine has no provisioning route
        raise ApiError(404, "Not Found")
    caller.enforce_not_agent("provision agent keys")
    tenant_id = caller.tenant_id if not caller.is_admin else body.tenant_id
    if tenant_id is None:
        raise ApiError(400, "tenant_id is required with an admin credential")
    if not state.storage.tenant_exists(tenant_id):
        raise ApiError(404, f"Tenant '{tenant_id}' not found")
    existing = state.storage.get_agent(tenant_id, body.agent_id)
    if existing is None:  # trust and home fleet are set when the agent row is created
        state.storage.upsert_agent(AgentRow(tenant_id, body.agent_id, body.initial_fleet,
                                            body.initial_trust, body.display_name))
    raw_key, key = state.keys.mint(tenant_id, body.agent_id, body.label)
    return {"id": key.id, "tenant_id": tenant_id, "agent_id": body.agent_id,
            "raw_key": raw_key, "key_prefix": key.key_prefix,
            "agent_row_created": existing is None, "created_at": key.created_at}


def _agent_out(agent: AgentRow) -> dict:
    return {"id": f"{agent.tenant_id}:{agent.agent_id}", "tenant_id": agent.tenant_id,
            "fleet_id": agent.fleet_id, "agent_id": agent.agent_id,
            "display_name": agent.display_name, "trust_level": agent.trust_level,
            "search_profile": None, "created_at": agent.created_at,
            "updated_at": agent.updated_at}


def _tenant_of(caller: Caller, tenant_id: str | None) -> str:
    tenant = tenant_id or caller.tenant_id
    if tenant is None:
        raise ApiError(400, "tenant_id is required")
    return tenant


@router.get("/agents/{agent_id}")
async def get_agent(agent_id: str, caller: CallerDep, state: StateDep,
                    tenant_id: Annotated[Text | None, Query()] = None) -> dict:
    tenant = _tenant_of(caller, tenant_id)
    caller.enforce_readable_tenant(tenant)
    agent = state.storage.get_agent(tenant, agent_id)
    viewer = scope.Viewer(caller.agent_id, state.agent_of(caller))
    if agent is None or not scope.agent_read_allowed(state.profile, viewer, agent):
        raise ApiError(404, f"Agent '{agent_id}' not found")
    return _agent_out(agent)


@router.patch("/agents/{agent_id}/trust")
async def patch_trust(agent_id: str, body: TrustUpdate, caller: CallerDep, state: StateDep,
                      tenant_id: Annotated[Text | None, Query()] = None) -> dict:
    caller.enforce_not_agent("change trust levels")
    tenant = _tenant_of(caller, tenant_id)
    caller.enforce_tenant(tenant)
    agent = state.storage.get_agent(tenant, agent_id)
    if agent is None:
        raise ApiError(404, f"Agent '{agent_id}' not found")
    fleet = body.fleet_id if body.fleet_id is not None else agent.fleet_id
    updated = AgentRow(tenant, agent_id, fleet, body.trust_level, agent.display_name,
                       agent.created_at)
    state.storage.upsert_agent(updated)
    return _agent_out(state.storage.get_agent(tenant, agent_id) or updated)


@router.delete("/agents/{agent_id}", status_code=204)
async def delete_agent(agent_id: str, caller: CallerDep, state: StateDep,
                       tenant_id: Annotated[Text | None, Query()] = None) -> Response:
    """Revocation (MemClaw `DELETE /agents/{id}` -> 204): the agent row goes and every key
    of the agent stops resolving at once; its memories stay (owned by the agent id)."""
    caller.enforce_not_agent("delete agents")
    tenant = _tenant_of(caller, tenant_id)
    caller.enforce_tenant(tenant)
    # hardened: its rows pass to an owner id nobody holds, so a later agent of the same id
    # inherits none of them (the tenant credential still reads them)
    retired = (f"{agent_id}~retired~{uuid.uuid4().hex[:12]}"
               if state.profile.hardening.deleted_agent_rows_retired else None)
    if not state.storage.delete_agent(tenant, agent_id, retired):
        raise ApiError(404, f"Agent '{agent_id}' not found")
    return Response(status_code=204)


@router.post("/entities/upsert")
async def upsert_entity(body: EntityUpsert, caller: CallerDep, state: StateDep) -> JSONResponse:
    caller.enforce_tenant(body.tenant_id)
    denial = scope.entity_write_denial(state.profile, state.agent_of(caller), body.fleet_id)
    if denial:
        raise ApiError(403, denial)
    entity = state.storage.find_entity(body.tenant_id, body.entity_type, body.canonical_name,
                                       body.fleet_id)
    if entity is None:
        entity = {"id": str(uuid.uuid4()), "tenant_id": body.tenant_id,
                  "fleet_id": body.fleet_id, "entity_type": body.entity_type,
                  "canonical_name": body.canonical_name, "attributes": body.attributes or {},
                  "created_at": now_iso()}
    else:
        entity["attributes"].update(body.attributes or {})
    state.storage.save_entity(entity)
    return JSONResponse(_entity_out(entity, []), status_code=200)


@router.get("/entities/{entity_id}")
async def get_entity(entity_id: uuid.UUID, tenant_id: Annotated[Text, Query()],
                     caller: CallerDep, state: StateDep) -> dict:
    caller.enforce_readable_tenant(tenant_id)
    entity = state.storage.get_entity(tenant_id, str(entity_id))
    viewer = scope.Viewer(caller.agent_id, state.agent_of(caller))
    if entity is None or not scope.entity_read_allowed(state.profile, viewer, entity):
        raise ApiError(404, "Entity not found")
    linked = [memory_out(r) for r in state.storage.memories_linked_to(tenant_id, entity["id"])
              if scope.byid_read_allowed(state.profile, viewer, r)]
    return _entity_out(entity, linked)


def _entity_out(entity: dict, linked: list[dict]) -> dict:
    keys = ("id", "tenant_id", "fleet_id", "entity_type", "canonical_name", "attributes")
    return {**{k: entity[k] for k in keys}, "linked_memories": linked, "relations": []}
