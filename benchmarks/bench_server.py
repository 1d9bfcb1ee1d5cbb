"""Reference-server benchmark, both storage backends side by side: GET-by-id, scoped search
and fast-write latency (p50, p99; sequential, loopback, one keep-alive connection) and
throughput with 16 concurrent clients, at 10k and 100k stored memories (1M with --million).

Each store is seeded through the storage layer (SQLite file, or a fresh database on an
embedded PostgreSQL + pgvector), then the real server is started on it and measured over HTTP.
The search is the harness's shape: a tenant key, one fleet in `fleet_ids` (1/8 of the rows
visible), top_k 5. PostgreSQL runs twice: exact ranking (the server's default) and the HNSW
index (`--vector-search hnsw`; bench_recall.py says what it misses). Targets (issue 13, 2
cores): SQLite at 10k GET p50 <= 0.7 ms, fast write p50 <= 1.5 ms, search p50 <= 3 ms;
PostgreSQL search p50 <= 5 ms at 100k, <= 15 ms at 1M.
The machine's load average is printed beside each block: these are shared cores. CPU-ms: the
CPU the server process and (PostgreSQL) its database backends spent per sequential request,
which a busy machine inflates far less than the wall times.

    python benchmarks/bench_server.py [--sizes 10000 100000] [--million] [--requests 300]
        [--backends sqlite postgres] [--stacks auto asyncio-h11]

`--stacks auto asyncio-h11` measures the serving stack too (uvloop + httptools vs uvicorn's
asyncio + h11), interleaved on the same store, so the pair shares the machine's load.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from seeding import FLEETS, Seeded, seed, sentence, store_location  # noqa: E402

from reference_server.launch.process import ReferenceServer  # noqa: E402

FAST_ARGS = ["--search-rate", "1000000/minute", "--write-rate", "1000000/second"]
STACKS = {"auto": [], "asyncio-h11": ["--loop", "asyncio", "--http", "h11"]}
OPS = ("GET by id", "search", "fast write")


class Connection:
    """A keep-alive `http.client` connection: minimal client overhead, so the figures are
    the server's (httpx adds about a millisecond per request on its own)."""

    def __init__(self, port: int, key: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.headers = {"X-API-Key": key, "Content-Type": "application/json"}

    def request(self, method: str, path: str, body: dict | None, expect: int) -> float:
        payload = json.dumps(body) if body is not None else None
        start = time.perf_counter()
        try:
            self.conn.request(method, path, body=payload, headers=self.headers)
            response = self.conn.getresponse()
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            self.conn.close()  # the server closed an idle keep-alive connection: reconnect
            start = time.perf_counter()
            self.conn.request(method, path, body=payload, headers=self.headers)
            response = self.conn.getresponse()
        data = response.read()
        elapsed = (time.perf_counter() - start) * 1000
        if response.status != expect:
            raise RuntimeError(f"{method} {path}: expected {expect}, got {response.status}: "
                               f"{data[:200]!r}")
        return elapsed


Request = tuple[str, str, dict | None]


def throughput(port: int, key: str, make: Callable[[int], Request], expect: int, total: int,
               clients: int = 16) -> float:
    """Requests per second with `clients` concurrent keep-alive connections."""
    def run(worker: int) -> None:
        conn = Connection(port, key)
        for i in range(worker, total, clients):
            conn.request(*make(i), expect)

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(run, range(clients)))
    return total / (time.perf_counter() - start)


def requests_for(seeded: Seeded, rng: random.Random, count: int) -> dict[str, Callable]:
    api, tenant = "/api/v1", seeded.tenant_id
    sample = [rng.choice(seeded.rows) for _ in range(count)]

    def get(i: int) -> Request:
        return "GET", f"{api}/memories/{sample[i % count]['id']}?tenant_id={tenant}", None

    def search(i: int) -> Request:
        row = sample[i % count]
        return "POST", api + "/search", {
            "tenant_id": tenant, "query": " ".join(row["content"].split()[:6]),
            "fleet_ids": [row["fleet_id"]], "top_k": 5}

    def write(i: int) -> Request:
        return "POST", api + "/memories", {
            "tenant_id": tenant, "agent_id": f"agent-{i % 8}", "fleet_id": FLEETS[i % 8],
            "write_mode": "fast",
            "content": f"benchmark write {uuid.uuid4().hex} {sentence(rng, seeded.words)}"}

    return {"GET by id": get, "search": search, "fast write": write}


def server_pids(server: ReferenceServer, db: Path | str) -> list[int]:
    """The server process and, on PostgreSQL, the backends serving its database: whose CPU
    a request costs (a figure the machine's load inflates far less than wall time)."""
    pids = [server._proc.pid] if server._proc is not None else []  # type: ignore[attr-defined]
    if isinstance(db, str):
        import psycopg

        with psycopg.connect(db, autocommit=True) as conn:
            pids += [r[0] for r in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid()").fetchall()]
    return pids


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of the processes (Linux /proc; 0 for a vanished one)."""
    total, tick = 0, os.sysconf("SC_CLK_TCK")
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / tick


def measure_servers(seeded: Seeded, profile: str, requests: int, rng: random.Random,
                    stacks: list[str], rps_requests: int,
                    vector_search: str = "exact") -> dict[tuple[str, str], dict]:
    """One server per serving stack on the same store, all running at once; sequential
    requests alternate between them, so every stack sees the same machine load."""
    kwargs: dict = ({"db_url": seeded.db} if isinstance(seeded.db, str)
                    else {"db_path": seeded.db})
    mode = ["--vector-search", vector_search] if isinstance(seeded.db, str) else []
    servers = {stack: ReferenceServer(profile=profile,
                                      extra_args=[*FAST_ARGS, *STACKS[stack], *mode], **kwargs)
               for stack in stacks}
    try:
        for server in servers.values():
            server.start()
        conns = {stack: Connection(servers[stack].port, seeded.key) for stack in stacks}
        makers = requests_for(seeded, rng, requests)
        for i in range(20):  # warm-up: SQLite loads the tenant's vectors on the first search
            for conn in conns.values():
                conn.request(*makers["search"](i), 200)
                conn.request(*makers["GET by id"](i), 200)
        out = {}
        for op in OPS:
            expect = 201 if op == "fast write" else 200
            latencies: dict[str, list[float]] = {stack: [] for stack in stacks}
            pids = {stack: server_pids(servers[stack], seeded.db) for stack in stacks}
            cpu_before = {stack: cpu_seconds(pids[stack]) for stack in stacks}
            for i in range(requests):
                for stack in stacks:
                    latencies[stack].append(conns[stack].request(*makers[op](i), expect))
            cpu_ms = {stack: (cpu_seconds(pids[stack]) - cpu_before[stack]) * 1000 / requests
                      for stack in stacks}
            for stack in stacks:
                rps = throughput(servers[stack].port, seeded.key, makers[op], expect,
                                 rps_requests)
                out[stack, op] = {"p50": float(np.percentile(latencies[stack], 50)),
                                  "p99": float(np.percentile(latencies[stack], 99)),
                                  "cpu_ms": cpu_ms[stack],
                                  "rps": rps}
        return out
    finally:
        for server in servers.values():
            server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--million", action="store_true", help="also measure at 1M memories")
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgres",
                                                          "postgres-hnsw"],
                        choices=["sqlite", "postgres", "postgres-hnsw"],
                        help="postgres: exact ranking (the default); postgres-hnsw: the index")
    parser.add_argument("--stacks", nargs="+", default=["auto"], choices=sorted(STACKS))
    parser.add_argument("--requests", type=int, default=300, help="sequential requests per op")
    parser.add_argument("--rps-requests", type=int, default=480,
                        help="requests per op for the 16-client throughput")
    parser.add_argument("--profile", default="memclaw-2026-05-30")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    sizes = args.sizes + ([1_000_000] if args.million else [])
    print(f"profile {args.profile}; {args.requests} sequential requests per op (p50/p99 ms); "
          f"req/s with 16 concurrent clients; cores {os.cpu_count()}", flush=True)
    results: list[dict] = []
    for n in sizes:
        block: dict[tuple[str, str], dict] = {}
        for backend in args.backends:
            with tempfile.TemporaryDirectory(prefix="bench-") as tmp, \
                    store_location(backend.split("-")[0], Path(tmp)) as db:
                start = time.perf_counter()
                mode = "hnsw" if backend.endswith("hnsw") else "exact"
                seeded = seed(db, args.profile, n, random.Random(args.seed), vector_search=mode)
                seed_s = time.perf_counter() - start
                load = os.getloadavg()[0]
                print(f"  seeded {n} rows on {backend} in {seed_s:.0f} s "
                      f"(load {load:.1f})", flush=True)
                rng = random.Random(args.seed + 1)
                figures = measure_servers(seeded, args.profile, args.requests, rng,
                                          args.stacks, args.rps_requests, mode)
                load = os.getloadavg()[0]
                for (stack, op), f in figures.items():
                    block[(backend, stack, op)] = f
                    results.append({"stored": n, "backend": backend, "stack": stack,
                                    "op": op, **f, "load": load, "seed_s": seed_s})
        print_block(n, block, args.backends, args.stacks,
                    [r["load"] for r in results if r["stored"] == n])
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


def print_block(n: int, block: dict, backends: list[str], stacks: list[str],
                loads: list[float]) -> None:
    cols = [(b, s) for b in backends for s in stacks]
    label = {c: c[0] if len(stacks) == 1 else f"{c[0]}/{c[1]}" for c in cols}
    print(f"\n{n:,} stored memories (load average {min(loads):.1f}-{max(loads):.1f})")
    header = f"{'op':<11}" + "".join(f" | {label[c]:^34}" for c in cols)
    print(header)
    print(f"{'':<11}" + "".join(f" | {'p50':>7} {'p99':>7} {'CPU-ms':>7} {'req/s@16':>9}"
                                for _ in cols))
    for op in OPS:
        line = f"{op:<11}"
        for c in cols:
            f = block.get((*c, op))
            line += (f" | {f['p50']:>7.2f} {f['p99']:>7.2f} {f['cpu_ms']:>7.2f} {f['rps']:>9.0f}"
                     if f else f" | {'-':>34}")
        print(line, flush=True)


if __name__ == "__main__":
    main()
