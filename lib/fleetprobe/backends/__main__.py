"""`python -m fleetprobe.backends --backend B --port N --data-dir DIR [--store S]`.

The network guard and the telemetry switches come first, before any backend library loads.
Env: `REFSERVER_ADMIN_KEY` (admin key, as the reference server); never printed.
"""

from __future__ import annotations

import os

from fleetprobe.backends import netguard

for _name, _value in netguard.OFFLINE_ENV.items():
    os.environ[_name] = _value
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
netguard.install()

import argparse  # noqa: E402
import asyncio  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import uvicorn  # noqa: E402

from fleetprobe.backends import BACKENDS, make_backend  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m fleetprobe.backends",
                                description="a memory backend behind MemClaw's wire")
    p.add_argument("--backend", required=True, choices=BACKENDS)
    p.add_argument("--store", default=None,
                   help="langgraph: memory (default), sqlite or postgres; mem0: qdrant "
                        "(default) or pgvector; crewai: lancedb (default) or qdrant-edge")
    p.add_argument("--deployment", default=None,
                   help="how wire scopes map onto the backend's own (docs/backends.md): "
                        "idiomatic (default) or strict")
    p.add_argument("--env-name", default=None,
                   help="the locked environment this process runs in (locks/<name>.lock)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--data-dir", type=Path, required=True,
                   help="directory for the backend's files (and the adapter's key registry)")
    p.add_argument("--log-level", default="warning",
                   choices=["critical", "error", "warning", "info", "debug"])
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    admin_key = os.environ.get("REFSERVER_ADMIN_KEY")
    if not admin_key:
        print("REFSERVER_ADMIN_KEY must be set (the harness sets it)", file=sys.stderr)
        return 2
    # Backends write their own state (mem0's ~/.mem0, CrewAI's storage dir) under data-dir.
    data_dir = args.data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("MEM0_DIR", str(data_dir / "mem0-home"))
    os.environ.setdefault("CREWAI_STORAGE_DIR", str(data_dir / "crewai-home"))
    logging.basicConfig(level=args.log_level.upper())

    from fleetprobe.backends.app import AdapterState, create_app
    from reference_server.governance.auth import KeyRegistry
    from reference_server.pipeline.embedding import HashingEmbedder
    from reference_server.storage import SqliteStorage

    storage = SqliteStorage(data_dir / "adapter-keys.db", HashingEmbedder().dim)
    backend = make_backend(args.backend, data_dir, args.store, args.deployment)
    state = AdapterState(backend, storage,
                         KeyRegistry(storage, admin_key), asyncio.Lock(),
                         env_name=args.env_name)
    uvicorn.run(create_app(state), host=args.host, port=args.port,
                log_level=args.log_level, access_log=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
