"""`python -m fleetprobe run <experiment> --params FILE [--set key=value ...]`.

`run` prints the run directory on stdout (progress and errors go to stderr), so scripts can
do `RUN=$(python -m fleetprobe run provenance --params params/smoke/provenance.yaml)`.
`report` belongs to the analysis package (`fleetprobe.analysis.report.main`).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fleetprobe.runner import ParamsError, load_params, registered_experiments, run_experiment
from fleetprobe.targets import TargetError

EXIT_USAGE = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fleetprobe", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run one experiment and print its run directory")
    run.add_argument("experiment", help="provenance, leakage, contradiction, propagation")
    run.add_argument("--params", required=True, help="params YAML (params/<target>/<exp>.yaml)")
    run.add_argument("--set", dest="overrides", action="append", default=[],
                     metavar="KEY=VALUE", help="override a param, e.g. --set seed=7 "
                     "--set pace_writes_per_s=null (repeatable; dotted keys for nesting)")
    canon = commands.add_parser(
        "canonical", help="paper-scale runs of every registered experiment for each profile")
    canon.add_argument("--params-dir", default="params/reference")
    canon.add_argument("--profiles", nargs="+", required=True, metavar="PROFILE")
    canon.add_argument("--set", dest="overrides", action="append", default=[],
                       metavar="KEY=VALUE", help="override applied to every run")
    canon.add_argument("--jobs", type=int, default=8, help="runs in parallel (default 8)")
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
        if args.command == "canonical":
            return _canonical(args.params_dir, args.profiles, args.overrides, args.jobs)
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


def _canonical(params_dir: str, profiles: Sequence[str], overrides: Sequence[str],
               jobs: int) -> int:
    """One run per (profile, registered experiment with a params file in params_dir).

    Runs go in parallel, each its own `fleetprobe run` process with its own bundled server and
    tenant: they are bound by the paper's rate limits, not by CPU, so parallel runs measure
    the same thing sequential ones would, in a fraction of the time."""
    commands: list[list[str]] = []
    for profile in profiles:
        for name in registered_experiments():
            path = Path(params_dir) / f"{name}.yaml"
            if not path.exists():
                print(f"fleetprobe: no {path}; skipping {name}", file=sys.stderr)
                continue
            load_params(path, [*overrides, f"target.profile={profile}"])  # fail fast on bad params
            sets = [arg for o in [*overrides, f"target.profile={profile}"] for arg in ("--set", o)]
            commands.append([sys.executable, "-m", "fleetprobe", "run", name, "--params",
                             str(path), *sets])
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        outcomes = list(pool.map(_run_quietly, commands))
    for command, (code, out) in zip(commands, outcomes, strict=True):
        label = f"{command[4]} {command[-1].removeprefix('target.profile=')}"
        print(f"{'ok' if code == 0 else f'FAILED ({code})'}  {label}  {out}", flush=True)
    return 0 if all(code == 0 for code, _ in outcomes) else EXIT_FAILED


def _run_quietly(command: list[str]) -> tuple[int, str]:
    """Run one experiment process; its run directory, or its last error line."""
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = (done.stdout if done.returncode == 0 else done.stderr).strip().splitlines()
    return done.returncode, lines[-1] if lines else ""


def _report(argv: list[str]) -> int:
    try:
        report = importlib.import_module("fleetprobe.analysis.report")
    except ImportError as exc:
        print(f"fleetprobe: report is not available yet ({exc})", file=sys.stderr)
        return EXIT_FAILED
    return int(report.main(argv) or 0)


if __name__ == "__main__":
    sys.exit(main())
