"""`POST /memories/redistribute`: the redistribute path as named steps
(`REDISTRIBUTE_STEPS`). Every trust rule is governance's (`scope.redistribute_*`): the
requester is judged before the target or any row is looked up (MemClaw's order, WIRE.md
2.9), then the target, then which rows may move and at what trust (`redistribute_gate`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..governance import scope
from ..governance.auth import Caller
from ..governance.profiles import Profile
from ..storage import AgentRow, Storage
from ..wire.errors import ApiError
from .byid import run_steps


@dataclass
class RedistributeContext:
    profile: Profile
    storage: Storage
    caller: Caller
    tenant_id: str
    agent_id: str  # the requester named in the query
    target_agent_id: str
    memory_ids: list[str]  # as asked, duplicates dropped, in order
    started: float = field(default_factory=time.perf_counter)
    requester: AgentRow | None = None
    target: AgentRow | None = None
    movable: list[dict] = field(default_factory=list)
    moved: list[dict] = field(default_factory=list)


def bind_identity(ctx: RedistributeContext) -> None:
    """An agent credential redistributes as itself (MemClaw added the check on 2026-06-11)."""
    if ctx.caller.agent_id is not None and ctx.caller.agent_id != ctx.agent_id:
        raise ApiError(403, f"agent_id '{ctx.agent_id}' does not match the authenticated agent "
                            f"identity '{ctx.caller.agent_id}'.")


def check_requester(ctx: RedistributeContext) -> None:
    requester = ctx.storage.get_agent(ctx.tenant_id, ctx.agent_id)
    denial = scope.redistribute_requester_denial(ctx.profile, ctx.agent_id, requester)
    if denial:
        raise ApiError(403, denial)
    ctx.requester = requester or AgentRow(ctx.tenant_id, ctx.agent_id, None, 0)


def check_target(ctx: RedistributeContext) -> None:
    target = ctx.storage.get_agent(ctx.tenant_id, ctx.target_agent_id)
    if target is None:
        raise ApiError(404, f"Target agent '{ctx.target_agent_id}' not found in tenant "
                            f"'{ctx.tenant_id}'.")
    denial = scope.redistribute_target_denial(ctx.profile, target)
    if denial:
        raise ApiError(403, denial)
    ctx.target = target


def gate_rows(ctx: RedistributeContext) -> None:
    assert ctx.requester is not None and ctx.target is not None
    rows = [r for r in ctx.storage.memories_by_ids(ctx.tenant_id, ctx.memory_ids)
            if r["deleted_at"] is None]
    needed, ctx.movable = scope.redistribute_gate(ctx.profile, ctx.requester, ctx.target, rows)
    if ctx.requester.trust_level < needed:
        raise ApiError(403, f"Agent '{ctx.agent_id}' requires trust_level >= {needed} for "
                            "redistribute.")


def reassign(ctx: RedistributeContext) -> None:
    assert ctx.target is not None
    ctx.moved = [r for r in ctx.movable if r["agent_id"] != ctx.target.agent_id]
    ctx.storage.reassign(ctx.tenant_id, [r["id"] for r in ctx.moved], ctx.target.agent_id)


REDISTRIBUTE_STEPS = (bind_identity, check_requester, check_target, gate_rows, reassign)


def run_redistribute(ctx: RedistributeContext) -> dict:
    """MemClaw's answer: moved, promoted (private rows made fleet-visible), skipped (already
    the target's), errors (ids not moved), redistribute_ms."""
    run_steps(ctx, REDISTRIBUTE_STEPS)
    movable_ids = {r["id"] for r in ctx.movable}
    return {"moved": len(ctx.moved),
            "promoted": sum(r["visibility"] == "scope_agent" for r in ctx.moved),
            "skipped": len(ctx.movable) - len(ctx.moved),
            "errors": [i for i in ctx.memory_ids if i not in movable_ids],
            "redistribute_ms": int((time.perf_counter() - ctx.started) * 1000)}
