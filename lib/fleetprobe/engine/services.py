"""The engine's processes: its PostgreSQL, then core-storage-api (which migrates the fresh
database on start-up), then core-api, each on a free loopback port with one worker, offline
providers and no Redis; and how to find, check and stop them again from another process.

An instance lives in a folder: `state.json` (what runs where, with which settings; never a
key) and `logs/` (each service's output, kept after it stops). Keys live only in the
environment of the processes: the admin key is random and forgotten, a gate key comes from
the caller's environment.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from fleetprobe.engine.build import EngineBuild
from fleetprobe.engine.errors import EngineError
from fleetprobe.engine.postgres import start_postgres, stop_postgres

ENV_STARTUP_S = "FLEETPROBE_ENGINE_STARTUP_S"
STARTUP_TIMEOUT_S = 240.0  # per service; migrations on a busy 2-core machine
# The engine's own defaults are 10 writes/s, 2 bulk writes/s and 30 searches/s, keyed by
# client IP without an API key: every probe from loopback shares one bucket. Raised, and
# recorded in state.json and the run's manifest.
DEFAULT_RATE_LIMITS = {"write": "1000/second", "write_bulk": "100/second",
                       "search": "1000/second"}
RATE_ENV = {"write": "RATE_LIMIT_WRITE", "write_bulk": "RATE_LIMIT_WRITE_BULK",
            "search": "RATE_LIMIT_SEARCH"}
# Offline, single-box settings (names from the engine's settings modules): fake embedder and
# entity extraction, no LLM, inline embedding, in-process event bus, no Redis, no TLS to the
# database, header identity unless a gate key is given.
OFFLINE_ENV = {
    "ENVIRONMENT": "development", "IS_STANDALONE": "false",
    "EMBEDDING_PROVIDER": "fake", "ENTITY_EXTRACTION_PROVIDER": "fake",
    "USE_LLM_FOR_MEMORY_CREATION": "false", "DEPLOYMENT_MODE": "inline",
    "EVENT_BUS_BACKEND": "inprocess", "REDIS_URL": "",
    "POSTGRES_REQUIRE_SSL": "false", "ALLOYDB_REQUIRE_SSL": "false",
    "LOG_FORMAT_JSON": "false", "PYTHONUNBUFFERED": "1",
}
# what a child keeps of the caller's environment: nothing that could switch on a provider
# (OPENAI_API_KEY, ...) or a gate the caller did not ask for
PASS_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ")
SERVICE_APPS = {
    "core-storage-api": ("core_storage_api.app:app", "core_storage_api.config:settings",
                         "/healthz"),
    "core-api": ("core_api.app:app", "core_api.config:settings", "/api/v1/health"),
}


@dataclass
class EngineState:
    """What runs where: written to state.json (no secrets) and into a run's manifest."""

    commit: str
    version: str
    source: str
    auth: str  # headers | gate
    rate_limits: dict[str, str]
    python: str
    home: str
    pids: dict[str, int] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    logs: dict[str, str] = field(default_factory=dict)
    pg_data: str | None = None
    started_at: str | None = None
    start_s: float | None = None
    owner_pid: int | None = None  # a run's private instance: the run's process
    committed_at: str | None = None
    # how the dependencies were chosen (the commit's uv.lock, or resolved as of its time)
    # and exactly what each service's environment holds ({service: {package: version}})
    resolution: dict[str, str | None] = field(default_factory=dict)
    dependencies: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['core-api']}"

    def url(self, service: str) -> str:
        return f"http://127.0.0.1:{self.ports[service]}"

    def manifest(self) -> dict[str, Any]:
        return {"commit": self.commit, "version": self.version, "auth": self.auth,
                "rate_limits": dict(self.rate_limits), "python": self.python,
                "services": {s: self.url(s) for s in self.ports}, "start_s": self.start_s,
                "committed_at": self.committed_at, "resolution": dict(self.resolution),
                "dependencies": {s: dict(d) for s, d in self.dependencies.items()}}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def startup_timeout_s() -> float:
    try:
        return float(os.environ.get(ENV_STARTUP_S) or STARTUP_TIMEOUT_S)
    except ValueError:
        return STARTUP_TIMEOUT_S


def start_engine(build: EngineBuild, run_dir: Path, auth: str = "headers",
                 gate_key: str | None = None, rate_limits: dict[str, str] | None = None,
                 owner_pid: int | None = None) -> EngineState:
    """PostgreSQL, core-storage-api, core-api; state.json written once all answer. On any
    failure everything started so far is stopped and the error names the log to read."""
    if auth not in ("headers", "gate"):
        raise EngineError(f"engine auth must be headers or gate, not {auth!r}")
    if auth == "gate" and not gate_key:
        raise EngineError("engine auth gate needs a gate key (MEMCLAW_API_KEY)")
    started = time.monotonic()
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "logs").mkdir(exist_ok=True)
    state = EngineState(
        commit=build.source.commit, version=build.source.version, source=str(build.source.path),
        auth=auth, rate_limits={**DEFAULT_RATE_LIMITS, **(rate_limits or {})},
        python=build.info.get("python_version", "?"), home=str(run_dir),
        started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), owner_pid=owner_pid,
        committed_at=build.source.committed_at, resolution=build.info.get("resolution", {}),
        dependencies=build.info.get("dependencies", {}))
    try:
        postgres = start_postgres(free_port())
        state.pg_data = str(postgres.data)
        env = _service_env(build, state, gate_key, postgres.env())
        for service in SERVICE_APPS:
            _start_service(build, state, service, env, run_dir)
        served = httpx.get(state.base_url + "/api/v1/version", timeout=10).json().get("version")
        if served != state.version:
            raise EngineError(f"the engine says it is version {served!r}, its source says "
                              f"{state.version!r}: not the source that was built?")
    except BaseException:
        stop_engine(state)
        raise
    state.start_s = round(time.monotonic() - started, 1)
    write_state(run_dir, state)
    return state


def _service_env(build: EngineBuild, state: EngineState, gate_key: str | None,
                 database: dict[str, str]) -> dict[str, str]:
    tree = build.tree
    env = {k: os.environ[k] for k in PASS_ENV if k in os.environ}
    env.update(OFFLINE_ENV)
    env.update({RATE_ENV[k]: v for k, v in state.rate_limits.items()})
    env["MEMCLAW_VERSION"] = state.version  # else /version says "dev" on a checkout
    env["PYTHONPATH"] = os.pathsep.join(
        str(p) for p in (tree / "core-api" / "src", tree / "core-storage-api" / "src", tree))
    env.update(database)
    env["ADMIN_API_KEY"] = secrets.token_urlsafe(24)  # required to boot; never used, forgotten
    if gate_key:
        env["MEMCLAW_API_KEY"] = gate_key
    return env


def _start_service(build: EngineBuild, state: EngineState, service: str,
                   env: dict[str, str], run_dir: Path) -> None:
    health = SERVICE_APPS[service][2]
    port = free_port()
    state.ports[service] = port
    if service == "core-api":
        env = {**env, "CORE_STORAGE_API_URL": state.url("core-storage-api")}
    log_path = run_dir / "logs" / f"{service}.log"
    state.logs[service] = str(log_path)
    cmd = [str(build.python(service)), *start_command(build.tree, service, port)]
    with log_path.open("ab") as log:
        # its own session: `down` signals the whole group, and a Ctrl-C in the shell that
        # ran `engine up` does not reach it
        proc = subprocess.Popen(cmd, env=env, cwd=run_dir, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    state.pids[service] = proc.pid
    _wait_healthy(proc, state.url(service) + health, service, log_path)


def start_command(tree: Path, service: str, port: int) -> list[str]:
    """How the commit starts the service (after `python`): `common.serve` where the commit
    has it (v2.2x), else its Dockerfile's `CMD` (uvicorn at v2.11.0), on loopback with one
    worker (without Redis the caches are per process)."""
    app, settings, _ = SERVICE_APPS[service]
    loopback = ["--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    if (tree / "common" / "serve.py").is_file():
        return ["-m", "common.serve", app, "--settings", settings, *loopback]
    cmd = dockerfile_cmd(tree / service / "Dockerfile")
    if not cmd or cmd[0] != "uvicorn":
        raise EngineError(f"{service}: no common/serve.py and its Dockerfile's CMD {cmd!r} "
                          "is not uvicorn: the kit does not know how to start this commit")
    return ["-m", "uvicorn", *_without_options(cmd[1:], {"--host", "--port", "--workers"}),
            *loopback]


def dockerfile_cmd(dockerfile: Path) -> list[str]:
    """The last exec-form `CMD [...]` of a Dockerfile."""
    found: list[str] = []
    for line in dockerfile.read_text().splitlines():
        if line.strip().startswith("CMD ["):
            found = json.loads(line.strip()[len("CMD "):])
    return found


def _without_options(args: list[str], names: set[str]) -> list[str]:
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in names:
            skip = True
        else:
            out.append(arg)
    return out


def _wait_healthy(proc: subprocess.Popen, url: str, service: str, log_path: Path) -> None:
    timeout = startup_timeout_s()
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=3.0) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise EngineError(f"{service} exited with code {proc.returncode} during "
                                  f"start-up; its log ({log_path}) ends:\n{log_tail(log_path)}")
            try:
                if client.get(url).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
    raise EngineError(f"{service} did not answer {url} within {timeout:.0f} s (a busy machine? "
                      f"raise {ENV_STARTUP_S}); its log ({log_path}) ends:\n{log_tail(log_path)}")


def log_tail(path: Path, lines: int = 25) -> str:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty)"


def alive(pid: int | None) -> bool:
    """The process exists and is not a zombie (an orphan nobody reaped yet)."""
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_engine(state: EngineState, timeout: float = 15.0) -> None:
    """core-api, then core-storage-api (each its whole process group: SIGTERM, then SIGKILL
    after `timeout`), then PostgreSQL, whose data directory is deleted."""
    for service in reversed(list(SERVICE_APPS)):
        _stop_group(state.pids.get(service), timeout)
    if state.pg_data:
        stop_postgres(Path(state.pg_data))


def _stop_group(pid: int | None, timeout: float) -> None:
    if not alive(pid):
        _reap(pid)
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + timeout
        while alive(pid) and time.monotonic() < deadline:
            _reap(pid)
            time.sleep(0.1)
        if not alive(pid):
            break
    _reap(pid)


def _reap(pid: int | None) -> None:
    """Collect our own child's exit status (a no-op for a process another one started)."""
    if not pid:
        return
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def write_state(run_dir: Path, state: EngineState) -> None:
    tmp = run_dir / "state.json.tmp"
    tmp.write_text(json.dumps(asdict(state), indent=2) + "\n")
    tmp.replace(run_dir / "state.json")


def read_state(run_dir: Path) -> EngineState | None:
    try:
        return EngineState(**json.loads((run_dir / "state.json").read_text()))
    except (OSError, ValueError, TypeError):
        return None


def health(state: EngineState) -> dict[str, Any]:
    """Each process alive?, each service answering?, and core-api's /version."""
    out: dict[str, Any] = {"processes": {s: alive(p) for s, p in state.pids.items()}}
    answers: dict[str, int | None] = {}
    with httpx.Client(timeout=3.0) as client:
        for service, (_, _, path) in SERVICE_APPS.items():
            try:
                answers[service] = client.get(state.url(service) + path).status_code
            except (httpx.HTTPError, KeyError):
                answers[service] = None
        try:
            out["version"] = client.get(state.base_url + "/api/v1/version").json().get("version")
        except (httpx.HTTPError, ValueError, KeyError, AttributeError):
            out["version"] = None
    out["answers"] = answers
    out["up"] = all(out["processes"].values()) and all(v == 200 for v in answers.values()) \
        and len(answers) == len(SERVICE_APPS)
    return out
