"""A report table and how it is written (csv, md, tex), with the small formatting helpers the
sections' tables share.

No file of reports/ but figures and notebooks is over `PAGE_LIMIT` bytes (issue 36): a long
table is shown on a page (its md and tex, REPRODUCTION.md, index.html) by its first
`SHOWN_ROWS` rows and a line naming the CSV that holds every row (`on_page`), and a CSV over
the limit is written in parts under `tables/<name>/`, `tables/<name>.csv` listing them
(`csv_files`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

import pandas as pd
from tabulate import LATEX_ESCAPE_RULES, tabulate

from fleetprobe.analysis.base.results import Results
from fleetprobe.analysis.base.stats import fmt_rate, rate

# bytes: no report file but figures and notebooks is larger
PAGE_LIMIT = 200_000
# the rows a long table shows on a page; every row is in its CSV
SHOWN_ROWS = 30
# a table whose CSV is longer than this (and that has more than SHOWN_ROWS rows) is long
LONG_TABLE = 12_000


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
    # a CSV over PAGE_LIMIT is written one part per value of this column (else by rows)
    split_by: str | None = None

    @property
    def empty(self) -> bool:
        return self.frame.empty

    @cached_property
    def csv(self) -> str:
        return self.frame.to_csv(index=False)

    @cached_property
    def long(self) -> bool:
        """Shown on a page by its first rows only (`on_page`)."""
        return is_long(self.frame, self.csv)

    @cached_property
    def shown(self) -> pd.DataFrame:
        """The rows a page shows: all of them, or the first SHOWN_ROWS of a long table."""
        return self.frame.head(SHOWN_ROWS) if self.long else self.frame

    @cached_property
    def markdown(self) -> str:
        """The table as a page shows it (once: the table's file and the section's fragment of
        REPRODUCTION.md both print it): a long one by its first rows and where the rest is."""
        return on_page(self.frame, self.name, csv=self.csv)

    def files(self, folder: str = "tables") -> dict[str, bytes]:
        """<name>.csv, .md and .tex (those of `formats`) by path under the output directory;
        an empty table says why in md and tex; a long one shows its first rows in md and tex,
        and a CSV over PAGE_LIMIT is written in parts (`csv_files`)."""
        # the md file sits beside the CSV: it names it without the folder
        body = f"_{self.note}_" if self.empty else on_page(self.frame, self.name, csv=self.csv,
                                                           where=f"{self.name}.csv")
        note = f"\n\n{self.note}" if self.note and not self.empty else ""
        rest = f" (first {len(self.shown)} of {len(self.frame)} rows; every row in " \
               f"{self.name}.csv)" if self.long else ""
        texts = {
            "md": lambda: f"## {self.title}\n\n{body}{note}\n",
            "tex": lambda: (f"% {self.note}\n" if self.empty else
                            latex(self.shown, self.title + rest, f"tab:{self.name}")),
        }
        out = {f"{folder}/{self.name}.{ext}": texts[ext]().encode()
               for ext in self.formats if ext != "csv"}
        if "csv" in self.formats:
            out.update(csv_files(self.frame, self.name, folder, self.split_by, self.csv))
        return out


def is_long(frame: pd.DataFrame, csv: str | None = None) -> bool:
    """More rows than a page shows, and more text than a page should hold."""
    if len(frame) <= SHOWN_ROWS:
        return False
    return len((csv if csv is not None else frame.to_csv(index=False)).encode()) > LONG_TABLE


def on_page(frame: pd.DataFrame, name: str, *, csv: str | None = None,
            rows: int = SHOWN_ROWS, where: str | None = None) -> str:
    """The frame as a Markdown table for a page: all of it when it is short, else its first
    `rows` rows and a line naming `tables/<name>.csv` (or `where`, the path from the page),
    which holds every row (a section that writes the frame as a Table of that name; a CSV in
    parts is listed there)."""
    if not is_long(frame, csv) or len(frame) <= rows:
        return markdown(frame)
    return (markdown(frame.head(rows)) + f"\n\n_The first {rows} of {len(frame):,} rows; "
            f"every row: `{where or f'tables/{name}.csv'}`._")


def csv_files(frame: pd.DataFrame, name: str, folder: str = "tables",
              split_by: str | None = None, text: str | None = None) -> dict[str, bytes]:
    """{<folder>/<name>.csv: the frame as CSV} when that is at most PAGE_LIMIT bytes; else the
    frame in parts (one per value of `split_by`, in order of first appearance, and a part over
    the limit again by rows), each `<folder>/<name>/<part>.csv` with the header, and
    `<folder>/<name>.csv` listing the parts (part, rows, file)."""
    text = frame.to_csv(index=False) if text is None else text
    if len(text.encode()) <= PAGE_LIMIT:
        return {f"{folder}/{name}.csv": text.encode()}
    groups = ([(str(v), frame[frame[split_by] == v]) for v in dict.fromkeys(frame[split_by])]
              if split_by and split_by in frame.columns else [("part", frame)])
    out: dict[str, bytes] = {}
    listed = []
    for label, group in groups:
        chunks = _chunks(group)
        for i, chunk in enumerate(chunks, 1):
            slug = _slug(label) + (f"-{i:02d}" if len(chunks) > 1 else "")
            path = f"{name}/{slug}.csv"
            out[f"{folder}/{path}"] = chunk.to_csv(index=False).encode()
            listed.append({"part": label, "rows": len(chunk), "file": path})
    out[f"{folder}/{name}.csv"] = pd.DataFrame(listed).to_csv(index=False).encode()
    return out


def _chunks(frame: pd.DataFrame) -> list[pd.DataFrame]:
    """Consecutive rows, each run of them at most PAGE_LIMIT bytes as CSV with its header: cut
    by an estimate of each row's size, a part still over the limit halved again."""
    sizes = (frame.astype(str).apply(lambda c: c.str.len()).sum(axis=1)
             + 3 * len(frame.columns)).tolist()
    starts, size = [0], 0
    for i, row in enumerate(sizes):
        if size + row > PAGE_LIMIT * 0.9 and i > starts[-1]:
            starts.append(i)
            size = 0
        size += row
    bounds = [*starts, len(frame)]
    out: list[pd.DataFrame] = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        out.extend(_within_limit(frame.iloc[a:b]))
    return out


def _within_limit(frame: pd.DataFrame) -> list[pd.DataFrame]:
    if len(frame) <= 1 or len(frame.to_csv(index=False).encode()) <= PAGE_LIMIT:
        return [frame]
    half = len(frame) // 2
    return [*_within_limit(frame.iloc[:half]), *_within_limit(frame.iloc[half:])]


def _slug(text: str) -> str:
    """A file name for a part: lower-case letters, digits, dots and dashes."""
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-") or "part"


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
