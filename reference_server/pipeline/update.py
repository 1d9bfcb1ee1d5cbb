"""`PATCH /memories/{id}`: the update path as named steps (`UPDATE_STEPS`).

The route parses the body into the columns given (`fields`, a null on a required column
meaning unchanged); the steps find the row, ask governance whether the viewer may change it
(`scope.update_denial`), turn the fields into column changes (a content change re-hashes,
meets the write path's exact-duplicate check and re-embeds), resolve entity links by the
profile's rule, and store everything in one transaction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..governance import scope
from ..governance.profiles import Profile
from ..storage import Storage
from ..wire.errors import ApiError
from ..wire.schemas import MemoryUpdate
from .byid import load_row, run_steps
from .embedding import Embedder
from .write import (
    DuplicateError,
    content_hash,
    entity_links_to_store,
    exact_twin,
    iso,
    require_min_length,
)


@dataclass
class UpdateContext:
    profile: Profile
    storage: Storage
    embedder: Embedder
    tenant_id: str
    memory_id: str
    viewer: scope.Viewer
    body: MemoryUpdate
    fields: dict[str, Any]  # the columns the body sets (model_dump(exclude_unset), parsed)
    row: dict = field(default_factory=dict)
    changes: dict[str, Any] = field(default_factory=dict)
    embedding: np.ndarray | None = None
    links: list[tuple[str, str]] | None = None
    updated: dict = field(default_factory=dict)


def check_update_allowed(ctx: UpdateContext) -> None:
    denial = scope.update_denial(ctx.profile, ctx.viewer, ctx.row)
    if denial:
        raise ApiError(403, denial)


def column_changes(ctx: UpdateContext) -> None:
    body, given, row = ctx.body, ctx.fields, ctx.row
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
    ctx.changes = changes


def check_new_content(ctx: UpdateContext) -> None:
    """A content change: long enough, re-hashed, not an exact duplicate of another live row
    of the same agent and fleet (the write path's check, when the profile writes with it),
    re-embedded."""
    content = ctx.body.content
    if content is None or content == ctx.row["content"]:
        return
    require_min_length(content)
    row = ctx.row
    hashed = ctx.changes["content_hash"] = content_hash(row["tenant_id"], row["fleet_id"],
                                                        content)
    if "check_exact_duplicate" in ctx.profile.write_steps:
        existing = exact_twin(ctx.profile, ctx.storage, row["tenant_id"], row["fleet_id"],
                              row["agent_id"], hashed, hide_expired=False)
        if existing and existing != row["id"]:
            raise DuplicateError("exact", existing)
    ctx.embedding = ctx.embedder.embed(content)


def resolve_links(ctx: UpdateContext) -> None:
    if ctx.body.entity_links is not None:
        ctx.links = entity_links_to_store(ctx.profile, ctx.storage, ctx.tenant_id,
                                          ctx.body.entity_links)


def store_update(ctx: UpdateContext) -> None:
    ctx.storage.update_memory(ctx.row, ctx.changes, ctx.embedding, ctx.links)
    ctx.updated = ctx.storage.get_memory(ctx.tenant_id, ctx.row["id"]) or {}


UPDATE_STEPS = (load_row, check_update_allowed, column_changes, check_new_content,
                resolve_links, store_update)


def run_update(ctx: UpdateContext) -> dict:
    """The updated row (its links: `storage.entity_links_of`)."""
    return run_steps(ctx, UPDATE_STEPS).updated
