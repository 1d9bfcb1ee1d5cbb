"""`ReferenceServer`: run the real server as a child process on loopback (tests, harness).

    with ReferenceServer(profile="memclaw-2026-05-31") as server:
        tenant_id, key = server.create_tenant()
        httpx.get(server.base_url + "/api/v1/version")

Keys are passed by environment (never on the command line, never printed).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import httpx

from ..governance.auth import new_raw_key

# A loaded 2-core machine (many servers starting beside a CPU-bound job) can take tens of
# seconds to import the server; override with FLEETPROBE_SERVER_STARTUP_S.
STARTUP_TIMEOUT_S = 90.0
# loading torch and a sentence-transformer model (`--embedder minilm`) takes longer
MODEL_STARTUP_TIMEOUT_S = 120.0
ENV_STARTUP_S = "FLEETPROBE_SERVER_STARTUP_S"
# How many servers may be starting (importing, binding) at once on this machine, across
# processes: `fleetprobe batch`, notebooks and test workers all share the same slots.
ENV_START_SLOTS = "FLEETPROBE_SERVER_START_SLOTS"
START_SLOTS_DIR = Path(tempfile.gettempdir()) / "fleetprobe-start-slots"


def startup_timeout_s() -> float:
    try:
        return float(os.environ.get(ENV_STARTUP_S) or STARTUP_TIMEOUT_S)
    except ValueError:
        return STARTUP_TIMEOUT_S


def start_slots() -> int:
    try:
        return max(1, int(os.environ.get(ENV_START_SLOTS) or (os.cpu_count() or 1)))
    except ValueError:
        return os.cpu_count() or 1


SLOT_WAIT_S = 600.0  # longest wait for a start-up slot before starting anyway


@contextlib.contextmanager
def start_slot(deadline: float):  # noqa: ANN201 - a context manager of nothing
    """Hold one of `start_slots()` machine-wide start-up slots (an flock on a slot file), so a
    burst of runs imports its servers a few at a time instead of all at once (each start-up
    is then quick, and its deadline fair); gives up waiting at `deadline` (monotonic) and
    starts anyway, never blocking a run for good."""
    START_SLOTS_DIR.mkdir(parents=True, exist_ok=True)
    handles = [open(START_SLOTS_DIR / f"slot-{i}", "a") for i in range(start_slots())]  # noqa: SIM115
    held = None
    try:
        while held is None and time.monotonic() < deadline:
            for handle in handles:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    continue
                held = handle
                break
            else:
                time.sleep(0.05)
        yield
    finally:
        for handle in handles:
            handle.close()  # closing releases the lock


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ReferenceServerError(RuntimeError):
    pass


class RunningServer:
    """A reference server some other process started and shares (fast mode of `fleetprobe
    reproduce`): enough to create a fresh tenant on it; never stopped from here."""

    def __init__(self, base_url: str, admin_key: str, profile: str, auth: str = "gateway",
                 gate_key: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.admin_key = admin_key
        self.profile = profile
        self.auth = auth
        self.gate_key = gate_key
        self.shared = True

    def create_tenant(self, tenant_id: str | None = None) -> tuple[str, str]:
        return _create_tenant(self.base_url, self.admin_key, tenant_id)


_LOOPBACK = threading.local()


def _loopback() -> httpx.Client:
    """One client per thread for the health polls and tenant creation of the servers it
    starts. They speak plain HTTP to 127.0.0.1, so no TLS context: building httpx's default
    one loads the CA bundle, about 30 ms of CPU per call, paid on every 0.1 s poll before."""
    client = getattr(_LOOPBACK, "client", None)
    if client is None:
        client = _LOOPBACK.client = httpx.Client(verify=False, timeout=30.0)
    return client


def _create_tenant(base_url: str, admin_key: str, tenant_id: str | None) -> tuple[str, str]:
    body = {"tenant_id": tenant_id} if tenant_id else {}
    r = _loopback().post(base_url + "/api/v1/admin/tenants", json=body,
                         headers={"X-API-Key": admin_key})
    if r.status_code != 201:
        raise ReferenceServerError(f"creating a tenant failed: {r.status_code} {r.text}")
    data = r.json()
    return data["tenant_id"], data["raw_key"]


class ReferenceServer:
    shared = False

    def __init__(self, profile: str = "memclaw-2026-05-30", db_path: Path | None = None,
                 port: int | None = None, extra_args: Sequence[str] = (),
                 env: dict | None = None, log_path: Path | None = None,
                 auth: str = "gateway", db_url: str | None = None) -> None:
        self.profile = profile
        self.auth = auth
        self._tmpdir: tempfile.TemporaryDirectory | None = None
        if db_path is None or log_path is None:
            self._tmpdir = tempfile.TemporaryDirectory(prefix="refserver-")
        tmp = Path(self._tmpdir.name) if self._tmpdir else None
        self.db_path = Path(db_path) if db_path else tmp / "reference.db"
        # postgresql://... instead of the SQLite file. Unset, FLEETPROBE_DB=postgres gives a
        # fresh database on this process's embedded PostgreSQL (embedded_pg.py): so
        # `FLEETPROBE_DB=postgres pytest` runs every server test on PostgreSQL (make test-pg).
        if db_url is None and os.environ.get("FLEETPROBE_DB") == "postgres":
            from .embedded_pg import shared_database_url

            db_url = shared_database_url()
        self.db_url = db_url
        self.log_path = Path(log_path) if log_path else tmp / "server.log"
        self.port = port or free_port()
        self.extra_args = list(extra_args)
        self.startup_timeout_s = (max(startup_timeout_s(), MODEL_STARTUP_TIMEOUT_S)
                                  if "minilm" in self.extra_args else startup_timeout_s())
        self.admin_key = new_raw_key()
        # The bootstrap tenant's key is chosen here too, so the server never prints one.
        self.default_tenant_id = "default"
        self.default_tenant_key = new_raw_key()
        # `auth="gate"`: the shared gate key every request must send (MEMCLAW_API_KEY's role)
        self.gate_key = new_raw_key() if auth == "gate" else None
        self._env = dict(env or {})
        self._proc: subprocess.Popen | None = None
        self._log = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _command(self) -> list[str]:
        return [sys.executable, "-m", "reference_server", "--profile", self.profile,
                "--host", "127.0.0.1", "--port", str(self.port),
                "--db", self.db_url or str(self.db_path), "--auth", self.auth,
                *self.extra_args]

    def _child_env(self) -> dict[str, str]:
        env = {**os.environ, **self._env}
        env["REFSERVER_ADMIN_KEY"] = self.admin_key
        env["REFSERVER_TENANT_ID"] = self.default_tenant_id
        env["REFSERVER_TENANT_KEY"] = self.default_tenant_key
        env["PYTHONUNBUFFERED"] = "1"  # its output reaches the log as it is written
        if self.gate_key:
            env["REFSERVER_GATE_KEY"] = self.gate_key
        # The child imports this package from the same place the parent did.
        package_root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH"))
                                            if p)
        return env

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> ReferenceServer:
        if self.running:
            return self
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        timeout = self.startup_timeout_s
        with start_slot(time.monotonic() + SLOT_WAIT_S):
            # the deadline runs from when this server may start, not from the queue
            started = time.monotonic()
            self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in _reap
            self._proc = subprocess.Popen(self._command(), env=self._child_env(),
                                          stdout=self._log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL)
            self._wait_healthy(started + timeout, timeout)
        return self

    def _wait_healthy(self, deadline: float, timeout: float) -> None:
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                code = self._proc.returncode
                self._reap()
                raise ReferenceServerError(
                    f"reference server exited with code {code} during start-up; its output:"
                    f"\n{self.log_tail()}")
            try:
                health = _loopback().get(self.base_url + "/api/v1/health", timeout=2.0)
                if health.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        # SIGTERM first, so the child's buffered output reaches the log before we read it.
        self.stop(timeout=5.0)
        raise ReferenceServerError(
            f"reference server did not answer /api/v1/health within {timeout:.0f} s on "
            f"{self.base_url} (a busy machine? raise {ENV_STARTUP_S}); its output:"
            f"\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        """The server's own stdout/stderr, last lines."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        if not text.strip():
            return ("(the server printed nothing: it was still importing or binding; "
                    "a busy machine?)")
        return "\n".join(text.splitlines()[-lines:])

    def create_tenant(self, tenant_id: str | None = None) -> tuple[str, str]:
        return _create_tenant(self.base_url, self.admin_key, tenant_id)

    def stop(self, timeout: float = 10.0) -> None:
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._reap()

    def kill(self) -> None:
        """SIGKILL, no shutdown hooks: what a crash looks like (durability tests)."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._reap()

    def restart(self) -> ReferenceServer:
        """Same db, same port, same keys."""
        self.stop()
        return self.start()

    def _reap(self) -> None:
        self._proc = None
        if self._log:
            self._log.close()
            self._log = None

    def close(self) -> None:
        self.stop()
        if self._tmpdir:
            self._tmpdir.cleanup()
            self._tmpdir = None

    def __enter__(self) -> ReferenceServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
