"""The SQLite store's vectors in memory: exact similarity ranking over only the rows a
scoped search may return.

A tenant's embeddings are held in blocks ("units"): one per fleet for the rows not visible
org-wide (the fleet-less rows are the unit of fleet None), and one for the org-visible rows
(`scope_org`, readable from every fleet). A fleet-scoped search ranks its fleets' units, the
fleet-less unit and the org unit, nothing else: at 100k rows over 8 fleets it multiplies
1/8 of the vectors, and the process holds only the units that were searched. Each unit is
loaded from the store on first use.

Slots are append-only: a replaced vector leaves a tombstone (rowid -1) and is appended anew,
a full block grows into new arrays. A search takes a snapshot under the store's lock (the
arrays and a copy of the live rowids) and multiplies outside it, on its worker thread, while
writers keep appending: no snapshot ever sees a half-written slot.

The ranking is exact and the same as one matrix over the whole tenant gave: every candidate's
cosine, those at or above the gate, most similar first, ties by rowid (insertion order).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np

Unit = tuple[str, str | None]  # ("fleet", fleet_id or None) or ORG
ORG: Unit = ("org", None)
Snapshot = tuple[np.ndarray, np.ndarray]  # (matrix, live rowids of its first rows)


def unit_of(fleet_id: str | None, visibility: str) -> Unit:
    """The unit a row's vector lives in."""
    return ORG if visibility == "scope_org" else ("fleet", fleet_id)


def units_in_scope(fleet_scope: Iterable[str], fleets: set[str | None]) -> list[Unit]:
    """The units a search restricted to `fleet_scope` can admit rows from (rule 4: its
    fleets, fleet-less rows, org-visible rows), among the tenant's `fleets`."""
    if len(fleets) < len(fleet_scope):  # a request may name 100k fleets: walk the smaller
        named = sorted((f for f in fleets if f is not None and f in fleet_scope), key=str)
    else:
        named = [f for f in fleet_scope if f in fleets]
    return [("fleet", f) for f in named] + [("fleet", None), ORG]


class Block:
    """One unit's vectors: append-only slots, a position per live rowid."""

    def __init__(self, rowids: np.ndarray, matrix: np.ndarray) -> None:
        n, dim = matrix.shape
        capacity = n + max(64, n // 8)
        self.rowids = np.full(capacity, -1, dtype=np.int64)
        self.rowids[:n] = rowids
        self.matrix = np.zeros((capacity, dim), dtype=np.float32)
        self.matrix[:n] = matrix
        self.count, self.dead = n, 0
        self.position = dict(zip(rowids.tolist(), range(n), strict=True))

    def snapshot(self) -> Snapshot:
        return self.matrix, self.rowids[:self.count].copy()

    def put(self, rowid: int, vector: np.ndarray) -> None:
        """Add a row's vector, or replace it (tombstone the old slot, append the new)."""
        self.remove(rowid)
        if self.count == len(self.rowids):  # full: new arrays, snapshots keep the old ones
            grown = max(64, self.count * 2)
            self.rowids = np.resize(self.rowids, grown)
            self.rowids[self.count:] = -1
            matrix = np.zeros((grown, self.matrix.shape[1]), dtype=np.float32)
            matrix[:self.count] = self.matrix[:self.count]
            self.matrix = matrix
        self.matrix[self.count] = vector
        self.rowids[self.count] = rowid
        self.position[rowid] = self.count
        self.count += 1

    def remove(self, rowid: int) -> None:
        position = self.position.pop(rowid, None)
        if position is None:
            return
        self.rowids[position] = -1  # readers copied their rowids: they keep the old state
        self.dead += 1
        if self.dead > 1024 and self.dead * 2 > self.count:
            self._compact()

    def _compact(self) -> None:
        live = np.flatnonzero(self.rowids[:self.count] >= 0)
        fresh = Block(self.rowids[live], self.matrix[live])
        self.__dict__.update(fresh.__dict__)


class VectorIndex:
    """Per tenant: its units' blocks, loaded lazily by the store, and the fleets it has rows
    in (None until the store has told it). Not thread-safe: the store holds its lock around
    every call; `ranked` runs on snapshots, outside the lock."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._blocks: dict[str, dict[Unit, Block]] = {}
        self._fleets: dict[str, set[str | None]] = {}

    def fleets(self, tenant_id: str) -> set[str | None] | None:
        return self._fleets.get(tenant_id)

    def set_fleets(self, tenant_id: str, fleets: set[str | None]) -> None:
        self._fleets[tenant_id] = fleets

    def loaded(self, tenant_id: str, unit: Unit) -> bool:
        return unit in self._blocks.get(tenant_id, {})

    def load(self, tenant_id: str, unit: Unit, rowids: Sequence[int],
             blobs: Sequence[bytes]) -> None:
        matrix = (np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(-1, self.dim)
                  if blobs else np.zeros((0, self.dim), dtype=np.float32))
        self._blocks.setdefault(tenant_id, {})[unit] = Block(
            np.asarray(rowids, dtype=np.int64), matrix)

    def load_matrix(self, tenant_id: str, unit: Unit, rowids: np.ndarray,
                    matrix: np.ndarray) -> None:
        self._blocks.setdefault(tenant_id, {})[unit] = Block(
            np.asarray(rowids, dtype=np.int64), matrix.reshape(-1, self.dim))

    def place(self, tenant_id: str, unit: Unit, rowid: int, vector: np.ndarray | None) -> None:
        """A row's current unit and vector as read back from a shared store (PostgreSQL: a
        row another process may have written or moved): out of every other loaded block,
        into its unit's if loaded; `vector` None (no embedding) takes it out of all."""
        fleets = self._fleets.get(tenant_id)
        if fleets is not None and unit != ORG and vector is not None:
            fleets.add(unit[1])
        for held, block in self._blocks.get(tenant_id, {}).items():
            if held == unit and vector is not None:
                at = block.position.get(rowid)
                if at is None or not np.array_equal(block.matrix[at], vector):
                    block.put(rowid, vector.astype(np.float32, copy=False))
            else:
                block.remove(rowid)

    def put(self, tenant_id: str, unit: Unit, rowid: int, vector: np.ndarray,
            was: Unit | None = None) -> None:
        """A row's vector (new, replaced, or moved from unit `was`). Units not loaded yet
        are left alone: they read the row from the store when first used."""
        fleets = self._fleets.get(tenant_id)
        if fleets is not None and unit != ORG:
            fleets.add(unit[1])
        blocks = self._blocks.get(tenant_id, {})
        if was is not None and was != unit and was in blocks:
            blocks[was].remove(rowid)
        if unit in blocks:
            blocks[unit].put(rowid, vector.astype(np.float32, copy=False))

    def move(self, tenant_id: str, rowid: int, was: Unit, unit: Unit) -> None:
        """A row changed unit without a new vector: it keeps the one it had."""
        blocks = self._blocks.get(tenant_id, {})
        old = blocks.get(was)
        if was == unit or old is None or rowid not in old.position:
            if unit in blocks and was != unit:
                del blocks[unit]  # the vector is not in memory: reload that unit on use
            return
        vector = old.matrix[old.position[rowid]].copy()
        self.put(tenant_id, unit, rowid, vector, was)

    def forget(self, tenant_id: str) -> None:
        """Drop what is held for a tenant (after a bulk write): reloaded on first use."""
        self._blocks.pop(tenant_id, None)
        self._fleets.pop(tenant_id, None)

    def snapshots(self, tenant_id: str, units: Iterable[Unit]) -> list[Snapshot]:
        blocks = self._blocks.get(tenant_id, {})
        return [blocks[u].snapshot() for u in units if u in blocks]


def ranked(snapshots: Sequence[Snapshot], vector: np.ndarray, min_similarity: float,
           first: int | None = 256) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(rowids, sims) at or above the gate, most similar first, ties by rowid; exact. The
    best `first` (and every tie of the last of them) come from a partial sort, the rest only
    if the consumer asks: a search usually stops after a few dozen rows. Pure numpy on
    snapshots, so it runs outside the store's lock and, in BLAS, outside the GIL."""
    query = vector.astype(np.float32, copy=False)
    ids, scores = [], []
    for matrix, rowids in snapshots:
        if rowids.size == 0:
            continue
        sims = matrix[:rowids.size] @ query
        keep = np.flatnonzero((sims >= min_similarity) & (rowids >= 0))
        ids.append(rowids[keep])
        scores.append(sims[keep])
    if not ids:
        return
    rowids, sims = np.concatenate(ids), np.concatenate(scores)
    chunks: list[np.ndarray] = [np.arange(sims.size)]
    if first is not None and sims.size > first:
        cut = sims[np.argpartition(-sims, first - 1)[first - 1]]
        head = sims >= cut  # every tie of the cut too: the order stays exact
        chunks = [np.flatnonzero(head), np.flatnonzero(~head)]
    for chunk in chunks:
        if chunk.size == 0:
            continue
        order = chunk[np.lexsort((rowids[chunk], -sims[chunk]))]
        yield rowids[order], sims[order]
