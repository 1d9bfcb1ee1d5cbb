"""The text of the metric views, read from metrics.sql, so a notebook or the HTML page can show
the query behind every table without the reader opening the file.

`excerpt(["leakage_reprobe"])` gives each named view with the comment above it and, before
it, every view it reads from (down to the `events` and `manifests` tables).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from fleetprobe.analysis.base.db import METRICS_SQL

_CREATE = re.compile(r"^CREATE VIEW\s+(\w+)\s+AS\b", re.MULTILINE | re.IGNORECASE)
_BANNER = re.compile(r"^--\s*-{10,}\s*$")
_READS = re.compile(r"\b(?:FROM|JOIN)\s+(\w+)\b", re.IGNORECASE)


@cache
def view_statements(path: Path = METRICS_SQL) -> dict[str, str]:
    """{view name: its comment lines and CREATE VIEW statement}, in file order."""
    lines = Path(path).read_text().splitlines()
    views: dict[str, str] = {}
    starts = [i for i, line in enumerate(lines) if _CREATE.match(line)]
    for i in starts:
        name = _CREATE.match(lines[i])[1]
        top = i
        while top > 0 and lines[top - 1].startswith("--") and not _BANNER.match(lines[top - 1]):
            top -= 1
        end = i
        while end < len(lines) and not lines[end].rstrip().endswith(";"):
            end += 1
        views[name] = "\n".join(lines[top:end + 1])
    return views


def dependencies(name: str, statements: dict[str, str] | None = None) -> list[str]:
    """The views `name` reads from, recursively, each before the views that read it."""
    statements = statements if statements is not None else view_statements()
    ordered: list[str] = []

    def visit(view: str, seen: tuple[str, ...]) -> None:
        if view in ordered:  # reached before by another path: its reads are listed already
            return
        read = _reads(statements.get(view, ""))
        for other in statements:
            if other != view and other not in seen and other.lower() in read:
                visit(other, (*seen, view))
        if view not in ordered:
            ordered.append(view)

    visit(name, ())
    return ordered[:-1]


@cache
def _reads(statement: str) -> frozenset[str]:
    """The names (lower case) a view's body reads FROM or JOINs: one scan of the body, not
    a search per view of metrics.sql (the HTML page asks for hundreds of excerpts)."""
    body = _CREATE.split(statement, maxsplit=1)[-1]
    return frozenset(m.lower() for m in _READS.findall(body))


def excerpt(names: Iterable[str], statements: dict[str, str] | None = None) -> str:
    """The SQL of the named views and of the views they read from, dependencies first; a name
    metrics.sql does not define is listed as such."""
    statements = statements if statements is not None else view_statements()
    shown: list[str] = []
    missing: list[str] = []
    for name in dict.fromkeys(names):
        if name not in statements:
            missing.append(name)
            continue
        for view in (*dependencies(name, statements), name):
            if view not in shown:
                shown.append(view)
    parts = [statements[v] for v in shown]
    if missing:
        parts.append("-- not a view of metrics.sql: " + ", ".join(missing))
    return "\n\n".join(parts)


def details_html(views: Iterable[str]) -> str:
    """A folded HTML block with the SQL of the views (see `excerpt`); "" when none is named."""
    return _details_html(tuple(views))


@cache
def _details_html(names: tuple[str, ...]) -> str:
    """details_html, once per list of views (tables and figures share theirs)."""
    if not names:
        return ""
    summary = ", ".join(f"<code>{html.escape(v)}</code>" for v in names)
    return (f"<details class='sql'><summary>SQL: {summary} (metrics.sql)</summary>"
            f"<pre><code>{html.escape(excerpt(names))}</code></pre></details>")


def links_html(views: Iterable[str]) -> str:
    """A line linking each named view to its statement in the page's SQL appendix
    (`appendix_html`): the page prints each view once, not once per table that reads it."""
    names = tuple(dict.fromkeys(views))
    if not names:
        return ""
    links = ", ".join(f"<a href='#sql-{html.escape(v)}'><code>{html.escape(v)}</code></a>"
                      for v in names)
    return f"<p class='sql'>SQL (metrics.sql): {links}</p>"


def appendix_html(views: Iterable[str], statements: dict[str, str] | None = None) -> str:
    """Every named view and every view it reads from, each once in metrics.sql's order, as a
    folded block with an anchor (`sql-<view>`) the tables' links reach; a view it reads is
    linked from its text's summary line."""
    statements = statements if statements is not None else view_statements()
    wanted: set[str] = set()
    for name in views:
        if name in statements:
            wanted.update((*dependencies(name, statements), name))
    blocks = []
    for name in (v for v in statements if v in wanted):
        reads = [v for v in dependencies(name, statements) if v in wanted
                 and v.lower() in _reads(statements[name])]
        read = (" reads " + ", ".join(f"<a href='#sql-{html.escape(v)}'>{html.escape(v)}</a>"
                                      for v in reads)) if reads else ""
        blocks.append(f"<details class='sql' id='sql-{html.escape(name)}'><summary><code>"
                      f"{html.escape(name)}</code>{read}</summary><pre><code>"
                      f"{html.escape(statements[name])}</code></pre></details>")
    return "\n".join(blocks)
