"""PostgreSQL + pgvector storage behind the `Storage` protocol (what MemClaw runs on; the
`pg` extra). `python -m reference_server --db postgresql://...` selects it.

`PostgresStorage` (store.py) runs the statements both stores share (storage/sql/) over a
connection pool; what is PostgreSQL's own sits in rooms of its own: the schema, created at
start (schema.py), the NUL-safe text and raw-vector codecs (codecs.py), the scope blocks'
vectors ranked exactly in this process and caught up from the table by `vec_xid` before
every search (blocks.py), the COPY seed (bulk.py) and the HNSW walk (hnsw.py), where the
scope predicate is in the SQL (`scope.search_predicate_sql`) for searches over a whole
tenant. Similarity is the inner product over unit vectors (= cosine).
"""

from __future__ import annotations

from .store import (
    DEFAULT_VECTOR_SEARCH,
    EF_SEARCH,
    ITERATIVE_SCAN,
    VECTOR_SEARCH,
    PostgresStorage,
)

__all__ = ["DEFAULT_VECTOR_SEARCH", "EF_SEARCH", "ITERATIVE_SCAN", "VECTOR_SEARCH",
           "PostgresStorage"]
