"""A 20-run seed sweep (issue 38): serially, on a local Dask cluster of two workers on the same
machine, and (for context) on the kit's own executor two at a time. Prints each wall time,
the two-worker/serial ratio, and Dask's coordination cost per run:

- cluster start-up (scheduler and worker processes, once per sweep);
- overhead per run: (wall after start-up x workers - the runs' own seconds on their workers)
  / runs: every second a worker slot spent not running a run (scheduling, a worker's first
  import of the kit, handing the trace back, idle at the tail), per run;
- hand-back: from the end of a run on its worker to its directory in `runs/` (median).

Each run is the provenance experiment on the smoke params (its own reference server on
loopback, as in `make reproduce`), seeds 1..N; every mode writes a reproduction of its own
under a scratch folder. The 1-minute load average is printed before and after each mode:
on a shared machine the figures are only comparable at a similar load.

    .venv/bin/python benchmarks/bench_sweep.py [--runs 20] [--workers 2] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from fleetprobe.drive.batch import PlannedRun, load_plan
from fleetprobe.reproduction import RECORD, new_reproduction, run_plan

REPO = Path(__file__).resolve().parents[1]


def sweep_plan(folder: Path, runs: int, settings: list[str]) -> Path:
    plan = folder / "sweep.yaml"
    plan.write_text(yaml.safe_dump({"name": "bench-sweep", "runs": [{
        "experiment": "provenance", "params": str(REPO / "params/smoke/provenance.yaml"),
        "profiles": ["memclaw-2026-05-30"], "set": settings, "seeds": f"1..{runs}"}]}))
    return plan


def run_mode(name: str, plan_file: Path, root: Path, jobs: int,
             executor: Any = None) -> dict[str, Any]:
    plan = load_plan(plan_file)
    directory = new_reproduction(root / name, plan, fast=False, jobs=jobs)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    complete = run_plan(directory, plan, fast=False, jobs=jobs, executor=executor)
    wall = time.perf_counter() - started
    record = json.loads((directory / RECORD).read_text())
    if not complete:
        raise SystemExit(f"{name}: the sweep did not complete; see {directory}")
    return {"mode": name, "wall_s": round(wall, 2), "runs": len(plan.runs),
            "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2),
            "directory": str(directory), "record": record}


def dask_costs(result: dict[str, Any], landed: dict[str, float], startup_s: float,
               workers: int) -> dict[str, float]:
    directory = Path(result["directory"])
    seconds, hand_back = [], []
    for key, state in result["record"]["runs"].items():
        block = json.loads((directory / "runs" / state["run_id"] / "manifest.json"
                            ).read_text())["executor"]
        seconds.append(block["task_seconds"])
        hand_back.append(landed[key] - (block["task_started_at"] + block["task_seconds"]))
    after_startup = result["wall_s"]  # run_plan starts after the cluster is up
    overhead = (after_startup * workers - sum(seconds)) / len(seconds)
    return {"startup_s": round(startup_s, 2), "run_s_median": round(statistics.median(seconds), 2),
            "overhead_per_run_s": round(overhead, 2),
            "hand_back_median_ms": round(1000 * statistics.median(hand_back), 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--set", dest="settings", action="append", default=None,
                        help="overrides of every run (default: chains=4, settle_s=0.1)")
    parser.add_argument("--transfer", choices=("auto", "bytes"), default="auto")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    args.settings = args.settings or ["chains=4", "settle_s=0.1"]
    from fleetprobe.reproduction.dask_runs import DaskRuns

    class Timed(DaskRuns):
        """Notes when each run is in `runs/` (the caller's side of the hand-back)."""

        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.landed: dict[str, float] = {}

        def attempt(self, directory: Path, run: PlannedRun, n: int, fast: bool
                    ) -> tuple[int, str, str]:
            outcome = super().attempt(directory, run, n, fast)
            self.landed[run.key] = time.time()
            return outcome

    os.chdir(REPO)
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as scratch:
        root = Path(scratch)
        plan = sweep_plan(root, args.runs, args.settings)
        print(f"{args.runs}-run seed sweep ({', '.join(args.settings)}), "
              f"{os.cpu_count()} cores", flush=True)
        serial = run_mode("serial", plan, root, jobs=1)
        executor = Timed(workers=args.workers, transfer=args.transfer)
        startup = executor.startup_s
        on_dask = run_mode(f"dask-{args.workers}", plan, root, jobs=args.runs,
                           executor=executor)
        local = run_mode(f"local-{args.workers}", plan, root, jobs=args.workers)
        costs = dask_costs(on_dask, executor.landed, startup, args.workers)
    results = [serial, on_dask, local]
    for result in results:
        print(f"{result['mode']:>10}: {result['wall_s']:7.1f} s  "
              f"(load {result['load_before']} -> {result['load_after']})", flush=True)
    ratio = serial["wall_s"] / (on_dask["wall_s"] + startup)
    print(f"two-worker/serial speed-up: {ratio:.2f}x (serial {serial['wall_s']:.1f} s / "
          f"dask {on_dask['wall_s'] + startup:.1f} s with its {startup:.1f} s start-up)")
    print(f"dask coordination: start-up {costs['startup_s']} s; overhead "
          f"{costs['overhead_per_run_s']} s per run (run itself: median "
          f"{costs['run_s_median']} s); hand-back median {costs['hand_back_median_ms']} ms")
    if args.json:
        for result in results:
            result.pop("record")
        args.json.write_text(json.dumps({"results": results, "ratio": round(ratio, 3),
                                         "dask": costs, "transfer": args.transfer},
                                        indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
