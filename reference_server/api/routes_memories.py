"""Memory endpoints: write, bulk, by id, list, contradictions, status, delete,
redistribute, search, recall (WIRE.md section 2)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from fastapi import APIRouter, Body, Depends, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from ..governance import scope
from ..governance.auth import Caller, caller_from
from ..pipeline.bulk import BulkWrite, run_bulk
from ..pipeline.search import SearchContext, run_search_off_loop
from ..pipeline.write import (
    DuplicateError,
    WriteContext,
    content_hash,
    entity_links_to_store,
    iso,
    require_min_length,
    run_write,
)
from ..storage import AgentRow, ListFilter
from ..wire.errors import ApiError
from ..wire.schemas import (
    RESERVED_MEMORY_TYPES,
    STATUSES,
    BulkMemoryCreate,
    MemoryCreate,
    MemoryFields,
    MemoryUpdate,
    RedistributeRequest,
    SearchRequest,
    Text,
    Timestamp,
    reserved_type_message,
)
from ..wire.serialize import content_preview, memory_detail, memory_out
from .routes_insights import withdraw_derived_insights
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


# reads by id -----------------------------------------------------------------------------

def _viewer(state: ServerState, caller: Caller, agent_id: str | None = None) -> scope.Viewer:
    """The governing identity: the verified agent, else an agent id named in the request."""
    ident = caller.agent_id or agent_id
    if ident is None or caller.tenant_id is None:
        return scope.Viewer(ident)
    return scope.Viewer(ident, state.storage.get_agent(caller.tenant_id, ident))


def _live_row(state: ServerState, tenant_id: str, memory_id: UUID) -> dict:
    """The tenant's row, or 404 when it is absent, soft-deleted or another tenant's."""
    row = state.storage.get_memory(tenant_id, str(memory_id))
    if row is None or row["deleted_at"] is not None:
        raise ApiError(404, "Memory not found")
    return row


def _readable_row(state: ServerState, caller: Caller, tenant_id: str, memory_id: UUID) -> dict:
    caller.enforce_readable_tenant(tenant_id)
    row = _live_row(state, tenant_id, memory_id)
    if not scope.byid_read_allowed(state.profile, _viewer(state, caller), row):
        raise ApiError(404, "Memory not found")  # never 403: existence is not disclosed
    return row


def _detail_links(state: ServerState, tenant_id: str, memory_id: str) -> list[dict]:
    links = state.storage.entity_links_of([memory_id]).get(memory_id, [])
    for link in links:
        entity = state.storage.get_entity(tenant_id, link["entity_id"])
        if entity:
            link.update(entity_type=entity["entity_type"],
                        canonical_name=entity["canonical_name"],
                        attributes=entity["attributes"])
    return links


@router.get("/memories/{memory_id}")
async def get_memory(memory_id: UUID, tenant_id: Annotated[Text, Query()],
                     caller: CallerDep, state: StateDep) -> JSONResponse:
    row = _readable_row(state, caller, tenant_id, memory_id)
    return JSONResponse(memory_detail(row, _detail_links(state, tenant_id, row["id"])))


@router.get("/memories/{memory_id}/contradictions")
async def get_contradictions(memory_id: UUID, tenant_id: Annotated[Text, Query()],
                             caller: CallerDep, state: StateDep) -> dict:
    row = _readable_row(state, caller, tenant_id, memory_id)
    viewer = _viewer(state, caller)
    visible = lambda r: scope.byid_read_allowed(state.profile, viewer, r)  # noqa: E731
    newer = [r for r in state.storage.successors_of(tenant_id, [row["id"]]) if visible(r)]
    older = [r for r in state.storage.memories_by_ids(tenant_id, [row["supersedes_id"]] if
                                                      row["supersedes_id"] else [])
             if visible(r) and r["deleted_at"] is None]
    entries = ([_contradiction(row, r, "superseded_by") for r in newer]
               + [_contradiction(row, r, "supersedes") for r in older])
    return {
        "memory_id": row["id"], "status": row["status"],
        "superseded_by": _brief(newer[0]) if newer else None,
        "superseded_memories": [_brief(r) for r in older],
        "detection_status": "pending" if state.storage.detection_pending(row["id"])
        else "completed",
        "contradictions": entries,
    }


def _brief(row: dict) -> dict:
    return {"id": row["id"], "content_preview": content_preview(row["content"]),
            "status": row["status"], "created_at": row["created_at"]}


def _contradiction(row: dict, other: dict, direction: str) -> dict:
    rdf = row["predicate"] is not None and other["predicate"] is not None
    return {"memory_id": other["id"], "status": other["status"],
            "reason": "rdf_conflict" if rdf else "unknown",
            "content_preview": content_preview(other["content"]), "direction": direction,
            "created_at": other["created_at"]}


@router.patch("/memories/{memory_id}/status")
async def patch_status(memory_id: UUID, tenant_id: Annotated[Text, Query()],
                       caller: CallerDep, state: StateDep,
                       body: Annotated[dict[str, Any], Body()]) -> dict:
    caller.enforce_tenant(tenant_id)
    status = body.get("status")
    if status not in STATUSES:
        raise ApiError(400, "Invalid status. Must be one of: " + ", ".join(STATUSES))
    row = _live_row(state, tenant_id, memory_id)
    denial = scope.status_change_denial(state.profile, _viewer(state, caller), row)
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
    row = _live_row(state, tenant_id, memory_id)
    denial = scope.update_denial(state.profile, _viewer(state, caller, agent_id), row)
    if denial:
        raise ApiError(403, denial)
    changes, embedding = _column_changes(state, row, body, given)
    links = None if body.entity_links is None else entity_links_to_store(
        state.profile, state.storage, tenant_id, body.entity_links)
    state.storage.update_memory(row, changes, embedding, links)
    updated = state.storage.get_memory(tenant_id, row["id"])
    return memory_out(updated, state.storage.entity_links_of([row["id"]]).get(row["id"]))


def _column_changes(state: ServerState, row: dict, body: MemoryUpdate,
                    given: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    changes = {k: v for k, v in given.items() if k not in ("entity_links", "metadata")}
    for key in ("expires_at", "ts_valid_start", "ts_valid_end"):
        if key in changes:
            changes[key] = iso(getattr(body, key))
    if "subject_entity_id" in changes and body.subject_entity_id is not None:
        changes["subject_entity_id"] = str(body.subject_entity_id)
    if "memory_type" in changes and changes["memory_type"] == "semantic":
        changes["memory_type"] = "fact"
    if "metadata" in given:
        merge = body.metadata_mode != "replace"
        changes["metadata"] = ({**(row["metadata"] or {}), **(body.metadata or {})} if merge
                               else body.metadata)
    embedding = None
    if body.content is not None and body.content != row["content"]:
        require_min_length(body.content)
        changes["content_hash"] = content_hash(row["tenant_id"], row["fleet_id"], body.content)
        if "check_exact_duplicate" in state.profile.write_steps:
            existing = state.storage.find_exact_duplicate(
                row["tenant_id"], row["fleet_id"], row["agent_id"], changes["content_hash"])
            if existing and existing != row["id"]:
                raise DuplicateError("exact", existing)
        embedding = state.embedder.embed(body.content)
    return changes, embedding


@router.delete("/memories/{memory_id}", status_code=204)
async def delete_memory(memory_id: UUID, tenant_id: Annotated[Text, Query()],
                        caller: CallerDep, state: StateDep,
                        agent_id: Annotated[Text | None, Query()] = None) -> Response:
    caller.enforce_tenant(tenant_id)
    viewer = _viewer(state, caller, agent_id)
    if state.profile.delete_caller_checked_first:  # the caller's trust, before any lookup
        denial = scope.delete_denial(state.profile, viewer, None)
        if denial:
            raise ApiError(403, denial)
    row = _live_row(state, tenant_id, memory_id)
    denial = scope.delete_denial(state.profile, viewer, row)
    if denial:
        raise ApiError(403, denial)
    state.storage.soft_delete(tenant_id, row["id"])
    if state.profile.hardening.derived_insights_withdrawn:
        withdraw_derived_insights(state, tenant_id, row["id"])
    return Response(status_code=204)


# list ------------------------------------------------------------------------------------

SortColumn = Literal["created_at", "weight", "memory_type", "agent_id", "status",
                     "recall_count", "fleet_id", "tenant_id", "expires_at", "deleted_at"]


@router.get("/memories")
async def list_memories(
    caller: CallerDep, state: StateDep,
    tenant_id: Text | None = None, fleet_id: Text | None = None, agent_id: Text | None = None,
    memory_type: Text | None = None,
    exclude_memory_types: Annotated[list[Text] | None, Query()] = None,
    created_after: Timestamp | None = None, created_before: Timestamp | None = None,
    status: Text | None = None, visibility: Text | None = None, run_id: Text | None = None,
    cursor: Text | None = None, sort: SortColumn = "created_at",
    order: Literal["asc", "desc"] = "desc",
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    include_deleted: bool = False,
) -> JSONResponse:
    tenant = tenant_id or caller.tenant_id
    if tenant is None:
        raise ApiError(400, "tenant_id is required")
    caller.enforce_readable_tenant(tenant)
    # MemClaw lists as the agent the `agent_id` filter names when the credential names none
    # (its private rows show, its fleet rule applies); hardened applies the fleet and trust
    # rules of the credential's own identity, so a filter never hides what the credential
    # may read
    viewer = _viewer(state, caller, agent_id)
    access = _viewer(state, caller) if state.profile.hardening.list_row_access else viewer
    if state.profile.hardening.list_deleted_tenant_only and caller.agent_id is not None:
        include_deleted = False  # hardened: soft-deleted rows are an administrative view
    if access.agent_id and fleet_id and not scope.fleet_read_allowed(
            state.profile, access.agent, fleet_id):
        home = access.agent.fleet_id if access.agent else None
        raise ApiError(403, f"fleet-scope policy: fleet '{fleet_id}' is not readable by "
                            f"principals of fleet '{home or 'none'}'.")
    flt = ListFilter(tenant_id=tenant, fleet_id=fleet_id, agent_id=agent_id,
                     memory_type=memory_type, exclude_memory_types=exclude_memory_types or (),
                     status=status, run_id=run_id, created_after=iso(created_after),
                     created_before=iso(created_before), include_deleted=include_deleted,
                     sort=sort, order=order, after=_decode_cursor(cursor, sort, order))
    page = _page(state, viewer, access, flt, offset, limit)
    more = len(page) > limit
    page = page[:limit]
    next_cursor = (_encode_cursor(page[-1]) if more and sort == "created_at"
                   and order == "desc" else None)
    links = state.storage.entity_links_of([r["id"] for r in page])
    return JSONResponse({"items": [memory_out(r, links.get(r["id"])) for r in page],
                         "next_cursor": next_cursor})


def _page(state: ServerState, viewer: scope.Viewer, access: scope.Viewer, flt: ListFilter,
          offset: int, limit: int) -> list[dict]:
    page: list[dict] = []
    skipped = 0
    for row in state.storage.iter_memories(flt):
        if not scope.list_row_visible(state.profile, viewer, row, access):
            continue
        if skipped < offset:
            skipped += 1
            continue
        page.append(row)
        if len(page) > limit:
            break
    return page


def _encode_cursor(row: dict) -> str:
    return base64.urlsafe_b64encode(f"{row['created_at']}:{row['id']}".encode()).decode()


def _decode_cursor(cursor: str | None, sort: str, order: str) -> tuple[str, str] | None:
    if cursor is None:
        return None
    if sort != "created_at" or order != "desc":
        raise ApiError(400, "cursor is only supported with sort=created_at&order=desc")
    try:
        created_at, memory_id = base64.urlsafe_b64decode(cursor.encode()).decode().rsplit(":", 1)
        UUID(memory_id)
        datetime.fromisoformat(created_at)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise ApiError(400, "Invalid cursor") from None
    return created_at, memory_id


# redistribute ----------------------------------------------------------------------------

@router.post("/memories/redistribute")
async def redistribute(body: RedistributeRequest, tenant_id: Annotated[Text, Query()],
                       agent_id: Annotated[Text, Query()], caller: CallerDep,
                       state: StateDep) -> dict:
    started = time.perf_counter()
    caller.enforce_tenant(tenant_id)
    if caller.agent_id is not None and caller.agent_id != agent_id:
        raise ApiError(403, f"agent_id '{agent_id}' does not match the authenticated agent "
                            f"identity '{caller.agent_id}'.")
    profile = state.profile
    requester = state.storage.get_agent(tenant_id, agent_id)
    if requester is None and profile.governed:
        raise ApiError(403, f"Agent '{agent_id}' requires trust_level >= "
                            f"{profile.redistribute_trust_cross_fleet} for redistribute.")
    requester = requester or AgentRow(tenant_id, agent_id, None, 0)
    # MemClaw checks the requester's trust before it looks the target up (WIRE.md 2.9), so a
    # requester below every redistribute rung gets 403 even for an unknown target.
    lowest_rung = min(profile.redistribute_trust_sibling, profile.redistribute_trust_cross_fleet)
    if profile.governed and requester.trust_level < lowest_rung:
        raise ApiError(403, f"Agent '{agent_id}' requires trust_level >= {lowest_rung} for "
                            "redistribute.")
    target = state.storage.get_agent(tenant_id, body.target_agent_id)
    if target is None:
        raise ApiError(404, f"Target agent '{body.target_agent_id}' not found in tenant "
                            f"'{tenant_id}'.")
    if target.trust_level < 1 and profile.governed:
        raise ApiError(403, f"Target agent '{target.agent_id}' is restricted (trust_level=0). "
                            "Cannot assign memories to a restricted agent.")
    wanted = list(dict.fromkeys(str(i) for i in body.memory_ids))
    rows = [r for r in state.storage.memories_by_ids(tenant_id, wanted)
            if r["deleted_at"] is None]
    needed, movable = scope.redistribute_gate(profile, requester, target, rows)
    if requester.trust_level < needed:
        raise ApiError(403, f"Agent '{agent_id}' requires trust_level >= {needed} for "
                            "redistribute.")
    movable_ids = {r["id"] for r in movable}
    to_move = [r for r in movable if r["agent_id"] != target.agent_id]
    state.storage.reassign(tenant_id, [r["id"] for r in to_move], target.agent_id)
    return {"moved": len(to_move),
            "promoted": sum(r["visibility"] == "scope_agent" for r in to_move),
            "skipped": len(movable) - len(to_move),
            "errors": [i for i in wanted if i not in movable_ids],
            "redistribute_ms": int((time.perf_counter() - started) * 1000)}


# search and recall -----------------------------------------------------------------------

async def _search(state: ServerState, caller: Caller, body: SearchRequest,
                  raw_key: str | None, path: str) -> tuple[list[dict], dict[str, str]]:
    """The items, and the rate-limit headers for the answer on `path`."""
    headers = state.rate_limit("search", caller, raw_key, path)
    caller.enforce_readable_tenant(body.tenant_id)
    ctx = SearchContext(state.profile, state.storage, state.embedder, caller, body,
                        recall=path == "recall")
    results = await run_search_off_loop(ctx)
    links = state.storage.entity_links_of([row["id"] for row, _ in results])
    items = [memory_out(row, links.get(row["id"]), similarity=sim) for row, sim in results]
    if body.diagnostic:  # MemClaw ignores the flag; here it says how each row was reached
        for item in items:
            hop = ctx.graph_hops.get(item["id"])
            item["retrieval"] = ({"path": "similarity"} if hop is None
                                 else {"path": "graph", "graph_hop": hop})
    return items, headers


@router.post("/search")
async def search(body: SearchRequest, request: Request, caller: CallerDep,
                 state: StateDep) -> JSONResponse:
    items, headers = await _search(state, caller, body, request.headers.get("x-api-key"),
                                   "search")
    return JSONResponse({"items": items}, headers=headers)


@router.post("/recall")
async def recall(body: SearchRequest, request: Request, response: Response,
                 caller: CallerDep, state: StateDep) -> dict:
    """No LLM here: the summary is extractive and deterministic (first sentence of each
    retrieved memory, in rank order)."""
    items, headers = await _search(state, caller, body, request.headers.get("x-api-key"),
                                   "recall")
    response.headers.update(headers)
    sentences = [_first_sentence(item["content"]) for item in items]
    return {"summary": " ".join(sentences), "summarizer": "extractive (no LLM)",
            "memory_count": len(items), "memories": items}


def _first_sentence(text: str) -> str:
    for end in (". ", "! ", "? ", "\n"):
        cut = text.find(end)
        if cut != -1:
            return text[: cut + 1].strip()
    return text.strip()
