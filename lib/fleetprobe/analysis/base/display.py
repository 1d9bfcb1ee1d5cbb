"""Notebook helpers: show what `report.build` wrote, so notebook cells stay one line each."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd
from IPython.display import HTML, Image, Markdown, display

from fleetprobe.analysis.base.html import frame_html
from fleetprobe.analysis.base.sql_views import details_html


def show_notes(built: dict[str, Any]) -> None:
    if built["notes"]:
        display(Markdown("\n".join(f"- {note}" for note in built["notes"])))


def show_table(built: dict[str, Any], name: str, sql: bool = True) -> None:
    """The table, its note and (unless sql=False) the metric views it is computed from."""
    table = built["tables"][name]
    if table.empty:
        display(Markdown(f"_{table.note}_"))
    else:
        display(_html(table.frame))
        if table.note:
            display(Markdown(f"_{table.note}_"))
    if sql:
        show_sql(built, name)


def show_sql(built: dict[str, Any], name: str) -> None:
    """The SQL views of metrics.sql a table is computed from, read from the file."""
    views = built["tables"][name].views
    if views:
        display(HTML(details_html(views)))
    else:
        display(Markdown(f"_{name}: no metric view named for this table._"))


def show_figure(built: dict[str, Any], name: str, sql: bool = True) -> None:
    """The figure (its caption is drawn in it) and the metric views it draws."""
    figure = built["figures"][name]
    png = [p for p in figure.paths if p.suffix == ".png"]
    display(Image(filename=str(png[0])) if png else Markdown(f"_{figure.note}_"))
    if sql and figure.views:
        display(HTML(details_html(figure.views)))


def show_verdicts(built: dict[str, Any], claim_ids: Iterable[str]) -> None:
    """The paper's value, the reproduced one and the verdict for some claims."""
    wanted = list(claim_ids)
    rows = [{"claim": v.label, "paper": v.paper, "reproduced": v.measured,
             "verdict": v.status, "why": v.reason}
            for v in built["verdicts"] if v.claim_id in wanted]
    display(_html(pd.DataFrame(rows)))


def _html(frame: pd.DataFrame) -> HTML:
    """A table as index.html writes it (no index, no random styler id: an executed notebook
    is byte-identical from run to run)."""
    return HTML(frame_html(frame))


def show_verdict_counts(built: dict[str, Any]) -> None:
    counts = pd.Series([v.status for v in built["verdicts"]], name="claims").value_counts()
    display(counts.to_frame())
    display(Markdown(f"Full page: `{built['reproduction']}`"))
