"""A batch of runs from a plan file (`params/reproduce.yaml`), in parallel processes.

Each entry names an experiment, its params file, the server profiles to run it under and
optional overrides; every (entry, profile) is one `fleetprobe run` process with its own bundled
server and tenant. The runs are bound by the paper's rate limits, not by CPU, so running them
side by side measures what running them one after another would, in a fraction of the time.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import yaml

from fleetprobe.runner import (
    ParamsError,
    get_experiment,
    load_params,
    parse_params,
    registered_experiments,
)


@dataclass(frozen=True)
class PlannedRun:
    experiment: str
    params_file: Path
    profile: str
    overrides: tuple[str, ...]

    @property
    def label(self) -> str:
        extra = f" [{', '.join(self.overrides)}]" if self.overrides else ""
        return f"{self.experiment} {self.profile}{extra}"

    def command(self, common: Sequence[str]) -> list[str]:
        sets = [*common, *self.overrides, f"target.profile={self.profile}"]
        return [sys.executable, "-m", "fleetprobe", "run", self.experiment,
                "--params", str(self.params_file), *(a for s in sets for a in ("--set", s))]


def read_plan(path: str | Path, common: Sequence[str] = ()) -> list[PlannedRun]:
    """The runs a plan file lists; every run's params are validated so a typo fails here,
    before any run starts."""
    path = Path(path)
    try:
        entries = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("runs")
    except (OSError, yaml.YAMLError, AttributeError) as exc:
        raise ParamsError(f"cannot read batch plan {path}: {exc}") from exc
    if not isinstance(entries, list) or not entries:
        raise ParamsError(f"batch plan {path} needs a non-empty `runs:` list")
    runs = [run for i, entry in enumerate(entries) for run in _entry_runs(path, i, entry)]
    for run in runs:
        raw = load_params(run.params_file,
                          [*common, *run.overrides, f"target.profile={run.profile}"])
        parse_params(get_experiment(run.experiment), raw)
    return runs


def _entry_runs(plan: Path, index: int, entry: object) -> list[PlannedRun]:
    where = f"batch plan {plan}, run {index + 1}"
    if not isinstance(entry, dict):
        raise ParamsError(f"{where}: expected a mapping with experiment, params, profiles")
    experiment = entry.get("experiment")
    if experiment not in registered_experiments():
        raise ParamsError(f"{where}: unknown experiment {experiment!r}; known: "
                          f"{', '.join(sorted(registered_experiments()))}")
    profiles = entry.get("profiles")
    if not isinstance(profiles, list) or not profiles:
        raise ParamsError(f"{where}: `profiles` must be a non-empty list")
    overrides = tuple(str(s) for s in entry.get("set") or ())
    params_file = Path(entry.get("params") or f"params/reference/{experiment}.yaml")
    return [PlannedRun(experiment, params_file, str(p), overrides) for p in profiles]


def run_batch(runs: Sequence[PlannedRun], common: Sequence[str] = (), jobs: int = 16) -> int:
    """Run every planned run; print one line per run (its directory or its error)."""
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        outcomes = list(pool.map(lambda run: _run_quietly(run.command(common)), runs))
    for run, (code, last_line) in zip(runs, outcomes, strict=True):
        print(f"{'ok' if code == 0 else f'FAILED ({code})'}  {run.label}  {last_line}",
              flush=True)
    return 0 if all(code == 0 for code, _ in outcomes) else 1


def _run_quietly(command: list[str]) -> tuple[int, str]:
    """One experiment process: its run directory, or its last error line."""
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = (done.stdout if done.returncode == 0 else done.stderr).strip().splitlines()
    return done.returncode, lines[-1] if lines else ""
