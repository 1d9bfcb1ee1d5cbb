"""Storage, the bottom layer: the `Storage` protocol and its row types (`protocol.py`,
`rows.py`), one SQL store in two dialects (`sql/`: the statements both share), the SQLite
store (`sqlite.py`) and the PostgreSQL + pgvector store (`postgres/`, optional dependency),
the in-memory vector blocks both rank from (`vectors.py`), and `open_storage`, the one place
that picks a store. Imports nothing else of the server.
"""

from __future__ import annotations

from pathlib import Path

from .protocol import RowFilter, Storage
from .rows import (
    LIVE_STATUSES,
    MEMORY_COLUMNS,
    AgentRow,
    IdempotencyRecord,
    KeyRow,
    ListFilter,
    NewMemory,
    list_where,
    monotonic_due,
    now_iso,
)
from .sqlite import SqliteStorage

__all__ = ["LIVE_STATUSES", "MEMORY_COLUMNS", "AgentRow", "IdempotencyRecord", "KeyRow",
           "ListFilter", "NewMemory", "RowFilter", "SqliteStorage", "Storage", "list_where",
           "monotonic_due", "now_iso", "open_storage"]


def open_storage(db: Path | str, dim: int, vector_search: str = "exact") -> Storage:
    """`postgresql://...` -> PostgreSQL + pgvector (the `pg` extra); anything else is a
    SQLite file path. `vector_search` (PostgreSQL): `exact` or `hnsw` (postgres/store.py)."""
    if isinstance(db, str) and db.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStorage  # optional dependency

        return PostgresStorage(db, dim, vector_search)
    return SqliteStorage(db, dim)
