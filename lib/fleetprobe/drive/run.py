"""Running a registered experiment by name: the lifecycle every run goes through.

    params -> plan (seed) -> trace dir -> target -> preflight -> phases (events)
           -> checkers (judge recorded events) -> manifest (complete) -> summary.csv

This module sits above `harness.experiment` (what an experiment module is made of) and
`experiments` (the modules, which register themselves with `experiment.register` when the
package is imported), so that the experiment base never imports the experiments built on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from fleetprobe.client import INTERRUPTED
from fleetprobe.harness.experiment import (
    EXPERIMENTS,
    Experiment,
    ExperimentParams,
    ParamsError,
    RunContext,
    describe_failure,
    make_client,
    parse_params,
)
from fleetprobe.harness.seeding import new_nonce
from fleetprobe.harness.targets import Target, open_target, preflight
from fleetprobe.harness.trace import SecretLeakError, Trace

log = logging.getLogger("fleetprobe")


def registered_experiments() -> list[str]:
    import fleetprobe.experiments  # noqa: F401 - importing registers the bundled experiments

    return sorted(EXPERIMENTS)


def get_experiment(name: str) -> Experiment:
    if name not in registered_experiments():
        known = ", ".join(registered_experiments()) or "none"
        raise ParamsError(f"unknown experiment {name!r} (known: {known})")
    return EXPERIMENTS[name]()


FAILED_DIR = "_failed"  # under a traces root: runs that failed before their first phase


async def arun_experiment(
    name: str, params: dict[str, Any], *, target: Target | None = None
) -> Path:
    """Run one experiment; returns its run directory. `target` overrides `params.target`
    (tests pass a Target on a server they control).

    A run that fails before its first phase (server start-up, preflight) is moved to
    `<traces_root>/_failed/`, so it stays inspectable but never sits among the real runs."""
    experiment = get_experiment(name)
    p = parse_params(experiment, params)
    plan = experiment.make_plan(p)
    trace = Trace(p.traces_root, experiment.name, p.seed, new_nonce(), p.model_dump(mode="json"))
    trace.manifest.planned = experiment.planned_counts(plan, p)
    trace.write_manifest()
    progress = {"phases": 0}
    try:
        with contextlib.ExitStack() as stack:
            tgt = target or stack.enter_context(open_target(p.target))
            await _execute(experiment, p, plan, trace, tgt, progress)
            _keep_model_trace(tgt, trace)
    except BaseException as exc:
        trace.finish(complete=False, reason=describe_failure(exc))
        if progress["phases"] == 0:
            _set_aside(trace.dir)
        else:
            _summary_of_partial_run(trace.dir)
        raise
    trace.finish(complete=True)
    write_summary(trace.dir)
    return trace.dir


def _keep_model_trace(target: Target, trace: Trace) -> None:
    """A backend served by the scripted model (a model deployment, docs/scripted-model.md):
    every prompt and answer, as `model.jsonl` beside the run's events (keys refused)."""
    path = getattr(target.server, "model_trace", None)
    if path is not None and Path(path).exists():
        text = Path(path).read_text()
        if any(secret in text for secret in target.secrets if secret):
            raise SecretLeakError("refused to write model.jsonl: it contains an API key")
        (trace.dir / "model.jsonl").write_text(text)


def _set_aside(run_dir: Path) -> Path:
    failed = run_dir.parent / FAILED_DIR
    failed.mkdir(exist_ok=True)
    moved = failed / run_dir.name
    n = 1
    while moved.exists():  # a retry in the same second made a run of the same name
        n += 1
        moved = failed / f"{run_dir.name}.{n}"
    run_dir.rename(moved)
    log.warning("the run failed before its first phase; its manifest is in %s", moved)
    return moved


def _summary_of_partial_run(run_dir: Path) -> None:
    """What was measured before the failure, without masking the failure itself."""
    try:
        write_summary(run_dir)
    except Exception as exc:  # noqa: BLE001 - the run's own error is the one to report
        log.warning("summary.csv not written for the incomplete run %s: %s", run_dir.name, exc)


async def _execute(
    experiment: Experiment, p: ExperimentParams, plan: Any, trace: Trace, target: Target,
    progress: dict[str, int],
) -> None:
    trace.add_secrets(target.secrets)
    trace.manifest.target = target.manifest_entry()
    async with make_client(target.base_url, experiment.client_params(p)) as client:
        ctx = RunContext(p, plan, trace.manifest.nonce, trace, client, target)
        await preflight(client, target)
        trace.manifest.target = target.manifest_entry()
        trace.write_manifest()
        for phase in experiment.phases():
            progress["phases"] += 1
            await phase(ctx)
            trace.write_manifest()  # executed counts so far, in case the next phase dies
        for checker in experiment.checkers():
            checker(ctx)


def run_experiment(name: str, params: dict[str, Any], *, target: Target | None = None) -> Path:
    """Synchronous entry point; works inside Jupyter (whose loop is already running)."""
    coro = arun_experiment(name, params, target=target)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        if threading.current_thread() is threading.main_thread():
            return asyncio.run(_interruptible(coro))
        return asyncio.run(coro)
    outcome: dict[str, Any] = {}

    def in_thread() -> None:
        try:
            outcome["dir"] = asyncio.run(coro)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            outcome["exc"] = exc

    worker = threading.Thread(target=in_thread, name=f"fleetprobe-{name}")
    worker.start()
    worker.join()
    if "exc" in outcome:
        raise outcome["exc"]
    return outcome["dir"]


async def _interruptible(coro: Awaitable[Path]) -> Path:
    """The run under Ctrl-C: the first SIGINT cancels it (as asyncio.run would) and sets
    `client.INTERRUPTED`, so each later request raises too; it ends as KeyboardInterrupt."""
    import signal

    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    assert task is not None

    def on_sigint() -> None:
        if INTERRUPTED.is_set():  # a second Ctrl-C: stop now
            raise KeyboardInterrupt
        INTERRUPTED.set()
        task.cancel()

    INTERRUPTED.clear()
    loop.add_signal_handler(signal.SIGINT, on_sigint)
    try:
        return await coro
    except asyncio.CancelledError:
        if INTERRUPTED.is_set():
            raise KeyboardInterrupt from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGINT)


def write_summary(run_dir: Path) -> Path | None:
    """summary.csv via the analysis package (owned by the analysis engineer)."""
    try:
        from fleetprobe.analysis.base.summary import write_summary as analysis_write_summary
    except ImportError as exc:
        log.warning("summary.csv not written: the analysis package is unavailable (%s)", exc)
        return None
    return analysis_write_summary(run_dir)
