"""What a run over the world learns on the wire (ids, credentials, what the target did not build),
built from recorded responses and shared by the world-building phases and the probes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fleetprobe.client import Credential, Result, not_supported
from fleetprobe.harness.experiment import RunContext
from fleetprobe.harness.seeding import scoped
from fleetprobe.world.plan import RowSpec, World


@dataclass
class Wire:
    tenant_ids: dict[str, str] = field(default_factory=dict)
    tenant_of_id: dict[str, str] = field(default_factory=dict)
    creds: dict[str, Credential] = field(default_factory=dict)
    agent_ids: dict[str, str] = field(default_factory=dict)
    principal_of: dict[tuple[str, str], str] = field(default_factory=dict)
    fleet_plan: dict[str, str] = field(default_factory=dict)
    memory_ids: dict[str, str] = field(default_factory=dict)
    row_of: dict[str, str] = field(default_factory=dict)
    attempts: dict[str, tuple[str, int]] = field(default_factory=dict)
    idempotency: dict[str, str] = field(default_factory=dict)
    entities: dict[tuple[str, str | None], str] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    # each doomed row as its GET answered just before the delete (row key -> body)
    before_delete: dict[str, dict[str, Any]] = field(default_factory=dict)
    bulk_absent: bool = False
    # a backend adapter (docs/backends.md) answers "not supported" where its memory system
    # has no equivalent: per world-building step (entity, bulk, trust, agents, list) and per
    # row it could not build as planned (a status, a deletion), the reason; the probes that
    # need them are recorded not applicable with it, never sent
    unsupported: dict[str, str] = field(default_factory=dict)
    unbuilt: dict[str, str] = field(default_factory=dict)
    # rows whose entity link the target did not keep (the entity census): row -> reason
    unlinked: dict[str, str] = field(default_factory=dict)
    # principals and rows the target did not provide, and why (the run is then incomplete)
    missing_principals: dict[str, str] = field(default_factory=dict)
    missing_rows: dict[str, str] = field(default_factory=dict)


def wire(ctx: RunContext) -> Wire:
    return ctx.__dict__.setdefault("world_wire", Wire())


def world(ctx: RunContext) -> World:
    return ctx.plan.world


def fleet_id(ctx: RunContext, fleet: str | None) -> str | None:
    return None if fleet is None else scoped(fleet, ctx.nonce)


def plan_fleet(w: Wire, fleet: str | None) -> str | None:
    return None if fleet is None else w.fleet_plan.get(fleet, fleet)


def entity_name(ctx: RunContext, fleet: str | None) -> str:
    return scoped(f"svc {fleet or 'no fleet'}", ctx.nonce)


def row_fleet(ctx: RunContext, row: RowSpec) -> str | None:
    """The fleet the row was written into: its `away` fleet, else its owner's home."""
    return row.away or ctx.plan.world.principals[row.owner].home


def note_unsupported(w: Wire, step: str, result: Result) -> str | None:
    """Remember a backend's "not supported" answer to a world-building step."""
    reason = not_supported(result)
    if reason is not None:
        w.unsupported.setdefault(step, reason)
    return reason


def remember(w: Wire, row: RowSpec, memory_id: str) -> None:
    w.memory_ids[row.key] = memory_id
    w.row_of[memory_id] = row.key


def ids(items: Any) -> list[str]:
    return [i.get("id") for i in items or [] if isinstance(i, dict)]
