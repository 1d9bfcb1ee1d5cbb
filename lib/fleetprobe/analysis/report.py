"""Every table, figure and the paper-versus-reproduction page, from the traces alone.

    python -m fleetprobe report [--traces data/traces] [--out reports] [--run RUN_ID ...]

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

from fleetprobe.analysis import (
    backends_report,
    faults_report,
    figures,
    html_report,
    matrix_report,
    scale_report,
    separation_report,
    tables,
    verdict,
)
from fleetprobe.analysis.results import Results


def build(traces_root: Path, out_dir: Path, run_ids: Sequence[str] | None = None,
          ) -> dict[str, Any]:
    """Write reports/tables, reports/figures, reports/REPRODUCTION.md and reports/index.html;
    return what was written, the verdicts and a note for everything that could not be drawn."""
    out_dir = Path(out_dir)
    results = Results.load(Path(traces_root), run_ids)
    try:
        unknown = sorted(set(run_ids or ()) - set(results.runs.run_id))
        if unknown:
            raise ValueError(f"no run named {', '.join(unknown)} under {traces_root}")
        verdicts = verdict.judge_all(results)
        table_list = [*tables.build_tables(results, verdicts),
                      faults_report.faults_table(results), scale_report.scale_table(results)]
        table_paths = {t.name: tables.write_table(t, out_dir / "tables") for t in table_list}
        figure_outputs = figures.write_figures(results, out_dir / "figures")
        reproduction = verdict.write_reproduction(results, out_dir / "REPRODUCTION.md", verdicts)
        scale_report.append_section(reproduction, table_list[-1])
        faults_report.append_to_reproduction(results, reproduction)
        separation = separation_report.build(results, out_dir)  # not a paper claim: own section
        matrix = matrix_report.write(results.con, out_dir)  # reports/MATRIX.md (beyond the paper)
        notes = [f"{run}: {n} line(s) of events.jsonl are not JSON and were skipped "
                 "(an interrupted write?)" for run, n in results.con.execute(
                     "SELECT run_dir, lines FROM unreadable_lines ORDER BY run_dir").fetchall()]
        notes += [t.note for t in table_list if t.empty]
        notes += [f.note for f in figure_outputs.values() if f.note]
        notes += [separation.note] if separation.note else []
        backends = backends_report.write_backends_report(results, out_dir, traces_root)
        notes += backends["notes"]
        notes += [n for n in matrix.notes if n != matrix_report.NO_RUNS]  # MATRIX.md says so
        if results.runs.empty:
            notes.insert(0, f"No runs found under {traces_root}: run an experiment first "
                            "(make reproduce) or point --traces at a directory of runs.")
        built = {
            "traces_root": Path(traces_root),
            "out_dir": out_dir,
            "tables": {t.name: t for t in table_list},
            "table_paths": table_paths,
            "figures": figure_outputs,
            "reproduction": reproduction,
            "matrix": matrix,
            "verdicts": verdicts,
            "canonical": results.canonical,
            "separation": separation,
            "backends": backends,
            "notes": notes,
        }
        built["index"] = html_report.write_index(built)
        return built
    finally:
        results.con.close()


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
    args = parser.parse_args(argv)
    if not args.traces.is_dir():
        parser.error(f"--traces {args.traces} is not a directory of runs")
    try:
        built = build(args.traces, args.out, args.runs)
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
