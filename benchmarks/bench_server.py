"""Reference-server benchmark: GET-by-id, search and fast-write latency (p50/p99) and
throughput at 1k and 10k stored memories (100k with --large), on loopback.

The store is seeded directly through the storage layer (quick), then the real server is
started on it and measured over HTTP. Prints a table; targets on 2 cores: GET p50 <= 2 ms,
search p50 <= 10 ms at 10k, fast write p50 <= 5 ms.

    python benchmarks/bench_server.py [--large] [--requests 300] [--profile P]
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from reference_server.app import ServerConfig, build_state
from reference_server.auth import new_raw_key
from reference_server.process import ReferenceServer
from reference_server.profiles import get_profile
from reference_server.storage import AgentRow, now_iso
from reference_server.write_pipeline import content_hash

FAST_ARGS = ["--search-rate", "1000000/minute", "--write-rate", "1000000/second"]
FLEETS = [f"fleet-{i}" for i in range(8)]


def vocabulary(rng: random.Random, size: int = 3000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(size)]


def sentence(rng: random.Random, words: list[str]) -> str:
    return " ".join(rng.choice(words) for _ in range(rng.randint(12, 20)))


def seed(db_path: Path, profile: str, n: int, rng: random.Random) -> tuple[str, str, list[dict]]:
    """Tenant, its key and n memories written straight into the store."""
    state = build_state(ServerConfig(get_profile(profile), db_path, new_raw_key()))
    tenant_id, storage = "bench", state.storage
    storage.create_tenant(tenant_id)
    raw_key, _ = state.keys.mint(tenant_id)
    for i, fleet in enumerate(FLEETS):
        storage.upsert_agent(AgentRow(tenant_id, f"agent-{i}", fleet, 1))
    words, rows = vocabulary(rng), []
    for i in range(n):
        fleet = FLEETS[i % len(FLEETS)]
        content = f"{sentence(rng, words)} {i}"
        row = {"id": str(uuid.uuid4()), "tenant_id": tenant_id, "fleet_id": fleet,
               "agent_id": f"agent-{i % len(FLEETS)}", "memory_type": "fact", "title": None,
               "content": content, "weight": 0.5, "source_uri": None, "run_id": None,
               "metadata": {"write_mode": "fast"}, "content_hash": content_hash(
                   tenant_id, fleet, content), "client_request_id": None,
               "created_at": now_iso(), "expires_at": None, "deleted_at": None,
               "ts_valid_start": None, "ts_valid_end": None, "subject_entity_id": None,
               "predicate": None, "object_value": None, "status": "active",
               "visibility": "scope_team", "recall_count": 0, "last_recalled_at": None,
               "supersedes_id": None}
        rows.append(row)
    storage.insert_many(rows, [state.embedder.embed(r["content"]) for r in rows])
    storage.close()
    return tenant_id, raw_key, rows


class Connection:
    """A keep-alive `http.client` connection: minimal client overhead, so the figures are
    the server's (httpx adds about a millisecond per request on its own)."""

    def __init__(self, port: int, key: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
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


def measure(n: int, profile: str, requests: int, rng: random.Random) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        seed_start = time.perf_counter()
        tenant_id, key, rows = seed(db, profile, n, rng)
        seed_s = time.perf_counter() - seed_start
        with ReferenceServer(profile=profile, db_path=db, extra_args=FAST_ARGS) as server:
            conn = Connection(server.port, key)
            sample = [rng.choice(rows) for _ in range(requests)]
            api = "/api/v1"
            # warm-up: the first search loads the tenant's vectors into memory
            conn.request("POST", api + "/search", {"tenant_id": tenant_id, "query": "warm"}, 200)

            def get(i: int) -> Request:
                row_id = sample[i % requests]["id"]
                return "GET", f"{api}/memories/{row_id}?tenant_id={tenant_id}", None

            def search(i: int) -> Request:
                row = sample[i % requests]
                return "POST", api + "/search", {
                    "tenant_id": tenant_id, "query": " ".join(row["content"].split()[:6]),
                    "fleet_ids": [row["fleet_id"]], "top_k": 5}

            def write(i: int) -> Request:
                return "POST", api + "/memories", {
                    "tenant_id": tenant_id, "agent_id": f"agent-{i % 8}",
                    "fleet_id": FLEETS[i % 8], "write_mode": "fast",
                    "content": f"benchmark write {uuid.uuid4().hex} {sentence(rng, ['x'])}"}

            results = []
            for name, make, expect in (("GET by id", get, 200), ("search", search, 200),
                                       ("fast write", write, 201)):
                latencies = [conn.request(*make(i), expect) for i in range(requests)]
                p50, p99 = (float(np.percentile(latencies, q)) for q in (50, 99))
                rps = throughput(server.port, key, make, expect, requests * 2)
                results.append({"stored": n, "op": name, "p50_ms": p50, "p99_ms": p99,
                                "mean_ms": statistics.fmean(latencies), "rps_16": rps,
                                "seed_s": seed_s})
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--large", action="store_true", help="also measure at 100k memories")
    parser.add_argument("--sizes", type=int, nargs="+", help="stored-memory counts to measure")
    parser.add_argument("--requests", type=int, default=300, help="sequential requests per op")
    parser.add_argument("--profile", default="memclaw-2026-05-30")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    sizes = args.sizes or [1_000, 10_000] + ([100_000] if args.large else [])
    rng = random.Random(args.seed)
    print(f"profile {args.profile}, {args.requests} sequential requests per op, "
          "throughput with 16 concurrent clients")
    print(f"{'stored':>7}  {'op':<11} {'p50 ms':>7} {'p99 ms':>7} {'mean ms':>8} "
          f"{'req/s@16':>9}  seed s")
    for n in sizes:
        for r in measure(n, args.profile, args.requests, rng):
            print(f"{r['stored']:>7}  {r['op']:<11} {r['p50_ms']:>7.2f} {r['p99_ms']:>7.2f} "
                  f"{r['mean_ms']:>8.2f} {r['rps_16']:>9.0f}  {r['seed_s']:.1f}")


if __name__ == "__main__":
    main()
