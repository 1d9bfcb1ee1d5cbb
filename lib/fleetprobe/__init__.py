"""fleetprobe: reproduce "Governed Shared Memory for Multi-Agent LLM Systems" against the
bundled reference server or a live MemClaw-compatible endpoint.

    from fleetprobe import load_params, run_experiment
    run_dir = run_experiment("provenance", load_params("params/smoke/provenance.yaml"))
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fleetprobe.drive.run import arun_experiment, run_experiment
    from fleetprobe.harness.experiment import ParamsError, load_params
    from fleetprobe.harness.targets import TargetError

# Imported on first use: the report's processes import fleetprobe.analysis, not the harness
# (its HTTP client and experiment base were a second of every report's start-up).
_LAZY = {"arun_experiment": "fleetprobe.drive.run", "run_experiment": "fleetprobe.drive.run",
         "ParamsError": "fleetprobe.harness.experiment",
         "load_params": "fleetprobe.harness.experiment",
         "TargetError": "fleetprobe.harness.targets"}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'fleetprobe' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


__all__ = [
    "ParamsError",
    "TargetError",
    "arun_experiment",
    "load_params",
    "run_experiment",
]
