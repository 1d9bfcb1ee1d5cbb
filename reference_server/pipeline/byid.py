"""What the by-id paths (read, update, status, delete, redistribute) share: the governing
identity, the live row, and the runner of a path's named steps.

A path is a tuple of small functions over one context, run in order (`run_steps`), like
the write path (write.py): the order of its gates can be read in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from ..governance import scope
from ..governance.auth import Caller
from ..governance.profiles import Profile
from ..storage import Storage
from ..wire.errors import ApiError

C = TypeVar("C")


def run_steps(ctx: C, steps: Sequence[Callable[[C], None]]) -> C:
    for step in steps:
        step(ctx)
    return ctx


def viewer_of(storage: Storage, caller: Caller, agent_id: str | None = None) -> scope.Viewer:
    """The governing identity: the verified agent, else an agent id named in the request."""
    return _viewer(storage, caller.tenant_id, caller.agent_id or agent_id)


def _viewer(storage: Storage, tenant_id: str | None, ident: str | None) -> scope.Viewer:
    if ident is None or tenant_id is None:
        return scope.Viewer(ident)
    return scope.Viewer(ident, storage.get_agent(tenant_id, ident))


def query_viewer_of(profile: Profile, storage: Storage, caller: Caller,
                     agent_id: str | None = None) -> scope.Viewer:
    """The identity the changes (PATCH, PATCH status: `agent_id=None`, DELETE)
    are governed by: as `viewer_of`, or only the request's `agent_id` query
    (`agent_query_is_identity`, MemClaw before 045039f), the verified credential not
    consulted."""
    if not profile.agent_query_is_identity:
        return viewer_of(storage, caller, agent_id)
    if caller.tenant_id is None:  # an admin credential: no agent rule applies
        return scope.Viewer(None)
    return _viewer(storage, caller.tenant_id, agent_id)


class ByIdContext(Protocol):
    storage: Storage
    tenant_id: str
    memory_id: str
    row: dict


def load_row(ctx: ByIdContext) -> None:
    """A path's step: the live row the request names (404 otherwise)."""
    ctx.row = live_row(ctx.storage, ctx.tenant_id, ctx.memory_id)


def live_row(storage: Storage, tenant_id: str, memory_id: str) -> dict:
    """The tenant's row, or 404 when it is absent, soft-deleted or another tenant's."""
    row = storage.get_memory(tenant_id, memory_id)
    if row is None or row["deleted_at"] is not None:
        raise ApiError(404, "Memory not found")
    return row
