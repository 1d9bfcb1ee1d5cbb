"""`ReferenceServer`: run the real server as a child process on loopback (tests, harness).

    with ReferenceServer(profile="memclaw-2026-05-31") as server:
        tenant_id, key = server.create_tenant()
        httpx.get(server.base_url + "/api/v1/version")

Keys are passed by environment (never on the command line, never printed).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import httpx

from .auth import new_raw_key

STARTUP_TIMEOUT_S = 20.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ReferenceServerError(RuntimeError):
    pass


class ReferenceServer:
    def __init__(self, profile: str = "memclaw-2026-05-30", db_path: Path | None = None,
                 port: int | None = None, extra_args: Sequence[str] = (),
                 env: dict | None = None, log_path: Path | None = None,
                 db_url: str | None = None) -> None:
        self.profile = profile
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
        self.admin_key = new_raw_key()
        # The bootstrap tenant's key is chosen here too, so the server never prints one.
        self.default_tenant_id = "default"
        self.default_tenant_key = new_raw_key()
        self._env = dict(env or {})
        self._proc: subprocess.Popen | None = None
        self._log = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _command(self) -> list[str]:
        return [sys.executable, "-m", "reference_server", "--profile", self.profile,
                "--host", "127.0.0.1", "--port", str(self.port),
                "--db", self.db_url or str(self.db_path), *self.extra_args]

    def _child_env(self) -> dict[str, str]:
        env = {**os.environ, **self._env}
        env["REFSERVER_ADMIN_KEY"] = self.admin_key
        env["REFSERVER_TENANT_ID"] = self.default_tenant_id
        env["REFSERVER_TENANT_KEY"] = self.default_tenant_key
        # The child imports this package from the same place the parent did.
        package_root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH"))
                                            if p)
        return env

    def start(self) -> ReferenceServer:
        if self._proc is not None and self._proc.poll() is None:
            return self
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # closed in _reap
        self._proc = subprocess.Popen(self._command(), env=self._child_env(),
                                      stdout=self._log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL)
        self._wait_healthy()
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise ReferenceServerError(
                    f"reference server exited with code {self._proc.returncode} during "
                    f"startup; log tail:\n{self.log_tail()}")
            try:
                if httpx.get(self.base_url + "/api/v1/health", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.kill()
        raise ReferenceServerError(
            f"reference server did not answer /api/v1/health within {STARTUP_TIMEOUT_S:.0f} s "
            f"on {self.base_url}; log tail:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def create_tenant(self, tenant_id: str | None = None) -> tuple[str, str]:
        body = {"tenant_id": tenant_id} if tenant_id else {}
        r = httpx.post(self.base_url + "/api/v1/admin/tenants", json=body,
                       headers={"X-API-Key": self.admin_key}, timeout=10.0)
        if r.status_code != 201:
            raise ReferenceServerError(f"creating a tenant failed: {r.status_code} {r.text}")
        data = r.json()
        return data["tenant_id"], data["raw_key"]

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
