"""Request bodies, field for field as MemClaw's `schemas.py` (WIRE.md 2.1-2.12).

Unknown fields are ignored (pydantic's default), exactly as MemClaw does: a singular
`fleet_id` on /search is silently dropped, which is one of the search-leak hypotheses.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import AfterValidator, BaseModel, Field


def _encodable(value: str) -> str:
    """JSON can carry lone surrogates that no UTF-8 store accepts; refuse them up front."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("string is not valid UTF-8 (lone surrogate)") from None
    return value


Text = Annotated[str, AfterValidator(_encodable)]

MemoryType = Literal["fact", "episode", "decision", "preference", "task", "semantic",
                     "intention", "plan", "commitment", "action", "outcome", "cancellation",
                     "rule", "insight"]
RESERVED_MEMORY_TYPES = frozenset({"outcome", "rule", "insight"})


def reserved_type_message(memory_type: str) -> str:
    """MemClaw's refusal, word for word: it names the server-side route for each type."""
    return (f"memory_type='{memory_type}' is server-reserved and cannot be supplied on writes. "
            "Use memclaw_evolve for outcome/rule or memclaw_insights for insight; for "
            "agent-authored reflections, use memory_type='semantic' or 'fact' (or omit "
            "memory_type to auto-classify).")


STATUS_PATTERN = r"^(active|pending|confirmed|cancelled|outdated|conflicted|archived|deleted)$"
VISIBILITY_PATTERN = r"^(scope_agent|scope_team|scope_org)$"
STATUSES = ("active", "pending", "confirmed", "cancelled", "outdated", "conflicted",
            "archived", "deleted")
TENANT_ID_PATTERN = r"^[A-Za-z0-9._:\-]{1,128}$"


class EntityLinkIn(BaseModel):
    entity_id: UUID
    role: Text = "mentioned"


class MemoryFields(BaseModel):
    """What a single write and a bulk item share."""

    content: Annotated[Text, Field(min_length=1, max_length=10000)]
    memory_type: MemoryType | None = None
    weight: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    source_uri: Text | None = None
    run_id: Text | None = None
    metadata: dict[str, Any] | None = None
    entity_links: list[EntityLinkIn] = []
    expires_at: datetime | None = None
    ts_valid_start: datetime | None = None
    ts_valid_end: datetime | None = None
    reference_datetime: datetime | None = None
    subject_entity_id: UUID | None = None
    predicate: Text | None = None
    object_value: Text | None = None
    status: Annotated[Text, Field(pattern=STATUS_PATTERN)] | None = None
    write_mode: Literal["fast", "strong", "auto", "stm"] | None = None


class MemoryCreate(MemoryFields):
    tenant_id: Text
    agent_id: Annotated[Text, Field(min_length=1, max_length=256)] | None = None
    fleet_id: Text | None = None
    visibility: Annotated[Text, Field(pattern=VISIBILITY_PATTERN)] | None = None
    persist: bool = True


class MemoryUpdate(BaseModel):
    content: Annotated[Text, Field(min_length=1, max_length=10000)] | None = None
    memory_type: MemoryType | None = None
    weight: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    title: Text | None = None
    status: Annotated[Text, Field(pattern=STATUS_PATTERN)] | None = None
    visibility: Annotated[Text, Field(pattern=VISIBILITY_PATTERN)] | None = None
    metadata: dict[str, Any] | None = None
    metadata_mode: Annotated[Text, Field(pattern=r"^(merge|replace)$")] | None = None
    source_uri: Text | None = None
    subject_entity_id: UUID | None = None
    predicate: Text | None = None
    object_value: Text | None = None
    ts_valid_start: datetime | None = None
    ts_valid_end: datetime | None = None
    expires_at: datetime | None = None
    entity_links: list[EntityLinkIn] | None = None


class BulkMemoryItem(MemoryFields):
    pass


class BulkMemoryCreate(BaseModel):
    tenant_id: Text
    agent_id: Annotated[Text, Field(min_length=1, max_length=256)] | None = None
    fleet_id: Text | None = None
    visibility: Annotated[Text, Field(pattern=VISIBILITY_PATTERN)] | None = None
    items: Annotated[list[BulkMemoryItem], Field(min_length=1, max_length=100)]


class SearchRequest(BaseModel):
    tenant_id: Text
    query: Annotated[Text, Field(min_length=1, max_length=5000)]
    fleet_ids: list[Text] | None = None
    filter_agent_id: Text | None = None
    memory_type_filter: MemoryType | None = None
    status_filter: Annotated[Text, Field(pattern=STATUS_PATTERN)] | None = None
    valid_at: datetime | None = None
    top_k: Annotated[int, Field(ge=1, le=20)] = 5
    diagnostic: bool = False


class EntityUpsert(BaseModel):
    tenant_id: Text
    fleet_id: Text | None = None
    entity_type: Annotated[Text, Field(min_length=1, max_length=256)]
    canonical_name: Annotated[Text, Field(min_length=1, max_length=1000)]
    attributes: dict[str, Any] | None = None


class RedistributeRequest(BaseModel):
    memory_ids: Annotated[list[UUID], Field(min_length=1, max_length=500)]
    target_agent_id: Annotated[Text, Field(min_length=1, max_length=256)]


class TrustUpdate(BaseModel):
    trust_level: Annotated[int, Field(ge=0, le=3)]
    fleet_id: Text | None = None


class ProvisionRequest(BaseModel):
    agent_id: Annotated[Text, Field(min_length=1, max_length=256)]
    label: Text | None = None
    initial_trust: Annotated[int, Field(ge=0, le=3)] = 1
    initial_fleet: Text | None = None
    display_name: Text | None = None
    tenant_id: Text | None = None  # admin credential only: which tenant


class TenantCreate(BaseModel):
    tenant_id: Annotated[Text, Field(pattern=TENANT_ID_PATTERN)] | None = None
