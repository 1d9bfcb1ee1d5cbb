"""`BackendServer`: a backend adapter as a child process on loopback, managed exactly like
the reference server (same start/health/stop, same tenant creation through the admin key).
The child runs from the backend's own locked environment (`envs.ensure`), never the kit's.

    with BackendServer("mem0") as server:
        tenant_id, key = server.create_tenant()
"""

from __future__ import annotations

from pathlib import Path

from reference_server.launch.process import ReferenceServer

from . import envs
from .base import MODEL_BACKENDS, MODEL_DEPLOYMENTS
from .scripted_model import MODEL_URL_ENV
from .scripted_model.process import ScriptedModelServer

# Importing a backend (crewai most of all) takes seconds on a busy 2-core machine.
STARTUP_TIMEOUT_S = 240.0


class BackendServer(ReferenceServer):
    """`env`: the locked environment to run in (default: the backend's own, `locks/<backend>.in`;
    a version sweep names another, e.g. `langgraph-ckpt-3.1.0`). A deployment that runs the
    backend's model-mediated paths (`base.MODEL_DEPLOYMENTS`) starts the scripted model first
    and hands the adapter its base URL; every prompt and answer goes to `model_trace`
    (default: `model.jsonl` in the adapter's directory)."""

    def __init__(self, backend: str, store: str | None = None, port: int | None = None,
                 env: dict | None = None, backend_env: str | None = None,
                 deployment: str | None = None, model_trace: Path | None = None) -> None:
        super().__init__(profile=f"backend-{backend}", port=port, env=env)
        self.startup_timeout_s = max(self.startup_timeout_s, STARTUP_TIMEOUT_S)
        self.backend = backend
        self.store = store
        self.deployment = deployment
        self.backend_env = backend_env or backend
        self.python = envs.ensure(self.backend_env)  # built before the start-up clock runs
        self.data_dir = self.db_path.parent / "backend-data"
        self.model: ScriptedModelServer | None = None
        if deployment in MODEL_DEPLOYMENTS or backend in MODEL_BACKENDS:
            self.model_trace = model_trace or self.db_path.parent / "model.jsonl"
            self.model = ScriptedModelServer(trace=self.model_trace)

    def start(self) -> BackendServer:
        if self.model is not None and not self.model.running:
            self.model.start()
        super().start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        super().stop(timeout)
        if self.model is not None:
            self.model.stop(timeout)

    def close(self) -> None:
        super().close()
        if self.model is not None:
            self.model.close()

    def _command(self) -> list[str]:
        cmd = [str(self.python), "-m", "fleetprobe.backends", "--backend", self.backend,
               "--host", "127.0.0.1", "--port", str(self.port), "--data-dir",
               str(self.data_dir), "--env-name", self.backend_env]
        cmd += ["--store", self.store] if self.store else []
        return cmd + (["--deployment", self.deployment] if self.deployment else [])

    def _child_env(self) -> dict[str, str]:
        env = super()._child_env()
        lib = str(Path(__file__).resolve().parents[2])  # lib/, for a source checkout
        env["PYTHONPATH"] = lib + ":" + env["PYTHONPATH"]
        for leak in ("VIRTUAL_ENV", "PYTHONHOME"):  # the kit's venv must not reach the child
            env.pop(leak, None)
        if self.model is not None:
            env[MODEL_URL_ENV] = self.model.openai_base_url
        return env
