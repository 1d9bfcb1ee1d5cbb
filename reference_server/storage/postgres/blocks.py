"""The searched scope blocks' vectors, held in this process for exact ranking (vectors.py
ranks them): loaded from the table on first use and caught up with it before every search.

Every row carries `vec_xid` (schema.py), the id of the transaction that inserted it or last
changed its vector or block, so a catch-up reads exactly the rows changed since the previous
one, by this process or any other writing to the same database.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

import numpy as np
import psycopg
from psycopg.rows import tuple_row

from ..protocol import RowFilter
from ..vectors import ORG, Unit, VectorIndex, unit_of, units_in_scope
from .codecs import RawVectorLoader, matrix

# Every transaction below this id had ended when the statement's snapshot was taken: a
# catch-up from it reads every row committed since, however late a transaction commits.
OLDEST_OPEN_XID = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS low"
# A catch-up larger than this drops the tenant's blocks instead (reloaded on use).
CATCH_UP_MAX_ROWS = 5_000
# The tenant's blocks, each found by one index probe (a loose scan of ix_memories_block).
TENANT_BLOCKS = """WITH RECURSIVE b AS (
    (SELECT scope_block FROM memories WHERE tenant_id = %(t)s ORDER BY scope_block LIMIT 1)
    UNION ALL
    SELECT (SELECT scope_block FROM memories WHERE tenant_id = %(t)s
            AND scope_block > b.scope_block ORDER BY scope_block LIMIT 1)
    FROM b WHERE b.scope_block IS NOT NULL)
SELECT scope_block FROM b WHERE scope_block IS NOT NULL"""

def unit_block(unit: Unit) -> str:
    """The scope block holding a unit's rows (block '' holds two: fleet-less and ORG)."""
    return "" if unit == ORG or unit[1] is None else f"f:{unit[1]}"


class VectorBlocks:
    """The blocks of every tenant searched so far; a tenant's are read and changed under
    its own lock (one tenant's first load of 1M rows holds no other tenant's search)."""

    def __init__(self, dim: int,
                 connection: Callable[[], AbstractContextManager[psycopg.Connection]],
                 vector_oid: int) -> None:
        self.dim, self._connection, self._vector_oid = dim, connection, vector_oid
        self.index = VectorIndex(dim)
        self._tenant_locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()
        self._caught_up: dict[str, int] = {}  # tenant -> the xid its catch-ups start from

    def tenant_lock(self, tenant_id: str) -> threading.Lock:
        with self._locks_lock:
            return self._tenant_locks.setdefault(tenant_id, threading.Lock())

    def forget(self, tenant_id: str) -> None:
        """Drop the tenant's blocks (reloaded on use): after a bulk seed, cheaper than
        catching up row by row."""
        with self.tenant_lock(tenant_id):
            self.index.forget(tenant_id)
            self._caught_up.pop(tenant_id, None)

    def snapshots(self, tenant_id: str, visible: RowFilter | None) -> list:
        """Snapshots of the units `visible` can admit rows from (every unit without a fleet
        scope), caught up with the table and loaded on first use; `ranked` multiplies them
        outside the lock."""
        with self.tenant_lock(tenant_id), self._connection() as conn:
            self._catch_up(conn, tenant_id)
            fleets = self.index.fleets(tenant_id) or {None}
            scope = visible.fleet_scope if visible is not None else None
            units = (units_in_scope(scope, fleets) if scope is not None
                     else [("fleet", f) for f in fleets] + [ORG])
            missing = [u for u in units if not self.index.loaded(tenant_id, u)]
            if missing:
                self._load_units(conn, tenant_id, missing)
            return self.index.snapshots(tenant_id, units)

    def _catch_up(self, conn: psycopg.Connection, tenant_id: str) -> None:
        """Bring the tenant's loaded blocks up to the table, in one round trip: the rows whose
        `vec_xid` is at or above the oldest transaction open at the previous catch-up (all
        older ones had ended, so their rows were read then or before) are put where they now
        belong. A first call (or a long catch-up) starts afresh: the tenant's fleets, no
        block loaded. Both read after the new mark, so nothing committed later is lost."""
        since = self._caught_up.get(tenant_id)
        with conn.pipeline():
            mark = conn.execute(OLDEST_OPEN_XID)
            changed = conn.cursor(binary=True)
            changed.adapters.register_loader(self._vector_oid, RawVectorLoader)
            if since is not None:
                changed.execute("SELECT rowid, fleet_id, visibility, embedding FROM memories "
                                "WHERE tenant_id = %s AND vec_xid >= %s::xid8 LIMIT %s",
                                (tenant_id, str(since), CATCH_UP_MAX_ROWS + 1))
        low = mark.fetchone()["low"]  # type: ignore[index]
        rows = changed.fetchall() if since is not None else None
        if rows is None or len(rows) > CATCH_UP_MAX_ROWS:
            self.index.forget(tenant_id)
            blocks = conn.execute(TENANT_BLOCKS, {"t": tenant_id}).fetchall()
            self.index.set_fleets(tenant_id, {None, *(r["scope_block"][2:] for r in blocks
                                                      if r["scope_block"])})
        else:
            for r in rows:
                vector = (matrix([r["embedding"]], self.dim)[0]
                          if r["embedding"] is not None else None)
                self.index.place(tenant_id, unit_of(r["fleet_id"], r["visibility"]),
                                 r["rowid"], vector)
        self._caught_up[tenant_id] = low

    def _load_units(self, conn: psycopg.Connection, tenant_id: str,
                    units: Sequence[Unit]) -> None:
        """The units' vectors, in one statement (a search over many small fleets' units is
        one round trip), each unit in rowid order; a unit with no row loads empty."""
        cur = conn.cursor(binary=True, row_factory=tuple_row)
        cur.adapters.register_loader(self._vector_oid, RawVectorLoader)
        rows = cur.execute("SELECT rowid, fleet_id, visibility, embedding FROM memories "
                           "WHERE tenant_id = %s AND scope_block = ANY(%s) "
                           "AND embedding IS NOT NULL ORDER BY rowid",
                           (tenant_id, sorted({unit_block(u) for u in units}))).fetchall()
        found: dict[Unit, list[tuple]] = {u: [] for u in units}
        for r in rows:
            held = found.get(unit_of(r[1], r[2]))
            if held is not None:  # block '' also holds the unit not asked for
                held.append(r)
        for unit, unit_rows in found.items():
            self.index.load_matrix(
                tenant_id, unit, np.asarray([r[0] for r in unit_rows], dtype=np.int64),
                matrix([r[3] for r in unit_rows], self.dim))
