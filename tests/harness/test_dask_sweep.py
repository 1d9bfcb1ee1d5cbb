"""`reproduce --executor dask`: a swept plan on a LocalCluster, resumed through a scheduler
address with the traces handed back as bytes; a worker killed mid-run (slow tier); and the
default path never importing Dask."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

# in the dev lock, so `make setup` installs it: a missing install fails here, never skips
import distributed
import pytest
import yaml

from fleetprobe.drive.batch import PlannedRun, load_plan
from fleetprobe.reproduction import RECORD, new_reproduction, promote, run_plan
from fleetprobe.reproduction.dask_runs import DaskRuns

from .traces import REPO

SMOKE = str(REPO / "params/smoke/provenance.yaml")


def swept_plan(tmp_path: Path, seeds: str, settings: list[str]) -> Path:
    plan = tmp_path / "swept.yaml"
    plan.write_text(yaml.safe_dump({"name": "swept", "runs": [{
        "experiment": "provenance", "params": SMOKE, "profiles": ["memclaw-2026-05-30"],
        "set": settings, "seeds": seeds}]}))
    return plan


def manifest(directory: Path, run_id: str) -> dict[str, Any]:
    return json.loads((directory / "runs" / run_id / "manifest.json").read_text())


class LosesSeed(DaskRuns):
    """A local cluster on which every attempt at one seed is lost before it is submitted."""

    def __init__(self, seed: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seed = seed

    def attempt(self, directory: Path, run: PlannedRun, n: int, fast: bool
                ) -> tuple[int, str, str]:
        if dict(run.sweep)["seed"] == self.seed:
            return 1, "worker lost: injected by the test", ""
        return super().attempt(directory, run, n, fast)


def test_a_swept_plan_runs_on_a_local_cluster_and_resumes_through_an_address(
        tmp_path: Path) -> None:
    plan = load_plan(swept_plan(tmp_path, "1..2", ["chains=2", "settle_s=0.05"]))
    directory = new_reproduction(tmp_path / "r", plan, fast=False, jobs=2)
    first = LosesSeed("2", workers=2)
    workers = set(first.describe()["workers"])
    assert len(workers) == 2
    assert run_plan(directory, plan, fast=False, jobs=2, executor=first) is False
    record = json.loads((directory / RECORD).read_text())
    assert record["executor"]["kind"] == "dask" and record["executor"]["local_cluster"]
    by_seed = {dict(r.sweep)["seed"]: r.key for r in plan.runs}
    done = record["runs"][by_seed["1"]]
    assert done["status"] == "ok"
    block = manifest(directory, done["run_id"])["executor"]
    assert block["worker"] in workers and block["transfer"] == "shared filesystem"
    assert block["host"] and block["python"] == sys.version.split()[0]
    assert block["packages"]["distributed"] == distributed.__version__
    lost = record["runs"][by_seed["2"]]
    assert (lost["status"], lost["attempts"]) == ("failed", 2)
    assert "worker lost" in lost["error"]
    with pytest.raises(Exception, match="not complete"):
        promote(directory, tmp_path / "traces")

    # the next invocation, on a scheduler named by address, runs only the lost seed; its
    # worker does not share this folder as far as the token says (transfer forced to bytes)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  protocol="tcp://", host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        second = DaskRuns(address=cluster.scheduler_address, transfer="bytes")
        assert run_plan(directory, plan, fast=False, jobs=2, executor=second) is True
        record = json.loads((directory / RECORD).read_text())
        assert record["executor"]["scheduler"] == cluster.scheduler_address
        assert not record["executor"]["local_cluster"]
        resumed = record["runs"][by_seed["2"]]
        assert (resumed["status"], resumed["attempts"]) == ("ok", 3)
        assert record["runs"][by_seed["1"]] == done  # kept, not rerun
        block = manifest(directory, resumed["run_id"])["executor"]
        assert block["transfer"] == "bytes" and block["worker"] in cluster.scheduler_info[
            "workers"]
        assert (directory / "runs" / resumed["run_id"] / "events.jsonl").stat().st_size > 0
    assert not (directory / "work").exists()
    assert promote(directory, tmp_path / "traces") == 0


def test_the_default_reproduce_path_never_imports_dask(tmp_path: Path) -> None:
    """What `make reproduce` runs (the CLI, the plan, the default executor), in a fresh
    process: Dask must not be imported, so a machine without it reproduces the paper."""
    plan = swept_plan(tmp_path, "1..1", ["chains=1", "settle_s=0.05"])
    script = f"""
import sys
from pathlib import Path
from fleetprobe import cli
from fleetprobe.drive.batch import load_plan
from fleetprobe.reproduction import new_reproduction, run_plan
plan = load_plan({str(plan)!r})
directory = new_reproduction(Path({str(tmp_path / "r")!r}), plan, fast=False, jobs=1)
assert run_plan(directory, plan, fast=False, jobs=1), "the run failed"
assert cli.build_parser().parse_args(["reproduce", "p.yaml"]).executor == "local"
dask = sorted(m for m in sys.modules if m.split(".")[0] in ("dask", "distributed"))
print("DASK", dask)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=REPO, check=False, timeout=240)
    assert done.returncode == 0, done.stderr
    assert "DASK []" in done.stdout


@pytest.mark.slow
def test_a_worker_killed_mid_run_ends_the_sweep_complete_by_retry_or_failed_with_the_reason(
        tmp_path: Path) -> None:
    """A worker process (and the server its run started) killed with SIGKILL while it runs an
    attempt: the attempt fails as a lost worker, with its reason under failed/, and the retry
    on another worker completes it; the plan is never silently short."""
    import psutil

    plan = load_plan(swept_plan(tmp_path, "1..3", ["chains=6", "settle_s=1.5"]))
    directory = new_reproduction(tmp_path / "r", plan, fast=False, jobs=3)
    executor = DaskRuns(workers=2)
    pids: dict[str, int] = executor.client.run(os.getpid)
    result: dict[str, bool] = {}
    runner = threading.Thread(target=lambda: result.update(
        complete=run_plan(directory, plan, fast=False, jobs=3, executor=executor)))
    runner.start()
    killed, killed_attempt = None, ""
    deadline = time.monotonic() + 120
    while killed is None and time.monotonic() < deadline and runner.is_alive():
        busy = {w: keys for w, keys in executor.client.processing().items() if keys}
        if busy and (directory / "work").is_dir() and any((directory / "work").iterdir()):
            time.sleep(1.0)  # into the run: its server started, events written
            worker, keys = next(iter(busy.items()))
            process = psutil.Process(pids[worker])
            for child in process.children(recursive=True):
                child.send_signal(signal.SIGKILL)
            process.send_signal(signal.SIGKILL)
            killed, _, rest = str(keys[0]).partition(".attempt")
            killed_attempt = rest.split("-")[0]
        time.sleep(0.2)
    runner.join(timeout=300)
    assert killed is not None, "no attempt was seen running"
    assert not runner.is_alive()
    record = json.loads((directory / RECORD).read_text())
    state = record["runs"][killed]
    reason = (directory / "failed" / f"{killed}.attempt{killed_attempt}" / "REASON.txt"
              ).read_text()
    assert "worker lost" in reason and "KilledWorker" in reason
    assert state["attempts"] >= 2
    if result["complete"]:  # retried elsewhere: every planned run is there
        assert state["status"] == "ok"
        assert len(list((directory / "runs").iterdir())) == len(plan.runs)
    else:  # or marked failed with why, and promotion refuses it
        assert state["status"] == "failed" and state["error"]
        with pytest.raises(Exception, match="not complete"):
            promote(directory, tmp_path / "traces")
