"""`fleetprobe reproduce PLAN`: find or make the reproduction, run what it lacks on the chosen
executor, then build its notebooks and report. `--executor dask` imports Dask only here, on
demand: the default path never needs it installed."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from fleetprobe.drive.batch import default_jobs, load_plan
from fleetprobe.reproduction.outputs import EarlyNotebooks, build_outputs, canonical_notebooks
from fleetprobe.reproduction.record import (
    CANONICAL,
    RECORD,
    REPRODUCTIONS,
    find_resumable,
    new_reproduction,
)
from fleetprobe.reproduction.serial import Executor, run_plan

EXECUTORS = ("local", "dask")
RATE_BOUND_THREADS = 8  # runs per local Dask worker at the paper's rate limits


def make_executor(name: str, address: str | None, workers: int | None,
                  threads: int | None = None, fast: bool = False) -> Executor | None:
    """None for the default (the serial path builds its own); a Dask client otherwise. A
    local worker runs one run at a time when runs are CPU-bound (fast), else several: at the
    paper's rate limits a run mostly waits."""
    if name == "local":
        return None
    if name == "dask":
        from fleetprobe.reproduction.dask_runs import DaskRuns

        return DaskRuns(address=address, workers=workers,
                        threads=threads or (1 if fast else RATE_BOUND_THREADS))
    raise ValueError(f"unknown executor {name!r}; known: {', '.join(EXECUTORS)}")


def reproduce(plan_path: str | Path, *, fast: bool = False, fresh: bool = False,
              jobs: int | None = None, root: Path = REPRODUCTIONS,
              out_dir: Path = Path("reports"), executor: str = "local",
              address: str | None = None, workers: int | None = None,
              threads: int | None = None) -> int:
    plan = load_plan(plan_path, fast=fast)
    directory = None if fresh else find_resumable(root, plan.name, fast)
    runner = make_executor(executor, address, workers, threads, fast)
    # a cluster queues the tasks itself: one waiting caller thread per run
    jobs = jobs or (min(256, max(1, len(plan.runs))) if runner is not None
                    else default_jobs(fast))
    if directory is None:
        directory = new_reproduction(root, plan, fast, jobs)
    else:
        print(f"resuming {directory} (only its missing or failed runs); --fresh to start over",
              flush=True)
    early = EarlyNotebooks(directory, plan)
    complete = run_plan(directory, plan, fast, jobs, early, runner)
    if not complete:
        early.executed()  # let the notebooks it started finish
        print(f"not every run completed: see {directory / RECORD}, the logs in "
              f"{directory / 'logs'} and the failed attempts in {directory / 'failed'}; the "
              "report was not rebuilt. Run the same command again to rerun only those.",
              file=sys.stderr, flush=True)
        return 1
    code = build_outputs(directory, plan, out_dir, jobs, early)
    print(f"reproduction {directory} {'complete' if code == 0 else 'ran, report FAILED'}; "
          f"report in {out_dir}/ (back to the committed evidence: `make report` or "
          f"`git checkout -- {out_dir}`)", flush=True)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["notebooks"] and len(args) <= 3:
        traces = Path(args[1]) if len(args) > 1 else CANONICAL
        out = Path(args[2]) if len(args) > 2 else Path("reports")
        return canonical_notebooks(traces, out)
    print("usage: python -m fleetprobe.reproduction notebooks [TRACES [OUT]]", file=sys.stderr)
    return 2
