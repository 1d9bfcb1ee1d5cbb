"""One `make reproduce` = one reproduction directory, resumable, and promotable.

    python -m fleetprobe reproduce params/reproduce.yaml [--fast] [--fresh] [--jobs N]
    python -m fleetprobe promote data/reproductions/<id>

A reproduction lives in `data/reproductions/<UTC>-<plan>[-fast]/` (not committed):

    reproduction.json   the plan it ran, fast or not, every run's status, attempts and run_id
    runs/<run_id>/      complete runs only: the report of this reproduction reads these
    failed/<key>.attempt<N>/   what a failed attempt left (incomplete trace, set-aside preflight)
    logs/<key>.attempt<N>.log  that attempt's own output (the server's output on start-up failure)
    REPRODUCTION.md     a copy of the report page built from runs/

An invocation resumes the latest reproduction *of the same plan and mode* that is not
complete, rerunning only the runs that are missing or failed; a complete one is never
touched, so a second invocation makes a fresh reproduction with the same rows. The report
(`reports/`) is built from this reproduction's `runs/` only. `promote` replaces the committed
canonical runs of the plan in `data/traces/` by this reproduction's runs (events gzipped with
fixed bytes) and records which runs belong to which plan in `data/traces/canonical.json`.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import multiprocessing
import os
import shutil
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fleetprobe.batch import (
    Outcome,
    Plan,
    PlannedRun,
    default_jobs,
    load_plan,
    report_outcome,
    run_process,
    with_retry,
)
from fleetprobe.runner import ParamsError
from fleetprobe.trace import ENV_RUN_ID_REGISTRY, git_commit

REPRODUCTIONS = Path("data/reproductions")
CANONICAL = Path("data/traces")
INDEX = "canonical.json"
RECORD = "reproduction.json"
ENV_SHARED = "FLEETPROBE_SHARED_SERVERS"


# ------------------------------------------------------------------ the record


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_record(directory: Path) -> dict[str, Any] | None:
    try:
        record = json.loads((directory / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def find_resumable(root: Path, plan: str, fast: bool) -> Path | None:
    """The latest reproduction of this plan and mode, if it is not complete."""
    mine = []
    for directory in sorted(root.glob("*")) if root.is_dir() else []:
        record = read_record(directory)
        if record and record.get("plan") == plan and bool(record.get("fast")) == fast:
            mine.append((directory, record))
    if mine and not mine[-1][1].get("complete"):
        return mine[-1][0]
    return None


def new_reproduction(root: Path, plan: Plan, fast: bool, jobs: int) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    base = f"{stamp}-{plan.name}{'-fast' if fast else ''}"
    root.mkdir(parents=True, exist_ok=True)
    for n in range(1, 100):
        directory = root / (base if n == 1 else f"{base}-{n}")
        try:
            directory.mkdir()
        except FileExistsError:
            continue
        _write_json(directory / RECORD, {
            "plan": plan.name, "plan_file": str(plan.path), "fast": fast, "jobs": jobs,
            "created_at": _now(), "git_commit": git_commit(), "complete": False,
            "shared_servers": fast, "runs": {}, "report": None})
        return directory
    raise RuntimeError(f"could not create a reproduction directory under {root}")


# ------------------------------------------------------------------ running


class SharedServers:
    """Fast mode: one bundled server per distinct target (profile and server options),
    started by the first run that needs it and shared by every run of that target, each run
    in a tenant of its own (the rate limits are per tenant). Evidence runs do not share: a
    server busy with seven runs queues their requests, and GET p50 went from tens to hundreds
    of ms, so each starts its own (in its thread, under the machine-wide start slots). A
    server that fails to start fails that run's attempt with the server's output; the retry
    starts it again. Runs find a shared server in the environment
    (`targets.reference_target`)."""

    def __init__(self) -> None:
        self._servers: dict[str, Any] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def ensure(self, key: str, share_reference: bool = True) -> None:
        """Start the target's server unless it runs. A backend adapter is shared in every
        mode (one per backend x deployment x store x environment for the whole plan, each
        run in a tenant of its own: its start-up was a third of the plan's time); a bundled
        server only when `share_reference` (fast mode)."""
        from fleetprobe.targets import TargetParams, backend_server, server_launch
        from reference_server.launch.process import ReferenceServer

        target = TargetParams.model_validate_json(key)
        if target.kind == "backend":
            def launch() -> Any:
                return backend_server(target)
        elif target.kind == "reference" and share_reference:
            def launch() -> Any:
                return ReferenceServer(**server_launch(target))
        else:
            return
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            server = self._servers.get(key)
            if server is not None and server.running:
                return
            if server is not None:
                server.close()
            server = launch()
            try:
                server.start()
            except BaseException:
                server.close()
                raise
            with self._guard:
                self._servers[key] = server
                os.environ[ENV_SHARED] = json.dumps(
                    {k: {"base_url": s.base_url, "admin_key": s.admin_key, "auth": s.auth,
                         "gate_key": s.gate_key} for k, s in self._servers.items()})

    def close(self) -> None:
        for server in self._servers.values():
            server.close()
        self._servers.clear()
        os.environ.pop(ENV_SHARED, None)


class RunFailed(Exception):
    """A run that failed in a worker process, as plain text (the worker's own exception may
    not survive pickling back): the one-line reason and the worker's traceback."""

    def __init__(self, reason: str, details: str) -> None:
        super().__init__(reason, details)  # both in args: that is what pickling restores
        self.reason, self.details = reason, details

    def __str__(self) -> str:
        return self.reason


def _execute(experiment: str, params_file: str, settings: list[str],
             env: dict[str, str] | None = None) -> str:
    """One run (in a worker process, or this thread): its run directory, or RunFailed."""
    import traceback

    from fleetprobe.run import run_experiment
    from fleetprobe.runner import describe_failure, load_params

    os.environ.update(env or {})
    try:
        return str(run_experiment(experiment, load_params(params_file, settings)))
    except Exception as exc:  # noqa: BLE001 - sent back as text
        raise RunFailed(describe_failure(exc), traceback.format_exc()) from None


# What a worker process needs imported before it forks: the harness, the experiments and the
# per-run summary's analysis stack, so no run pays Python's start-up and imports again.
WORKER_PRELOAD = ["fleetprobe.run", "fleetprobe.experiments", "fleetprobe.analysis.base.summary"]


class WorkerProcesses:
    """Fast mode's runs, one per worker process. In threads of one process the CPU-bound
    harnesses shared one GIL: one core at most, and 739,000 context switches over a
    reproduction spent a third of its harness CPU taking turns. Workers fork from a server
    process that imported `WORKER_PRELOAD` once (forkserver: a clean single-threaded parent,
    unlike this process with its server and notebook threads). A worker that dies (killed,
    out of memory) breaks the pool: its attempt fails and the next gets a fresh pool."""

    def __init__(self, jobs: int) -> None:
        if "forkserver" in multiprocessing.get_all_start_methods():
            self._context = multiprocessing.get_context("forkserver")
            self._context.set_forkserver_preload(WORKER_PRELOAD)
        else:  # Windows: each worker imports the harness itself
            self._context = multiprocessing.get_context("spawn")
        self._jobs, self._lock = max(1, jobs), threading.Lock()
        self._pool = self._new_pool()

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(max_workers=self._jobs, mp_context=self._context)

    def run(self, experiment: str, params_file: str, settings: list[str]) -> Path:
        env = {k: os.environ[k] for k in (ENV_SHARED, ENV_RUN_ID_REGISTRY) if k in os.environ}
        pool = self._pool
        try:
            return Path(pool.submit(_execute, experiment, params_file, settings, env).result())
        except BrokenProcessPool:
            with self._lock:
                if self._pool is pool:
                    self._pool = self._new_pool()
            raise

    def close(self) -> None:
        self._pool.shutdown(cancel_futures=True)


def _attempt(directory: Path, run: PlannedRun, n: int, fast: bool,
             servers: SharedServers, workers: WorkerProcesses | None) -> tuple[int, str, str]:
    """One attempt at a run: its server (fast: shared, started on first use; else its own),
    then the experiment (fast: in a worker process; else in this thread, no Python start-up
    per run) into a work directory that moves to `runs/` when complete, or to `failed/`
    (named, inspectable) when not."""
    import traceback

    from fleetprobe.runner import describe_failure

    work = directory / "work" / run.key
    shutil.rmtree(work, ignore_errors=True)
    log = directory / "logs" / f"{run.key}.attempt{n}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    settings = run.settings([f"traces_root={work}", "progress=false"], fast)
    try:
        servers.ensure(run.target_key(fast=fast), share_reference=fast)
        run_dir = Path(workers.run(run.experiment, str(run.params_file), settings)
                       if workers is not None
                       else _execute(run.experiment, str(run.params_file), settings))
    except Exception as exc:  # noqa: BLE001 - recorded and retried
        failed = isinstance(exc, RunFailed)  # the run's own failure, else its server's
        log.write_text(exc.details if failed else traceback.format_exc(), encoding="utf-8")
        if work.exists():
            kept = directory / "failed" / f"{run.key}.attempt{n}"
            kept.parent.mkdir(exist_ok=True)
            shutil.rmtree(kept, ignore_errors=True)
            work.rename(kept)
        reason = exc.reason if failed else describe_failure(exc)
        return 1, f"{reason} (log: {log})", log.read_text()
    log.write_text(f"{run_dir}\n", encoding="utf-8")
    target = directory / "runs" / run_dir.name
    target.parent.mkdir(exist_ok=True)
    run_dir.rename(target)
    shutil.rmtree(work, ignore_errors=True)
    return 0, target.name, ""


def _complete(run_dir: Path) -> bool:
    try:
        return bool(json.loads((run_dir / "manifest.json").read_text()).get("complete"))
    except (OSError, ValueError):
        return False


def run_plan(directory: Path, plan: Plan, fast: bool, jobs: int,
             early: EarlyNotebooks | None = None) -> bool:
    """Run every run of the plan that this reproduction lacks; True when all are complete."""
    record = read_record(directory) or {}
    runs_state: dict[str, Any] = record.setdefault("runs", {})
    present = {p.name for p in (directory / "runs").glob("*")}
    todo = [run for run in plan.runs
            if not (runs_state.get(run.key, {}).get("status") == "ok"
                    and runs_state[run.key].get("run_id") in present)]
    done_before = len(plan.runs) - len(todo)
    print(f"reproduction {directory}: {len(todo)} run(s) to do"
          + (f", {done_before} kept from before" if done_before else "")
          + f", {jobs} at a time", flush=True)
    started = time.monotonic()
    servers, record_lock = SharedServers(), threading.Lock()
    os.environ[ENV_RUN_ID_REGISTRY] = str(directory / "run-ids")

    def one(run: PlannedRun) -> Outcome:
        before = runs_state.get(run.key, {}).get("attempts", 0)
        outcome = with_retry(lambda n: _attempt(directory, run, before + n, fast, servers,
                                                workers))
        runs_state[run.key] = {
            "label": run.label, "experiment": run.experiment, "profile": run.profile,
            "overrides": list(run.overrides), "notebook": run.notebook,
            "status": "ok" if outcome.code == 0 else "failed",
            "run_id": outcome.last_line if outcome.code == 0 else None,
            "error": None if outcome.code == 0 else outcome.last_line,
            "attempts": before + outcome.attempts}
        with record_lock:
            _write_json(directory / RECORD, record)
        report_outcome(run.label, outcome)
        if early is not None and outcome.code == 0:
            early.submit(run, outcome.last_line)
        return outcome

    workers = WorkerProcesses(min(jobs, len(todo))) if fast and todo else None
    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            outcomes = list(pool.map(one, todo))
    finally:
        if workers is not None:
            workers.close()
        servers.close()
        os.environ.pop(ENV_RUN_ID_REGISTRY, None)
    shutil.rmtree(directory / "work", ignore_errors=True)
    failed = sum(o.code != 0 for o in outcomes)
    print(f"runs: {len(todo) - failed} ok, {failed} failed in {time.monotonic() - started:.0f} s",
          flush=True)
    record["complete"] = all(runs_state.get(r.key, {}).get("status") == "ok" for r in plan.runs)
    _write_json(directory / RECORD, record)
    return bool(record["complete"])


def notebook_command(source: Path, output: Path, *parameters: str) -> list[str]:
    return [sys.executable, "-m", "fleetprobe.notebooks", str(source), str(output), *parameters]


class EarlyNotebooks:
    """The experiment notebook of a `notebook: true` run, executed as soon as that run is
    complete (while longer runs go on) into the reproduction's `notebooks/`, as many at a
    time as there are cores (one at a time, the last were still queued a dozen seconds
    after the runs ended); `build_outputs` copies each into the report directory once every
    run is complete, so a reproduction that fails leaves `reports/` as it was."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 1)
        self._futures: dict[str, tuple[str, Future]] = {}

    def submit(self, run: PlannedRun, run_id: str) -> None:
        source = Path("notebooks") / f"{run.experiment}.ipynb"
        if not (run.notebook and source.is_file()):
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
        record["report"] = {"out_dir": str(out_dir), "built_at": _now()}
        _write_json(directory / RECORD, record)
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


def reproduce(plan_path: str | Path, *, fast: bool = False, fresh: bool = False,
              jobs: int | None = None, root: Path = REPRODUCTIONS,
              out_dir: Path = Path("reports")) -> int:
    plan = load_plan(plan_path, fast=fast)
    jobs = jobs or default_jobs(fast)
    directory = None if fresh else find_resumable(root, plan.name, fast)
    if directory is None:
        directory = new_reproduction(root, plan, fast, jobs)
    else:
        print(f"resuming {directory} (only its missing or failed runs); --fresh to start over",
              flush=True)
    early = EarlyNotebooks(directory)
    complete = run_plan(directory, plan, fast, jobs, early)
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


# ------------------------------------------------------------------ promote


def gzip_bytes(data: bytes) -> bytes:
    """gzip with no file name and mtime 0: the same input gives the same bytes."""
    with contextlib.closing(__import__("io").BytesIO()) as buffer:
        with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0,
                           compresslevel=9) as zipped:
            zipped.write(data)
        return buffer.getvalue()


def promote(directory: str | Path, canonical: Path = CANONICAL, allow_fast: bool = False) -> int:
    directory = Path(directory)
    record = read_record(directory)
    if record is None:
        raise ParamsError(f"{directory} is not a reproduction (no {RECORD})")
    if not record.get("complete"):
        raise ParamsError(f"{directory} is not complete; run `make reproduce` again to finish it")
    if record.get("fast") and not allow_fast:
        raise ParamsError(f"{directory} ran with the rate limits lifted (--fast); the "
                          "canonical evidence is made at the paper's limits (--allow-fast "
                          "to promote it anyway)")
    plan = str(record["plan"])
    new_runs = sorted(s["run_id"] for s in record["runs"].values() if s.get("status") == "ok")
    canonical.mkdir(parents=True, exist_ok=True)
    index_path = canonical / INDEX
    index = json.loads(index_path.read_text()) if index_path.is_file() else {"plans": {}}
    plans: dict[str, Any] = index.setdefault("plans", {})
    if plan in plans:
        old = set(plans[plan]["runs"])
    else:  # runs committed before the index existed belong to no other plan
        claimed = {r for p in plans.values() for r in p["runs"]}
        old = {d.name for d in canonical.iterdir() if d.is_dir() and d.name not in claimed}
    clash = sorted(n for n in new_runs if (canonical / n).exists() and n not in old)
    if clash:
        raise ParamsError(f"{', '.join(clash)} already in {canonical} for another plan")
    for name in sorted(old):
        shutil.rmtree(canonical / name, ignore_errors=True)
    for name in new_runs:
        source, target = directory / "runs" / name, canonical / name
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir()
        for item in sorted(source.iterdir()):
            if item.name == "events.jsonl":
                (target / "events.jsonl.gz").write_bytes(gzip_bytes(item.read_bytes()))
            else:
                shutil.copyfile(item, target / item.name)
    notebooks = {s["experiment"]: s["run_id"] for s in record["runs"].values()
                 if s.get("notebook") and s.get("status") == "ok"}
    plans[plan] = {"reproduction": directory.name, "plan_file": record.get("plan_file"),
                   "fast": bool(record.get("fast")), "git_commit": record.get("git_commit"),
                   "runs": new_runs, "notebooks": dict(sorted(notebooks.items()))}
    _write_json(index_path, index)
    print(f"promoted {len(new_runs)} run(s) of plan {plan!r} into {canonical} "
          f"(replaced {len(old)}); now `make notebooks report` rebuilds reports/ from them")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["notebooks"] and len(args) <= 3:
        traces = Path(args[1]) if len(args) > 1 else CANONICAL
        out = Path(args[2]) if len(args) > 2 else Path("reports")
        return canonical_notebooks(traces, out)
    print("usage: python -m fleetprobe.reproduction notebooks [TRACES [OUT]]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
