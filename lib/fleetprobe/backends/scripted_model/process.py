"""`ScriptedModelServer`: the scripted model as a child process on a free loopback port,
started, health-checked and stopped like the reference server.

    with ScriptedModelServer(trace=run_dir / "model.jsonl") as model:
        base_url = model.openai_base_url   # http://127.0.0.1:<port>/v1
"""

from __future__ import annotations

import sys
from pathlib import Path

from reference_server.launch.process import ReferenceServer

from .rules import RULES_FILE


class ScriptedModelServer(ReferenceServer):
    def __init__(self, trace: Path | None = None, rules: Path | None = None,
                 port: int | None = None, python: str | None = None) -> None:
        super().__init__(profile="scripted-model", port=port)
        self.trace = trace
        self.rules = rules or RULES_FILE
        self.python = python or sys.executable
        self.log_path = self.db_path.parent / "scripted-model.log"

    @property
    def openai_base_url(self) -> str:
        return self.base_url + "/v1"

    def _command(self) -> list[str]:
        cmd = [self.python, "-m", "fleetprobe.backends.scripted_model", "--host", "127.0.0.1",
               "--port", str(self.port), "--rules", str(self.rules)]
        return cmd + (["--trace", str(self.trace)] if self.trace else [])

    def _child_env(self) -> dict[str, str]:
        env = super()._child_env()
        lib = str(Path(__file__).resolve().parents[3])  # lib/, for a source checkout
        env["PYTHONPATH"] = lib + ":" + env["PYTHONPATH"]
        return env
