"""The SQL both stores speak: `SqlStore` (every statement the SQLite and PostgreSQL stores
share, written once: store.py for memory rows, records.py for the rest, base.py for what a
store provides) and `Dialect` (what differs between the two drivers' SQL: placeholder style,
null-safe equality, list membership, substring search, NULL order). A store subclasses
`SqlStore` with its dialect and its own connection, vectors and bulk insert.
"""

from __future__ import annotations

from .base import decode_row, encode_columns
from .dialect import POSTGRES, SQLITE, Dialect
from .store import SqlStore

__all__ = ["POSTGRES", "SQLITE", "Dialect", "SqlStore", "decode_row", "encode_columns"]
