"""The write path as a composition: small named steps run in the order a profile lists
(`Profile.write_steps`), like MemClaw's `pipeline/compositions/write.py`.

Gates that decide who may write (tenant, agent, trust, fleet) run before the pipeline, in
the route; the pipeline decides what is stored.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from ..governance.profiles import Profile
from ..governance.scope import Viewer, expired, row_access_allowed
from ..storage import LIVE_STATUSES, AgentRow, IdempotencyRecord, NewMemory, Storage, now_iso
from ..storage import monotonic_due as due_in
from ..wire.errors import ApiError
from ..wire.schemas import EntityLinkIn, MemoryFields
from ..wire.serialize import memory_out
from .contradiction import carries_single_valued_triple
from .embedding import Embedder, off_loop_if_heavy
from .latency import LatencySimulator

STRONG_BY_TYPE = frozenset({"decision", "commitment", "cancellation"})

# MemClaw skips the semantic gate when content holds identifier-like tokens (UUID, PR
# number, semver, SHA, ticket id): near-identical text with different ids is not a dup.
IDENTIFIER = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|\bv?\d+\.\d+\.\d+\b"
    r"|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"
    r"|(?:\bPR\s*|#)\d+\b"
    r"|\b[A-Z][A-Z0-9]{1,9}-\d+\b"
)


class DuplicateError(ApiError):
    def __init__(self, kind: str, existing_id: str) -> None:
        label = "Duplicate" if kind == "exact" else "Near-duplicate"
        super().__init__(409, f"{label} memory exists: {existing_id}")
        self.kind = kind
        self.existing_id = existing_id

# MemClaw's judge band (SEMANTIC_DEDUP_JUDGE_THRESHOLD): fast mode's advisory near duplicate
ADVISORY_NEAR_DUPLICATE = 0.85
NEAR_DUPLICATE_CANDIDATES = 50  # the nearest rows a near-duplicate step looks at


@dataclass
class PendingWrites:
    """A bulk chunk's rows, gated but not yet committed (pipeline/bulk.py commits them in one
    transaction): the duplicate steps see them as rows written after every stored one, as
    they would have been had each item been inserted on its own."""
    memories: list[NewMemory] = field(default_factory=list)

    def exact_duplicate(self, fleet_id: str | None, agent_id: str, content_hash: str
                        ) -> str | None:
        return next((m.row["id"] for m in self.memories
                     if m.row["content_hash"] == content_hash and m.row["fleet_id"] == fleet_id
                     and m.row["agent_id"] == agent_id), None)

    def similar(self, vector: np.ndarray, min_similarity: float
                ) -> tuple[list[dict], np.ndarray]:
        """The pending rows at or above the threshold, in insertion order, and their cosines."""
        held = [m for m in self.memories if m.embedding is not None]
        if not held:
            return [], np.zeros(0, dtype=np.float32)
        sims = np.stack([m.embedding for m in held]) @ vector.astype(np.float32, copy=False)
        keep = np.flatnonzero(sims >= min_similarity)
        return [held[i].row for i in keep.tolist()], sims[keep]

@dataclass
class WriteContext:
    profile: Profile
    storage: Storage
    embedder: Embedder
    latency: LatencySimulator | None
    tenant_id: str
    agent: AgentRow
    fleet_id: str | None
    visibility: str
    fields: MemoryFields
    persist: bool = True
    client_request_id: str | None = None
    idempotency_key: str | None = None
    request_hash: str | None = None
    started: float = field(default_factory=time.perf_counter)
    write_mode: str = "fast"
    content_hash: str = ""
    embedding: np.ndarray | None = None
    response: dict[str, Any] | None = None
    on_detection_scheduled: Callable[[], None] | None = None
    # fast mode's advisory near duplicate (detect_near_duplicate): (row id, cosine)
    near_duplicate: tuple[str, float] | None = None
    # a bulk chunk's uncommitted rows: the insert step adds to them instead of storing
    pending: PendingWrites | None = None


async def resolve_write_mode(ctx: WriteContext) -> None:
    mode = ctx.fields.write_mode
    if mode == "stm":
        raise ApiError(422, "STM is not enabled. Set USE_STM=true to enable short-term memory.")
    if mode in ("fast", "strong"):
        ctx.write_mode = mode
    else:
        ctx.write_mode = "strong" if ctx.fields.memory_type in STRONG_BY_TYPE else "fast"
    if ctx.write_mode == "strong" and ctx.latency is not None:
        await ctx.latency.strong_enrichment()


def content_hash(tenant_id: str, fleet_id: str | None, content: str) -> str:
    """MemClaw's `sha256("{tenant}:{fleet or ''}:{content}")`."""
    return hashlib.sha256(f"{tenant_id}:{fleet_id or ''}:{content}".encode()).hexdigest()


def check_content_length(ctx: WriteContext) -> None:
    require_min_length(ctx.fields.content)


def require_min_length(content: str) -> None:
    if len(content.strip()) < 10:
        raise ApiError(422, "Memory content too short (minimum 10 characters).")


def hash_content(ctx: WriteContext) -> None:
    ctx.content_hash = content_hash(ctx.tenant_id, ctx.fleet_id, ctx.fields.content)


async def embed(ctx: WriteContext) -> None:
    """A model embedder's work, or a long text's, goes off the event loop (a bulk of long
    items must not stall other tenants). Pure: the duplicate checks and the insert that
    follow still run on the loop, with no await between them, so concurrent identical
    writes cannot both pass the exact gate. A bulk embeds its items beforehand, together."""
    if ctx.embedding is not None:
        return
    content = ctx.fields.content
    ctx.embedding = await off_loop_if_heavy(ctx.embedder, content, ctx.embedder.embed, content)


def exact_twin(profile: Profile, storage: Storage, tenant_id: str, fleet_id: str | None,
               agent_id: str, hashed: str, hide_expired: bool) -> str | None:
    """The live row of the same agent and fleet with the same content hash (MemClaw's exact
    duplicate), if any: the one check of a write (`check_exact_duplicate`) and of a content
    update (pipeline/update.py). `hide_expired`: an expired row is no twin (hardened writes;
    the update path has never applied it)."""
    existing = storage.find_exact_duplicate(tenant_id, fleet_id, agent_id, hashed)
    if existing and hide_expired:
        row = storage.get_memory(tenant_id, existing)  # a forgotten row is no twin
        existing = None if row is None or expired(profile, row) else existing
    return existing


def check_exact_duplicate(ctx: WriteContext) -> None:
    existing = exact_twin(ctx.profile, ctx.storage, ctx.tenant_id, ctx.fleet_id,
                          ctx.agent.agent_id, ctx.content_hash,
                          ctx.profile.hardening.expired_rows_hidden)
    if not existing and ctx.pending is not None:
        existing = ctx.pending.exact_duplicate(ctx.fleet_id, ctx.agent.agent_id,
                                               ctx.content_hash)
    if existing:
        raise DuplicateError("exact", existing)


def check_near_duplicate(ctx: WriteContext) -> None:
    """Strong mode only: the nearest live row of the same fleet and visibility, across
    agents, at cosine >= the profile threshold (MemClaw auto-reject 0.97). MemClaw's LLM
    judge for the 0.85-0.97 band does not exist here: that band is admitted."""
    if ctx.write_mode != "strong" or ctx.embedding is None:
        return
    if IDENTIFIER.search(ctx.fields.content):
        return
    for row, _ in nearest_rows(ctx, ctx.profile.near_duplicate_threshold):
        if _same_dedup_scope(ctx, row):
            raise DuplicateError("near", row["id"])


def nearest_rows(ctx: WriteContext, min_similarity: float) -> list[tuple[dict, float]]:
    """The `NEAR_DUPLICATE_CANDIDATES` most similar rows at or above the threshold, stored
    ones first on equal cosine (insertion order), then a bulk chunk's pending ones."""
    assert ctx.embedding is not None
    rowids, sims = ctx.storage.ranked_by_similarity(ctx.tenant_id, ctx.embedding, min_similarity)
    first = rowids[:NEAR_DUPLICATE_CANDIDATES].tolist()
    rows = ctx.storage.rows_by_rowids(first)
    ranked = [(rows[r], s) for r, s in zip(first, sims[:len(first)].tolist(), strict=True)
              if r in rows]
    if ctx.pending is None:
        return ranked
    pending, pending_sims = ctx.pending.similar(ctx.embedding, min_similarity)
    if not pending:
        return ranked
    cut = len(first)  # the stored rows that made the cut, then the pending ones, merged
    merged = sorted([(s, 0, i) for i, s in enumerate(sims[:cut].tolist())]
                    + [(s, 1, i) for i, s in enumerate(pending_sims.tolist())],
                    key=lambda t: -t[0])  # stable: stored before pending, each in order
    out = []
    for sim, source, i in merged[:NEAR_DUPLICATE_CANDIDATES]:
        row = rows.get(first[i]) if source == 0 else pending[i]
        if row is not None:
            out.append((row, sim))
    return out


def _same_dedup_scope(ctx: WriteContext, row: dict) -> bool:
    if ctx.profile.hardening.dedup_readable_only and not row_access_allowed(
            ctx.profile, Viewer(ctx.agent.agent_id, ctx.agent), row):
        return False  # hardened: a row the writer may not read is no duplicate to report
    if expired(ctx.profile, row):
        return False
    return (row["fleet_id"] == ctx.fleet_id and row["visibility"] == ctx.visibility
            and row["status"] in LIVE_STATUSES and row["deleted_at"] is None)


def detect_near_duplicate(ctx: WriteContext) -> None:
    """Fast mode only (MemClaw's advisory twin of the strong gate, v2.29 `DetectNearDuplicate`):
    the nearest live row of the same fleet and visibility at cosine >= 0.85, any agent's, is
    named in the new row's metadata (`near_duplicate_of`); the write is admitted."""
    if ctx.write_mode != "fast" or ctx.embedding is None:
        return
    if IDENTIFIER.search(ctx.fields.content):
        return
    for row, sim in nearest_rows(ctx, ADVISORY_NEAR_DUPLICATE):
        if _same_dedup_scope(ctx, row):
            ctx.near_duplicate = (row["id"], round(float(sim), 4))
            return


def check_near_duplicate_unless_single_valued_triple(ctx: WriteContext) -> None:
    """Paper 9.2 (a): a structural contradiction is decided by the detector, not the gate."""
    f = ctx.fields
    if carries_single_valued_triple(f.subject_entity_id, f.predicate, f.object_value):
        return
    check_near_duplicate(ctx)


def insert_row(ctx: WriteContext) -> None:
    _insert(ctx, schedule_detection=False)


def insert_row_and_schedule_detection(ctx: WriteContext) -> None:
    _insert(ctx, schedule_detection=ctx.profile.contradiction_detection)


def entity_links_to_store(profile: Profile, storage: Storage, tenant_id: str,
                          links: Sequence[EntityLinkIn]) -> list[tuple[str, str]]:
    """The (entity id, role) pairs a write or update stores, by the profile's rule for links
    naming no entity of the tenant (`Profile.unknown_entity_links`); refusals are 422 before
    anything is written."""
    pairs = [(str(link.entity_id), link.role) for link in links]
    limit = profile.max_entity_links
    if limit is not None and len(pairs) > limit:
        raise ApiError(422, f"Too many entity_links: {len(pairs)} (at most {limit}).")
    if profile.unknown_entity_links == "store" or not pairs:
        return pairs
    known = storage.known_entity_ids(tenant_id, [eid for eid, _ in pairs])
    if profile.unknown_entity_links == "drop":
        return [(eid, role) for eid, role in pairs if eid in known]
    unknown = next((i for i, (eid, _) in enumerate(pairs) if eid not in known), None)
    if unknown is not None:
        raise ApiError(422, f"entity_links[{unknown}]: entity '{pairs[unknown][0]}' not "
                            f"found in tenant '{tenant_id}'.")
    return pairs


def _insert(ctx: WriteContext, schedule_detection: bool) -> None:
    links = entity_links_to_store(ctx.profile, ctx.storage, ctx.tenant_id,
                                  ctx.fields.entity_links)
    row = build_row(ctx)
    ctx.response = memory_out(row, [{"entity_id": eid, "role": role} for eid, role in links],
                              usage=True)
    if not ctx.persist:
        return
    idem = None
    if ctx.idempotency_key:
        idem = IdempotencyRecord(ctx.tenant_id, ctx.idempotency_key, ctx.request_hash or "",
                                 201, json.dumps(ctx.response))
    due = due_in(ctx.profile.effective_detection_delay_s) if schedule_detection else None
    memory = NewMemory(row, ctx.embedding, links, due, idem)
    if ctx.pending is not None:  # a bulk chunk: committed with its siblings (pipeline/bulk.py)
        ctx.pending.memories.append(memory)
        return
    ctx.storage.insert_memories([memory])
    if due is not None and ctx.on_detection_scheduled:
        ctx.on_detection_scheduled()


def build_row(ctx: WriteContext) -> dict[str, Any]:
    f = ctx.fields
    memory_type = "fact" if f.memory_type in (None, "semantic") else f.memory_type
    metadata = dict(f.metadata or {})
    metadata["write_mode"] = ctx.write_mode
    metadata["memory_type_agent_set"] = f.memory_type is not None
    if ctx.write_mode == "fast":
        metadata["enrichment_pending"] = True  # no enrichment ever runs here (no LLM)
    if ctx.near_duplicate is not None:
        metadata["near_duplicate_of"], metadata["near_duplicate_similarity"] = ctx.near_duplicate
    metadata["write_latency_ms"] = int((time.perf_counter() - ctx.started) * 1000)
    return {
        "id": str(uuid.uuid4()), "tenant_id": ctx.tenant_id, "fleet_id": ctx.fleet_id,
        "agent_id": ctx.agent.agent_id, "memory_type": memory_type, "title": None,
        "content": f.content, "weight": 0.5 if f.weight is None else f.weight,
        "source_uri": f.source_uri, "run_id": f.run_id, "metadata": metadata,
        "content_hash": ctx.content_hash, "client_request_id": ctx.client_request_id,
        "created_at": now_iso(), "expires_at": iso(f.expires_at), "deleted_at": None,
        "ts_valid_start": iso(f.ts_valid_start), "ts_valid_end": iso(f.ts_valid_end),
        "subject_entity_id": str(f.subject_entity_id) if f.subject_entity_id else None,
        "predicate": f.predicate, "object_value": f.object_value,
        "status": f.status or "active", "visibility": ctx.visibility, "recall_count": 0,
        "last_recalled_at": None, "supersedes_id": None,
    }


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    aware = value if value.tzinfo else value.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat(timespec="microseconds")


STEPS: dict[str, Callable[[WriteContext], Any]] = {
    fn.__name__: fn for fn in (
        check_content_length, resolve_write_mode, hash_content, embed, check_exact_duplicate,
        check_near_duplicate, check_near_duplicate_unless_single_valued_triple,
        detect_near_duplicate, insert_row,
        insert_row_and_schedule_detection)
}


def validate_steps(names: tuple[str, ...]) -> None:
    """Known steps, and none that awaits after `embed`: from the first gate to the insert a
    write runs without giving the loop away, so two concurrent identical writes cannot both
    pass the exact gate (and a bulk chunk gates and commits in one go)."""
    unknown = [n for n in names if n not in STEPS]
    if unknown:
        raise ValueError(f"unknown write steps: {unknown}")
    awaiting = [n for n in gate_steps(names) if inspect.iscoroutinefunction(STEPS[n])]
    if awaiting:
        raise ValueError(f"write steps after 'embed' must not await: {awaiting}")


def prepare_steps(names: tuple[str, ...]) -> tuple[str, ...]:
    """The steps up to and including `embed`: they may await (simulated enrichment latency,
    the embedder off the loop)."""
    return names[:names.index("embed") + 1] if "embed" in names else ()


def gate_steps(names: tuple[str, ...]) -> tuple[str, ...]:
    """The steps after `embed`: the duplicate gates and the insert, run without an await."""
    return names[len(prepare_steps(names)):]


async def run_steps(ctx: WriteContext, names: Sequence[str]) -> None:
    for name in names:
        result = STEPS[name](ctx)
        if inspect.isawaitable(result):
            await result


def run_steps_now(ctx: WriteContext, names: Sequence[str]) -> None:
    """Steps that never await (`gate_steps`), run synchronously."""
    for name in names:
        STEPS[name](ctx)


async def run_write(ctx: WriteContext) -> dict[str, Any]:
    await run_steps(ctx, ctx.profile.write_steps)
    assert ctx.response is not None, "a write composition must end with an insert step"
    return ctx.response
