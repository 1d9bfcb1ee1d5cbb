"""One adapter per backend for the whole `tests/backends` session: every smoke (leakage,
matrix) and wire-level test of a backend talks to the same adapter process, each in a fresh
tenant, through the harness's shared-server hook (`FLEETPROBE_SHARED_SERVERS`, as `fleetprobe
reproduce --fast` shares a bundled server). Importing a backend is most of an adapter's
start-up (CrewAI's about 10 s on an idle 2-core machine), so this pays it once per backend.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fleetprobe.backends.process import BackendServer
from fleetprobe.drive.run import run_experiment
from fleetprobe.harness.targets import ENV_SHARED_SERVERS, TargetParams

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = {"langgraph": "langgraph", "mem0": "mem0ai", "crewai": "crewai"}
PACKAGE["graphiti"] = "graphiti-core"
PACKAGE["cognee"] = "cognee"  # issue 37
# `make backends-smoke` sets it: the adapters (each from its own locked environment, built
# on first use) start only there, so `make test` stays quick and never builds environments
ENV_RUN = "FLEETPROBE_BACKENDS"


def need(backend: str) -> None:
    if os.environ.get(ENV_RUN) != "1":
        pytest.skip(f"the {backend} adapter runs under make backends-smoke ({ENV_RUN}=1)")


def locked_version(backend: str, env: str | None = None) -> str:
    """The version of the backend's package its environment's lock pins."""
    from fleetprobe.backends import envs

    name = PACKAGE[backend]
    for line in envs.lock_file(env or backend).read_text().splitlines():
        if line.startswith(f"{name}=="):
            return line.split("==", 1)[1].split()[0]
    raise AssertionError(f"{name} is not pinned in the {env or backend} lock")


@pytest.fixture(scope="session")
def backend_server() -> Iterator[Callable[..., BackendServer]]:
    """`backend_server("crewai")`: the session's adapter of that backend (and deployment,
    store), started on first use."""
    started: dict[tuple[str, str | None, str | None, str | None], BackendServer] = {}

    def get(backend: str, deployment: str | None = None, store: str | None = None,
            env: str | None = None) -> BackendServer:
        need(backend)
        key = (backend, deployment, store, env)
        if key not in started:
            t0 = time.monotonic()
            started[key] = BackendServer(backend, store, deployment=deployment,
                                         backend_env=env).start()
            print(f"\n{backend} ({deployment or 'idiomatic'}, {store or 'default store'}, "
                  f"{env or backend}) adapter start-up: {time.monotonic() - t0:.1f} s")
        return started[key]

    yield get
    for server in started.values():
        server.close()


def run_on(server: BackendServer, experiment: str, params: dict[str, Any],
           monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run `experiment` with `params` (from `load_params`) against the shared adapter."""
    key = TargetParams.model_validate(params["target"]).model_dump_json()
    monkeypatch.setenv(ENV_SHARED_SERVERS, json.dumps({key: {
        "base_url": server.base_url, "admin_key": server.admin_key}}))
    return run_experiment(experiment, params)
