"""`python -m fleetprobe run <experiment> --params FILE [--set key=value ...]`.

`run` prints the run directory on stdout (progress and errors go to stderr), so scripts can
do `RUN=$(python -m fleetprobe run provenance --params params/smoke/provenance.yaml)`.
`batch PLAN` runs every (experiment, profile) a plan file lists, in parallel processes.
`report` belongs to the analysis package (`fleetprobe.analysis.report.main`).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from fleetprobe.batch import read_plan, run_batch
from fleetprobe.runner import ParamsError, load_params, run_experiment
from fleetprobe.targets import TargetError

EXIT_USAGE = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fleetprobe", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run one experiment and print its run directory")
    run.add_argument("experiment", help="provenance, leakage, contradiction, propagation, matrix")
    run.add_argument("--params", required=True, help="params YAML (params/<target>/<exp>.yaml)")
    run.add_argument("--set", dest="overrides", action="append", default=[],
                     metavar="KEY=VALUE", help="override a param, e.g. --set seed=7 "
                     "--set pace_writes_per_s=null (repeatable; dotted keys for nesting)")
    batch = commands.add_parser(
        "batch", help="the runs a plan file lists (e.g. params/reproduce.yaml), in parallel")
    batch.add_argument("plan", help="YAML with a `runs:` list of experiment/params/profiles/set")
    batch.add_argument("--jobs", type=int, default=16, help="runs in parallel (default 16)")
    batch.add_argument("--set", dest="overrides", action="append", default=[],
                       metavar="KEY=VALUE", help="override applied to every run")
    commands.add_parser("report", help="tables and figures from existing traces",
                        add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["report"]:
        return _report(argv[1:])
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="fleetprobe: %(message)s")
    try:
        if args.command == "batch":
            return run_batch(read_plan(args.plan, args.overrides), args.overrides, args.jobs)
        params = load_params(args.params, args.overrides)
        run_dir = run_experiment(args.experiment, params)
    except ParamsError as exc:
        print(f"fleetprobe: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except TargetError as exc:
        print(f"fleetprobe: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("fleetprobe: interrupted; the trace so far is kept and marked incomplete",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    print(run_dir)
    return 0


def _report(argv: list[str]) -> int:
    try:
        report = importlib.import_module("fleetprobe.analysis.report")
    except ImportError as exc:
        print(f"fleetprobe: report is not available yet ({exc})", file=sys.stderr)
        return EXIT_FAILED
    return int(report.main(argv) or 0)


if __name__ == "__main__":
    sys.exit(main())
