"""HTML pieces of reports/index.html a section renders itself: its tables, figures, the SQL
views behind them, links to its notebook and trace folders. Self-contained markup (no script);
every path is relative to the output directory, so the page opens from file://.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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


@dataclass
class _File:
    """A table or figure a report module wrote as a file, shaped like Table/FigureOutput."""

    name: str
    title: str
    frame: pd.DataFrame | None = None
    note: str = ""
    paths: tuple[Path, ...] = ()
    caption: str = ""
    views: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return self.frame is None or self.frame.empty


def _find(name: str, out_dir: Path, folder: str, suffixes: tuple[str, ...]) -> Path | None:
    candidates = [out_dir / name, *(out_dir / folder / f"{name}{s}" for s in suffixes)]
    return next((p for p in candidates if p.suffix in suffixes and p.is_file()), None)


def figure_file(name: str, out_dir: Path, caption: str) -> _File | None:
    path = _find(name, out_dir, "figures", (".png", ".svg", ".jpg"))
    if path is None:
        return None
    pdf = path.with_suffix(".pdf")
    return _File(name, path.stem.replace("_", " "), caption=caption,
                 paths=(path, *((pdf,) if pdf.is_file() else ())))


def table_file(name: str, out_dir: Path, note: str) -> _File | None:
    path = _find(name, out_dir, "tables", (".csv",))
    if path is None:
        return None
    try:
        frame = pd.read_csv(path, keep_default_na=False, dtype=str)
    except pd.errors.EmptyDataError:  # an empty table is written as a bare newline
        frame = pd.DataFrame()
    return _File(path.stem, path.stem.replace("_", " "), frame, note)


def figure_html(name: str, figure, out_dir: Path) -> str:
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
            f"</figcaption>{sql_html(figure)}</figure>")


# A table longer than this shows its first rows on the page and links its files for the rest
# (the matrix's gap list has 5,000 rows: a page no one scrolls, seconds for a browser to lay out)
MAX_PAGE_ROWS = 500


def table_html(name: str, table, out_dir: Path) -> str:
    if table is None:
        return f"<p class='missing' id='table-{_e(name)}'>{_e(name)}: not produced.</p>"
    files = [f"<a href='tables/{_e(table.name)}.{ext}'>{ext}</a>" for ext in ("csv", "md", "tex")
             if (out_dir / "tables" / f"{table.name}.{ext}").is_file()]
    head = (f"<h3 id='table-{_e(name)}'>{_e(table.title)}"
            + (f" <small>({', '.join(files)})</small>" if files else "") + "</h3>")
    if table.empty:
        return f"{head}<p class='missing'>{_e(table.note)}</p>{sql_html(table)}"
    rendered = frame_html(blank_missing(table.frame.head(MAX_PAGE_ROWS)))
    if len(table.frame) > MAX_PAGE_ROWS:
        rendered += (f"<p class='note'>The first {MAX_PAGE_ROWS:,} of {len(table.frame):,} "
                     f"rows; every row is in {', '.join(files) or 'the table files'}.</p>")
    note = f"<p class='note'>{_e(table.note)}</p>" if table.note else ""
    return f"{head}<div class='scroll'>{rendered}</div>{note}{sql_html(table)}"


def blank_missing(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame's cells as Python objects, a missing one as "" (what
    `frame.astype(object).where(frame.notna(), "")` gives, without pandas aligning and
    copying the frame twice: a fifth of a second a report)."""
    values = frame.to_numpy(dtype=object)
    values[pd.isna(values)] = ""
    return pd.DataFrame(values, index=frame.index, columns=frame.columns, dtype=object)


def frame_html(frame: pd.DataFrame) -> str:
    """`frame.to_html(index=False, escape=True, border=0, classes="data")`, the same text.
    When every cell is text without a line break or tab, an int or a bool (the report's
    tables: their numbers are formatted already) the rows are written here, where pandas
    formats each cell through its generic formatter (a third of a second per report);
    pandas writes the head (from the frame without rows) and any other frame."""
    values = frame.to_numpy(dtype=object)
    cells = values.ravel().tolist()
    simple = frame.columns.nlevels == 1 and frame.columns.name is None  # else a row head
    if simple and all(type(v) in _PLAIN and not (type(v) is str and _CONTROL.search(v))
                      for v in cells):
        head, empty_body, tail = frame.iloc[0:0].to_html(
            index=False, escape=True, border=0, classes="data").rpartition(_EMPTY_BODY)
        if empty_body and tail == "\n</table>":
            rows = [head, _BODY_START]
            for row in values.tolist():
                rows.append("    <tr>")
                rows += [f"      <td>{_cell(v)}</td>" for v in row]
                rows.append("    </tr>")
            return "\n".join([*rows, "  </tbody>", "</table>"])
    return frame.to_html(index=False, escape=True, border=0, classes="data")


_PLAIN = (str, int, bool)
_CONTROL = re.compile("[\t\r\n]")  # pandas shows them as escapes in some columns only
_BODY_START, _EMPTY_BODY = "  <tbody>", "\n  <tbody>\n  </tbody>"
_HTML_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def _cell(value: object) -> str:
    """A cell as pandas writes it: HTML's specials escaped, stripped, runs of two spaces
    made non-breaking."""
    return str(value).translate(_HTML_ESCAPES).strip().replace("  ", "&nbsp;&nbsp;")


def sql_html(table) -> str:
    """The metric views a table or figure is computed from, folded (text of metrics.sql)."""
    return sql_views.details_html(getattr(table, "views", ()))


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
    return line + sql_views.details_html(views)


def rel(path: Path, start: Path) -> str:
    return Path(os.path.relpath(Path(path).resolve(), Path(start).resolve())).as_posix()


def css_class(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


