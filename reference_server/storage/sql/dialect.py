"""What differs between SQLite's and PostgreSQL's SQL, as far as the shared statements go.

Shared statements are written with `?` placeholders and SQLite's spelling of nothing else:
`Dialect.sql` turns them into the driver's placeholder style (psycopg: `%s`), and the few
spellings that differ are asked of the dialect where the statement is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=512)
def _percent_s(sql: str) -> str:
    # shared SQL never holds a literal `?` or `%`: every value is a parameter
    return sql.replace("?", "%s")


@dataclass(frozen=True)
class Dialect:
    name: str
    mark: str  # the driver's placeholder: `?` (sqlite3) or `%s` (psycopg)
    null_eq: str  # equality that holds for two NULLs: `IS` / `IS NOT DISTINCT FROM`
    arrays: bool  # a list binds as one array parameter (`= ANY(%s)`)
    substring: str  # position of the second text in the first, 0 when absent
    # SQLite sorts NULLs first ascending and last descending; a dialect that sorts them the
    # other way spells that order out, so a list pages alike on both
    spell_nulls: bool = False

    def sql(self, text: str) -> str:
        """A shared statement (`?` placeholders) in this driver's placeholder style."""
        return _percent_s(text) if self.mark == "%s" else text

    def order(self, direction: str) -> str:
        """`ASC` / `DESC` with SQLite's place for NULLs (smallest)."""
        if not self.spell_nulls:
            return direction
        return f"{direction} {'NULLS LAST' if direction == 'DESC' else 'NULLS FIRST'}"

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """`column` is one of `values`: one array parameter where the driver has arrays
        (any length, one plan), else one placeholder per value (callers keep lists within
        SQLite's parameter limit)."""
        if self.arrays:
            return f"{column} = ANY(?)", [list(values)]
        return f"{column} IN ({', '.join('?' for _ in values)})", list(values)


SQLITE = Dialect("sqlite", "?", "IS", arrays=False, substring="instr")
POSTGRES = Dialect("postgresql", "%s", "IS NOT DISTINCT FROM", arrays=True, substring="strpos",
                   spell_nulls=True)
