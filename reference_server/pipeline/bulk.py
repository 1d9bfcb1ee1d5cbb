"""The bulk write path (`POST /memories/bulk`): every item goes through the profile's write
steps, as a single write does, and answers as it would have one at a time; the work is priced
by the bulk's size rather than by its items.

Items go through in chunks (`chunks`: up to `CHUNK_CHARS` of content or `CHUNK_ITEMS`
items). For each chunk:

1. `prepare`: the attempt-id replay check, the reserved-type check, then the steps up to
   `embed` (length, write mode, hash) for each item; the chunk's texts are embedded together,
   on the one bulk worker thread when that is heavy, so the event loop keeps serving other
   tenants while four bulks run.
2. `gate_and_commit`: with no await from its first line to the commit, the attempt check
   again (a concurrent replay may have committed meanwhile), then the duplicate gates and the
   row for each item in order (an item sees the chunk's earlier items as rows, as it would
   have after their own inserts), then one transaction for the chunk's rows.

A chunk is the unit of commit: a crash leaves the chunks before it written, and a retry with
the same attempt id answers them `duplicate_attempt`, as one-item-at-a-time did.

The chunks overlap: while the worker thread embeds chunk n+1, the loop gates and commits chunk
n (the gates need chunk n's vectors only, and chunk n+1's gates run after chunk n's commit).
One after the other, a 977 KB bulk's gates (a near-duplicate lookup per item on
`memclaw-2.29`) added two thirds to its embedding time on top.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..governance.profiles import Profile
from ..storage import AgentRow, Storage
from ..wire.errors import ApiError
from ..wire.schemas import RESERVED_MEMORY_TYPES, MemoryFields
from .embedding import INLINE_TEXT_CHARS, Embedder
from .write import (
    DuplicateError,
    PendingWrites,
    WriteContext,
    gate_steps,
    prepare_steps,
    run_steps,
    run_steps_now,
)

CHUNK_CHARS = 100_000  # content per chunk: ~30-60 ms of embedding for unseen words
CHUNK_ITEMS = 25  # items per chunk: bounds the loop's gate-and-commit turn for short items

# One thread embeds every bulk's chunks, in turn: concurrent bulks share one core and leave
# the other to the event loop (a thread per bulk took both cores and the loop's GIL turns).
_EMBED_WORKER: ThreadPoolExecutor | None = None


@dataclass
class BulkItem:
    index: int
    fields: MemoryFields
    request_id: str  # the client_request_id stored (per agent or per fleet, by profile)
    result: dict[str, Any]  # this item's entry of the answer
    ctx: WriteContext | None = None


@dataclass
class BulkWrite:
    """One bulk request, after the route's gates (tenant, attempt id, writer, fleet)."""
    profile: Profile
    storage: Storage
    embedder: Embedder
    tenant_id: str
    agent: AgentRow
    fleet_id: str | None
    attempt_id: str
    # (item fields, stored client_request_id) -> the item's write context
    make_context: Callable[[MemoryFields, str], WriteContext]
    on_detection_scheduled: Callable[[], None] | None = None
    # hardened (`bulk_stops_at_revocation`): why the caller's grant is gone, asked before
    # each chunk's commit (None: still granted); `stopped` is set when the bulk stopped there
    grant_withdrawn: Callable[[], str | None] | None = None
    stopped: str | None = None


async def run_bulk(bulk: BulkWrite, items: Sequence[MemoryFields]) -> list[dict[str, Any]]:
    """Each item's answer entry, in order (`created`, `duplicate_attempt`,
    `duplicate_content` or `error`)."""
    entries = [bulk_item(bulk, i, item) for i, item in enumerate(items)]
    parts = list(chunks(entries))
    embedded: list[BulkItem] | None = None  # the chunk whose vectors are in, not committed
    for n, chunk in enumerate(parts):
        ready = await prepare(bulk, chunk)
        vectors = embedding_started(bulk, ready)  # on the worker thread while we commit
        if embedded is not None and not commit(bulk, entries, n - 1, embedded):
            if vectors is not None:
                vectors.cancel()
            return [e.result for e in entries]
        await attach(ready, vectors)
        embedded = ready
    if embedded is not None:
        commit(bulk, entries, len(parts) - 1, embedded)
    return [e.result for e in entries]


def commit(bulk: BulkWrite, entries: list[BulkItem], n: int, ready: list[BulkItem]) -> bool:
    """Chunk n's gates and rows, unless the writer's grant is gone (then every item from
    chunk n on is answered not written, and False). Nothing awaits from the grant's check to
    the commit: a grant checked here holds for the chunk's rows (a revocation acknowledged
    before lands before the check)."""
    bulk.stopped = bulk.grant_withdrawn() if bulk.grant_withdrawn else None
    if bulk.stopped:
        stop(entries, n, bulk.stopped)
        return False
    gate_and_commit(bulk, ready)
    return True


def stop(entries: list[BulkItem], chunk: int, reason: str) -> None:
    """Every item from the chunk the grant was found withdrawn at on: not written, why."""
    first = sum(len(c) for c in list(chunks(entries))[:chunk])
    for entry in entries[first:]:
        entry.result |= {"status": "error", "id": None,
                         "error": f"not written: {reason} while the bulk ran"}


def bulk_item(bulk: BulkWrite, index: int, fields: MemoryFields) -> BulkItem:
    request_id = f"{bulk.attempt_id}:{index}"
    result = {"index": index, "client_request_id": request_id, "status": "created",
              "id": None, "duplicate_of": None, "error": None}
    if bulk.profile.hardening.bulk_attempts_per_agent:  # stored per writer, shown as sent
        request_id = f"{bulk.agent.agent_id}\x1f{request_id}"
    elif bulk.profile.bulk_attempts_per_fleet:  # the engine's (tenant, fleet, id) index
        request_id = f"{bulk.fleet_id or ''}\x1f{request_id}"
    if not bulk.profile.bulk_keeps_entity_links:
        fields = fields.model_copy(update={"entity_links": []})
    return BulkItem(index, fields, request_id, result)


def chunks(entries: list[BulkItem]) -> Iterator[list[BulkItem]]:
    chunk: list[BulkItem] = []
    size = 0
    for entry in entries:
        if chunk and (size + len(entry.fields.content) > CHUNK_CHARS
                      or len(chunk) == CHUNK_ITEMS):
            yield chunk
            chunk, size = [], 0
        chunk.append(entry)
        size += len(entry.fields.content)
    if chunk:
        yield chunk


async def prepare(bulk: BulkWrite, chunk: list[BulkItem]) -> list[BulkItem]:
    """The chunk's items that reach the gates, each with its context and embedding."""
    ready = []
    steps = tuple(s for s in prepare_steps(bulk.profile.write_steps) if s != "embed")
    for entry in replayed(bulk, chunk):
        if entry.fields.memory_type in RESERVED_MEMORY_TYPES:
            entry.result |= {"status": "error",
                             "error": f"memory_type='{entry.fields.memory_type}' is "
                                      "server-reserved"}
            continue
        entry.ctx = bulk.make_context(entry.fields, entry.request_id)
        try:
            await run_steps(entry.ctx, steps)
        except ApiError as err:
            entry.result |= {"status": "error", "error": err.message}
            continue
        ready.append(entry)
    return ready


def embedding_started(bulk: BulkWrite, ready: list[BulkItem]
                      ) -> asyncio.Future[list[Any]] | None:
    """The ready items' vectors: started now on the bulk worker thread when heavy (a model,
    or long text), else made here after one turn of the loop when awaited; None when the
    profile embeds nothing."""
    texts = [e.fields.content for e in ready]
    if "embed" not in bulk.profile.write_steps or not ready:
        return None
    if bulk.embedder.offload or sum(map(len, texts)) > INLINE_TEXT_CHARS:
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(_embed_worker(), bulk.embedder.embed_many, texts)
    return asyncio.ensure_future(_inline(bulk.embedder, texts))


async def attach(ready: list[BulkItem], vectors: asyncio.Future[list[Any]] | None) -> None:
    if vectors is None:
        return
    for entry, vector in zip(ready, await vectors, strict=True):
        entry.ctx.embedding = vector  # type: ignore[union-attr]


def gate_and_commit(bulk: BulkWrite, ready: list[BulkItem]) -> None:
    """The gates and rows of a prepared chunk, then one transaction (synchronous)."""
    pending = PendingWrites()
    steps = gate_steps(bulk.profile.write_steps)
    for entry in replayed(bulk, ready):
        ctx = entry.ctx
        assert ctx is not None
        ctx.pending = pending
        try:
            run_steps_now(ctx, steps)
        except DuplicateError as dup:
            entry.result |= {"status": "duplicate_content", "duplicate_of": dup.existing_id}
            continue
        except ApiError as err:
            entry.result |= {"status": "error", "error": err.message}
            continue
        assert ctx.response is not None, "a write composition must end with an insert step"
        entry.result |= {"id": ctx.response["id"]}
    bulk.storage.insert_memories(pending.memories)
    scheduled = any(m.detection_due_at is not None for m in pending.memories)
    if scheduled and bulk.on_detection_scheduled:
        bulk.on_detection_scheduled()


def replayed(bulk: BulkWrite, entries: list[BulkItem]) -> list[BulkItem]:
    """The entries this attempt id has not written yet; those an earlier try of the same bulk
    wrote answer `duplicate_attempt` with their row (one lookup for the chunk)."""
    written = bulk.storage.find_client_requests(bulk.tenant_id,
                                                [e.request_id for e in entries])
    for entry in entries:
        if entry.request_id in written:
            entry.result |= {"status": "duplicate_attempt", "id": written[entry.request_id]}
    return [e for e in entries if e.request_id not in written]


def _embed_worker() -> ThreadPoolExecutor:
    global _EMBED_WORKER
    if _EMBED_WORKER is None:
        _EMBED_WORKER = ThreadPoolExecutor(1, thread_name_prefix="bulk-embed")
    return _EMBED_WORKER


async def _inline(embedder: Embedder, texts: list[str]) -> list[Any]:
    await asyncio.sleep(0)
    return embedder.embed_many(texts)

