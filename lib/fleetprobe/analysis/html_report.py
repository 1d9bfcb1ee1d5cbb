"""reports/index.html: the reviewer's page, from what `report.build` wrote.

One self-contained file (inline CSS, no script, no CDN; figures are the relative PNG files
beside it), so it opens from file:// on a machine with no network. It shows the verdict table
(status coloured, the basis of each reproduced claim, each claim linked to its paper section
and to the trace folders of the runs it rests on), then every section of `SECTIONS` with its
sentence, tables and figures, then any table or figure no section names, the executed
notebooks and the runs.

A report module adds its own section with `register(Section(...))` at import time, naming
the tables and figures it shows: a name of `report.build`'s tables (`Table.name`) or figures
(`FigureOutput.name`), or else a file the module wrote under the output directory
(`tables/<name>.csv`, `figures/<name>.png`, or a relative path such as `tables/x.csv`); a name
found nowhere is shown as "not produced", never dropped silently. `captions` gives a file
figure its caption; a table file's note is the Section's `notes` entry.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from fleetprobe.analysis import sql_views

INDEX = "index.html"


@dataclass(frozen=True)
class Section:
    key: str
    title: str
    sentence: str
    tables: tuple[str, ...] = ()
    figures: tuple[str, ...] = ()
    paper: str = ""  # the paper section(s) it answers, e.g. "8.1; 9.1"
    captions: tuple[tuple[str, str], ...] = ()  # (figure name, caption) for figure files
    notes: tuple[tuple[str, str], ...] = ()  # (table name, note) for table files


SECTIONS: list[Section] = []


def register(section: Section) -> None:
    """Add a section (or replace the one with the same key, keeping its place)."""
    for i, known in enumerate(SECTIONS):
        if known.key == section.key:
            SECTIONS[i] = section
            return
    SECTIONS.append(section)


for _section in (
    Section("headline", "Table 2: headline results",
            "Each row of the paper's Table 2 beside the reproduced value from the canonical "
            "run of the state the paper measured, with the verdict and its basis.",
            tables=("table2",), paper="8"),
    Section("leakage", "Leakage",
            "Scope enforcement by path: the tenant key's GET-by-id exposure and the search "
            "leak per write/search variant (Fig. 2), search latency (Fig. 3), which variant "
            "gives the paper's 72/164, the agent-scoped GET-by-id probe and the remediation "
            "re-probe.",
            tables=("search_leak_hypothesis", "table3", "reprobe"),
            figures=("fig2_leakage_envelope", "fig3_search_latency"), paper="8.1; 9.1"),
    Section("provenance", "Provenance",
            "Fifty depth-4 chains walked back from the leaf: per-hop fetch latency of the "
            "paper-state run (Fig. 4), and paced versus unthrottled writes.",
            tables=("ablation_pacing",), figures=("fig4_hop_latency",), paper="8.2"),
    Section("propagation", "Propagation",
            "Visibility to fleet siblings and foreign readers (Fig. 5), the write-to-visible "
            "window of the tight-poll phase (Fig. 6) and redistribute by requester trust.",
            tables=("redistribute",), figures=("fig5_visibility", "fig6_window"),
            paper="8.3; 9.3"),
    Section("contradiction", "Contradiction",
            "Which gate rejected each write, detection per pair (sequential and concurrent) "
            "under the headline prose and its ablations, and the write latency (Fig. 7).",
            tables=("contradiction_admission", "ablation_contradiction"),
            figures=("fig7_write_latency",), paper="8.4; 9.2"),
    Section("profiles", "Profiles side by side",
            "The same metrics for every server profile, each from its canonical run: the "
            "state the paper measured, the remediation, the paper's proposals and an "
            "ungoverned store.",
            tables=("profiles",), paper="9"),
):
    register(_section)


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

CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5rem auto; max-width: 1400px;
       padding: 0 1rem; color: #222; line-height: 1.4; }
h1 { font-size: 1.6rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.6rem 0; font-size: 0.85rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.45rem; vertical-align: top;
         text-align: left; }
th { background: #f2f2f2; }
.scroll { overflow-x: auto; }
.status { font-weight: 600; white-space: nowrap; }
.reproduced { background: #d9f2d9; } .differs { background: #f9d6d5; }
.not-comparable { background: #eeeeee; } .not-measured { background: #fff2cc; }
.basis-mechanism { color: #1b5e20; } .basis-workload-construction { color: #8a4b00; }
.basis-interval-overlap-only { color: #b00020; }
figure { margin: 1rem 0; } figure img { max-width: 100%; height: auto;
         border: 1px solid #ddd; }
figcaption { font-size: 0.85rem; color: #444; max-width: 60rem; }
.note { font-size: 0.85rem; color: #555; max-width: 70rem; }
.missing { color: #8a4b00; font-style: italic; }
nav a { margin-right: 0.8rem; }
code { font-size: 0.85em; }
details.sql { font-size: 0.8rem; margin: 0.3rem 0 1rem; }
details.sql pre { background: #f7f7f7; padding: 0.5rem; overflow-x: auto; }
"""


# ------------------------------------------------------------------------------ page


def write_index(built: dict[str, Any]) -> Path:
    """Write out_dir/index.html for a `report.build` result; return its path."""
    out_dir = Path(built["out_dir"])
    path = out_dir / INDEX
    path.write_text(render(built), encoding="utf-8")
    return path


def render(built: dict[str, Any]) -> str:
    out_dir = Path(built["out_dir"])
    traces = Path(built["traces_root"])
    tables, figures = built["tables"], built["figures"]
    named_tables = {t for s in SECTIONS for t in s.tables}
    named_figures = {f for s in SECTIONS for f in s.figures}
    others = Section("other", "Other tables and figures",
                     "Written by the report but named by no section above.",
                     tuple(t for t in tables if t not in named_tables),
                     tuple(f for f in figures if f not in named_figures))
    sections = [*SECTIONS, *([others] if others.tables or others.figures else [])]
    body = [
        "<h1>Paper versus reproduction</h1>",
        "<p class='note'>Generated by <code>fleetprobe report</code> from the run traces "
        "only. Rates are <em>reproduced</em> when the paper's and the measured 95% Wilson "
        "intervals overlap; the <em>basis</em> column says what a reproduced claim rests on: "
        "<span class='basis-mechanism'>mechanism</span> (the server's rule gives the paper's "
        "count), <span class='basis-workload-construction'>workload construction</span> (the "
        "workload fixes the number whatever the system does) or "
        "<span class='basis-interval-overlap-only'>interval overlap only</span> (the point "
        "estimates differ). Latencies are not comparable unless the target was live. "
        "<a href='REPRODUCTION.md'>REPRODUCTION.md</a> has the same verdicts as text.</p>",
        _nav(sections),
        *_notes(built.get("notes", [])),
        "<h2 id='verdict'>Verdict, claim by claim</h2>",
        _verdict_table(built["verdicts"], figures, tables, traces, out_dir),
    ]
    for section in sections:
        body.append(_section(section, tables, figures, out_dir))
    body += [_notebooks(out_dir), _runs(built.get("canonical"), traces, out_dir),
             _paper_sections()]
    return ("<!DOCTYPE html>\n<html lang='en'>\n<head>\n<meta charset='utf-8'>\n"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>\n"
            "<title>fleetprobe: paper versus reproduction</title>\n"
            f"<style>{CSS}</style>\n</head>\n<body>\n" + "\n".join(body) +
            "\n</body>\n</html>\n")


def _nav(sections: Iterable[Section]) -> str:
    links = [("verdict", "Verdict"), *((s.key, s.title) for s in sections),
             ("notebooks", "Notebooks"), ("runs", "Runs")]
    return "<nav>" + "".join(f"<a href='#{k}'>{_e(t)}</a>" for k, t in links) + "</nav>"


def _notes(notes: list[str]) -> list[str]:
    if not notes:
        return []
    return ["<ul class='note'>", *(f"<li>{_e(n)}</li>" for n in notes), "</ul>"]


def _verdict_table(verdicts, figures, tables, traces: Path, out_dir: Path) -> str:
    rows = []
    for v in verdicts:
        runs = ", ".join(f"<a href='{_e(_rel(traces / r, out_dir))}/'>{_e(r)}</a>"
                         for r in v.run_ids) or "-"
        status = _css(v.status)
        rows.append(
            f"<tr class='claim' id='claim-{_e(v.claim_id)}'><td>{_e(v.label)}</td>"
            f"<td>{_section_links(v.section, figures, tables)}</td><td>{_e(v.profile)}</td>"
            f"<td>{_e(v.paper)}</td><td>{_e(v.measured)}</td>"
            f"<td class='status {status}'>{_e(v.status)}</td>"
            f"<td class='basis-{_css(v.basis)}'>{_e(v.basis)}</td>"
            f"<td>{_e(v.reason)}</td><td>{runs}</td></tr>")
    head = "".join(f"<th>{h}</th>" for h in ("claim", "paper section", "profile", "paper",
                                             "measured", "status", "basis", "reason", "runs"))
    return (f"<div class='scroll'><table id='verdict-table'><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div>")


def _section_links(text: str, figures, tables) -> str:
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


def _section(section: Section, tables, figures, out_dir: Path) -> str:
    out = [f"<h2 id='{_e(section.key)}'>{_e(section.title)}</h2>",
           f"<p>{_e(section.sentence)}"
           + (f" (paper {_section_links(section.paper, {}, {})})" if section.paper else "")
           + "</p>"]
    captions, notes = dict(section.captions), dict(section.notes)
    for name in section.figures:
        figure = figures.get(name) or _figure_file(name, out_dir, captions.get(name, ""))
        out.append(_figure(name, figure, out_dir))
    for name in section.tables:
        table = tables.get(name) or _table_file(name, out_dir, notes.get(name, ""))
        out.append(_table(name, table, out_dir))
    return "\n".join(out)


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


def _figure_file(name: str, out_dir: Path, caption: str) -> _File | None:
    path = _find(name, out_dir, "figures", (".png", ".svg", ".jpg"))
    if path is None:
        return None
    pdf = path.with_suffix(".pdf")
    return _File(name, path.stem.replace("_", " "), caption=caption,
                 paths=(path, *((pdf,) if pdf.is_file() else ())))


def _table_file(name: str, out_dir: Path, note: str) -> _File | None:
    path = _find(name, out_dir, "tables", (".csv",))
    if path is None:
        return None
    frame = pd.read_csv(path, keep_default_na=False, dtype=str)
    return _File(path.stem, path.stem.replace("_", " "), frame, note)


def _figure(name: str, figure, out_dir: Path) -> str:
    if figure is None:
        return f"<p class='missing' id='fig-{_e(name)}'>{_e(name)}: not produced.</p>"
    png = next((p for p in figure.paths if Path(p).suffix == ".png"), None)
    if png is None:
        return f"<p class='missing' id='fig-{_e(name)}'>{_e(figure.title)}: {_e(figure.note)}</p>"
    pdf = next((p for p in figure.paths if Path(p).suffix == ".pdf"), None)
    src = _rel(Path(png), out_dir)
    links = f" <a href='{_e(src)}'>png</a>" + (
        f" <a href='{_e(_rel(Path(pdf), out_dir))}'>pdf</a>" if pdf else "")
    # the caption is drawn in the image; the page repeats it as the image's alt text only
    return (f"<figure id='fig-{_e(name)}'><img src='{_e(src)}' "
            f"alt='{_e(figure.title)}. {_e(figure.caption)}'>"
            f"<figcaption><strong>{_e(figure.title)}</strong> ({links.strip()})"
            f"</figcaption>{_sql(figure)}</figure>")


def _table(name: str, table, out_dir: Path) -> str:
    if table is None:
        return f"<p class='missing' id='table-{_e(name)}'>{_e(name)}: not produced.</p>"
    files = [f"<a href='tables/{_e(table.name)}.{ext}'>{ext}</a>" for ext in ("csv", "md", "tex")
             if (out_dir / "tables" / f"{table.name}.{ext}").is_file()]
    head = (f"<h3 id='table-{_e(name)}'>{_e(table.title)}"
            + (f" <small>({', '.join(files)})</small>" if files else "") + "</h3>")
    if table.empty:
        return f"{head}<p class='missing'>{_e(table.note)}</p>{_sql(table)}"
    frame = table.frame.astype(object).where(pd.notna(table.frame), "")
    rendered = frame.to_html(index=False, escape=True, border=0, classes="data")
    note = f"<p class='note'>{_e(table.note)}</p>" if table.note else ""
    return f"{head}<div class='scroll'>{rendered}</div>{note}{_sql(table)}"


def _sql(table) -> str:
    """The metric views a table or figure is computed from, folded (text of metrics.sql)."""
    return sql_views.details_html(getattr(table, "views", ()))


def _notebooks(out_dir: Path) -> str:
    books = sorted(p.name for p in out_dir.glob("*.ipynb"))
    items = "".join(f"<li><a href='{_e(b)}'>{_e(b)}</a></li>" for b in books)
    return ("<h2 id='notebooks'>Executed notebooks</h2>"
            + (f"<ul>{items}</ul>" if books else
               "<p class='missing'>No executed notebook in this folder yet (run "
               "<code>make reproduce</code> or <code>make report</code>).</p>"))


def _runs(canonical: pd.DataFrame | None, traces: Path, out_dir: Path) -> str:
    out = ["<h2 id='runs'>Canonical runs and their trace folders</h2>"]
    if canonical is None or canonical.empty:
        return "\n".join([*out, "<p class='missing'>No runs in the traces.</p>"])
    rows = "".join(
        f"<tr><td>{_e(r.experiment)}</td><td>{_e(r.profile)}</td><td>{_e(r.target_kind)}</td>"
        f"<td><a href='{_e(_rel(traces / r.run_id, out_dir))}/'>{_e(r.run_id)}</a></td>"
        f"<td>{_e(r.basis)}</td></tr>"
        for r in canonical.sort_values(["experiment", "profile"]).itertuples())
    out.append("<table><thead><tr><th>experiment</th><th>profile</th><th>target</th>"
               f"<th>run (trace folder)</th><th>chosen as</th></tr></thead><tbody>{rows}"
               "</tbody></table>")
    return "\n".join(out)


def _paper_sections() -> str:
    items = "".join(f"<li id='paper-{_e(k)}'>&sect;{_e(k)} {_e(v)}</li>"
                    for k, v in PAPER_SECTIONS.items())
    return ("<h2 id='paper'>Paper sections cited</h2><p class='note'>\"Governed Shared Memory "
            f"for Multi-Agent LLM Systems\", by section number.</p><ul>{items}</ul>")


# ------------------------------------------------------------------------------ helpers


def _rel(path: Path, start: Path) -> str:
    return Path(os.path.relpath(Path(path).resolve(), Path(start).resolve())).as_posix()


def _css(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


__all__ = ["INDEX", "SECTIONS", "Section", "register", "render", "write_index"]
