"""Memory reads: by id, contradictions, list, search, recall (WIRE.md section 2). Every
path asks governance (`scope`) which rows the caller may see."""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from typing import Annotated, Literal
from uuid import UUID

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, Response

from ..governance import scope
from ..governance.auth import Caller, caller_from
from ..pipeline.byid import live_row, query_viewer_of, viewer_of
from ..pipeline.search import SearchContext, run_search_off_loop
from ..pipeline.write import iso
from ..storage import ListFilter
from ..wire.errors import ApiError
from ..wire.schemas import SearchRequest, Text, Timestamp
from ..wire.serialize import content_preview, memory_detail, memory_out
from .state import ServerState, state_of

router = APIRouter(prefix="/api/v1")
CallerDep = Annotated[Caller, Depends(caller_from)]
StateDep = Annotated[ServerState, Depends(state_of)]


# by id -----------------------------------------------------------------------------------

def _readable_row(state: ServerState, caller: Caller, tenant_id: str, memory_id: UUID) -> dict:
    caller.enforce_readable_tenant(tenant_id)
    row = live_row(state.storage, tenant_id, str(memory_id))
    if not scope.byid_read_allowed(state.profile, viewer_of(state.storage, caller), row):
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
    viewer = viewer_of(state.storage, caller)
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
    # (its private rows show, its fleet rule applies); before 045039f it listed as that
    # filter alone (`agent_query_is_identity`: no filter, no private rows and no fleet
    # rule, whoever the credential is); hardened applies the fleet and trust rules of the
    # credential's own identity, so a filter never hides what the credential may read
    viewer = query_viewer_of(state.profile, state.storage, caller, agent_id)
    access = viewer_of(state.storage, caller) if state.profile.hardening.list_row_access else viewer
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
