"""What a report section is given and what it gives back.

A section module (`fleetprobe.analysis.sections.<name>`) has one entry point,
`build(context) -> SectionOutput`: it reads the traces through `context.results()` and returns
its tables, figures and other files as values (`SectionOutput.files`: bytes by path under the
output directory; it writes nothing itself), with its Markdown fragments (pieces of a shared
document such as REPRODUCTION.md, each with an `order` that places it) and its HTML fragment.
Sections share nothing but the traces, so the build can make them in separate processes and
keep each one's output between builds (`fleetprobe.analysis.build`); everything a section
returns is picklable. A section module declares `EXPERIMENTS`, the experiments whose runs it
reads (None: every run), which is what decides when its kept output is stale.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetprobe.analysis.base import db, html
from fleetprobe.analysis.base.results import Results, load_paper_values
from fleetprobe.analysis.base.tables import Table

REPRODUCTION = "REPRODUCTION.md"


@dataclass
class FigureOutput:
    """A drawn figure as a value. It lives here, not beside the drawing in `figures`, so the
    composing process unpickles a kept section without importing matplotlib (about 1 s)."""

    name: str
    title: str
    paths: list[Path] = field(default_factory=list)
    note: str = ""
    caption: str = ""
    views: tuple[str, ...] = ()  # the metric views of metrics.sql the figure draws
    # the rendered files, by path under the output directory (the build's writer writes them)
    files: dict[str, bytes] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class Context:
    """Where the traces are, where the section writes, and which runs were named canonical."""

    traces_root: Path
    out_dir: Path
    run_ids: tuple[str, ...] = ()
    # the traces already loaded into a DuckDB file (`db.write_database`), read-only here;
    # None: each section parses the traces it needs itself
    database: Path | None = None
    # (run directory, lines) of events.jsonl lines that were not JSON, as the sections' loads
    # found them (each process fills its own copy; the report gathers them)
    unreadable: list[tuple[str, int]] = field(default_factory=list, compare=False)

    def results(self, experiments: Collection[str] | None = None) -> Results:
        """The traces as `Results`, with the events of `experiments` only (None: all)."""
        if self.database is not None:
            results = Results(db.open_database(self.database), load_paper_values(),
                              self.run_ids)
        else:
            results = Results.load(self.traces_root, self.run_ids or None,
                                   experiments=experiments)
        self.unreadable.extend(results.con.execute(
            "SELECT run_dir, lines FROM unreadable_lines").fetchall())
        return results


@dataclass(frozen=True)
class Fragment:
    """A block of a shared Markdown document; blocks are joined in `order`, then by section
    registration order, one blank line apart."""

    document: str
    order: int
    text: str


@dataclass
class SectionOutput:
    key: str
    title: str
    sentence: str = ""
    tables: dict[str, Table] = field(default_factory=dict)
    figures: dict[str, FigureOutput] = field(default_factory=dict)
    fragments: list[Fragment] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # every file it gives the report, by path under the output directory (its tables' and
    # figures' and documents such as MATRIX.md): the build's writer writes them
    files: dict[str, bytes] = field(default_factory=dict)
    html: str = ""  # the section's body on reports/index.html (below its heading)
    paper: str = ""  # the paper section(s) it answers, e.g. "8.1; 9.1"
    notebook: str = ""  # the executed notebook under out_dir that shows the experiment
    views: tuple[str, ...] = ()  # the metric views of metrics.sql it reads
    runs: tuple[str, ...] = ()  # the runs (trace folders) it rests on
    data: dict[str, Any] = field(default_factory=dict)  # what a notebook or the report reuses
    cpu_seconds: float = 0.0  # CPU time its build took (benchmarks/bench_report.py prints it)


def compose(fragments: Sequence[Fragment], document: str) -> str:
    """The document from its fragments: by order (stable), one blank line apart."""
    blocks = sorted((f for f in fragments if f.document == document), key=lambda f: f.order)
    return "\n\n".join(f.text.strip("\n") for f in blocks) + "\n"


def finish(output: SectionOutput, context: Context, table_names: Sequence[str] | None = None,
           figure_names: Sequence[str] | None = None) -> SectionOutput:
    """Render the section's HTML fragment from what it built (unless it rendered its own),
    and add its tables' and figures' files to those it gives the report."""
    for table in output.tables.values():  # unless the section wrote them its own way
        for name, data in table.files().items():
            output.files.setdefault(name, data)
    for figure in output.figures.values():
        output.files.update(figure.files)
    if not output.html:
        output.html = html.section_body(
            output.sentence, output.paper, output.tables, output.figures, context.out_dir,
            context.traces_root, output.notebook, output.views, output.runs,
            table_names, figure_names)
    return output


def from_parts(key: str, title: str, sentence: str, context: Context,
               tables: Sequence[Table], figures: Sequence[FigureOutput], *,
               fragments: Sequence[Fragment] = (), paper: str = "", notebook: str = "",
               runs: Sequence[str] = ()) -> SectionOutput:
    """A section of the tables and figures it built, rendered: a note for each that is
    empty, and the metric views they read (in order, once each)."""
    output = SectionOutput(
        key, title, sentence, tables={t.name: t for t in tables},
        figures={f.name: f for f in figures}, fragments=list(fragments),
        notes=[t.note for t in tables if t.empty] + [f.note for f in figures if f.note],
        paper=paper, notebook=notebook,
        views=tuple(dict.fromkeys(v for x in (*tables, *figures) for v in x.views)),
        runs=tuple(runs))
    return finish(output, context)
