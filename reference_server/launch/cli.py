"""`python -m reference_server --profile P --host 127.0.0.1 --port N --db PATH`.

Env: `REFSERVER_ADMIN_KEY` (admin key), `REFSERVER_TENANT_ID` (default `default`) and
`REFSERVER_TENANT_KEY` (its key). A key not given by env is generated and printed once to
stderr; keys given by env are never printed or logged.

`--auth` picks the credential shape (governance/auth.py): `gateway` (default; tenant and agent
keys), `gate` (a shared gate key read from the variable `--gate-key-env` names, default
`REFSERVER_GATE_KEY`, plus `X-Tenant-ID` and a client-asserted `X-Agent-ID`, like a
self-hosted MemClaw with `MEMCLAW_API_KEY`) or `headers` (no key at all).
"""

from __future__ import annotations

import os

# Before numpy loads: one event loop does all the work, and BLAS worker threads only contend
# with it (a 10k x 384 mat-vec is ~10x slower multi-threaded on a busy 2-core machine).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import uvicorn  # noqa: E402

from ..api.app import BODY_STALL_S, ServerConfig, build_state, create_app  # noqa: E402
from ..api.state import ServerState  # noqa: E402
from ..governance.auth import AUTH_MODES, hash_key, new_raw_key  # noqa: E402
from ..governance.profiles import DEFAULT_PROFILE, PROFILES, get_profile  # noqa: E402
from ..governance.ratelimit import parse_rate  # noqa: E402
from ..pipeline.warmup import warm_up  # noqa: E402
from .connections import HEADER_TIMEOUT_S, MAX_CONNECTIONS_PER_CLIENT, http_protocol  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m reference_server",
                                description="fleetprobe reference server (MemClaw wire format)")
    p.add_argument("--profile", default=DEFAULT_PROFILE, choices=sorted(PROFILES))
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--db", type=_db, default=Path("reference_server.db"),
                   help="SQLite file (created if missing), or postgresql://... (PostgreSQL + "
                        "pgvector, the `pg` extra; schema created at start)")
    p.add_argument("--search-rate", type=_rate, help='e.g. "100/minute" (profile default)')
    p.add_argument("--write-rate", type=_rate, help='e.g. "10/second" (profile default)')
    p.add_argument("--bulk-rate", type=_rate, help='e.g. "2/second" (profile default)')
    p.add_argument("--rate-limit-key", choices=["tenant", "key"],
                   help="rate-limit bucket: per tenant (the paper) or per API key (MemClaw's code)")
    p.add_argument("--detection-delay", type=float, help="seconds before a contradiction job runs")
    p.add_argument("--latency-model", action="store_true",
                   help="simulate strong-mode enrichment latency (version reports it)")
    p.add_argument("--auth", default="gateway", choices=list(AUTH_MODES),
                   help="credential shape: gateway keys, shared gate key + headers, headers")
    p.add_argument("--gate-key-env", default="REFSERVER_GATE_KEY",
                   help="with --auth gate: the environment variable holding the gate key")
    p.add_argument("--embedder", default="hashing", choices=["hashing", "minilm"],
                   help="hashing (offline default) or minilm (all-MiniLM-L6-v2, the embed extra)")
    p.add_argument("--embed-kernel", default="lazy", choices=["lazy", "eager"],
                   help="numba kernels (the hashing embedder's many-word generator, the "
                        "search's int8 product): each loaded on a thread at its first use "
                        "(lazy), or both before the port opens (eager)")
    p.add_argument("--vector-search", default="exact", choices=["exact", "hnsw"],
                   help="PostgreSQL: exact similarity ranking (default) or the HNSW index")
    p.add_argument("--loop", default="auto", choices=["auto", "asyncio", "uvloop"],
                   help="event loop (auto: uvloop when installed)")
    p.add_argument("--http", default="auto", choices=["auto", "h11", "httptools"],
                   help="HTTP parser (auto: httptools when installed)")
    p.add_argument("--header-timeout", type=float, default=HEADER_TIMEOUT_S,
                   help="close a connection without complete request headers after this many "
                        "seconds (checked every period: closed within 2x)")
    p.add_argument("--max-connections-per-client", type=int,
                   default=MAX_CONNECTIONS_PER_CLIENT,
                   help="close a client address's connections beyond this many open at once")
    p.add_argument("--body-timeout", type=float, default=BODY_STALL_S,
                   help="answer 408 and close when a request body sends nothing this long")
    p.add_argument("--log-level", default="warning",
                   choices=["critical", "error", "warning", "info", "debug"])
    args = p.parse_args(argv)
    if args.max_connections_per_client < 1:
        p.error("--max-connections-per-client must be at least 1")
    return args


def _db(text: str) -> Path | str:
    return text if text.startswith(("postgresql://", "postgres://")) else Path(text)


def _rate(text: str) -> str:
    try:
        return parse_rate(text).spec
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _secret_from_env(name: str, what: str) -> str:
    value = os.environ.get(name)
    if value:
        return value
    value = new_raw_key()
    print(f"reference_server: generated {what} (set {name} to choose one): {value}",
          file=sys.stderr, flush=True)
    return value


def bootstrap_tenant(state: ServerState) -> None:
    tenant_id = os.environ.get("REFSERVER_TENANT_ID") or "default"
    raw_key = _secret_from_env("REFSERVER_TENANT_KEY", f"key for tenant '{tenant_id}'")
    state.storage.create_tenant(tenant_id)
    if state.storage.find_key(hash_key(raw_key)) is None:
        state.keys.mint(tenant_id, label="bootstrap tenant key", raw_key=raw_key)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr)
    profile = get_profile(args.profile).with_overrides(
        search_rate=args.search_rate, write_rate=args.write_rate, bulk_rate=args.bulk_rate,
        detection_delay_s=args.detection_delay, rate_limit_key=args.rate_limit_key)
    admin_key = _secret_from_env("REFSERVER_ADMIN_KEY", "admin key")
    gate_key = _secret_from_env(args.gate_key_env, "gate key") if args.auth == "gate" else None
    state = build_state(ServerConfig(profile=profile, db_path=args.db, admin_key=admin_key,
                                     latency_model=args.latency_model, auth_mode=args.auth,
                                     gate_key=gate_key, embedder=args.embedder,
                                     vector_search=args.vector_search))
    bootstrap_tenant(state)
    if args.embed_kernel == "eager":
        # Before the port opens (ReferenceServer waits for /health): loaded on a thread
        # after it, the kernels met the first bulk half-loaded, which then took the slow
        # paths while their compilation took the CPU (issue 35: 1.7 s instead of 0.3 s)
        warm_up(args.embedder == "hashing")
    # CPU work (embedding, search scoring) runs in worker threads; a short GIL switch
    # interval lets the event loop thread take the GIL back within ~1 ms, so one heavy
    # request does not hold other tenants' requests (default 5 ms per hand-off).
    sys.setswitchinterval(0.001)
    uvicorn.run(create_app(state, body_stall_s=args.body_timeout), host=args.host,
                port=args.port, log_level=args.log_level,
                access_log=args.log_level in ("info", "debug"), loop=args.loop,
                http=http_protocol(args.http, args.header_timeout,
                                   args.max_connections_per_client))


if __name__ == "__main__":
    main()
