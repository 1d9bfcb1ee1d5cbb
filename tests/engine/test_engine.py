"""MemClaw's real open-source engine v2.29.0, started by the kit (`make test-engine`, CI).

The source is FLEETPROBE_ENGINE_SRC, else the v2.29.0 archive in ../shared/engines beside the
repo (conftest.py). The May commits of the paper's day: test_engine_may.py.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import httpx
import pytest

from fleetprobe.engine.source import inspect_source

from .conftest import (
    answers,
    check_leakage,
    fleetprobe,
    leakage_run,
    process_alive,
)

pytestmark = [pytest.mark.engine, pytest.mark.timeout(900)]


def test_up_status_leakage_down(engine_src: str, tmp_path: Path) -> None:
    """`engine up` builds (cold on a fresh machine) and starts the engine; `status` and
    /version name it; leakage runs against that instance through the CLI; `down` stops
    every process and removes the database."""
    commit = inspect_source(Path(engine_src)).commit
    fleetprobe("engine", "down", src=engine_src)  # a clean start, whatever ran before
    started = time.monotonic()
    state = json.loads(fleetprobe("engine", "up", "--json", src=engine_src).stdout)
    print(f"engine up (build if needed + start): {time.monotonic() - started:.1f} s; "
          f"services answered after {state['start_s']} s")
    try:
        assert state["commit"] == commit and state["version"] == "2.29.0"
        api = state["services"]["core-api"]
        assert httpx.get(api + "/api/v1/version").json() == {"version": "2.29.0"}
        status = fleetprobe("engine", "status", "--json", src=engine_src)
        [shown] = json.loads(status.stdout)
        assert shown["health"]["up"] is True and shown["health"]["version"] == "2.29.0"
        assert shown["health"]["answers"] == {"core-storage-api": 200, "core-api": 200}
        assert Path(shown["logs"]["core-api"]).stat().st_size > 0  # the services log there
        pids = list(shown["pids"].values())

        check_leakage(leakage_run(tmp_path, engine_src), engine_src, shared=True)
    finally:
        fleetprobe("engine", "down", src=engine_src)
    assert not any(answers(url + "/api/v1/version") for url in state["services"].values())
    assert not any(process_alive(pid) for pid in pids)
    assert not Path(state["pg_data"]).exists()  # the engine's database is gone too
    after = fleetprobe("engine", "status", src=engine_src, check=False)
    assert after.returncode == 1 and "no instance" in after.stdout


def test_run_starts_and_stops_its_own_engine(engine_src: str, tmp_path: Path) -> None:
    """With no instance up, a `target.kind: engine` run starts one of its own and stops it
    (and its PostgreSQL) when it ends."""
    fleetprobe("engine", "down", src=engine_src)
    run = leakage_run(tmp_path, engine_src)
    check_leakage(run, engine_src, shared=False)
    services = run["manifest"]["target"]["engine"]["services"]
    assert not any(answers(url + "/api/v1/version") for url in services.values())
    assert fleetprobe("engine", "status", src=engine_src, check=False).returncode == 1


def test_gate_key_required_and_never_written(engine_src: str, tmp_path: Path) -> None:
    """`--auth gate`: the engine refuses requests without the gate key from MEMCLAW_API_KEY,
    accepts them with it; a `target.auth: gate` run speaks through it; and the key is in no
    file the kit wrote (engine state, logs, the run's trace)."""
    key = "fp-test-gate-" + os.urandom(8).hex()
    fleetprobe("engine", "down", src=engine_src)
    up = fleetprobe("engine", "up", "--auth", "gate", "--json", src=engine_src,
                    env={"MEMCLAW_API_KEY": key})
    state = json.loads(up.stdout)
    try:
        api = state["services"]["core-api"] + "/api/v1/memories?limit=1"
        tenant = {"X-Tenant-ID": "fp-gate-test"}
        assert httpx.get(api, headers=tenant).status_code in (401, 403)
        assert httpx.get(api, headers={**tenant, "X-API-Key": key}).status_code == 200
        run = leakage_run(tmp_path, engine_src, "--set", "target.auth=gate",
                          env={"MEMCLAW_API_KEY": key})
        check_leakage(run, engine_src, shared=True, auth="gate")
        written = [p for folder in (Path(state["home"]), run["run_dir"])
                   for p in folder.rglob("*") if p.is_file()]
        assert len(written) > 3
        assert not any(key in p.read_text(errors="replace") for p in written)
        assert key not in up.stdout
    finally:
        fleetprobe("engine", "down", src=engine_src)
