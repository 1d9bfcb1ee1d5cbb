"""`reproduce PLAN --executor dask [--address tcp://HOST:8786]`: each attempt at a run is one
Dask task. The task starts the run's own loopback server (or engine, or backend adapter) on
its worker, runs the experiment there, stamps an `executor` block into the run's manifest and
hands the trace back: in place when the worker sees the reproduction's folder (a shared
filesystem, proven by a token file, not assumed), else as bytes (a tar.gz) that this process
unpacks. The record, `runs/`, `failed/` and `logs/` are kept by `serial.run_plan` as for the
default executor, so either can resume the other's reproduction.

A lost worker is an attempt that failed with the reason (`failed/<key>.attemptN/REASON.txt`),
retried once like any failed attempt; the local cluster's scheduler is told to give up on a
task at the first worker it kills (`allowed-failures` 0), so every loss shows in the record.
A scheduler of your own keeps its setting (Dask's default: three deaths, then KilledWorker).

Dask is imported here only, and only when this executor is built: `make reproduce` (the
default executor) runs without it.
"""

from __future__ import annotations

import io
import json
import logging
import os
import platform
import secrets
import shutil
import socket
import sys
import tarfile
import tempfile
import time
import traceback
from importlib import metadata
from pathlib import Path
from typing import Any

from fleetprobe.drive.batch import PlannedRun
from fleetprobe.harness.experiment import load_params
from fleetprobe.harness.trace import ENV_RUN_ID_REGISTRY
from fleetprobe.reproduction.serial import WORKER_PRELOAD, attempt_log, keep_failed, land

TOKEN_FILE = ".executor-token"
EXECUTOR_PACKAGES = ("fleetprobe", "dask", "distributed", "httpx", "fastapi", "uvicorn")
TRANSFERS = ("auto", "bytes")


def _versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in EXECUTOR_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _pack(root: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for item in sorted(root.iterdir()):
            archive.add(item, arcname=item.name)
    return buffer.getvalue()


def _unpack(data: bytes, into: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        archive.extractall(into, filter="data")  # no absolute paths or links out of `into`


def _stamp(root: Path, block: dict[str, Any]) -> None:
    """The executor block into every manifest the attempt left (the run's, or a partial one)."""
    for path in root.glob("**/manifest.json"):
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        manifest["executor"] = block
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(manifest, indent=2, default=str), encoding="utf-8")
        os.replace(tmp, path)


def run_task(experiment: str, params: dict[str, Any], key: str, attempt: int,
             directory: str, token: str, transfer: str) -> dict[str, Any]:
    """One attempt, on a Dask worker. Never raises for the run's own failure (the reason and
    the worker's traceback come back as text, with what the attempt left): an exception out
    of here means the worker or the cluster failed, not the run."""
    from fleetprobe.drive.run import run_experiment
    from fleetprobe.harness.experiment import describe_failure

    reproduction = Path(directory)
    try:
        shared = transfer != "bytes" and (reproduction / TOKEN_FILE).read_text() == token
    except OSError:
        shared = False
    if shared:  # the caller's folder: the trace lands in place, names reserved there
        work = reproduction / "work" / f"{key}.attempt{attempt}"
        shutil.rmtree(work, ignore_errors=True)
        registry = reproduction / "run-ids"
    else:  # this machine's own disk: names reserved among this worker machine's runs
        work = Path(tempfile.mkdtemp(prefix="fleetprobe-run-"))
        registry = Path(tempfile.gettempdir()) / f"fleetprobe-run-ids-{token}"
    os.environ[ENV_RUN_ID_REGISTRY] = str(registry)
    try:
        from distributed import get_worker

        worker = get_worker().address
    except (ImportError, ValueError):
        worker = None
    block: dict[str, Any] = {
        "kind": "dask", "worker": worker, "host": socket.gethostname(), "pid": os.getpid(),
        "python": sys.version.split()[0], "implementation": platform.python_implementation(),
        "platform": platform.platform(), "packages": _versions(), "attempt": attempt,
        "transfer": "shared filesystem" if shared else "bytes",
        "task_started_at": time.time()}
    started = time.monotonic()
    result: dict[str, Any] = {"ok": False, "shared": shared, "executor": block}
    try:
        run_dir = run_experiment(experiment, {**params, "traces_root": str(work)})
        result.update(ok=True, name=run_dir.name)
    except Exception as exc:  # noqa: BLE001 - sent back as text, the run's own failure
        result.update(reason=describe_failure(exc), details=traceback.format_exc())
    block["task_seconds"] = round(time.monotonic() - started, 3)
    _stamp(work, block)
    if shared:
        result["work"] = str(work)
    else:
        result["archive"] = _pack(work)
        shutil.rmtree(work, ignore_errors=True)
    return result


class DaskRuns:
    """The Dask executor: a scheduler at `address`, else a LocalCluster on loopback with
    `workers` worker processes (default: one per core), one thread each (`threads`: more for
    rate-bound runs at the paper's limits, which mostly wait)."""

    name = "dask"

    def __init__(self, address: str | None = None, workers: int | None = None,
                 threads: int = 1, transfer: str = "auto") -> None:
        try:
            import dask
            from distributed import Client, LocalCluster
        except ImportError as exc:  # the dev lock has it; a bare install may not
            raise RuntimeError("--executor dask needs Dask distributed: pip install "
                               "'distributed' (or `make setup`)") from exc
        if transfer not in TRANSFERS:
            raise ValueError(f"transfer must be one of {TRANSFERS}, not {transfer!r}")
        self.transfer, self.cluster = transfer, None
        # Dask logs every worker start and stop at INFO; a run's outcome is reported by the
        # plan's own lines, and a lost worker by its failed attempt
        logging.getLogger("distributed").setLevel(logging.ERROR)
        started = time.monotonic()
        if address:
            self.client = Client(address)
        else:
            with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
                # each worker imports the harness as it starts (as the default executor's
                # worker processes do), not inside its first run's time
                self.cluster = LocalCluster(
                    n_workers=workers or os.cpu_count() or 1, threads_per_worker=threads,
                    processes=True, host="127.0.0.1", dashboard_address=None,
                    preload=list(WORKER_PRELOAD))
            self.client = Client(self.cluster)
        self.startup_s = time.monotonic() - started
        self._tokens: dict[Path, str] = {}

    def describe(self) -> dict[str, Any]:
        workers = self.client.scheduler_info().get("workers", {})
        return {"kind": self.name, "scheduler": self.client.scheduler.address,
                "local_cluster": self.cluster is not None, "transfer": self.transfer,
                "workers": sorted(workers), "startup_s": round(self.startup_s, 3)}

    def _token(self, directory: Path) -> str:
        """A fresh token in the reproduction's folder: a worker that reads it back sees this
        folder (a shared filesystem), whatever its path looks like from there."""
        if directory not in self._tokens:
            token = secrets.token_hex(8)
            (directory / TOKEN_FILE).write_text(token, encoding="utf-8")
            self._tokens[directory] = token
        return self._tokens[directory]

    def attempt(self, directory: Path, run: PlannedRun, n: int, fast: bool
                ) -> tuple[int, str, str]:
        # resolved here: a worker needs the kit installed, not this checkout's params/ folder
        params = load_params(run.params_file, run.settings(["progress=false"], fast))
        log = attempt_log(directory, run.key, n)
        work = directory / "work" / f"{run.key}.attempt{n}"
        future = self.client.submit(
            run_task, run.experiment, params, run.key, n, str(directory.resolve()),
            self._token(directory), self.transfer, pure=False,
            key=f"{run.key}.attempt{n}-{secrets.token_hex(4)}")
        try:
            result = future.result()
        except Exception as exc:  # noqa: BLE001 - the worker or cluster, not the run
            reason = f"worker lost: {type(exc).__name__}: {exc}"
            log.write_text(f"{reason}\n{traceback.format_exc()}", encoding="utf-8")
            keep_failed(directory, run.key, n, work, reason)
            return 1, f"{reason} (log: {log})", log.read_text()
        if not result["shared"]:
            shutil.rmtree(work, ignore_errors=True)
            _unpack(result["archive"], work)
        where = result["executor"]
        if not result["ok"]:
            log.write_text(f"on {where['worker']} ({where['host']}):\n{result['details']}",
                           encoding="utf-8")
            keep_failed(directory, run.key, n, work, result["reason"])
            return 1, f"{result['reason']} (log: {log})", log.read_text()
        run_dir = work / result["name"]
        if (directory / "runs" / run_dir.name).exists():  # named on another machine alike
            reason = f"run id {run_dir.name} is another run's already (same second, seed)"
            keep_failed(directory, run.key, n, work, reason)
            return 1, reason, ""
        log.write_text(f"{run_dir}\n{json.dumps(where, indent=2)}\n", encoding="utf-8")
        name = land(directory, run_dir)
        shutil.rmtree(work, ignore_errors=True)
        return 0, name, ""

    def close(self) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()
