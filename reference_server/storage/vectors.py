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

Each block also holds its vectors quantized to int8 (a scale per row: the largest component
maps to 127), so a search reads a quarter of the bytes: a compiled kernel (`int8_dots`,
numba, loaded on a thread of its own at first use; numpy's float32 product until then) gives
every row's approximate cosine, and only the rows that can reach the gate are ranked by their
float32 vectors. Rounding moves a component by at most half its row's scale, so the
approximate cosine is within scale / 2 * |q|_1 of the true one (plus float rounding, under
QUANT_SLACK): no row at or above the gate is left out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from .kernels import BackgroundKernel

Unit = tuple[str, str | None]  # ("fleet", fleet_id or None) or ORG
ORG: Unit = ("org", None)
# (matrix, live rowids of its first rows, int8 codes, their per-row scales)
Snapshot = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
QUANT_SLACK = 1e-3  # float32 rounding of both products, far above its worst case at 384-d


def quantized(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row as int8 codes times a float32 scale (max |component| / 127)."""
    scales = (np.abs(matrix).max(axis=1) / 127).astype(np.float32) if len(matrix) else (
        np.zeros(0, dtype=np.float32))
    safe = np.where(scales > 0, scales, 1)
    codes = np.rint(matrix / safe[:, None]).clip(-127, 127).astype(np.int8)
    return codes, scales


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
        self.codes = np.zeros((capacity, dim), dtype=np.int8)
        self.scales = np.zeros(capacity, dtype=np.float32)
        self.codes[:n], self.scales[:n] = quantized(self.matrix[:n])
        self.count, self.dead = n, 0
        self.position = dict(zip(rowids.tolist(), range(n), strict=True))

    def snapshot(self) -> Snapshot:
        return self.matrix, self.rowids[:self.count].copy(), self.codes, self.scales

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
            codes = np.zeros((grown, self.codes.shape[1]), dtype=np.int8)
            codes[:self.count] = self.codes[:self.count]
            self.codes, self.scales = codes, np.resize(self.scales, grown)
        self.matrix[self.count] = vector
        code, scale = quantized(self.matrix[self.count:self.count + 1])
        self.codes[self.count], self.scales[self.count] = code[0], scale[0]
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
    in (None until the store has told it). Calls for one tenant must not overlap: the store
    holds its lock (SQLite) or that tenant's (PostgreSQL) around every call; calls for two
    tenants touch only their own entries. `ranked` runs on snapshots, outside the lock."""

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


def exact_cosines(rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Each row's product with the query, summed the same way whatever the other rows (a
    BLAS product's last bits depend on a row's place in the matrix): a row's cosine is the
    same in every search, so one exactly at a gate is kept by that gate."""
    return np.einsum("ij,j->i", rows, query)


def ranked(snapshots: Sequence[Snapshot], vector: np.ndarray, min_similarity: float,
           first: int | None = 256) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(rowids, sims) at or above the gate, most similar first, ties by rowid; exact. The
    best `first` (and every tie of the last of them) come from a partial sort, the rest only
    if the consumer asks: a search usually stops after a few dozen rows. Pure numpy on
    snapshots, so it runs outside the store's lock and, in BLAS, outside the GIL."""
    query = vector.astype(np.float32, copy=False)
    kernel = int8_dots()
    reach = 0.5 * float(np.abs(query).sum())  # |q.v - scale * q.codes| <= scale * reach
    ids, scores = [], []
    for matrix, rowids, codes, scales in snapshots:
        n = rowids.size
        if n == 0:
            continue
        if kernel is None:  # BLAS over every row, then the exact cosines of the near ones
            near = matrix[:n] @ query >= min_similarity - QUANT_SLACK
        else:  # the quarter-size codes first, float32 only for the rows that can pass
            approx = np.empty(n, dtype=np.float32)
            kernel(codes[:n], query, approx)
            near = approx * scales[:n] >= min_similarity - scales[:n] * reach - QUANT_SLACK
        can = np.flatnonzero(near & (rowids >= 0))
        sims = exact_cosines(matrix[can], query)
        passed = sims >= min_similarity
        keep, sims = can[passed], sims[passed]
        ids.append(rowids[keep])
        scores.append(sims)
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



def ranked_rows(ranked_ids: Iterable[tuple[np.ndarray, np.ndarray]],
                fetch: Callable[[list[int]], dict[int, dict]], tenant_id: str,
                visible: Any, first: int, growth: int) -> Iterator[tuple[dict, float]]:
    """The rows of `ranked` (rowids, sims) in order, read by `fetch` (rowid -> row) in
    chunks of `first` rows growing `growth`-fold to 1,024, so a search that stops after a
    few dozen reads a few dozen; a row gone since its vector was ranked, or of another
    tenant, is skipped; with `visible` (a RowFilter), only the rows it admits."""
    size = first
    for rowids, sims in ranked_ids:
        start = 0
        while start < len(rowids):
            ids = rowids[start:start + size].tolist()
            rows = fetch(ids)
            for rowid, sim in zip(ids, sims[start:start + size].tolist(), strict=True):
                row = rows.get(rowid)
                if row is None or row["tenant_id"] != tenant_id:
                    continue
                if visible is None or visible.admits(row):
                    yield row, sim
            start += size
            size = min(size * growth, 1024)


Int8Dots = Callable[[np.ndarray, np.ndarray, np.ndarray], None]


def _load_int8_dots() -> Int8Dots:
    from .int8dots import dots

    dots(np.zeros((1, 2), dtype=np.int8), np.zeros(2, dtype=np.float32),
         np.empty(1, dtype=np.float32))  # compiles, or loads the cached build
    return dots


_int8_kernel: BackgroundKernel[Int8Dots] = BackgroundKernel("int8-dots", _load_int8_dots)


def int8_dots(wait: bool = False) -> Int8Dots | None:
    """The compiled `codes @ query` kernel (int8dots.py) once loaded, else None (numpy's
    float32 product over every row meanwhile); the first ask starts loading it. `wait`:
    until it is loaded or has failed to (start-up, tests)."""
    return _int8_kernel.get(wait)
