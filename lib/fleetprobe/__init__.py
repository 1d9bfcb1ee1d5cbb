"""fleetprobe: reproduce "Governed Shared Memory for Multi-Agent LLM Systems" against the
bundled reference server or a live MemClaw-compatible endpoint.

    from fleetprobe import load_params, run_experiment
    run_dir = run_experiment("provenance", load_params("params/smoke/provenance.yaml"))
"""

from fleetprobe.run import arun_experiment, run_experiment
from fleetprobe.runner import ParamsError, load_params
from fleetprobe.targets import TargetError

__all__ = [
    "ParamsError",
    "TargetError",
    "arun_experiment",
    "load_params",
    "run_experiment",
]
