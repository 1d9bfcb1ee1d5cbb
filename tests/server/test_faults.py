"""Concurrency, restart and kill -9 durability, rate limits: against real server processes
on loopback, bounded in count and time."""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx
import pytest

from reference_server.launch.process import ReferenceServer

from .conftest import FAST_ARGS, Api, ServerPool, ids

WRITERS, WRITES_EACH, READERS = 8, 40, 4


async def _hammer(base_url: str, key: str, tenant_id: str) -> tuple[list[str], int]:
    """Concurrent writers and readers; returns acknowledged ids and the reader error count."""
    acknowledged: list[str] = []
    reader_errors = 0
    stop = asyncio.Event()
    async with httpx.AsyncClient(base_url=base_url + "/api/v1", timeout=30.0,
                                 headers={"X-API-Key": key}) as http:
        async def writer(n: int) -> None:
            for i in range(WRITES_EACH):
                r = await http.post("/memories", json={
                    "tenant_id": tenant_id, "agent_id": f"writer-{n}", "fleet_id": "F1",
                    "content": f"Concurrent write number {i} from writer {n} about shard {i}"})
                assert r.status_code == 201, r.text
                acknowledged.append(r.json()["id"])

        async def reader() -> None:
            nonlocal reader_errors
            while not stop.is_set():
                r = await http.post("/search", json={"tenant_id": tenant_id,
                                                     "query": "concurrent write shard"})
                reader_errors += r.status_code != 200
                if acknowledged:
                    g = await http.get(f"/memories/{acknowledged[-1]}",
                                       params={"tenant_id": tenant_id})
                    reader_errors += g.status_code != 200

        readers = [asyncio.create_task(reader()) for _ in range(READERS)]
        await asyncio.gather(*(writer(n) for n in range(WRITERS)))
        stop.set()
        await asyncio.gather(*readers)
    return acknowledged, reader_errors


def test_concurrent_writers_and_readers_lose_nothing(pool: ServerPool) -> None:
    api = pool.tenant_api("memclaw-2026-05-30")
    acknowledged, reader_errors = asyncio.run(_hammer(api.base_url, api.key, api.tenant_id))
    assert len(acknowledged) == len(set(acknowledged)) == WRITERS * WRITES_EACH
    assert reader_errors == 0
    stored = ids(api.list(limit=500))
    assert stored == set(acknowledged)


@pytest.fixture
def own_server(tmp_path) -> ReferenceServer:
    server = ReferenceServer(profile="memclaw-2026-05-30", db_path=tmp_path / "durable.db",
                             extra_args=(*FAST_ARGS[:-2], "--detection-delay", "1.5"),
                             log_path=tmp_path / "server.log")
    yield server.start()
    server.close()


def _fact(api: Api, subject: str, city: str) -> dict:
    r = api.write(f"The ledger service region is currently set to {city} for all traffic",
                  agent_id="ops-writer", fleet_id="ops", subject_entity_id=subject,
                  predicate="region", object_value=city)
    assert r.status_code == 201, r.text
    return r.json()


def test_kill_9_loses_no_acknowledged_write_and_no_pending_detection(
        own_server: ReferenceServer) -> None:
    tenant_id, key = own_server.create_tenant()
    api = Api(own_server.base_url, key, tenant_id)
    written = [api.write(f"Durable note {i} about the ledger migration plan",
                         agent_id="w").json()["id"] for i in range(30)]
    subject = str(uuid.uuid4())
    old, new = _fact(api, subject, "Frankfurt"), _fact(api, subject, "Dublin")
    assert api.contradictions(new["id"]).json()["detection_status"] == "pending"
    api.close()
    own_server.kill()  # SIGKILL right after the acknowledgements, detection still queued
    own_server.start()
    api = Api(own_server.base_url, key, tenant_id)
    assert all(api.get(i).status_code == 200 for i in written)
    deadline = time.monotonic() + 10
    while api.get(old["id"]).json()["status"] != "outdated" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert api.get(old["id"]).json()["status"] == "outdated"
    assert api.get(new["id"]).json()["supersedes_id"] == old["id"]
    assert api.contradictions(new["id"]).json()["detection_status"] == "completed"


def test_restart_keeps_rows_keys_and_agents(own_server: ReferenceServer) -> None:
    tenant_id, key = own_server.create_tenant()
    api = Api(own_server.base_url, key, tenant_id)
    agent = api.provision("kept", "F9", trust=2)
    row = agent.write("A memory that must survive an orderly restart").json()
    own_server.restart()
    assert agent.get(row["id"]).status_code == 200  # the agent key still resolves
    assert agent.http.get("/whoami").json()["agent_id"] == "kept"
    assert api.http.get("/agents/kept").json()["trust_level"] == 2


def test_rate_limits_answer_429_with_memclaw_message(start_limited) -> None:
    server = start_limited
    tenant_id, key = server.create_tenant()
    other_id, other_key = server.create_tenant()
    api, other = Api(server.base_url, key, tenant_id), Api(server.base_url, other_key, other_id)
    statuses = [api.write(f"Rate limited write number {i} for the tenant",
                          agent_id="w").status_code for i in range(14)]
    assert statuses.count(201) == 10 and statuses.count(429) == 4
    limited = api.write("One more write that is over the limit", agent_id="w")
    assert limited.json() == {
        "detail": "Rate limit exceeded: 10 per 1 second. Try again later.",
        "error": {"code": "RATE_LIMITED",
                  "message": "Rate limit exceeded: 10 per 1 second. Try again later."}}
    assert other.write("Another tenant has its own write budget", agent_id="w").status_code == 201
    searches = [api.search("rate limited write").status_code for _ in range(101)]
    assert searches[:100] == [200] * 100 and searches[100] == 429
    assert api.search("x" * 10).json()["detail"] == (
        "Rate limit exceeded: 100 per 1 minute. Try again later.")
    assert api.get(api.list().json()["items"][0]["id"]).status_code == 200  # reads by id: no limit


@pytest.fixture
def start_limited(tmp_path) -> ReferenceServer:
    server = ReferenceServer(profile="memclaw-2026-05-30", log_path=tmp_path / "s.log",
                             db_path=tmp_path / "limited.db")
    yield server.start()
    server.close()


async def _same_key_twice(base_url: str, key: str, tenant_id: str) -> list[httpx.Response]:
    body = {"tenant_id": tenant_id, "agent_id": "slow", "write_mode": "strong",
            "content": "A strong write that waits for simulated enrichment"}
    headers = {"X-API-Key": key, "Idempotency-Key": "same-key"}
    async with httpx.AsyncClient(base_url=base_url + "/api/v1", timeout=60.0) as http:
        first = asyncio.create_task(http.post("/memories", json=body, headers=headers))
        await asyncio.sleep(0.2)  # the first write is now inside the simulated enrichment
        second = await http.post("/memories", json=body, headers=headers)
        done = await first
        replay = await http.post("/memories", json=body, headers=headers)
    return [done, second, replay]


def test_cli_overrides_and_latency_model(tmp_path) -> None:
    """With --latency-model a strong write waits in the simulated enrichment pool; a second
    write with the same Idempotency-Key meanwhile gets MemClaw's 409, then a replay."""
    with ReferenceServer(profile="proposed", db_path=tmp_path / "o.db",
                         extra_args=["--search-rate", "30/second", "--write-rate", "5/second",
                                     "--rate-limit-key", "key", "--latency-model"]) as server:
        version = httpx.get(server.base_url + "/api/v1/version").json()
        tenant_id, key = server.create_tenant()
        done, second, replay = asyncio.run(_same_key_twice(server.base_url, key, tenant_id))
        tenant = Api(server.base_url, key, tenant_id)
        agent = tenant.provision("own-bucket", "F1")
        fast = [tenant.write(f"Per-key bucket write {i} of the tenant key", agent_id="k",
                             write_mode="fast").status_code for i in range(6)]
        other_key = agent.write("The agent key has its own write bucket", write_mode="fast")
    assert done.status_code == 201
    assert second.status_code == 409
    assert second.json()["detail"] == "Idempotency-Key still in progress; retry shortly"
    assert replay.status_code == 201 and replay.json()["id"] == done.json()["id"]
    assert fast.count(429) >= 1 and other_key.status_code == 201
    assert version["profile"] == "proposed"
    assert version["rate_limits"] == {"write": "5/second", "search": "30/second",
                                      "bulk": "2/second"}
    assert version["latency_simulated"] is True
