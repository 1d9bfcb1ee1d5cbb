"""MemClaw's real open-source engine, started by the kit (`make test-engine`, CI).

The source is FLEETPROBE_ENGINE_SRC, else the archive in ../shared/engines beside the repo.
Without a source or a Python >= 3.12 the tier skips, saying which is missing; under CI
(CI=true) it fails instead, so CI cannot pass without really running it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleetprobe.engine import EngineError
from fleetprobe.engine.python import find_python
from fleetprobe.engine.source import ENV_SRC, inspect_source

pytestmark = [pytest.mark.engine, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"the engine tier must run in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def engine_src() -> str:
    src = os.environ.get(ENV_SRC) or next(
        (str(p) for p in sorted((REPO.parent / "shared" / "engines").glob("caura-*.tar.gz"))),
        None)
    if not src:
        _unavailable(f"no engine source: set {ENV_SRC} or put the archive in "
                     f"{REPO.parent / 'shared' / 'engines'}")
    try:
        find_python()
    except EngineError as exc:
        _unavailable(str(exc))
    return src


def fleetprobe(*args: str, src: str, env: dict[str, str] | None = None,
               check: bool = True) -> subprocess.CompletedProcess:
    """The CLI as a user runs it, with the source in the environment."""
    proc = subprocess.run([sys.executable, "-m", "fleetprobe", *args], capture_output=True,
                          text=True, env={**os.environ, ENV_SRC: src, **(env or {})},
                          cwd=REPO, timeout=800)
    if check and proc.returncode != 0:
        raise AssertionError(f"fleetprobe {' '.join(args)} exited {proc.returncode}:\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def process_alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def leakage_run(tmp_path: Path, src: str, *settings: str,
                env: dict[str, str] | None = None) -> dict[str, Any]:
    started = time.monotonic()
    out = fleetprobe("run", "leakage", "--params", "params/engine/leakage.yaml",
                     "--set", f"traces_root={tmp_path}", *settings, src=src, env=env)
    run_dir = Path(out.stdout.strip().splitlines()[-1])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    print(f"leakage against the engine: {time.monotonic() - started:.1f} s wall")
    return {"manifest": manifest, "events": events, "run_dir": run_dir}


def check_leakage(run: dict[str, Any], commit: str, shared: bool,
                  auth: str = "headers") -> None:
    manifest, events = run["manifest"], run["events"]
    assert manifest["complete"] is True, manifest["incomplete_reason"]
    assert manifest["skipped"] == []
    assert manifest["executed"] == {**manifest["executed"], **manifest["planned"]}
    target = manifest["target"]
    assert target["kind"] == "engine"
    assert target["label"] == f"engine 2.29.0 @ {commit[:7]}"
    assert target["server_version"] == "2.29.0"  # what the engine's /version answered
    assert target["engine"]["commit"] == commit
    assert target["engine"]["version"] == "2.29.0"
    assert target["engine"]["rate_limits"]["search"] == "1000/second"
    assert target["engine"]["shared"] is shared
    assert target["auth"] == auth and target["engine"]["auth"] == auth
    # the engine answered the run's requests: writes created, searches and GETs answered
    writes = [e for e in events if e["phase"] == "write"]
    probes = [e for e in events if e["phase"] == "probe"]
    assert writes and all(e["status"] == 201 for e in writes), {e["status"] for e in writes}
    assert probes and all(e["status"] in (200, 404) for e in probes)
    assert sum(e["op"] == "POST /api/v1/search" for e in probes) > 0
    assert len(probes) == manifest["planned"]["probe"]


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

        check_leakage(leakage_run(tmp_path, engine_src), commit, shared=True)
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
    commit = inspect_source(Path(engine_src)).commit
    fleetprobe("engine", "down", src=engine_src)
    run = leakage_run(tmp_path, engine_src)
    check_leakage(run, commit, shared=False)
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
        check_leakage(run, state["commit"], shared=True, auth="gate")
        written = [p for folder in (Path(state["home"]), run["run_dir"])
                   for p in folder.rglob("*") if p.is_file()]
        assert len(written) > 3
        assert not any(key in p.read_text(errors="replace") for p in written)
        assert key not in up.stdout
    finally:
        fleetprobe("engine", "down", src=engine_src)
