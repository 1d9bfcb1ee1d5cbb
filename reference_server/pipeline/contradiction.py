"""Asynchronous contradiction detection after commit (MemClaw's RDF path, WIRE.md 5.2).

A write that carries `subject_entity_id`, `predicate`, `object_value` with a single-valued
predicate is checked against live rows of the same tenant and fleet asserting a different
object for the same subject: the older row becomes `outdated`, the newer row gets
`supersedes_id`. Jobs live in the `detection_jobs` table (inserted with the memory row),
so a restart or `kill -9` loses no pending detection. There is no LLM here, so MemClaw's
semantic path (2) abstains, as MemClaw does without an LLM provider.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from importlib import resources

from ..storage import LIVE_STATUSES, Storage

log = logging.getLogger("reference_server.contradiction")

PREDICATES_FILE = "data/single_value_predicates.txt"


def load_single_value_predicates() -> frozenset[str]:
    """MemClaw's `SINGLE_VALUE_PREDICATES`, exactly as its engine ships them (the data file
    names its source). A predicate outside the set is multi-valued: no supersession."""
    text = resources.files("reference_server").joinpath(PREDICATES_FILE).read_text(encoding="utf-8")
    return frozenset(line.strip() for line in text.splitlines()
                     if line.strip() and not line.lstrip().startswith("#"))


SINGLE_VALUE_PREDICATES = load_single_value_predicates()


def is_single_valued(predicate: str | None) -> bool:
    return predicate is not None and predicate.lower() in SINGLE_VALUE_PREDICATES


def carries_single_valued_triple(subject: object, predicate: str | None,
                                 object_value: str | None) -> bool:
    return subject is not None and object_value is not None and is_single_valued(predicate)


def supersessions_for(storage: Storage, row: dict) -> list[tuple[str, str]]:
    """(newer_id, older_id) pairs the RDF path establishes for `row`."""
    if row is None or row["deleted_at"] is not None or row["status"] not in LIVE_STATUSES:
        return []
    if not carries_single_valued_triple(row["subject_entity_id"], row["predicate"],
                                        row["object_value"]):
        return []
    pairs = []
    for other in storage.rdf_candidates(row):
        older, newer = sorted((row, other), key=lambda r: (r["created_at"], r["id"]))
        pairs.append((newer["id"], older["id"]))
    return pairs


class ContradictionDetector:
    """Drains `detection_jobs` whose due time has come; one background task per server."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="contradiction-detector")

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def detect(self, memory_id: str, tenant_id: str) -> None:
        row = self.storage.get_memory(tenant_id, memory_id)
        self.storage.complete_detection(memory_id, supersessions_for(self.storage, row))

    async def _run(self) -> None:
        while True:
            try:
                jobs = self.storage.due_jobs(time.time())
                for memory_id, tenant_id in jobs:
                    self.detect(memory_id, tenant_id)
                    # a turn of the loop between jobs: a bulk leaves up to 50 due at once,
                    # and run back to back (a commit each) they held every other request
                    await asyncio.sleep(0)
                if jobs:
                    continue
                await self._sleep_until_next()
            except asyncio.CancelledError:
                raise
            except Exception:  # keep detecting; a failed job stays queued and is retried
                log.exception("contradiction detection failed")
                await asyncio.sleep(1.0)

    async def _sleep_until_next(self) -> None:
        due = self.storage.next_due_at()
        timeout = 1.0 if due is None else min(max(due - time.time(), 0.0), 1.0)
        self.wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.wake.wait(), timeout)
