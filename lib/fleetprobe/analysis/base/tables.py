"""A report table and how it is written (csv, md, tex), with the small formatting helpers the
sections' tables share."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
import tabulate as _tabulate_module
from pandas.api.extensions import ExtensionDtype
from pandas.core.dtypes.cast import maybe_box_native
from tabulate import LATEX_ESCAPE_RULES, tabulate

from fleetprobe.analysis.base.results import Results
from fleetprobe.analysis.base.stats import fmt_rate, rate


@dataclass
class Table:
    name: str
    title: str
    frame: pd.DataFrame
    note: str = ""
    # the metric views of metrics.sql the table is computed from (shown beside it)
    views: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return self.frame.empty

    @cached_property
    def markdown(self) -> str:
        """The frame as a Markdown table (once: the table's file and the section's fragment
        of REPRODUCTION.md both print it)."""
        return markdown(self.frame)


def write_table(table: Table, out_dir: Path) -> list[Path]:
    """<name>.csv, <name>.md and <name>.tex; an empty table says why in md and tex."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, md_path, tex_path = (out_dir / f"{table.name}.{ext}" for ext in ("csv", "md", "tex"))
    table.frame.to_csv(csv_path, index=False)
    body = f"_{table.note}_" if table.empty else table.markdown
    note = f"\n\n{table.note}" if table.note and not table.empty else ""
    md_path.write_text(f"## {table.title}\n\n{body}{note}\n")
    tex_path.write_text(f"% {table.note}\n" if table.empty else
                        latex(table.frame, table.title, f"tab:{table.name}"))
    return [csv_path, md_path, tex_path]


def latex(frame: pd.DataFrame, caption: str, label: str) -> str:
    """A booktabs table with its caption and label. The cells are tabulate's, as in the
    Markdown files (the same numbers, written the same way); pandas' LaTeX writer renders
    every cell through a template, twice the CPU for six-decimal floats and `NaN`."""
    tabular = tabulate(frame, headers="keys", tablefmt=LATEX_BOOKTABS, showindex=False,
                       disable_numparse=text_columns(frame))
    return (f"\\begin{{table}}\n\\caption{{{escape_latex(caption)}}}\n"
            f"\\label{{{label}}}\n{tabular}\n\\end{{table}}\n")


def escape_latex(text: str) -> str:
    """Text with LaTeX's special characters escaped as tabulate escapes a cell's."""
    return text.translate(_LATEX_ESCAPES)


_LATEX_ESCAPES = str.maketrans(LATEX_ESCAPE_RULES)


def _latex_row(cells: list[str], colwidths: list[int], colaligns: list[str]) -> str:
    """tabulate's LaTeX row (cells escaped, joined by &, ended by \\\\), escaping a cell in one
    str.translate where tabulate looks each character up in a Python function."""
    return ("&".join(c.translate(_LATEX_ESCAPES) for c in cells) + "\\\\").rstrip()


# tabulate's latex_booktabs with the faster row writer (the same text: tests/analysis
# test_tables.py compares them)
LATEX_BOOKTABS = _tabulate_module._table_formats["latex_booktabs"]._replace(
    headerrow=_latex_row, datarow=_latex_row)


def markdown(frame: pd.DataFrame, headers: str | list[str] = "keys") -> str:
    """`frame.to_markdown(index=False, headers=headers)`: the same text for less CPU
    (text_columns)."""
    return tabulate(frame, headers=headers, tablefmt="pipe", showindex=False,
                    disable_numparse=text_columns(frame))


def text_columns(frame: pd.DataFrame) -> list[int]:
    """The columns tabulate would type as text: those with a cell that reads as neither
    a number, a bool nor empty (tabulate's own per-cell rule; a text cell makes the whole
    column text). Number parsing off for them changes nothing in the output (a text
    column is left-aligned and printed as is either way) and spares tabulate parsing each
    of their cells as an int and a float, twice per table (Markdown and LaTeX): most of the
    cells are formatted text, and the first one usually settles its column."""
    values = frame.values  # what tabulate reads of a DataFrame
    cell_type = _tabulate_module._type
    # a numpy number or bool column has no text cell: not looked through (a nullable one
    # can: tabulate types a missing value <NA> as text)
    numeric = [isinstance(dtype, np.dtype) and dtype.kind in "biuf"
               for dtype in frame.dtypes.tolist()]
    return [j for j in range(values.shape[1])
            if not numeric[j] and any(cell_type(cell) is str for cell in values[:, j])]


def per_canonical_run(results: Results, experiment: str, view: str) -> pd.DataFrame:
    """A view's rows for every canonical run of an experiment, with the run's profile."""
    runs = results.canonical[results.canonical.experiment == experiment]
    frame = results.view(view, list(runs.run_id))
    frame.insert(0, "profile", frame.run_id.map(runs.set_index("run_id").profile))
    return frame.sort_values(["profile", "run_id"], kind="stable").reset_index(drop=True)


def records(frame: pd.DataFrame) -> list[dict]:
    """`frame.to_dict("records")`: the same dicts of the same Python values (pandas' own
    boxing of object and extension columns' cells), from each column's `tolist()`, where
    pandas steps through the rows (cell by cell in a text column: a tenth of a second for
    the matrix's gap catalogue)."""
    columns = list(frame.columns)
    if not columns:
        return [{} for _ in range(len(frame))]
    values = []
    for j, dtype in enumerate(frame.dtypes.tolist()):
        column = frame.iloc[:, j].tolist()
        if dtype == np.dtype(object) or isinstance(dtype, ExtensionDtype):
            column = [maybe_box_native(v) for v in column]
        values.append(column)
    return [dict(zip(columns, row, strict=True)) for row in zip(*values, strict=True)]


def readable_trust_and_relation(frame: pd.DataFrame) -> pd.DataFrame:
    """The tenant key has no trust level and no relation (tenant-wide authority)."""
    frame = frame.reset_index(drop=True).copy()
    frame["trust"] = [("-" if pd.isna(t) else str(int(t))) for t in frame.trust]
    frame["relation"] = frame.relation.fillna("tenant-wide")
    return frame


def k_of_n(k: int, n: int) -> str:
    return fmt_rate(rate(int(k), int(n)), with_value=False)


def empty_note(frame: pd.DataFrame, note: str) -> str:
    return f"Not available: {note}." if frame.empty else ""


def markdown_or_note(frame: pd.DataFrame, note: str) -> str:
    return f"_{note}._" if frame.empty else markdown(frame)
