"""Plans of runs (`params/reproduce.yaml`): read them, run them in parallel, keep them apart.

A plan file lists entries; each names an experiment, its params file, the server profiles to
run it under and optional overrides, and every (entry, profile) is one `fleetprobe run`
process with its own tenant. The runs are bound by the paper's rate limits, not by CPU, so
many run side by side; what a busy machine cannot take is many servers *starting* at once,
which `reference_server.launch.process` bounds machine-wide (`FLEETPROBE_SERVER_START_SLOTS`).

    runs:
      - experiment: leakage                 # registered experiment
        params: params/reference/leakage.yaml   # default params/reference/<experiment>.yaml
        profiles: [memclaw-2026-05-30]
        set: ["seed=7"]                     # optional overrides
        notebook: true                      # execute notebooks/<experiment>.ipynb on this run
        fast: false                         # optional: leave this entry out of `--fast`
        seeds: 1..5                         # optional sweep: one run per seed (drive.sweeps)
        sweep: {chains: [10, 50]}           # optional sweep of any param (product with seeds)
    seeds: [1, 2]                           # optional: default seeds/sweep for every entry
    fast:                                   # `--fast`: the plan's runs, rate limits lifted
      set: [...]                            # overrides for every run
      experiments: {provenance: [...]}      # overrides for one experiment's runs

`fleetprobe batch PLAN` runs a plan into a traces root. `fleetprobe reproduce PLAN` (what `make
reproduce` calls, module `fleetprobe.reproduction`) keeps each invocation in a directory of
its own and resumes it.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from fleetprobe.drive import sweeps
from fleetprobe.drive.run import get_experiment, registered_experiments
from fleetprobe.harness.experiment import ParamsError, load_params, parse_params

ENV_JOBS = "JOBS"


def default_jobs(fast: bool = False) -> int:
    """Runs side by side: rate-bound runs mostly wait (a paper-scale run uses a few CPU-seconds
    over minutes), so many per core, and the plan's wall time is its longest run only if all
    start at once; server start-ups stay bounded machine-wide (`reference_server.launch.process`).
    Unthrottled (fast) runs are CPU-bound but still wait on settle windows, pacing and polls
    (a contradiction run, most of its 30 s), so eight per core: each is a worker process and
    the waiting ones leave the CPU to the others. `JOBS` in the environment overrides."""
    cores = os.cpu_count() or 1
    try:
        return max(1, int(os.environ[ENV_JOBS]))
    except (KeyError, ValueError):
        return 8 * cores if fast else 16 * cores


@dataclass(frozen=True)
class PlannedRun:
    experiment: str
    params_file: Path
    profile: str
    overrides: tuple[str, ...]
    notebook: bool = False
    fast_overrides: tuple[str, ...] = ()
    # the swept (param, value) of this run: overrides too, and part of its name
    sweep: sweeps.Assignment = ()

    @property
    def label(self) -> str:
        every = (*self.overrides, *sweeps.overrides(self.sweep))
        extra = f" [{', '.join(every)}]" if every else ""
        return f"{self.experiment} {self.profile}{extra}"

    @property
    def key(self) -> str:
        """Stable name of this run within its plan (resuming matches runs by it)."""
        key = f"{self.experiment}-{self.profile}"
        if self.overrides:
            key += "-" + hashlib.sha1("\n".join(self.overrides).encode()).hexdigest()[:8]
        if self.sweep:  # readable, and unchanged for a run without a sweep
            key += "-" + sweeps.run_suffix(self.sweep)
        return key

    def settings(self, common: Sequence[str] = (), fast: bool = False) -> list[str]:
        """The run's overrides; the profile names a bundled server's behaviour, so a run
        whose target is live gets none (a live target is named by `target.label`)."""
        settings = [*common, *(self.fast_overrides if fast else ()), *self.overrides,
                    *sweeps.overrides(self.sweep)]
        target = load_params(self.params_file, settings).get("target") or {}
        if isinstance(target, dict) and target.get("kind") == "live":
            return settings
        return [*settings, f"target.profile={self.profile}"]

    def command(self, common: Sequence[str], fast: bool = False) -> list[str]:
        return [sys.executable, "-m", "fleetprobe", "run", self.experiment,
                "--params", str(self.params_file),
                *(a for s in self.settings(common, fast) for a in ("--set", s))]

    def target_key(self, common: Sequence[str] = (), fast: bool = False) -> str:
        """What a server must be started with to serve this run (shared servers key on it)."""
        raw = load_params(self.params_file, self.settings(common, fast))
        return parse_params(get_experiment(self.experiment), raw).target.model_dump_json()


@dataclass(frozen=True)
class Plan:
    name: str
    path: Path
    runs: tuple[PlannedRun, ...]
    fast_common: tuple[str, ...] = field(default=())


def read_plan(path: str | Path, common: Sequence[str] = (), fast: bool = False) -> list[PlannedRun]:
    """The runs a plan file lists; every run's params are validated so a typo fails here,
    before any run starts."""
    return list(load_plan(path, common, fast).runs)


def load_plan(path: str | Path, common: Sequence[str] = (), fast: bool = False) -> Plan:
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        entries = doc.get("runs")
    except (OSError, yaml.YAMLError, AttributeError) as exc:
        raise ParamsError(f"cannot read batch plan {path}: {exc}") from exc
    if not isinstance(entries, list) or not entries:
        raise ParamsError(f"batch plan {path} needs a non-empty `runs:` list")
    fast_doc = doc.get("fast") or {}
    if not isinstance(fast_doc, dict):
        raise ParamsError(f"batch plan {path}: `fast` must be a mapping of set/experiments")
    fast_common = tuple(str(s) for s in fast_doc.get("set") or ())
    per_experiment = {str(k): tuple(str(s) for s in v or ())
                      for k, v in (fast_doc.get("experiments") or {}).items()}
    defaults = {k: doc[k] for k in ("seeds", "sweep") if doc.get(k) is not None}
    runs = [run for i, entry in enumerate(entries)
            for run in _entry_runs(path, i, entry, fast_common, per_experiment, defaults)
            if not (fast and entry.get("fast") is False)]
    if fast:  # unthrottled, the CPU-heaviest runs are the long ones: start them first
        first = [str(e) for e in fast_doc.get("first") or ()]
        runs.sort(key=lambda run: first.index(run.experiment) if run.experiment in first
                  else len(first))
    keys = [run.key for run in runs]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    if duplicates:
        raise ParamsError(f"batch plan {path} lists the same run twice: {', '.join(duplicates)}")
    for run in runs:
        raw = load_params(run.params_file, run.settings(common, fast))
        parse_params(get_experiment(run.experiment), raw)
    return Plan(str(doc.get("name") or path.stem), path, tuple(runs), fast_common)


def _entry_runs(plan: Path, index: int, entry: object, fast_common: tuple[str, ...],
                per_experiment: dict[str, tuple[str, ...]],
                defaults: dict[str, object] | None = None) -> list[PlannedRun]:
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
    if not isinstance(entry.get("fast", True), bool):
        raise ParamsError(f"{where}: `fast` must be true or false (false: not in --fast)")
    overrides = tuple(str(s) for s in entry.get("set") or ())
    params_file = Path(entry.get("params") or f"params/reference/{experiment}.yaml")
    fast = (*fast_common, *per_experiment.get(str(experiment), ()))
    swept = {**(defaults or {}), **{k: entry[k] for k in ("seeds", "sweep") if k in entry}}
    try:
        assignments = sweeps.expand(swept.get("seeds"), swept.get("sweep"))
    except sweeps.SweepError as exc:
        raise ParamsError(f"{where}: {exc}") from exc
    return [PlannedRun(experiment, params_file, str(p), overrides, bool(entry.get("notebook")),
                       fast, assignment) for p in profiles for assignment in assignments]


@dataclass
class Outcome:
    code: int
    attempts: int
    last_line: str
    log: str = ""


def run_process(command: list[str], log_path: Path | None = None,
                env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """One experiment process: (exit code, its run directory or last error line, its output)."""
    done = subprocess.run(command, capture_output=True, text=True, check=False,
                          env={**os.environ, **(env or {})})
    output = done.stderr + done.stdout
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text(output, encoding="utf-8")
    lines = (done.stdout if done.returncode == 0 else done.stderr).strip().splitlines()
    return done.returncode, lines[-1] if lines else "", output


def with_retry(attempt: Callable[[int], tuple[int, str, str]], retries: int = 1) -> Outcome:
    """Run `attempt(n)` (n = 1, 2, ...) until it exits 0 or has been retried `retries` times;
    a run that fails twice is a real failure, once is usually the machine."""
    n = 0
    while True:
        n += 1
        code, last, output = attempt(n)
        if code == 0 or n > retries:
            return Outcome(code, n, last, output)


def run_batch(runs: Sequence[PlannedRun], common: Sequence[str] = (),
              jobs: int | None = None) -> int:
    """Run every planned run (each retried once); one line per run: its directory or why it
    failed, with the failed process's own output."""
    jobs = jobs or default_jobs()

    def one(run: PlannedRun) -> Outcome:
        return with_retry(lambda n: run_process(run.command(common)))

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        outcomes = list(pool.map(one, runs))
    for run, outcome in zip(runs, outcomes, strict=True):
        report_outcome(run.label, outcome)
    return 0 if all(o.code == 0 for o in outcomes) else 1


def report_outcome(label: str, outcome: Outcome) -> None:
    retried = f" (attempt {outcome.attempts})" if outcome.attempts > 1 else ""
    if outcome.code == 0:
        print(f"ok  {label}{retried}  {outcome.last_line}", flush=True)
        return
    print(f"FAILED ({outcome.code})  {label}{retried}  {outcome.last_line}", flush=True)
    tail = outcome.log.strip().splitlines()[-15:]
    for line in tail:
        print(f"    | {line}", flush=True)
