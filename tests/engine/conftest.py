"""What the engine tier's tests share: which engine source each runs (the archives in
../shared/engines, or FLEETPROBE_ENGINE_SRC), the CLI as a user runs it, a small leakage run
and its checks.

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

REPO = Path(__file__).resolve().parents[2]
ARCHIVES = REPO.parent / "shared" / "engines"


def unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"the engine tier must run in CI: {reason}")
    pytest.skip(reason)


def archive(commit: str) -> str:
    """The archive of `commit` (short hash) in ../shared/engines, with a Python >= 3.12."""
    found = sorted(ARCHIVES.glob(f"caura-*-{commit}.tar.gz"))
    if not found:
        unavailable(f"no engine archive of {commit} in {ARCHIVES}")
    try:
        find_python()
    except EngineError as exc:
        unavailable(str(exc))
    return str(found[0])


@pytest.fixture(scope="module")
def engine_src() -> str:
    """v2.29.0 (b65ecbe), the kit's engine of today, unless FLEETPROBE_ENGINE_SRC names
    another source."""
    if not os.environ.get(ENV_SRC):
        return archive("b65ecbe")
    try:
        find_python()
    except EngineError as exc:
        unavailable(str(exc))
    return os.environ[ENV_SRC]


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


def check_leakage(run: dict[str, Any], src: str, shared: bool,
                  auth: str = "headers") -> None:
    """A complete run that the engine of `src` answered, as its manifest and events say."""
    source = inspect_source(Path(src))
    manifest, events = run["manifest"], run["events"]
    assert manifest["complete"] is True, manifest["incomplete_reason"]
    assert manifest["skipped"] == []
    assert manifest["executed"] == {**manifest["executed"], **manifest["planned"]}
    target = manifest["target"]
    assert target["kind"] == "engine"
    assert target["label"] == f"engine {source.version} @ {source.short_commit}"
    assert target["server_version"] == source.version  # what the engine's /version answered
    assert target["engine"]["commit"] == source.commit
    assert target["engine"]["version"] == source.version
    assert target["engine"]["rate_limits"]["search"] == "1000/second"
    assert target["engine"]["shared"] is shared
    assert target["auth"] == auth and target["engine"]["auth"] == auth
    # the exact versions the engine ran with, as its build installed them
    deps = target["engine"]["dependencies"]
    assert set(deps) == {"core-api", "core-storage-api"}
    assert deps["core-api"]["fastapi"] and deps["core-storage-api"]["sqlalchemy"]
    # the engine answered the run's requests: writes created, searches and GETs answered
    writes = [e for e in events if e["phase"] == "write"]
    probes = [e for e in events if e["phase"] == "probe"]
    assert writes and all(e["status"] == 201 for e in writes), {e["status"] for e in writes}
    assert probes and all(e["status"] in (200, 404) for e in probes)
    assert sum(e["op"] == "POST /api/v1/search" for e in probes) > 0
    assert len(probes) == manifest["planned"]["probe"]
