"""The rows a store keeps and hands up (agents, keys, idempotency records, the list filter),
the memory columns both stores share, and the SQL of the list filter. Imports no other layer.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

LIVE_STATUSES = ("active", "confirmed", "pending")

MEMORY_COLUMNS = (
    "id", "tenant_id", "fleet_id", "agent_id", "memory_type", "title", "content", "weight",
    "source_uri", "run_id", "metadata", "content_hash", "client_request_id", "created_at",
    "expires_at", "deleted_at", "ts_valid_start", "ts_valid_end", "subject_entity_id",
    "predicate", "object_value", "status", "visibility", "recall_count", "last_recalled_at",
    "supersedes_id")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class NewMemory:
    """One memory to insert: its row, embedding, entity links (entity id, role), the due time
    of its contradiction job (none: no job) and the idempotency record its answer replays."""
    row: dict
    embedding: Any = None  # np.ndarray | None (numpy stays out of this module)
    links: Sequence[tuple[str, str]] = ()
    detection_due_at: float | None = None
    idempotency: IdempotencyRecord | None = None


@dataclass(frozen=True)
class AgentRow:
    tenant_id: str
    agent_id: str
    fleet_id: str | None
    trust_level: int
    display_name: str | None = None
    created_at: str = ""
    updated_at: str = ""


@dataclass(frozen=True)
class KeyRow:
    id: str
    tenant_id: str
    agent_id: str | None
    kind: str
    key_prefix: str
    created_at: str


@dataclass
class IdempotencyRecord:
    tenant_id: str
    key: str
    request_hash: str
    status_code: int
    body: str


@dataclass
class ListFilter:
    tenant_id: str
    fleet_id: str | None = None
    agent_id: str | None = None
    memory_type: str | None = None
    exclude_memory_types: Sequence[str] = ()
    status: str | None = None
    run_id: str | None = None
    created_after: str | None = None
    created_before: str | None = None
    include_deleted: bool = False
    sort: str = "created_at"
    order: str = "desc"
    # (created_at, id) of the last row already returned, for the created_at-desc cursor.
    after: tuple[str, str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


_SORTABLE = {"created_at", "weight", "memory_type", "agent_id", "status", "recall_count",
             "fleet_id", "tenant_id", "expires_at", "deleted_at"}


def list_where(flt: ListFilter, mark: str = "?") -> tuple[list[str], list[Any]]:
    """The list filter as SQL clauses and parameters (`mark`: the driver's placeholder)."""
    if flt.sort not in _SORTABLE:
        raise ValueError(f"unsortable column {flt.sort}")
    where, args = [f"tenant_id = {mark}"], [flt.tenant_id]
    equals = {"fleet_id": flt.fleet_id, "agent_id": flt.agent_id,
              "memory_type": flt.memory_type, "status": flt.status, "run_id": flt.run_id}
    for column, value in equals.items():
        if value is not None:
            where.append(f"{column} = {mark}")
            args.append(value)
    if flt.exclude_memory_types:
        where.append(f"memory_type NOT IN ({', '.join(mark for _ in flt.exclude_memory_types)})")
        args.extend(flt.exclude_memory_types)
    if flt.created_after:
        where.append(f"created_at > {mark}")
        args.append(flt.created_after)
    if flt.created_before:
        where.append(f"created_at < {mark}")
        args.append(flt.created_before)
    if not flt.include_deleted:
        where.append("deleted_at IS NULL")
    if flt.after:
        where.append(f"(created_at < {mark} OR (created_at = {mark} AND id < {mark}))")
        args.extend([flt.after[0], flt.after[0], flt.after[1]])
    return where, args


def monotonic_due(delay_s: float) -> float:
    """Detection due times are wall-clock epochs so they survive a restart."""
    return time.time() + delay_s
