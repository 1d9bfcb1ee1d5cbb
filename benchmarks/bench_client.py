"""The harness's own per-request overhead against the reference server.

Same GET-by-id, sent alternately through fleetprobe's MemClawClient (tenacity, pacer lookup,
semaphore, Result) and through a bare httpx.AsyncClient; the difference of the medians is
what the harness adds. Also times appending one event to a trace (done once per request).
Target: <= 0.5 ms added at p50.

    .venv/bin/python benchmarks/bench_client.py [--requests 2000] [--profile naive]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time

import httpx

from fleetprobe.client import MemClawClient, Result
from fleetprobe.harness.targets import target_for_server
from fleetprobe.harness.trace import Trace
from reference_server.launch.process import ReferenceServer


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


async def measure(base_url: str, tenant, n: int) -> tuple[list[float], list[float]]:
    harness, raw = [], []
    async with MemClawClient(base_url, max_concurrency=1) as client, \
            httpx.AsyncClient(base_url=base_url) as http:
        written = await client.write(tenant, {"agent_id": "bench", "content":
                                              "Benchmark row for GET-by-id timing."})
        memory_id = written.body["id"]
        path = f"/api/v1/memories/{memory_id}"
        headers, params = tenant.headers(), {"tenant_id": tenant.tenant_id}
        for _ in range(50):  # warm both connection pools
            await client.get(tenant, memory_id)
            await http.get(path, headers=headers, params=params)
        for _ in range(n):
            t0 = time.perf_counter()
            r = await client.get(tenant, memory_id)
            harness.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            response = await http.get(path, headers=headers, params=params)
            response.json()
            raw.append((time.perf_counter() - t0) * 1000)
            assert r.status == response.status_code == 200
    return harness, raw


def event_cost_ms(n: int) -> float:
    with tempfile.TemporaryDirectory() as root:
        trace = Trace(root, "provenance", 0, "bench", {})
        result = Result("GET /api/v1/memories/x", 200, {}, 1.0, 1, None)
        t0 = time.perf_counter()
        for i in range(n):
            trace.event("walk", result, chain_id="chain-000", hop=i % 4, memory_id="m")
        elapsed = (time.perf_counter() - t0) * 1000 / n
        trace.finish(complete=True)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--profile", default="memclaw-2026-05-30")
    args = parser.parse_args()
    with ReferenceServer(profile=args.profile) as server:
        target = target_for_server(server, args.profile)
        harness, raw = asyncio.run(measure(target.base_url, target.tenant, args.requests))
    print(f"GET-by-id x{args.requests} against the reference server ({args.profile})")
    print(f"{'path':<22}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}")
    for name, values in (("fleetprobe client", harness), ("raw httpx", raw)):
        print(f"{name:<22}{pct(values, 50):>10.3f}{pct(values, 95):>10.3f}{pct(values, 99):>10.3f}")
    added = pct(harness, 50) - pct(raw, 50)
    event = event_cost_ms(5000)
    print(f"client overhead at p50: {added:.3f} ms")
    print(f"trace event append:     {event:.3f} ms per event")
    print(f"harness total at p50:   {added + event:.3f} ms (target <= 0.5 ms)")


if __name__ == "__main__":
    main()
