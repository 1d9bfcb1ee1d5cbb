"""HTML pieces of reports/index.html a section renders itself: its tables, figures, the SQL
views behind them, links to its notebook and trace folders. Self-contained markup (no script);
every path is relative to the output directory, so the page opens from file://.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from fleetprobe.analysis.base import sql_views

# The paper's section titles, for the links of the verdict table (paper table of contents).
PAPER_SECTIONS = {
    "6": "Reference Implementation", "7": "Evaluation Methodology",
    "7.1": "Leakage Experiment", "7.2": "Contradiction Experiment",
    "7.3": "Provenance Experiment", "7.4": "Propagation Experiment",
    "8": "Experimental Results", "8.1": "Leakage", "8.2": "Provenance",
    "8.3": "Propagation", "8.4": "Contradiction", "9": "Discussion and Findings",
    "9.1": "Scope Enforcement Was Bimodal (GET-Path Gap Remediated)",
    "9.2": "Deduplication Starves Contradiction Detection",
    "9.3": "Cross-Agent Propagation Is Privilege-Gated",
    "9.4": "The Consistency Cost Is Paid at Write Time, Not Read Time",
    "10": "Limitations", "11": "Conclusion",
}

def section_links(text: str, figures, tables) -> str:
    """'8.1; Table 2; Fig. 2' with each part linked: paper sections to the list of section
    titles at the end, tables and figures to where this page shows them."""
    parts = []
    for part in (p.strip() for p in text.split(";")):
        fig = re.fullmatch(r"Fig\. (\d+)(.*)", part)
        table = re.fullmatch(r"Table (\d+)(.*)", part)
        number = re.match(r"(\d+(?:\.\d+)?)\b", part)
        target = None
        if fig:
            target = next((f"fig-{n}" for n in figures if n.startswith(f"fig{fig[1]}_")), None)
        elif table:
            target = f"table-table{table[1]}" if f"table{table[1]}" in tables else None
        elif number and number[1] in PAPER_SECTIONS:
            target = f"paper-{number[1]}"
        parts.append(f"<a href='#{target}'>{_e(part)}</a>" if target else _e(part))
    return "; ".join(parts)


def figure_html(name: str, figure, out_dir: Path, sql: bool = True) -> str:
    if figure is None:
        return f"<p class='missing' id='fig-{_e(name)}'>{_e(name)}: not produced.</p>"
    png = next((p for p in figure.paths if Path(p).suffix == ".png"), None)
    if png is None:
        return f"<p class='missing' id='fig-{_e(name)}'>{_e(figure.title)}: {_e(figure.note)}</p>"
    pdf = next((p for p in figure.paths if Path(p).suffix == ".pdf"), None)
    src = rel(Path(png), out_dir)
    links = f" <a href='{_e(src)}'>png</a>" + (
        f" <a href='{_e(rel(Path(pdf), out_dir))}'>pdf</a>" if pdf else "")
    # the caption is drawn in the image; the page repeats it as the image's alt text only
    return (f"<figure id='fig-{_e(name)}'><img src='{_e(src)}' "
            f"alt='{_e(figure.title)}. {_e(figure.caption)}'>"
            f"<figcaption><strong>{_e(figure.title)}</strong> ({links.strip()})"
            f"</figcaption>{sql_html(figure) if sql else ''}</figure>")


def table_html(name: str, table, out_dir: Path) -> str:
    if table is None:
        return f"<p class='missing' id='table-{_e(name)}'>{_e(name)}: not produced.</p>"
    files = [f"<a href='tables/{_e(table.name)}.{ext}'>{ext}</a>" for ext in table.formats]
    head = (f"<h3 id='table-{_e(name)}'>{_e(table.title)}"
            + (f" <small>({', '.join(files)})</small>" if files else "") + "</h3>")
    if table.empty:
        return f"{head}<p class='missing'>{_e(table.note)}</p>{sql_html(table)}"
    # a long table shows its first rows (tables.SHOWN_ROWS) and links its CSV for the rest:
    # no page over tables.PAGE_LIMIT bytes
    rendered = frame_html(blank_missing(table.shown))
    shown = len(table.shown)
    if shown < len(table.frame):
        rendered += (f"<p class='note'>The first {shown:,} of {len(table.frame):,} "
                     f"rows; every row is in {', '.join(files) or 'the table files'}.</p>")
    note = f"<p class='note'>{_e(table.note)}</p>" if table.note else ""
    return f"{head}<div class='scroll'>{rendered}</div>{note}{sql_html(table)}"


def blank_missing(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame's cells as Python objects, a missing one as ""."""
    return frame.astype(object).where(frame.notna(), "")


def frame_html(frame: pd.DataFrame) -> str:
    """A table as the page and the notebooks show it (no index, no random styler id: the same
    bytes from build to build)."""
    return frame.to_html(index=False, escape=True, border=0, classes="data")


def sql_html(table) -> str:
    """The metric views a table or figure is computed from, linked to their text in the
    page's SQL appendix (each view printed once there, `sql_views.appendix_html`)."""
    return sql_views.links_html(getattr(table, "views", ()))


def section_body(sentence: str, paper: str, tables: Mapping[str, Any],
                 figures: Mapping[str, Any], out_dir: Path, traces_root: Path,
                 notebook: str = "", views: Iterable[str] = (), runs: Iterable[str] = (),
                 table_names: Iterable[str] | None = None,
                 figure_names: Iterable[str] | None = None) -> str:
    """A section's sentence, its links (notebook, SQL views, trace folders), then its
    figures and tables (named ones missing are shown as "not produced", never dropped)."""
    out = [f"<p>{_e(sentence)}"
           + (f" (paper {section_links(paper, {}, {})})" if paper else "") + "</p>",
           links_line(out_dir, traces_root, notebook, views, runs)]
    for name in (figure_names if figure_names is not None else figures):
        out.append(figure_html(name, figures.get(name), out_dir))
    for name in (table_names if table_names is not None else tables):
        out.append(table_html(name, tables.get(name), out_dir))
    return "\n".join(p for p in out if p)


def links_line(out_dir: Path, traces_root: Path, notebook: str, views: Iterable[str],
               runs: Iterable[str]) -> str:
    parts = []
    if notebook:  # linked whether or not it is executed yet: the page must not depend on
        # which of the notebooks running beside the report (make reproduce) finished first
        parts.append(f"notebook: <a href='{_e(notebook)}'>{_e(notebook)}</a> (executed by "
                     "make notebooks)")
    run_links = ", ".join(f"<a href='{_e(rel(Path(traces_root) / r, out_dir))}/'>{_e(r)}</a>"
                          for r in runs)
    if run_links:
        parts.append(f"trace folders: {run_links}")
    line = f"<p class='links'>{'; '.join(parts)}</p>" if parts else ""
    return line + sql_views.links_html(views)


def rel(path: Path, start: Path) -> str:
    return Path(os.path.relpath(Path(path).resolve(), Path(start).resolve())).as_posix()


def css_class(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


