"""The HNSW index walk (`--vector-search hnsw`): rows in the index's order, the scope
predicate in the SQL as MemClaw does (`scope.search_predicate_sql`), pages of growing size;
and a long `fleet_ids` list narrowed to the tenant's fleets before it goes into SQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ..protocol import RowFilter
from ..sql import SqlStore
from ..sql.base import ROW_COLUMNS

LONG_FLEET_LIST = 256  # longer `fleet_ids` lists are cut to the tenant's fleets first


class HnswWalk(SqlStore):
    """The index walk and the fleet-list narrowing its SQL (and the entity graph's) uses."""

    def _visible_clause(self, tenant_id: str, visible: RowFilter) -> tuple[str, list[Any]]:
        return self._narrowed_to_tenant_fleets(tenant_id, visible).sql("%s")

    def _index_walk(self, tenant_id: str, vector: np.ndarray, min_similarity: float,
                    visible: RowFilter | None, first_page: int
                    ) -> Iterator[tuple[dict, float]]:
        """The HNSW index's order, the scope predicate checked (in the SQL) as it walks."""
        where = ["tenant_id = %s", "embedding IS NOT NULL"]
        args: list = [tenant_id]
        if visible is not None:
            clause, clause_args = self._narrowed_to_tenant_fleets(tenant_id, visible).sql("%s")
            where.append(clause)
            args.extend(clause_args)
        q = vector.astype(np.float32)
        sql = (f"SELECT {ROW_COLUMNS}, -(embedding <#> %s) AS _sim FROM memories "
               f"WHERE {' AND '.join(where)} ORDER BY embedding <#> %s LIMIT %s OFFSET %s")
        offset, page = 0, first_page
        while True:
            rows = self._memory_rows(sql, (q, *args, q, page, offset))
            for r in rows:
                sim = float(r.pop("_sim"))
                if sim < min_similarity:
                    return
                yield r, sim
            if len(rows) < page:
                return
            offset += page
            page = min(page * 4, 4096)

    def _narrowed_to_tenant_fleets(self, tenant_id: str, visible: RowFilter) -> RowFilter:
        """A long `fleet_ids` list (a legal request may name 100k) cut to the fleets the tenant
        has rows in: the same rows match, but every page query no longer ships and scans the
        whole list while holding the connection every other request waits for."""
        fleet_ids = visible.fleet_ids
        if len(fleet_ids) <= LONG_FLEET_LIST:
            return visible
        present = {r["fleet_id"] for r in self._all(
            "SELECT DISTINCT fleet_id FROM memories WHERE tenant_id = %s AND fleet_id IS NOT NULL",
            (tenant_id,))}
        # none present: keep one absent id, so the fleet clause stays and matches no fleet
        kept = frozenset(f for f in fleet_ids if f in present) or frozenset([next(iter(fleet_ids))])
        return visible.with_fleet_ids(kept)
