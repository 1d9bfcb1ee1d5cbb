"""Every table, figure and the paper-versus-reproduction page, from the traces alone.

    python -m fleetprobe report [--traces data/traces] [--out reports] [--run RUN_ID ...]

The report composes the registered sections (`fleetprobe.analysis.sections.REGISTRY`), whose
outputs the build room gives (`fleetprobe.analysis.build`: kept ones where their inputs are
unchanged, the others made now), in registration order, so the files are the same bytes
however they were made. REPRODUCTION.md is the sections' Markdown fragments in order;
index.html is the summary, then each section's HTML fragment; the build's writer writes them
with every section's files. `make report` builds by executing the report notebook
(`python -m fleetprobe.analysis.build`), and starts nothing when it and every file are current.

By default each experiment and profile is represented by its latest complete run at paper
scale with the paper's configuration (paper_values.yaml `headline_params`; runs with other
knobs are ablations, shown in the ablation tables); `--run RUN_ID` (repeatable) makes a named
run, ablation or not, the canonical one for its experiment and profile instead.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fleetprobe.analysis import html_report, sections
from fleetprobe.analysis.base import db
from fleetprobe.analysis.base.section import REPRODUCTION, Context, compose
from fleetprobe.analysis.build import runner, stamp, writer


def build(traces_root: Path, out_dir: Path, run_ids: Sequence[str] | None = None,
          jobs: int | None = None) -> dict[str, Any]:
    """Write reports/tables, reports/figures, reports/REPRODUCTION.md, MATRIX.md and
    reports/index.html; return what was written, the verdicts and a note for everything that
    could not be drawn. Sections whose inputs are unchanged since a kept build are not made
    again (`fleetprobe.analysis.build`)."""
    traces_root, out_dir = Path(traces_root), Path(out_dir)
    known = {db.read_manifest(d)["run_id"] for d in db.run_dirs(traces_root)}
    unknown = sorted(set(run_ids or ()) - known)
    if unknown:
        raise ValueError(f"no run named {', '.join(unknown)} under {traces_root}")
    context = Context(traces_root, out_dir, tuple(run_ids or ()))
    outputs = runner.outputs(context, list(sections.REGISTRY), jobs)
    reproduction = out_dir / REPRODUCTION
    verdict = outputs["verdict"].data
    unreadable = sorted({tuple(u) for o in outputs.values() for u in o.data["unreadable"]})
    notes = [f"{run}: {n} line(s) of events.jsonl are not JSON and were skipped (an "
             "interrupted write?)" for run, n in unreadable]
    notes += [n for o in outputs.values() for n in o.notes]
    if not known:
        notes.insert(0, f"No runs found under {traces_root}: run an experiment first "
                        "(make reproduce) or point --traces at a directory of runs.")
    built = {
        "traces_root": traces_root,
        "out_dir": out_dir,
        "sections": outputs,
        "tables": {n: t for o in outputs.values() for n, t in o.tables.items()},
        "figures": {n: f for o in outputs.values() for n, f in o.figures.items()},
        "reproduction": reproduction,
        "verdicts": verdict["verdicts"],
        "canonical": verdict["canonical"],
        "notes": notes,
        **{k: v for o in outputs.values() for k, v in o.data.items()
           if k not in ("verdicts", "canonical", "unreadable")},
    }
    files = {name: data for o in outputs.values() for name, data in o.files.items()}
    files[REPRODUCTION] = compose([f for o in outputs.values() for f in o.fragments],
                                  REPRODUCTION).encode()
    out_dir.mkdir(parents=True, exist_ok=True)  # the page lists the notebooks already there
    files[html_report.INDEX] = html_report.render(built).encode()
    for pages in (html_report.section_pages(built), html_report.verdict_pages(built)):
        files.update({name: text.encode() for name, text in pages.items()})
    writer.write(out_dir, files)
    stamp.record_files(out_dir, files)
    built["index"] = out_dir / html_report.INDEX
    return built


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="fleetprobe report",
        description="Tables, figures and REPRODUCTION.md from run traces (no server needed).")
    parser.add_argument("--traces", type=Path, default=Path("data/traces"),
                        help="directory of run directories (default: data/traces)")
    parser.add_argument("--out", type=Path, default=Path("reports"),
                        help="output directory (default: reports)")
    parser.add_argument("--run", dest="runs", action="append", default=None, metavar="RUN_ID",
                        help="use this run as canonical for its experiment and profile "
                             "(repeatable)")
    parser.add_argument("--jobs", type=int, default=None,
                        help="processes building sections (default: one per core)")
    args = parser.parse_args(argv)
    if not args.traces.is_dir():
        parser.error(f"--traces {args.traces} is not a directory of runs")
    try:
        built = build(args.traces, args.out, args.runs, args.jobs)
    except ValueError as error:
        parser.error(str(error))
    counts: dict[str, int] = {}
    for v in built["verdicts"]:
        counts[v.status] = counts.get(v.status, 0) + 1
    print(f"wrote {built['reproduction']}: " +
          ", ".join(f"{n} {status}" for status, n in counts.items()))
    print(f"tables in {args.out / 'tables'}, figures in {args.out / 'figures'}, "
          f"page {built['index']}")
    for note in built["notes"]:
        print(f"note: {note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
