"""Running a plan's runs into a reproduction: the record of each run, its attempts and their
retry, and the default executor (this machine: runs in threads, `--fast` ones in worker
processes beside shared servers). Another executor (`fleetprobe.reproduction.dask_runs`) plugs
in through `Executor`; the bookkeeping here (record, `runs/`, `failed/`, `logs/`) is the same
for every executor, so a reproduction can be resumed by either."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from fleetprobe.drive.batch import Outcome, Plan, PlannedRun, report_outcome, with_retry
from fleetprobe.harness.trace import ENV_RUN_ID_REGISTRY
from fleetprobe.reproduction.record import RECORD, read_record, write_json

if TYPE_CHECKING:
    from fleetprobe.reproduction.outputs import EarlyNotebooks

ENV_SHARED = "FLEETPROBE_SHARED_SERVERS"


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
        from fleetprobe.harness.targets import TargetParams, backend_server, server_launch
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

    from fleetprobe.drive.run import run_experiment
    from fleetprobe.harness.experiment import describe_failure, load_params

    os.environ.update(env or {})
    try:
        return str(run_experiment(experiment, load_params(params_file, settings)))
    except Exception as exc:  # noqa: BLE001 - sent back as text
        raise RunFailed(describe_failure(exc), traceback.format_exc()) from None


# What a worker process needs imported before it forks: the harness, the experiments and the
# per-run summary's analysis stack, so no run pays Python's start-up and imports again.
WORKER_PRELOAD = ["fleetprobe.drive.run", "fleetprobe.experiments",
                  "fleetprobe.analysis.base.summary"]


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


class Executor(Protocol):
    """Where a plan's attempts run. `attempt` returns (0, run id, "") once the run is in
    `runs/`, else (1, reason, log text) with what the attempt left under `failed/`."""

    name: str

    def attempt(self, directory: Path, run: PlannedRun, n: int, fast: bool
                ) -> tuple[int, str, str]: ...

    def describe(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


def attempt_log(directory: Path, key: str, n: int) -> Path:
    log = directory / "logs" / f"{key}.attempt{n}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    return log


def keep_failed(directory: Path, key: str, n: int, work: Path | None, reason: str) -> Path:
    """`failed/<key>.attempt<N>/`: what the attempt left (its incomplete trace, when it came
    back) and REASON.txt, so a failure is inspectable and never silent."""
    kept = directory / "failed" / f"{key}.attempt{n}"
    kept.parent.mkdir(exist_ok=True)
    shutil.rmtree(kept, ignore_errors=True)
    if work is not None and work.exists():
        work.rename(kept)
    kept.mkdir(exist_ok=True)
    (kept / "REASON.txt").write_text(reason + "\n", encoding="utf-8")
    return kept


def land(directory: Path, run_dir: Path) -> str:
    """A finished run's directory into `runs/` (what the report of this reproduction reads)."""
    target = directory / "runs" / run_dir.name
    target.parent.mkdir(exist_ok=True)
    shutil.rmtree(target, ignore_errors=True)
    run_dir.rename(target)
    return target.name


class LocalRuns:
    """The default executor: each attempt in a thread of this process, with its own server
    (fast: a shared one per target, the experiment in a worker process)."""

    name = "local"

    def __init__(self, fast: bool, jobs: int) -> None:
        self.servers = SharedServers()
        self.workers = WorkerProcesses(jobs) if fast else None

    def describe(self) -> dict[str, Any]:
        return {"kind": self.name}

    def attempt(self, directory: Path, run: PlannedRun, n: int, fast: bool
                ) -> tuple[int, str, str]:
        """Its server (fast: shared, started on first use; else its own), then the experiment
        (fast: in a worker process; else in this thread, no Python start-up per run) into a
        work directory that moves to `runs/` when complete, or to `failed/` when not."""
        import traceback

        from fleetprobe.harness.experiment import describe_failure

        work = directory / "work" / run.key
        shutil.rmtree(work, ignore_errors=True)
        log = attempt_log(directory, run.key, n)
        settings = run.settings([f"traces_root={work}", "progress=false"], fast)
        try:
            self.servers.ensure(run.target_key(fast=fast), share_reference=fast)
            run_dir = Path(self.workers.run(run.experiment, str(run.params_file), settings)
                           if self.workers is not None
                           else _execute(run.experiment, str(run.params_file), settings))
        except Exception as exc:  # noqa: BLE001 - recorded and retried
            failed = isinstance(exc, RunFailed)  # the run's own failure, else its server's
            log.write_text(exc.details if failed else traceback.format_exc(), encoding="utf-8")
            reason = exc.reason if failed else describe_failure(exc)
            keep_failed(directory, run.key, n, work, reason)
            return 1, f"{reason} (log: {log})", log.read_text()
        log.write_text(f"{run_dir}\n", encoding="utf-8")
        name = land(directory, run_dir)
        shutil.rmtree(work, ignore_errors=True)
        return 0, name, ""

    def close(self) -> None:
        if self.workers is not None:
            self.workers.close()
        self.servers.close()


def run_plan(directory: Path, plan: Plan, fast: bool, jobs: int,
             early: EarlyNotebooks | None = None, executor: Executor | None = None) -> bool:
    """Run every run of the plan that this reproduction lacks; True when all are complete."""
    record = read_record(directory) or {}
    runs_state: dict[str, Any] = record.setdefault("runs", {})
    # every run the plan (sweep) names: promotion checks each is here and complete
    record["planned"] = [run.key for run in plan.runs]
    present = {p.name for p in (directory / "runs").glob("*")}
    todo = [run for run in plan.runs
            if not (runs_state.get(run.key, {}).get("status") == "ok"
                    and runs_state[run.key].get("run_id") in present)]
    done_before = len(plan.runs) - len(todo)
    started = time.monotonic()
    record_lock = threading.Lock()
    os.environ[ENV_RUN_ID_REGISTRY] = str(directory / "run-ids")
    executor = executor or LocalRuns(fast and bool(todo), min(jobs, max(1, len(todo))))
    record["executor"] = executor.describe()
    print(f"reproduction {directory}: {len(todo)} run(s) to do"
          + (f", {done_before} kept from before" if done_before else "")
          + f", {jobs} at a time ({executor.name})", flush=True)

    def one(run: PlannedRun) -> Outcome:
        before = runs_state.get(run.key, {}).get("attempts", 0)
        outcome = with_retry(lambda n: executor.attempt(directory, run, before + n, fast))
        with record_lock:
            runs_state[run.key] = {
                "label": run.label, "experiment": run.experiment, "profile": run.profile,
                "overrides": list(run.overrides), "sweep": dict(run.sweep),
                "notebook": run.notebook,
                "status": "ok" if outcome.code == 0 else "failed",
                "run_id": outcome.last_line if outcome.code == 0 else None,
                "error": None if outcome.code == 0 else outcome.last_line,
                "attempts": before + outcome.attempts}
            write_json(directory / RECORD, record)
        report_outcome(run.label, outcome)
        if early is not None and outcome.code == 0:
            early.submit(run, outcome.last_line)
        return outcome

    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            outcomes = list(pool.map(one, todo))
    finally:
        executor.close()
        os.environ.pop(ENV_RUN_ID_REGISTRY, None)
    shutil.rmtree(directory / "work", ignore_errors=True)
    failed = sum(o.code != 0 for o in outcomes)
    print(f"runs: {len(todo) - failed} ok, {failed} failed in {time.monotonic() - started:.0f} s",
          flush=True)
    record["complete"] = all(runs_state.get(r.key, {}).get("status") == "ok" for r in plan.runs)
    write_json(directory / RECORD, record)
    return bool(record["complete"])
