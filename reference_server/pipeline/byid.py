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
    ident = caller.agent_id or agent_id
    if ident is None or caller.tenant_id is None:
        return scope.Viewer(ident)
    return scope.Viewer(ident, storage.get_agent(caller.tenant_id, ident))


def query_viewer_of(profile: Profile, storage: Storage, caller: Caller,
                     agent_id: str | None = None) -> scope.Viewer:
    """The identity the changes (PATCH, PATCH status: `agent_id=None`, DELETE)
    are governed by: as `viewer_of`, or only the request's `agent_id` query
    (`agent_query_is_identity`, MemClaw before 045039f), the verified credential not
    consulted."""
    if not profile.agent_query_is_identity:
        return viewer_of(storage, caller, agent_id)
    if agent_id is None or caller.tenant_id is None:
        return scope.Viewer(None)
    return scope.Viewer(agent_id, storage.get_agent(caller.tenant_id, agent_id))


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
