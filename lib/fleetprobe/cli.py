"""`python -m fleetprobe run <experiment> --params FILE [--set key=value ...]`.

`run` prints the run directory on stdout (progress and errors go to stderr), so scripts can
do `RUN=$(python -m fleetprobe run provenance --params params/smoke/provenance.yaml)`.
`batch PLAN` runs every (experiment, profile) a plan file lists, in parallel processes.
`reproduce PLAN` does so into a reproduction directory of its own (resumable) and rebuilds the
report from it; `promote DIR` makes a complete reproduction the committed canonical runs.
`judge RUN [--policy FILE]` recomputes a recorded run's verdicts with no server (docs/judge.md).
`report` belongs to the analysis package (`fleetprobe.analysis.report.main`); `engine up|down|
status` to the engine package (`fleetprobe.engine.cli`, docs/engine.md).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from fleetprobe import reproduction
from fleetprobe.drive import judge
from fleetprobe.drive.batch import default_jobs, read_plan, run_batch
from fleetprobe.drive.judge import JudgeError
from fleetprobe.drive.run import run_experiment
from fleetprobe.harness.experiment import ParamsError, load_params
from fleetprobe.harness.targets import TargetError
from fleetprobe.oracle import policy
from fleetprobe.oracle.policy import PolicyFileError

EXIT_USAGE = 2
EXIT_FAILED = 1
EXIT_INCOMPLETE = 3  # the run ended but could not do all it planned (manifest says why)
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
    batch.add_argument("--jobs", type=int, default=None,
                       help=f"runs in parallel (default: JOBS or {default_jobs()} here)")
    batch.add_argument("--set", dest="overrides", action="append", default=[],
                       metavar="KEY=VALUE", help="override applied to every run")
    repro = commands.add_parser(
        "reproduce", help="a plan's runs into data/reproductions/<UTC>-<plan>/ (resumes an "
        "unfinished one), then the notebooks and report from those runs only")
    repro.add_argument("plan", help="plan YAML, e.g. params/reproduce.yaml")
    repro.add_argument("--fast", action="store_true",
                       help="rate limits lifted, one shared server per profile")
    repro.add_argument("--fresh", action="store_true", help="never resume; start a new one")
    repro.add_argument("--jobs", type=int, default=None,
                       help="runs in parallel (default: JOBS, else from the core count)")
    repro.add_argument("--executor", choices=reproduction.EXECUTORS, default="local",
                       help="where runs execute: local (default: this machine, no Dask) or "
                       "dask (a LocalCluster, or the scheduler at --address; docs/sweeps.md)")
    repro.add_argument("--address", default=None, metavar="tcp://HOST:PORT",
                       help="with --executor dask: a running scheduler instead of a local "
                       "cluster")
    repro.add_argument("--workers", type=int, default=None,
                       help="with --executor dask and no --address: local worker processes "
                       "(default: one per core)")
    repro.add_argument("--threads", type=int, default=None,
                       help="with --executor dask and no --address: runs at a time per local "
                       "worker (default 1 with --fast, else 8: rate-bound runs mostly wait)")
    repro.add_argument("--root", default=str(reproduction.REPRODUCTIONS),
                       help="where reproductions go (default data/reproductions)")
    repro.add_argument("--out", default="reports", help="report directory (default reports)")
    promote = commands.add_parser(
        "promote", help="replace the committed canonical runs of a reproduction's plan in "
        "data/traces by its runs (gzipped events)")
    promote.add_argument("reproduction", help="data/reproductions/<id>")
    promote.add_argument("--traces", default=str(reproduction.CANONICAL))
    promote.add_argument("--allow-fast", action="store_true",
                         help="promote a --fast reproduction (not the paper's rate limits)")
    judge = commands.add_parser(
        "judge", help="every verdict of recorded runs again, from their events, no server "
        "(docs/judge.md)")
    judge.add_argument("runs", nargs="+", metavar="RUN", help="run directory data/traces/<run>")
    judge.add_argument("--policy", default=None, metavar="FILE", help="policy YAML (default: "
                       "lib/fleetprobe/oracle/policy.yaml; copy it and edit)")
    judge.add_argument("--out", default=None, metavar="FILE", help="write the re-judged "
                       "events as JSON lines (one run only)")
    judge.add_argument("--check", action="store_true",
                       help="exit 1 when a re-judged verdict differs from the recorded one")
    judge.add_argument("--verbose", action="store_true",
                       help="value counts of every field, not only those that differ")
    commands.add_parser("report", help="tables and figures from existing traces",
                        add_help=False)
    commands.add_parser("engine", help="MemClaw's open-source engine on loopback: up, down, "
                        "status (docs/engine.md)", add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["report"]:
        return _report(argv[1:])
    if argv[:1] == ["engine"]:
        from fleetprobe.engine.cli import main as engine_main

        return engine_main(argv[1:])
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="fleetprobe: %(message)s")
    try:
        if args.command == "batch":
            return run_batch(read_plan(args.plan, args.overrides), args.overrides, args.jobs)
        if args.command == "reproduce":
            return reproduction.reproduce(args.plan, fast=args.fast, fresh=args.fresh,
                                          jobs=args.jobs, root=Path(args.root),
                                          out_dir=Path(args.out), executor=args.executor,
                                          address=args.address, workers=args.workers,
                                          threads=args.threads)
        if args.command == "promote":
            return reproduction.promote(args.reproduction, Path(args.traces), args.allow_fast)
        if args.command == "judge":
            return _judge(args)
        params = load_params(args.params, args.overrides)
        run_dir = run_experiment(args.experiment, params)
    except ParamsError as exc:
        print(f"fleetprobe: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (PolicyFileError, JudgeError) as exc:
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
    return _exit_code_of(run_dir)


def _exit_code_of(run_dir: Path) -> int:
    """0 for a complete run; EXIT_INCOMPLETE, with the manifest's reason on stderr, else."""
    manifest = json.loads((Path(run_dir) / "manifest.json").read_text(encoding="utf-8"))
    if manifest.get("complete"):
        return 0
    print(f"fleetprobe: the run is incomplete: {manifest.get('incomplete_reason')}",
          file=sys.stderr)
    return EXIT_INCOMPLETE


def _judge(args: argparse.Namespace) -> int:
    """`judge`: a summary per run on stdout; with --check, 1 when any verdict differs."""
    if args.out and len(args.runs) > 1:
        raise JudgeError("--out takes one run; judge the runs one at a time")
    tables = policy.load(args.policy) if args.policy else None
    differences = 0
    for run in args.runs:
        rejudged = judge.rejudge(run, tables)
        print(judge.summary(rejudged, args.verbose))
        differences += rejudged.differences
        if args.out:
            print(f"re-judged events: {judge.write_events(rejudged, args.out)}")
    return EXIT_FAILED if args.check and differences else 0


def _report(argv: list[str]) -> int:
    try:
        report = importlib.import_module("fleetprobe.analysis.report")
    except ImportError as exc:
        print(f"fleetprobe: report is not available yet ({exc})", file=sys.stderr)
        return EXIT_FAILED
    return int(report.main(argv) or 0)


if __name__ == "__main__":
    sys.exit(main())
