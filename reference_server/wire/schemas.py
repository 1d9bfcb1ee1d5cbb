"""Request bodies, field for field as MemClaw's `schemas.py` (WIRE.md 2.1-2.12).

Unknown fields are ignored (pydantic's default), exactly as MemClaw does: a singular
`fleet_id` on /search is silently dropped, which is one of the search-leak hypotheses.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError


def _encodable(value: str) -> str:
    """JSON can carry lone surrogates that no UTF-8 store accepts; refuse them up front."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("string is not valid UTF-8 (lone surrogate)") from None
    return value


Text = Annotated[str, AfterValidator(_encodable)]


def _all_encodable(values: list[str]) -> list[str]:
    """One C-level pass for a whole list (a 100k-entry `fleet_ids` must stay cheap)."""
    _encodable("\n".join(values))
    return values


TextList = Annotated[list[str], AfterValidator(_all_encodable)]

# Free-form JSON the server stores and renders back (metadata, entity attributes): bounded
# nesting, finite numbers, encodable text in keys and values. Checked before anything is
# written, so every stored value renders back (JSON has no NaN/Infinity; 1e400 parses as inf).
MAX_JSON_DEPTH = 32
MAX_JSON_NODES = 20_000


def _storable_json(value: dict[str, Any]) -> dict[str, Any]:
    """Iterative walk (no recursion, so hostile depth cannot exhaust the stack)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    nodes = 0
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if nodes > MAX_JSON_NODES:
            raise ValueError(f"JSON object has more than {MAX_JSON_NODES} values")
        if isinstance(node, dict):
            if depth > MAX_JSON_DEPTH:
                raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
            for key, child in node.items():
                _encodable(key)
                stack.append((child, depth + 1))
        elif isinstance(node, list):
            if depth > MAX_JSON_DEPTH:
                raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
            stack.extend((child, depth + 1) for child in node)
        elif isinstance(node, str):
            _encodable(node)
        elif isinstance(node, float) and not math.isfinite(node):
            raise ValueError("number is not finite (NaN, Infinity or out of range)")
    return value


JsonObject = Annotated[dict[str, Any], AfterValidator(_storable_json)]

# Every stored timestamp is normalised to UTC; a datetime whose UTC value falls outside
# Python's year range (e.g. 9999-12-31T23:59:59-14:00) cannot be stored or compared.
_UTC_MIN = datetime.min.replace(tzinfo=UTC) + timedelta(days=1)
_UTC_MAX = datetime.max.replace(tzinfo=UTC) - timedelta(days=1)


def _utc_representable(value: datetime) -> datetime:
    aware = value if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        utc = aware.astimezone(UTC)
    except OverflowError:
        raise ValueError("datetime is out of range once converted to UTC") from None
    if not _UTC_MIN <= utc <= _UTC_MAX:
        raise ValueError("datetime is out of range once converted to UTC")
    return value


Timestamp = Annotated[datetime, AfterValidator(_utc_representable)]


class WireModel(BaseModel):
    """Request bodies: float fields refuse NaN and Infinity as well."""

    model_config = ConfigDict(allow_inf_nan=False)

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


class EntityLinkIn(WireModel):
    entity_id: UUID
    role: Text = "mentioned"


class MemoryFields(WireModel):
    """What a single write and a bulk item share."""

    content: Annotated[Text, Field(min_length=1, max_length=10000)]
    memory_type: MemoryType | None = None
    weight: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    source_uri: Text | None = None
    run_id: Text | None = None
    metadata: JsonObject | None = None
    entity_links: list[EntityLinkIn] = []
    expires_at: Timestamp | None = None
    ts_valid_start: Timestamp | None = None
    ts_valid_end: Timestamp | None = None
    reference_datetime: Timestamp | None = None
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


class MemoryUpdate(WireModel):
    content: Annotated[Text, Field(min_length=1, max_length=10000)] | None = None
    memory_type: MemoryType | None = None
    weight: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    title: Text | None = None
    status: Annotated[Text, Field(pattern=STATUS_PATTERN)] | None = None
    visibility: Annotated[Text, Field(pattern=VISIBILITY_PATTERN)] | None = None
    metadata: JsonObject | None = None
    metadata_mode: Annotated[Text, Field(pattern=r"^(merge|replace)$")] | None = None
    source_uri: Text | None = None
    subject_entity_id: UUID | None = None
    predicate: Text | None = None
    object_value: Text | None = None
    ts_valid_start: Timestamp | None = None
    ts_valid_end: Timestamp | None = None
    expires_at: Timestamp | None = None
    entity_links: list[EntityLinkIn] | None = None


class BulkMemoryItem(MemoryFields):
    pass


class BulkMemoryCreate(WireModel):
    tenant_id: Text
    agent_id: Annotated[Text, Field(min_length=1, max_length=256)] | None = None
    fleet_id: Text | None = None
    visibility: Annotated[Text, Field(pattern=VISIBILITY_PATTERN)] | None = None
    items: Annotated[list[BulkMemoryItem], Field(min_length=1, max_length=100)]


class SearchRequest(WireModel):
    tenant_id: Text
    query: Annotated[Text, Field(min_length=1, max_length=5000)]
    fleet_ids: TextList | None = None
    filter_agent_id: Text | None = None
    memory_type_filter: MemoryType | None = None
    status_filter: Annotated[Text, Field(pattern=STATUS_PATTERN)] | None = None
    valid_at: Timestamp | None = None
    top_k: Annotated[int, Field(ge=1, le=20)] = 5
    diagnostic: bool = False


class EntityUpsert(WireModel):
    tenant_id: Text
    fleet_id: Text | None = None
    entity_type: Annotated[Text, Field(min_length=1, max_length=256)]
    canonical_name: Annotated[Text, Field(min_length=1, max_length=1000)]
    attributes: JsonObject | None = None


class RedistributeRequest(WireModel):
    memory_ids: Annotated[list[UUID], Field(min_length=1, max_length=500)]
    target_agent_id: Annotated[Text, Field(min_length=1, max_length=256)]


class TrustUpdate(WireModel):
    trust_level: Annotated[int, Field(ge=0, le=3)]
    fleet_id: Text | None = None


class ProvisionRequest(WireModel):
    agent_id: Annotated[Text, Field(min_length=1, max_length=256)]
    label: Text | None = None
    initial_trust: Annotated[int, Field(ge=0, le=3)] = 1
    initial_fleet: Text | None = None
    display_name: Text | None = None
    tenant_id: Text | None = None  # admin credential only: which tenant


class TenantCreate(WireModel):
    tenant_id: Annotated[Text, Field(pattern=TENANT_ID_PATTERN)] | None = None


# Errors strict validation adds where MemClaw's lax pydantic coerces a scalar: a number sent
# as a string or a boolean (`"5"`, `true`), a boolean sent as a string or a number.
LOOSE_SCALAR_ERRORS = frozenset({"int_type", "float_type", "bool_type"})


def loose_scalars(model: type[BaseModel], raw: bytes) -> list[dict[str, Any]]:
    """Where `raw` passes `model` only by coercing a scalar: those errors, shaped as FastAPI's
    request errors. Other faults are left to the normal (lax) validation."""
    try:
        model.model_validate_json(raw, strict=True)
    except ValidationError as exc:
        return [{"type": e["type"], "loc": ("body", *e["loc"]), "msg": e["msg"],
                 "input": e.get("input")}
                for e in exc.errors() if e["type"] in LOOSE_SCALAR_ERRORS]
    return []
