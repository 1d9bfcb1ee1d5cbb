"""What a reproduction builds besides its runs: the executed experiment notebooks (early, while
the runs go on, and at the end) and the report notebook over this reproduction's runs; and
`make notebooks`, the same from the committed canonical runs."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from fleetprobe.drive.batch import Plan, PlannedRun, default_jobs, run_process
from fleetprobe.reproduction.record import CANONICAL, INDEX, RECORD, now, read_record, write_json


def notebook_command(source: Path, output: Path, *parameters: str) -> list[str]:
    return [sys.executable, "-m", "fleetprobe.base.notebooks", str(source), str(output),
            *parameters]


class EarlyNotebooks:
    """The experiment notebook of a `notebook: true` run, executed as soon as that run is
    complete (while longer runs go on) into the reproduction's `notebooks/`, as many at a
    time as there are cores (one at a time, the last were still queued a dozen seconds
    after the runs ended); `build_outputs` copies each into the report directory once every
    run is complete, so a reproduction that fails leaves `reports/` as it was."""

    def __init__(self, directory: Path, plan: Plan | None = None) -> None:
        self.directory = directory
        self._pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 1)
        self._futures: dict[str, tuple[str, Future]] = {}
        # the run each experiment's notebook shows (build_outputs: the plan's last one): a
        # sweep of twenty seeds executes its notebook once, not twenty times into one file
        self._shown = {run.experiment: run.key for run in plan.runs if run.notebook} \
            if plan is not None else None

    def submit(self, run: PlannedRun, run_id: str) -> None:
        source = Path("notebooks") / f"{run.experiment}.ipynb"
        if not (run.notebook and source.is_file()):
            return
        if self._shown is not None and self._shown.get(run.experiment) != run.key:
            return
        command = notebook_command(source, self.directory / "notebooks" / source.name,
                                   "-p", "run_dir", str(self.directory / "runs" / run_id))
        self._futures[run.experiment] = (run_id, self._pool.submit(run_process, command))

    def shows(self, experiment: str, run_id: str) -> bool:
        """True when this run's notebook was submitted here (done, running or queued)."""
        return self._futures.get(experiment, ("", None))[0] == run_id

    def executed(self) -> dict[str, tuple[str, Path]]:
        """experiment -> (the run it shows, the executed notebook), for those that passed."""
        self._pool.shutdown(wait=True)
        return {experiment: (run_id, self.directory / "notebooks" / f"{experiment}.ipynb")
                for experiment, (run_id, future) in self._futures.items()
                if future.result()[0] == 0}


# notebooks over every run under a traces root, like the report (no experiment of their own)
OVERVIEW_NOTEBOOKS = ("backends",)


def execute_notebooks(shown: dict[str, Path], traces_root: Path, out_dir: Path, jobs: int,
                      early: EarlyNotebooks | None = None) -> list[tuple[str, str]]:
    """`notebooks/<experiment>.ipynb` on each shown run and the report notebook over
    `traces_root`, side by side, into `out_dir`; the (name, output) of each that failed.
    A notebook `early` executed (or is executing) on the same run is copied, not rerun: the
    report notebook starts at once beside the early ones still going."""
    def on_run(experiment: str) -> tuple[str, list[str]]:
        return experiment, notebook_command(Path("notebooks") / f"{experiment}.ipynb",
                                            out_dir / f"{experiment}.ipynb",
                                            "-p", "run_dir", str(shown[experiment]))

    waiting = {e for e, run_dir in shown.items() if early and early.shows(e, run_dir.name)}
    items = [on_run(experiment) for experiment in sorted(shown) if experiment not in waiting
             and (Path("notebooks") / f"{experiment}.ipynb").is_file()]
    items.append(("report", notebook_command(
        Path("notebooks/report.ipynb"), out_dir / "report.ipynb",
        "-p", "traces_root", str(traces_root), "-p", "out_dir", str(out_dir))))
    items += [(name, notebook_command(Path("notebooks") / f"{name}.ipynb",
                                      out_dir / f"{name}.ipynb", "-p", "traces_root",
                                      str(traces_root)))
              for name in OVERVIEW_NOTEBOOKS if (Path("notebooks") / f"{name}.ipynb").is_file()]

    def execute(item: tuple[str, list[str]]) -> tuple[str, int, str]:
        name, command = item
        code, _, output = run_process(command)
        return name, code, output

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, min(jobs, (os.cpu_count() or 1) + 1))) as pool:
        results = list(pool.map(execute, items))
        staged = early.executed() if early is not None else {}
        copied = 0
        for experiment in sorted(waiting):
            if experiment in staged:  # executed while the runs went on
                out_dir.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(staged[experiment][1], out_dir / f"{experiment}.ipynb")
                copied += 1
            else:  # it failed there: once more here, where a failure is reported
                results.append(execute(on_run(experiment)))
    bad = [(name, output) for name, code, output in results if code != 0]
    for name, output in bad:
        print(f"FAILED  notebook {name}:\n{output.strip()}", flush=True)
    print(f"notebooks: {len(results) - len(bad)} executed into {out_dir}/ in "
          f"{time.monotonic() - started:.0f} s" + (f", {len(bad)} failed" if bad else "")
          + (f" ({copied} more executed while the runs went on)" if copied else ""),
          flush=True)
    return bad


def build_outputs(directory: Path, plan: Plan, out_dir: Path, jobs: int,
                  early: EarlyNotebooks | None = None) -> int:
    """The executed experiment notebooks of the plan's `notebook: true` runs, then the report
    notebook over this reproduction's runs only."""
    record = read_record(directory) or {}
    runs_dir = directory / "runs"
    shown = {}
    for run in plan.runs:
        state = record.get("runs", {}).get(run.key, {})
        if run.notebook and state.get("run_id"):
            shown[run.experiment] = runs_dir / state["run_id"]
    bad = execute_notebooks(shown, runs_dir, out_dir, jobs, early)
    if not bad:
        page = out_dir / "REPRODUCTION.md"
        if page.is_file():
            shutil.copyfile(page, directory / "REPRODUCTION.md")
        record["report"] = {"out_dir": str(out_dir), "built_at": now()}
        write_json(directory / RECORD, record)
    return 1 if bad else 0


def canonical_notebooks(traces: Path = CANONICAL, out_dir: Path = Path("reports")) -> int:
    """`make notebooks`: the executed experiment notebooks from the committed canonical runs
    (the runs canonical.json names for them), and the report."""
    index_path = traces / INDEX
    index = json.loads(index_path.read_text()) if index_path.is_file() else {"plans": {}}
    shown = {experiment: traces / run_id for plan in index["plans"].values()
             for experiment, run_id in (plan.get("notebooks") or {}).items()}
    # every experiment notebook is executed: one no plan names a run for shows the
    # committed run of the state the paper measured (else the latest complete run)
    for source in sorted(Path("notebooks").glob("*.ipynb")):
        if source.stem not in ("report", *OVERVIEW_NOTEBOOKS) and source.stem not in shown:
            run = notebook_run(traces, source.stem)
            if run is not None:
                shown[source.stem] = run
    bad = execute_notebooks(shown, traces, out_dir, default_jobs(fast=True))
    return 1 if bad else 0


PAPER_STATE = "memclaw-2026-05-30"


def notebook_run(traces: Path, experiment: str) -> Path | None:
    """The committed run an experiment's notebook shows when no plan names one: the latest
    complete run under the paper-state profile, else the latest complete run; None when the
    experiment has no complete run."""
    candidates = []
    for manifest_path in sorted(traces.glob("*/manifest.json")):
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("experiment") != experiment or not manifest.get("complete"):
            continue
        target = manifest.get("target") or {}
        paper_state = (target.get("label") or target.get("server_profile")) == PAPER_STATE
        candidates.append((paper_state, manifest.get("started_at") or "",
                           manifest_path.parent.name, manifest_path.parent))
    return max(candidates)[-1] if candidates else None


