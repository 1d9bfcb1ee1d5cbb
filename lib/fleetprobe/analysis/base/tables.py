"""A report table and how it is written (csv, md, tex), with the small formatting helpers the
sections' tables share."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import pandas as pd
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
    # the files it is written as (the matrix's long lists are CSV only)
    formats: tuple[str, ...] = ("csv", "md", "tex")

    @property
    def empty(self) -> bool:
        return self.frame.empty

    @cached_property
    def markdown(self) -> str:
        """The frame as a Markdown table (once: the table's file and the section's fragment
        of REPRODUCTION.md both print it)."""
        return markdown(self.frame)

    def files(self, folder: str = "tables") -> dict[str, bytes]:
        """<name>.csv, .md and .tex (those of `formats`) by path under the output directory;
        an empty table says why in md and tex."""
        body = f"_{self.note}_" if self.empty else self.markdown
        note = f"\n\n{self.note}" if self.note and not self.empty else ""
        texts = {
            "csv": lambda: self.frame.to_csv(index=False),
            "md": lambda: f"## {self.title}\n\n{body}{note}\n",
            "tex": lambda: (f"% {self.note}\n" if self.empty else
                            latex(self.frame, self.title, f"tab:{self.name}")),
        }
        return {f"{folder}/{self.name}.{ext}": texts[ext]().encode() for ext in self.formats}


def latex(frame: pd.DataFrame, caption: str, label: str) -> str:
    """A booktabs table with its caption and label; the cells are tabulate's, as in the
    Markdown files (the same numbers, written the same way)."""
    tabular = tabulate(frame, headers="keys", tablefmt="latex_booktabs", showindex=False)
    return (f"\\begin{{table}}\n\\caption{{{escape_latex(caption)}}}\n"
            f"\\label{{{label}}}\n{tabular}\n\\end{{table}}\n")


def escape_latex(text: str) -> str:
    """Text with LaTeX's special characters escaped as tabulate escapes a cell's."""
    return text.translate(_LATEX_ESCAPES)


_LATEX_ESCAPES = str.maketrans(LATEX_ESCAPE_RULES)


def markdown(frame: pd.DataFrame, headers: str | list[str] = "keys") -> str:
    """The frame as a Markdown (pipe) table, as `frame.to_markdown(index=False)`."""
    return tabulate(frame, headers=headers, tablefmt="pipe", showindex=False)


def per_canonical_run(results: Results, experiment: str, view: str) -> pd.DataFrame:
    """A view's rows for every canonical run of an experiment, with the run's profile."""
    runs = results.canonical[results.canonical.experiment == experiment]
    frame = results.view(view, list(runs.run_id))
    frame.insert(0, "profile", frame.run_id.map(runs.set_index("run_id").profile))
    return frame.sort_values(["profile", "run_id"], kind="stable").reset_index(drop=True)


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
