"""MemClaw's open-source engine as a target of the kit (docs/engine.md): found (source),
built once into a cache (python, build), started on loopback with its PostgreSQL (postgres,
services), as the user's instance or a run's own (instance), driven by `fleetprobe engine`
(cli). It uses nothing of the harness above it; `fleetprobe.harness.targets` uses it.
"""

from fleetprobe.engine.errors import EngineError
from fleetprobe.engine.instance import RunEngine, down, engine_for_run, status, up

__all__ = ["EngineError", "RunEngine", "down", "engine_for_run", "status", "up"]
