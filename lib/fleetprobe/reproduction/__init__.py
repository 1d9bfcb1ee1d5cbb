"""One `make reproduce` = one reproduction directory, resumable, and promotable.

    python -m fleetprobe reproduce params/reproduce.yaml [--fast] [--fresh] [--jobs N]
                                   [--executor dask [--address tcp://HOST:8786]]
    python -m fleetprobe promote data/reproductions/<id>

A reproduction lives in `data/reproductions/<UTC>-<plan>[-fast]/` (not committed):

    reproduction.json   the plan it ran, fast or not, every run's status, attempts and run_id,
                        the runs the plan (sweep) names, the executor
    runs/<run_id>/      complete runs only: the report of this reproduction reads these
    failed/<key>.attempt<N>/   what a failed attempt left (incomplete trace, REASON.txt)
    logs/<key>.attempt<N>.log  that attempt's own output (the server's output on start-up failure)
    REPRODUCTION.md     a copy of the report page built from runs/

An invocation resumes the latest reproduction *of the same plan and mode* that is not
complete, rerunning only the runs that are missing or failed; a complete one is never
touched, so a second invocation makes a fresh reproduction with the same rows. The report
(`reports/`) is built from this reproduction's `runs/` only.

The modules: `record` (the directory and reproduction.json), `serial` (running the plan's
runs, the default executor), `dask_runs` (the Dask executor, imported only when asked for),
`outputs` (notebooks and report), `promote`, `driver` (the command).
"""

from fleetprobe.reproduction.driver import EXECUTORS, main, make_executor, reproduce
from fleetprobe.reproduction.outputs import (
    OVERVIEW_NOTEBOOKS,
    PAPER_STATE,
    EarlyNotebooks,
    build_outputs,
    canonical_notebooks,
    execute_notebooks,
    notebook_command,
    notebook_run,
)
from fleetprobe.reproduction.promote import gzip_bytes, incomplete_runs, promote
from fleetprobe.reproduction.record import (
    CANONICAL,
    INDEX,
    RECORD,
    REPRODUCTIONS,
    find_resumable,
    new_reproduction,
    read_record,
)
from fleetprobe.reproduction.serial import (
    ENV_SHARED,
    WORKER_PRELOAD,
    LocalRuns,
    RunFailed,
    SharedServers,
    WorkerProcesses,
    run_plan,
)

__all__ = [
    "CANONICAL", "ENV_SHARED", "EXECUTORS", "INDEX", "OVERVIEW_NOTEBOOKS", "PAPER_STATE", "RECORD",
    "REPRODUCTIONS", "WORKER_PRELOAD", "EarlyNotebooks", "LocalRuns", "RunFailed",
    "SharedServers", "WorkerProcesses", "build_outputs", "canonical_notebooks",
    "execute_notebooks", "find_resumable", "gzip_bytes", "incomplete_runs", "main",
    "make_executor", "new_reproduction", "notebook_command", "notebook_run", "promote",
    "read_record", "reproduce", "run_plan",
]
