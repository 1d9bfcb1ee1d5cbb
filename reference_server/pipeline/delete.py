"""`DELETE /memories/{id}`: the delete path as named steps (`DELETE_STEPS`): governance
decides who may delete (`scope.delete_denial`; a profile may ask about the caller before
the row is looked up, as MemClaw's engine does), the row is soft-deleted, and under
`hardened` the insights derived from it are withdrawn with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..governance import scope
from ..governance.profiles import Profile
from ..storage import ListFilter, Storage
from ..wire.errors import ApiError
from .byid import load_row, run_steps


@dataclass
class DeleteContext:
    profile: Profile
    storage: Storage
    tenant_id: str
    memory_id: str
    viewer: scope.Viewer
    row: dict = field(default_factory=dict)


def check_caller_first(ctx: DeleteContext) -> None:
    """The caller's trust, before any lookup (`Profile.delete_caller_checked_first`)."""
    if ctx.profile.delete_caller_checked_first:
        denial = scope.delete_denial(ctx.profile, ctx.viewer, None)
        if denial:
            raise ApiError(403, denial)


def check_delete_allowed(ctx: DeleteContext) -> None:
    denial = scope.delete_denial(ctx.profile, ctx.viewer, ctx.row)
    if denial:
        raise ApiError(403, denial)


def soft_delete(ctx: DeleteContext) -> None:
    ctx.storage.soft_delete(ctx.tenant_id, ctx.row["id"])


def withdraw_insights(ctx: DeleteContext) -> None:
    if ctx.profile.hardening.derived_insights_withdrawn:
        withdraw_derived_insights(ctx.storage, ctx.tenant_id, ctx.row["id"])


DELETE_STEPS = (check_caller_first, load_row, check_delete_allowed, soft_delete,
                withdraw_insights)


def run_delete(ctx: DeleteContext) -> None:
    run_steps(ctx, DELETE_STEPS)


def withdraw_derived_insights(storage: Storage, tenant_id: str, memory_id: str) -> int:
    """Soft-delete the insight memories derived from `memory_id` (their findings name it);
    how many. `hardened` calls it when a row is deleted (`derived_insights_withdrawn`)."""
    derived = [row["id"] for row in storage.iter_memories(ListFilter(
                   tenant_id=tenant_id, memory_type="insight"))
               if memory_id in ((row["metadata"] or {}).get("related_memory_ids") or [])]
    for insight_id in derived:
        storage.soft_delete(tenant_id, insight_id)
    return len(derived)
