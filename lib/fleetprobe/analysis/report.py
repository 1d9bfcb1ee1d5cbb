"""Every table, figure and the paper-versus-reproduction page, from the traces alone.

    python -m fleetprobe report [--traces data/traces] [--out reports] [--run RUN_ID ...]

The report composes the registered sections (`fleetprobe.analysis.sections.REGISTRY`): each
is built in a process of its own (they share nothing but the traces), and their outputs are
put together in registration order, so the files are the same bytes however the processes
were scheduled. REPRODUCTION.md is the sections' Markdown fragments in order; index.html is the
summary, then each section's HTML fragment.

By default each experiment and profile is represented by its latest complete run at paper
scale with the paper's configuration (paper_values.yaml `headline_params`; runs with other
knobs are ablations, shown in the ablation tables); `--run RUN_ID` (repeatable) makes a named
run, ablation or not, the canonical one for its experiment and profile instead.
"""

from __future__ import annotations

import argparse
import importlib
import os
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from fleetprobe.analysis import html_report, sections
from fleetprobe.analysis.base import database_cache, db, workers
from fleetprobe.analysis.base.section import REPRODUCTION, Context, SectionOutput, compose

SECTIONS_PACKAGE = "fleetprobe.analysis.sections"
# Sections in the order they are handed to the processes: the longest first (CPU seconds
# as `make bench-report` prints them), so the two cores finish together; a section not named
# here goes last. The order of the output never depends on it.
LONGEST_FIRST = ("dynamics", "matrix", "backends", "leakage", "fidelity", "propagation",
                 "verdict", "live_targets", "contradiction", "separation", "scale",
                 "provenance", "faults", "embedder")


def build_section(key: str, context: Context) -> SectionOutput:
    """One registered section, built from the traces (in whichever process runs it)."""
    started = time.process_time()
    module = importlib.import_module(f"{SECTIONS_PACKAGE}.{sections.REGISTRY[key]}")
    output = module.build(context)
    output.data["unreadable"] = list(context.unreadable)
    output.cpu_seconds = time.process_time() - started
    return output


def build_sections(context: Context, keys: Sequence[str], jobs: int | None = None,
                   ) -> dict[str, SectionOutput]:
    """{key: output} in `keys` order; built in `jobs` processes (default: one per core;
    1: in this process, one after the other). The traces are parsed once, into a DuckDB
    file every section opens read-only (kept for the next build from the same traces:
    `database_cache`)."""
    jobs = jobs or os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="fleetprobe-report-") as scratch:
        if jobs <= 1:
            database = database_cache.database(context.traces_root, Path(scratch))
            context = replace(context, database=database)
            return {key: build_section(key, context) for key in keys}
        rank = {k: i for i, k in enumerate(LONGEST_FIRST)}
        order = sorted(keys, key=lambda k: rank.get(k, len(rank)))
        # the forkserver does its imports while this process finds or loads the traces
        mp_context = workers.start()
        database = database_cache.database(context.traces_root, Path(scratch))
        with ProcessPoolExecutor(max_workers=min(jobs, len(keys)),
                                 mp_context=mp_context) as pool:
            context = replace(context, database=database)
            futures = {key: pool.submit(build_section, key, context) for key in order}
            return {key: futures[key].result() for key in keys}


def build(traces_root: Path, out_dir: Path, run_ids: Sequence[str] | None = None,
          jobs: int | None = None) -> dict[str, Any]:
    """Write reports/tables, reports/figures, reports/REPRODUCTION.md, MATRIX.md and
    reports/index.html; return what was written, the verdicts and a note for everything that
    could not be drawn."""
    traces_root, out_dir = Path(traces_root), Path(out_dir)
    known = {db.read_manifest(d)["run_id"] for d in db.run_dirs(traces_root)}
    unknown = sorted(set(run_ids or ()) - known)
    if unknown:
        raise ValueError(f"no run named {', '.join(unknown)} under {traces_root}")
    out_dir.mkdir(parents=True, exist_ok=True)
    remove_old_figures(out_dir / "figures")
    context = Context(traces_root, out_dir, tuple(run_ids or ()))
    outputs = build_sections(context, list(sections.REGISTRY), jobs)
    reproduction = out_dir / REPRODUCTION
    reproduction.write_text(compose([f for o in outputs.values() for f in o.fragments],
                                    REPRODUCTION))
    verdict = outputs["verdict"].data
    unreadable = sorted({u for o in outputs.values() for u in o.data.pop("unreadable", ())})
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
           if k not in ("verdicts", "canonical")},
    }
    built["index"] = html_report.write_index(built)
    return built


FIGURE_SUFFIXES = (".png", ".pdf", ".svg")


def remove_old_figures(figures_dir: Path) -> None:
    """The figures an earlier build drew: every figure is drawn again, so a file left from
    a renamed figure or a dropped format would only be a stale picture the page could link."""
    if figures_dir.is_dir():
        for path in figures_dir.iterdir():
            if path.suffix in FIGURE_SUFFIXES and path.is_file():
                path.unlink()


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
