"""`up`, `down`, `status` of the engine instance a user starts (`<cache>/<commit>/run/`), and
`engine_for_run`: the engine a run of `target.kind: engine` talks to.

A run uses the instance `fleetprobe engine up` started when it is up for the same commit with
the same auth and rate limits (it is left running: the user started it); otherwise the run
starts a private instance of its own (`<cache>/<commit>/instances/<stamp>/`, logs kept) and
stops it when the run ends.
"""

from __future__ import annotations

import os
import secrets
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fleetprobe.engine.build import cache_root, commit_home, ensure_built, locked
from fleetprobe.engine.errors import EngineError
from fleetprobe.engine.services import (
    DEFAULT_RATE_LIMITS,
    EngineState,
    alive,
    health,
    read_state,
    start_engine,
    stop_engine,
)
from fleetprobe.engine.source import ENV_SRC, EngineSource, inspect_source, resolve_source

# The gate key: the variable the engine itself reads, and the one a live `gate` target reads
ENV_GATE_KEY = "MEMCLAW_API_KEY"
KEEP_PRIVATE_LOGS = 5  # private instances whose logs are kept (newest)
Log = Callable[[str], None]


def _source(src: str | os.PathLike | None) -> EngineSource:
    return inspect_source(resolve_source(src))


def _run_dir(source: EngineSource) -> Path:
    return commit_home(source) / "run"


def _gate_key(auth: str, required: bool) -> str | None:
    if auth != "gate":
        return None
    key = os.environ.get(ENV_GATE_KEY)
    if not key and required:
        raise EngineError(f"engine auth gate: export the gate key in {ENV_GATE_KEY} (it is "
                          "passed to the engine's environment, never written anywhere)")
    return key


def up(src: str | os.PathLike | None, auth: str = "headers",
       rate_limits: dict[str, str] | None = None, log: Log = print) -> EngineState:
    """Build if needed, then start the instance (or find it already up, as asked)."""
    source = _source(src)
    build = ensure_built(source, log=log)
    run_dir = _run_dir(source)
    limits = {**DEFAULT_RATE_LIMITS, **(rate_limits or {})}
    with locked(run_dir.parent / ".run.lock"):
        state = read_state(run_dir)
        if state is not None:
            if health(state)["up"] and state.auth == auth and state.rate_limits == limits:
                log(f"engine: already up at {state.base_url}")
                return state
            log("engine: stopping the previous instance (it is down, or was started with "
                "other settings)")
            _stop(run_dir, state)
        return start_engine(build, run_dir, auth, _gate_key(auth, required=True), limits)


def down(src: str | os.PathLike | None, log: Log = print) -> list[EngineState]:
    """Stop the instances of `src` (of every commit in the cache when no source is given):
    the `engine up` one, and private ones whose run is gone (a run in progress keeps its own,
    and stops it itself)."""
    stopped = []
    for run_dir in _run_dirs(src):
        with locked(run_dir.parent / ".run.lock"):
            state = read_state(run_dir)
            if state is None:
                continue
            if state.owner_pid and state.owner_pid != os.getpid() and alive(state.owner_pid):
                log(f"engine: left running {state.base_url}: it belongs to the run in process "
                    f"{state.owner_pid}, which stops it when it ends")
                continue
            _stop(run_dir, state)
            stopped.append(state)
    return stopped


def status(src: str | os.PathLike | None) -> list[tuple[EngineState, dict]]:
    """Each instance's state and health (of `src`, or every one in the cache)."""
    found = []
    for run_dir in _run_dirs(src):
        state = read_state(run_dir)
        if state is not None:
            found.append((state, health(state)))
    return found


def _run_dirs(src: str | os.PathLike | None) -> list[Path]:
    """The `engine up` instance and any private ones (a run's; left behind only when its
    process was killed) of `src`, or of every commit in the cache when no source is given."""
    if src or os.environ.get(ENV_SRC):
        homes = [commit_home(_source(src))]
    else:
        homes = sorted(p for p in cache_root().iterdir() if p.is_dir()) \
            if cache_root().is_dir() else []
    return [p.parent for home in homes
            for p in [home / "run" / "state.json", *home.glob("instances/*/state.json")]
            if p.exists()]


def _stop(run_dir: Path, state: EngineState) -> None:
    stop_engine(state)
    (run_dir / "state.json").unlink(missing_ok=True)


@dataclass
class RunEngine:
    """The engine a run talks to; `gate_key` lives in memory only."""

    state: EngineState
    gate_key: str | None
    shared: bool  # the user's `engine up` instance, left running after the run

    @staticmethod
    def create_tenant() -> tuple[str, str]:
        """A fresh tenant: under asserted identity (headers, gate) a tenant exists as soon as a
        request names it, so a new id is all it takes; there is no tenant key ("")."""
        return f"fp-{uuid.uuid4().hex[:12]}", ""


@contextmanager
def engine_for_run(src: str | os.PathLike | None, auth: str = "headers",
                   rate_limits: dict[str, str] | None = None,
                   log: Log = print) -> Iterator[RunEngine]:
    source = _source(src)
    limits = {**DEFAULT_RATE_LIMITS, **(rate_limits or {})}
    state = read_state(_run_dir(source))
    if (state is not None and state.auth == auth and state.rate_limits == limits
            and health(state)["up"]):
        yield RunEngine(state, _gate_key(auth, required=True), shared=True)
        return
    build = ensure_built(source, log=log)
    # a gate key of our own when the user gave none: the private engine is ours alone
    gate_key = _gate_key(auth, required=False) or (
        secrets.token_urlsafe(24) if auth == "gate" else None)
    instances = commit_home(source) / "instances"
    run_dir = instances / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}"
    _prune(instances)
    state = start_engine(build, run_dir, auth, gate_key, limits, owner_pid=os.getpid())
    try:
        yield RunEngine(state, gate_key, shared=False)
    finally:
        stop_engine(state)
        (run_dir / "state.json").unlink(missing_ok=True)


def _prune(instances: Path) -> None:
    """Keep the logs of the newest private instances only (none of them still running:
    a folder with a state.json belongs to a run in progress)."""
    if not instances.is_dir():
        return
    old = sorted(p for p in instances.iterdir() if not (p / "state.json").exists())
    for path in old[:-KEEP_PRIVATE_LOGS]:
        shutil.rmtree(path, ignore_errors=True)
