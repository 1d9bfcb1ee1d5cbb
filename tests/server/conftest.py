"""Fixtures for the reference server's own tests: real servers on loopback, one per profile
for the whole session (fresh tenants isolate tests), with rate limits raised except where a
test is about rate limits."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from reference_server.launch.process import ReferenceServer

PROFILES = ("memclaw-2026-05-30", "memclaw-2026-05-31", "proposed", "naive")
FAST_ARGS = ("--search-rate", "100000/minute", "--write-rate", "100000/second",
             "--bulk-rate", "1000/second", "--detection-delay", "0.05")


class Api:
    """A thin MemClaw REST client bound to one key (tests read raw responses)."""

    def __init__(self, base_url: str, key: str, tenant_id: str) -> None:
        self.base_url, self.key, self.tenant_id = base_url, key, tenant_id
        self.http = httpx.Client(base_url=base_url + "/api/v1", timeout=30.0,
                                 headers={"X-API-Key": key})

    def write(self, content: str, **fields: Any) -> httpx.Response:
        return self.http.post("/memories", json={"tenant_id": self.tenant_id,
                                                 "content": content, **fields})

    def get(self, memory_id: str, tenant_id: str | None = None) -> httpx.Response:
        return self.http.get(f"/memories/{memory_id}",
                             params={"tenant_id": tenant_id or self.tenant_id})

    def contradictions(self, memory_id: str) -> httpx.Response:
        return self.http.get(f"/memories/{memory_id}/contradictions",
                             params={"tenant_id": self.tenant_id})

    def search(self, query: str, **fields: Any) -> httpx.Response:
        return self.http.post("/search", json={"tenant_id": self.tenant_id, "query": query,
                                               **fields})

    def list(self, **params: Any) -> httpx.Response:
        return self.http.get("/memories", params={"tenant_id": self.tenant_id, **params})

    def provision(self, agent_id: str, fleet: str | None, trust: int = 1) -> Api:
        body: dict[str, Any] = {"agent_id": agent_id, "initial_trust": trust}
        if fleet is not None:
            body["initial_fleet"] = fleet
        r = self.http.post("/admin/agent-keys/provision", json=body)
        assert r.status_code == 201, r.text
        return Api(self.base_url, r.json()["raw_key"], self.tenant_id)

    def redistribute(self, requester: str, ids: list[str], target: str) -> httpx.Response:
        return self.http.post("/memories/redistribute",
                              params={"tenant_id": self.tenant_id, "agent_id": requester},
                              json={"memory_ids": ids, "target_agent_id": target})

    def close(self) -> None:
        self.http.close()


def ids(response: httpx.Response) -> set[str]:
    assert response.status_code == 200, response.text
    return {item["id"] for item in response.json()["items"]}


@dataclass
class ServerPool:
    servers: dict[str, ReferenceServer]

    def __getitem__(self, profile: str) -> ReferenceServer:
        if profile not in self.servers:
            server = ReferenceServer(profile=profile, extra_args=FAST_ARGS)
            self.servers[profile] = server.start()
        return self.servers[profile]

    def tenant_api(self, profile: str) -> Api:
        server = self[profile]
        tenant_id, key = server.create_tenant()
        return Api(server.base_url, key, tenant_id)


@pytest.fixture(scope="session")
def pool() -> Iterator[ServerPool]:
    pool = ServerPool({})
    yield pool
    for server in pool.servers.values():
        server.close()
