"""`BackendServer`: a backend adapter as a child process on loopback, managed exactly like
the reference server (same start/health/stop, same tenant creation through the admin key).

    with BackendServer("mem0") as server:
        tenant_id, key = server.create_tenant()
"""

from __future__ import annotations

import sys
from pathlib import Path

from reference_server.launch.process import ReferenceServer

# Importing a backend (crewai most of all) takes seconds on a busy 2-core machine.
STARTUP_TIMEOUT_S = 240.0


class BackendServer(ReferenceServer):
    def __init__(self, backend: str, store: str | None = None, port: int | None = None,
                 env: dict | None = None) -> None:
        super().__init__(profile=f"backend-{backend}", port=port, env=env)
        self.startup_timeout_s = max(self.startup_timeout_s, STARTUP_TIMEOUT_S)
        self.backend = backend
        self.store = store
        self.data_dir = self.db_path.parent / "backend-data"

    def _command(self) -> list[str]:
        cmd = [sys.executable, "-m", "fleetprobe.backends", "--backend", self.backend,
               "--host", "127.0.0.1", "--port", str(self.port), "--data-dir",
               str(self.data_dir)]
        return cmd + (["--store", self.store] if self.store else [])

    def _child_env(self) -> dict[str, str]:
        env = super()._child_env()
        lib = str(Path(__file__).resolve().parents[2])  # lib/, for a source checkout
        env["PYTHONPATH"] = lib + ":" + env["PYTHONPATH"]
        return env
