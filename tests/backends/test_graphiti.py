"""Graphiti on embedded Kuzu behind the wire (docs/backends.md, Graphiti), its ingestion
through the scripted model: a write is an episode Graphiti extracts entities and facts from
(every prompt answered by a rule, none unmatched), a search finds it by its facts and its
text within the named `group_id` partitions, and the two deployments differ where
docs/backends.md says: the previous episodes Graphiti puts in an ingestion prompt, and GET
by id across tenants (`EpisodicNode.get_by_uuid` takes no partition)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from fleetprobe.backends.graphiti_backend import part
from fleetprobe.backends.process import BackendServer

pytestmark = pytest.mark.backends


class Tenant:
    def __init__(self, server: BackendServer) -> None:
        self.server = server
        self.tenant_id, key = server.create_tenant()
        self.http = httpx.Client(base_url=server.base_url + "/api/v1", timeout=120,
                                 headers={"X-API-Key": key})

    def write(self, content: str, agent: str, fleet: str,
              visibility: str = "scope_team") -> str:
        r = self.http.post("/memories", json={
            "tenant_id": self.tenant_id, "fleet_id": fleet, "content": content,
            "agent_id": agent, "visibility": visibility})
        assert r.status_code == 201, r.text
        return r.json()["id"]

    def search(self, query: str, fleets: list[str]) -> list[str]:
        r = self.http.post("/search", json={"tenant_id": self.tenant_id, "query": query,
                                            "fleet_ids": fleets, "top_k": 10})
        assert r.status_code == 200, r.text
        return [item["id"] for item in r.json()["items"]]

    def model_calls(self) -> list[dict[str, Any]]:
        trace = self.server.model_trace  # written from the first request the model answers
        return [json.loads(line) for line in trace.read_text().splitlines()
                ] if trace.exists() else []


def test_group_id_segments_stay_distinct() -> None:
    # Graphiti allows [A-Za-z0-9_-] in a group_id; ids differing only in other characters
    # (or in `_`, the escape) stay distinct partitions, and never contain the separator "__"
    ids = ["fleet-1", "fleet_1", "fleet.1", "fleet%1", "flеet-1", "f1/x", "a__b"]
    parts = [part(i) for i in ids]
    assert len(set(parts)) == len(ids)
    assert all("__" not in p and p.replace("_", "").replace("-", "").isalnum() for p in parts)


def test_write_runs_graphitis_ingestion_and_search_finds_it(
        backend_server: Callable[..., BackendServer]) -> None:
    t = Tenant(backend_server("graphiti"))
    version = t.http.get("/version").json()
    assert version["backend_package"] == "graphiti-core"
    assert version["network"]["outbound_refused"] == 0  # model and Kuzu both local
    before = len(t.model_calls())
    mid = t.write("Marlow leads Project Kestrel. Kestrel ships from Rotterdam.", "a1", "f1")
    calls = t.model_calls()[before:]
    kinds = {c["kind"] for c in calls}
    assert {"graphiti.extract_entities", "graphiti.extract_edges", "embedding"} <= kinds
    assert "unmatched" not in kinds
    edges = next(json.loads(c["answer"]) for c in calls
                 if c["kind"] == "graphiti.extract_edges")["edges"]
    assert {e["fact"] for e in edges} == {"Marlow leads Project Kestrel.",
                                          "Kestrel ships from Rotterdam."}
    assert mid in t.search("Marlow Kestrel", ["f1"])
    assert mid not in t.search("Marlow Kestrel", ["f2"])  # another partition
    assert mid not in t.search("Marlow Kestrel", ["f"])  # equality, not a prefix
    patched = t.http.patch(f"/memories/{mid}", params={"tenant_id": t.tenant_id},
                           json={"content": "Marlow leads Project Heron."})
    assert patched.status_code == 501  # no episode update in Graphiti's API
    listed = t.http.get("/memories", params={"tenant_id": t.tenant_id, "fleet_id": "f1"})
    assert mid in [i["id"] for i in listed.json()["items"]]
    assert t.http.delete(f"/memories/{mid}", params={"tenant_id": t.tenant_id}
                         ).status_code == 204
    assert mid not in t.search("Marlow Kestrel", ["f1"])


# Graphiti puts the partition's previous episodes in every ingestion prompt
# (`retrieve_episodes(group_ids=[group_id])`): with the fleet as the partition (idiomatic)
# an agent's private episode is in a fleet-mate's prompt; with a partition per private row
# (strict) it is not.
PRIVATE_IN_MATES_PROMPT = {"idiomatic": True, "strict": False}
# GET by id: one Kuzu database for every tenant (idiomatic) vs one per tenant (strict)
OTHER_TENANT_GETS_BY_ID = {"idiomatic": True, "strict": False}


@pytest.mark.parametrize("deployment", ["idiomatic", "strict"])
def test_deployments_differ_as_documented(
        deployment: str, backend_server: Callable[..., BackendServer]) -> None:
    server = backend_server("graphiti", None if deployment == "idiomatic" else deployment)
    t = Tenant(server)
    secret = "Quillon vault code rotates at dusk"
    mid = t.write(secret, "owner", "f1", visibility="scope_agent")
    before = len(t.model_calls())
    t.write("Ferrand reviews the Quillon rota", "mate", "f1")
    prompts = " ".join(json.dumps(c.get("messages")) for c in t.model_calls()[before:])
    assert (secret in prompts) is PRIVATE_IN_MATES_PROMPT[deployment]
    other = Tenant(server)
    got = other.http.get(f"/memories/{mid}", params={"tenant_id": other.tenant_id})
    assert (got.status_code == 200) is OTHER_TENANT_GETS_BY_ID[deployment], got.text
