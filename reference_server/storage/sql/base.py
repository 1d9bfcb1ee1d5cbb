"""`SqlBase`: what a store built on `SqlStore` provides (its connection and vectors), the
helpers the shared statements use, and the row codecs both stores share.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np

from ..protocol import RowFilter
from ..rows import MEMORY_COLUMNS, NewMemory
from .dialect import Dialect

# Everything but the embedding (only the by-id detail shows it).
ROW_COLUMNS = "rowid AS _rowid, " + ", ".join(MEMORY_COLUMNS)
ROW_COLUMNS_M = "m.rowid AS _rowid, " + ", ".join(f"m.{c}" for c in MEMORY_COLUMNS)
IN_LIST_CHUNK = 500  # ids per statement where a list costs a parameter per id (SQLite)

# Upserts in the form both engines accept (SQLite 3.24+): the conflict target, then the
# columns a newer row replaces.
UPSERT_KEY = ("INSERT INTO api_keys VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
              "ON CONFLICT (key_hash) DO UPDATE SET id = excluded.id, "
              "tenant_id = excluded.tenant_id, agent_id = excluded.agent_id, "
              "kind = excluded.kind, key_prefix = excluded.key_prefix, "
              "label = excluded.label, created_at = excluded.created_at")
UPSERT_AGENT = ("INSERT INTO agents VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (tenant_id, agent_id) DO UPDATE SET fleet_id = excluded.fleet_id, "
                "display_name = excluded.display_name, trust_level = excluded.trust_level, "
                "updated_at = excluded.updated_at")
UPSERT_ENTITY = ("INSERT INTO entities VALUES (?, ?, ?, ?, ?, ?, ?) "
                 "ON CONFLICT (id) DO UPDATE SET tenant_id = excluded.tenant_id, "
                 "fleet_id = excluded.fleet_id, entity_type = excluded.entity_type, "
                 "canonical_name = excluded.canonical_name, attributes = excluded.attributes, "
                 "created_at = excluded.created_at")
INSERT_LINK = "INSERT INTO memory_entity_links VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
UPSERT_JOB = ("INSERT INTO detection_jobs VALUES (?, ?, ?, ?) "
              "ON CONFLICT (memory_id) DO UPDATE SET due_at = excluded.due_at, "
              "enqueued_at = excluded.enqueued_at")
UPSERT_IDEMPOTENCY = ("INSERT INTO idempotency VALUES (?, ?, ?, ?, ?, ?) "
                      "ON CONFLICT (tenant_id, key) DO UPDATE SET "
                      "request_hash = excluded.request_hash, "
                      "status_code = excluded.status_code, body = excluded.body, "
                      "created_at = excluded.created_at")


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...


class Tx(Protocol):
    """A transaction's statements, in `?`-placeholder SQL."""

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Cursor: ...
    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> Any: ...


def decode_row(row: Mapping[str, Any]) -> dict:
    """A memory row as a plain dict, metadata decoded."""
    d = dict(row)
    if d.get("metadata") is not None:
        d["metadata"] = json.loads(d["metadata"])
    return d


def decode_entity(row: Mapping[str, Any]) -> dict:
    d = dict(row)
    d["attributes"] = json.loads(d["attributes"])
    return d


def encode_columns(values: Mapping[str, Any]) -> dict[str, Any]:
    """Column values as stored: metadata as JSON text (validated finite above)."""
    out = dict(values)
    if out.get("metadata") is not None:
        out["metadata"] = json.dumps(out["metadata"], allow_nan=False)
    return out


class SqlBase:
    dialect: Dialect
    # ranked_rows's first page and growth: a store whose row reads cost a round trip each
    # starts smaller and grows faster
    RANK_PAGES: tuple[int, int] = (64, 2)

    # what a subclass provides ----------------------------------------------------------

    def _tx(self, durable: bool = True) -> AbstractContextManager[Tx]:
        """A write transaction; `durable=False` may skip waiting for the commit's flush."""
        raise NotImplementedError

    def _one(self, sql: str, args: Sequence[Any] = ()) -> Mapping[str, Any] | None:
        raise NotImplementedError

    def _all(self, sql: str, args: Sequence[Any] = ()) -> Sequence[Mapping[str, Any]]:
        raise NotImplementedError

    def _memory_rows(self, sql: str, args: Sequence[Any] = ()) -> list[dict]:
        """Memory rows as dicts, metadata decoded (callers treat them as read-only)."""
        return [decode_row(r) for r in self._all(sql, args)]

    def _snapshots(self, tenant_id: str, visible: RowFilter | None) -> list:
        """The vector snapshots of the units `visible` can admit rows from (vectors.py)."""
        raise NotImplementedError

    def _vector_param(self, vector: np.ndarray) -> Any:
        raise NotImplementedError

    def _vector_bytes(self, stored: Any) -> bytes | None:
        """A stored embedding as float32 bytes (the by-id detail's form)."""
        raise NotImplementedError

    def _vectors_changed(self, row: dict, changes: dict[str, Any],
                         embedding: np.ndarray | None) -> None:
        """After an update committed: the in-memory vectors follow (or catch up later)."""

    def _visible_clause(self, tenant_id: str, visible: RowFilter) -> tuple[str, list[Any]] | None:
        """`visible` as SQL over the memories' columns, or None to judge rows in Python."""
        return visible.sql(self.dialect.mark)

    # helpers ---------------------------------------------------------------------------

    def _in(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return self.dialect.in_list(column, values)

    def _chunks(self, values: Sequence[Any]) -> Iterator[Sequence[Any]]:
        size = len(values) if self.dialect.arrays else IN_LIST_CHUNK
        for start in range(0, len(values), max(size, 1)):
            yield values[start:start + size]

    def _pages(self, sql: str, args: Sequence[Any], first: int, last: int) -> Iterator[dict]:
        """The memory rows of `sql` (ending in `LIMIT ? OFFSET ?`), read lazily in pages of
        `first` rows, each four times the last, up to `last`: a reader that stops early
        reads little, one that reads everything makes few queries."""
        offset, size = 0, first
        while True:
            rows = self._memory_rows(sql, (*args, size, offset))
            yield from rows
            if len(rows) < size:
                return
            offset, size = offset + size, min(size * 4, last)

    @staticmethod
    def _side_rows(tx: Tx, memories: Sequence[NewMemory], enqueued: str) -> None:
        """Every memory's entity links, detection job and idempotency record."""
        links = [(m.row["id"], eid, role) for m in memories for eid, role in m.links]
        jobs = [(m.row["id"], m.row["tenant_id"], m.detection_due_at, enqueued)
                for m in memories if m.detection_due_at is not None]
        records = [(i.tenant_id, i.key, i.request_hash, i.status_code, i.body, enqueued)
                   for m in memories if (i := m.idempotency) is not None]
        for sql, rows in ((INSERT_LINK, links), (UPSERT_JOB, jobs),
                          (UPSERT_IDEMPOTENCY, records)):
            if rows:
                tx.executemany(sql, rows)

