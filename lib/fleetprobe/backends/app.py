"""The adapter's HTTP face: the subset of MemClaw's wire the experiments use, in front of one
backend, with the reference server's error envelope, request schemas, serializers and key
registry (keys and agents only: memories live in the backend).

Identity is the adapter's only addition and it checks nothing: a key names the tenant (and,
for an agent key, the agent and its home fleet), and the backend receives the request's own
scoping fields. Every MemClaw path the backend has no equivalent for answers 501
`NOT_SUPPORTED_BY_BACKEND` with the reason (docs/backends.md).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import platform
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib import metadata
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, FastAPI, Request
from fastapi.responses import JSONResponse, Response

from fleetprobe.client import NOT_SUPPORTED_CODE
from reference_server.api.routes_admin import new_tenant
from reference_server.governance.auth import Caller, KeyRegistry, caller_from
from reference_server.storage import AgentRow, SqliteStorage
from reference_server.wire.errors import (
    ApiError,
    EnvelopeResponse,
    envelope,
    install_error_handlers,
)
from reference_server.wire.schemas import (
    MemoryCreate,
    MemoryUpdate,
    ProvisionRequest,
    SearchRequest,
    TenantCreate,
)
from reference_server.wire.serialize import memory_detail, memory_out

from . import netguard
from .base import CALLER, Backend, Change, Denied, Identity, NotSupported, SearchScope, StoredMemory

log = logging.getLogger("fleetprobe.backends")
# the packages whose versions a manifest names (those present in the environment)
ENV_PACKAGES = (
    "langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite",
    "langgraph-checkpoint-postgres", "langchain-core", "langchain", "sqlite-vec", "psycopg",
    "mem0ai", "qdrant-client", "crewai", "lancedb", "pydantic", "fastapi", "uvicorn",
)
ENV_PACKAGES += ("graphiti-core", "kuzu", "openai")
ENV_PACKAGES += ("cognee", "litellm", "ladybug")  # issue 37: the cognee environment


@dataclass
class AdapterState:
    backend: Backend
    storage: SqliteStorage  # tenants, keys, agents only
    keys: KeyRegistry
    lock: asyncio.Lock  # a backend not safe for concurrent calls gets one at a time
    env_name: str | None = None  # the locked environment this process runs in

    def identity(self, caller: Caller) -> Identity:
        if caller.tenant_id is None:
            raise ApiError(403, "Admin credentials cannot read or write memories here.")
        if caller.agent_id is None:
            return Identity(caller.tenant_id)
        agent = self.storage.get_agent(caller.tenant_id, caller.agent_id)
        return Identity(caller.tenant_id, caller.agent_id,
                        agent.fleet_id if agent else None,
                        agent.trust_level if agent else None)

    async def call(self, fn: Any, *args: Any) -> Any:
        """`fn` off the event loop; one call at a time unless the backend says its store is
        safe for concurrent calls (`Backend.concurrent`: it serializes, or pools, itself)."""
        if getattr(self.backend, "concurrent", False):
            return await self._call(fn, *args)
        async with self.lock:
            return await self._call(fn, *args)

    async def _call(self, fn: Any, *args: Any) -> Any:
        try:
            return await asyncio.to_thread(fn, *args)
        except ValueError as exc:  # the backend refused this input (its own
            # validation): 422 in the envelope, nothing written
            raise ApiError(422, f"{self.backend.name} refused the request: {exc}") from exc
        except Denied as exc:  # the backend's own access control denied the caller
            # (Cognee's dataset permissions): 403 in the envelope, nothing written
            raise ApiError(403, f"{self.backend.name} denied the request: {exc}") from exc


def backend_version(backend: Backend) -> str | None:
    try:
        return metadata.version(backend.package)
    except metadata.PackageNotFoundError:
        return None


def environment(env_name: str | None) -> dict[str, Any]:
    """Which locked environment serves: its name, its lock's sha256 and the versions of the
    backend's packages as installed here (the manifest records them)."""
    from . import envs

    lock = envs.LOCKS / f"{env_name}.lock"
    digest = hashlib.sha256(lock.read_bytes()).hexdigest() if lock.exists() else None
    versions = {}
    for name in ENV_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return {"name": env_name, "lock_sha256": digest, "python": platform.python_version(),
            "packages": versions}


def _kit_version() -> str | None:
    try:
        return metadata.version("fleetprobe")
    except metadata.PackageNotFoundError:
        return None


def not_supported(backend: str, what: str, reason: str) -> JSONResponse:
    message = f"not supported by this backend ({backend}): {what}: {reason}"
    body = envelope(501, message, message, {"backend": backend, "reason": reason})
    body["error"]["code"] = NOT_SUPPORTED_CODE
    return EnvelopeResponse(body, status_code=501)


async def state_of(request: Request) -> AdapterState:  # async: no worker-thread hop
    return request.app.state.adapter


CallerDep = Annotated[Caller, Depends(caller_from)]
StateDep = Annotated[AdapterState, Depends(state_of)]
router = APIRouter(prefix="/api/v1")


@router.get("/health")
async def health(state: StateDep) -> dict:
    return {"status": "ok", "storage": "connected", "backend": state.backend.name}


@router.get("/version")
async def version(state: StateDep) -> dict:
    b = state.backend
    return {"version": _kit_version(), "engine": "fleetprobe-backend-adapter",
            "profile": f"backend-{b.name}", "backend": b.name,
            "backend_package": b.package, "backend_version": backend_version(b),
            "backend_store": b.store, "backend_deployment": b.deployment,
            "latency_simulated": False,
            "backend_env": environment(state.env_name),
            "network": netguard.report()}


@router.get("/whoami")
async def whoami(request: Request, state: StateDep) -> dict:
    caller = state.keys.peek(request.headers)
    if caller is None or caller.is_admin:
        return {"tenant_id": None, "agent_id": None,
                "auth_source": "anonymous" if caller is None else "admin-key"}
    return {"tenant_id": caller.tenant_id, "agent_id": caller.agent_id,
            "auth_source": "adapter-key", "auth_mode": caller.kind}


@router.post("/admin/tenants", status_code=201)
async def create_tenant(caller: CallerDep, state: StateDep,
                        body: Annotated[TenantCreate | None, Body()] = None) -> dict:
    return new_tenant(caller, state.storage, state.keys, body)


@router.post("/admin/agent-keys/provision", status_code=201)
async def provision(body: ProvisionRequest, caller: CallerDep, state: StateDep) -> dict:
    """An agent identity for the backend's scoping parameters; its trust is recorded and
    never checked (none of the backends has a trust concept)."""
    caller.enforce_not_agent("provision agent keys")
    tenant_id = caller.tenant_id if not caller.is_admin else body.tenant_id
    if tenant_id is None or not state.storage.tenant_exists(tenant_id):
        raise ApiError(404, f"Tenant '{tenant_id}' not found")
    existing = state.storage.get_agent(tenant_id, body.agent_id)
    if existing is None:
        state.storage.upsert_agent(AgentRow(tenant_id, body.agent_id, body.initial_fleet,
                                            body.initial_trust, body.display_name))
    raw_key, key = state.keys.mint(tenant_id, body.agent_id, body.label)
    return {"id": key.id, "tenant_id": tenant_id, "agent_id": body.agent_id,
            "raw_key": raw_key, "key_prefix": key.key_prefix,
            "agent_row_created": existing is None, "created_at": key.created_at}


@router.post("/memories", status_code=201)
async def write(body: MemoryCreate, caller: CallerDep, state: StateDep) -> Any:
    caller.enforce_tenant(body.tenant_id)
    who = state.identity(caller)
    if body.status not in (None, "active"):
        return not_supported(state.backend.name, "POST /memories with a status",
                             "no status lifecycle: every memory the backend stores is live")
    _named_fleets(body.fleet_id)
    agent_id = who.agent_id or body.agent_id  # an agent key writes as itself
    # as on MemClaw: the body's fleet, else the writing agent's home fleet (for a tenant key
    # writing as a provisioned agent, that agent's; an unknown agent has none)
    writer = (state.storage.get_agent(body.tenant_id, agent_id)
              if who.agent_id is None and agent_id else None)
    home = who.fleet_id if who.agent_id is not None else writer.fleet_id if writer else None
    fleet_id = body.fleet_id if body.fleet_id is not None else home
    memory = StoredMemory(
        tenant_id=body.tenant_id, content=body.content, agent_id=agent_id, fleet_id=fleet_id,
        visibility=body.visibility or "scope_team", metadata=dict(body.metadata or {}),
        memory_type=body.memory_type or "fact", source_uri=body.source_uri,
        run_id=body.run_id)
    CALLER.set(who)  # seen by the backend's write in its worker thread (context copied)
    try:
        stored = await state.call(state.backend.write, memory)
    except NotSupported as exc:
        return not_supported(state.backend.name, "POST /memories", str(exc))
    return JSONResponse(memory_out(stored.row(), usage=True), status_code=201)


@router.get("/memories/{memory_id}")
async def get_memory(memory_id: str, caller: CallerDep, state: StateDep,
                     tenant_id: str | None = None) -> Any:
    if tenant_id is not None:
        caller.enforce_readable_tenant(tenant_id)
    try:
        found = await state.call(state.backend.get, state.identity(caller), memory_id)
    except NotSupported as exc:
        return not_supported(state.backend.name, "GET /memories/{id}", str(exc))
    if found is None:
        raise ApiError(404, "Memory not found")
    return memory_detail(found.row(), [])


@router.post("/search")
async def search(body: SearchRequest, caller: CallerDep, state: StateDep) -> Any:
    caller.enforce_readable_tenant(body.tenant_id)
    who = state.identity(caller)
    scope = _scope(who, tuple(body.fleet_ids) if body.fleet_ids is not None else None,
                   body.filter_agent_id)
    try:
        found = await state.call(state.backend.search, who, body.query, scope, body.top_k)
    except NotSupported as exc:
        return not_supported(state.backend.name, "POST /search", str(exc))
    return {"items": [memory_out(m.row(), similarity=m.similarity) for m in found],
            "total": len(found)}


def _named_fleets(*fleet_ids: str | None) -> None:
    """An empty fleet id names no fleet: every backend here would file or read it as a path
    or namespace prefix of all fleets, so it is bad input (422), never written."""
    if any(f == "" for f in fleet_ids):
        raise ApiError(422, "fleet_id must not be empty")


def _scope(who: Identity, fleet_ids: tuple[str, ...] | None, author: str | None
           ) -> SearchScope:
    """The request's fleets, else the caller's home fleet (agent key), else tenant-wide."""
    _named_fleets(*(fleet_ids or ()))
    fleets = fleet_ids if fleet_ids is not None else (who.fleet_id,) if who.fleet_id else None
    return SearchScope(fleets, author)


# PATCH fields no backend here has (no status lifecycle, no re-scoping by patch, no entities)
_PATCH_UNSUPPORTED = ("memory_type", "title", "status", "visibility", "metadata_mode",
                      "source_uri", "subject_entity_id", "predicate", "object_value",
                      "ts_valid_start", "ts_valid_end")


@router.patch("/memories/{memory_id}")
async def patch_memory(memory_id: str, body: MemoryUpdate, caller: CallerDep,
                       state: StateDep, tenant_id: str | None = None) -> Any:
    """The backend's own update, with whatever identity its update takes (docs/backends.md)."""
    if tenant_id is not None:
        caller.enforce_readable_tenant(tenant_id)
    sent = body.model_dump(exclude_unset=True)
    other = sorted(k for k in sent if k in _PATCH_UNSUPPORTED)
    if other:
        return not_supported(state.backend.name, "PATCH /memories/{id}",
                             f"no equivalent of {', '.join(other)} in the backend's update")
    change = Change(body.content, body.weight, body.metadata)
    try:
        found = await state.call(state.backend.update, state.identity(caller), memory_id,
                                 change)
    except NotSupported as exc:
        return not_supported(state.backend.name, "PATCH /memories/{id}", str(exc))
    if found is None:
        raise ApiError(404, "Memory not found")
    return memory_out(found.row())


@router.delete("/memories/{memory_id}", status_code=204, response_model=None)
async def delete_memory(memory_id: str, caller: CallerDep, state: StateDep,
                        tenant_id: str | None = None) -> Response:
    """The backend's own delete (a hard delete on all three: nothing deleted is kept)."""
    if tenant_id is not None:
        caller.enforce_readable_tenant(tenant_id)
    try:
        gone = await state.call(state.backend.delete, state.identity(caller), memory_id)
    except NotSupported as exc:
        return not_supported(state.backend.name, "DELETE /memories/{id}", str(exc))
    if not gone:
        raise ApiError(404, "Memory not found")
    return Response(status_code=204)


@router.get("/memories")
async def list_memories(caller: CallerDep, state: StateDep, tenant_id: str | None = None,
                        agent_id: str | None = None, fleet_id: str | None = None,
                        limit: int = 50, include_deleted: bool = False) -> Any:
    """The backend's own listing (LangGraph search without a query, mem0 get_all, CrewAI
    list_records) over the same scope a search names."""
    if tenant_id is not None:
        caller.enforce_readable_tenant(tenant_id)
    if include_deleted:
        return not_supported(state.backend.name, "GET /memories?include_deleted",
                             "deletes are hard: nothing deleted is kept to list")
    if not 1 <= limit <= 1000:
        raise ApiError(422, "limit must be between 1 and 1000")
    who = state.identity(caller)
    scope = _scope(who, (fleet_id,) if fleet_id is not None else None, agent_id)
    try:
        found = await state.call(state.backend.list, who, scope, limit)
    except NotSupported as exc:
        return not_supported(state.backend.name, "GET /memories", str(exc))
    return {"items": [memory_out(m.row()) for m in found], "total": len(found)}


# MemClaw paths none of the three backends has an equivalent for (docs/backends.md).
UNSUPPORTED: tuple[tuple[str, str, str], ...] = (
    ("POST", "/memories/bulk", "MemClaw's bulk write with per-item admission"),
    ("PATCH", "/memories/{memory_id}/status", "no status lifecycle"),
    ("POST", "/recall", "MemClaw's second search endpoint; the backend's search is "
     "measured through POST /search"),
    ("GET", "/entities/{entity_id}", "no entity graph"),
    ("GET", "/memories/{memory_id}/contradictions",
     "no contradiction detection or supersession runs without an LLM"),
    ("POST", "/memories/redistribute", "no re-homing of a memory onto another agent"),
    ("PATCH", "/agents/{agent_id}/trust", "no trust levels"),
    ("GET", "/agents/{agent_id}", "no agent records with trust and home fleet"),
    ("POST", "/entities/upsert", "no entity graph"),
)


def _unsupported_route(method: str, path: str, reason: str) -> None:
    async def handler(request: Request) -> JSONResponse:
        return not_supported(request.app.state.adapter.backend.name, f"{method} {path}",
                             reason)

    router.add_api_route(path, handler, methods=[method], include_in_schema=False)


for _method, _path, _reason in UNSUPPORTED:
    _unsupported_route(_method, _path, _reason)


def create_app(state: AdapterState) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        state.backend.close()
        state.storage.close()

    app = FastAPI(title=f"fleetprobe backend adapter ({state.backend.name})",
                  lifespan=lifespan)
    app.state.adapter = app.state.server = state  # caller_from reads app.state.server.keys
    install_error_handlers(app)
    app.include_router(router)
    return app
