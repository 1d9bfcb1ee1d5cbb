"""Governance over time (issue 24): what `hardened` closes and MemClaw's profiles keep.

- a row past its `expires_at` is gone from every path on `hardened` (GET, list, search,
  recall, the entity's linked memories, the exact-duplicate gate), and still served by the
  MemClaw profiles (MemClaw stores expires_at and filters on it nowhere);
- an agent re-created under a deleted agent's id owns nothing its predecessor wrote on
  `hardened` (its rows pass to a retired owner id the tenant key still reads), and inherits
  the predecessor's private rows on the MemClaw profiles (rows belong to the id);
- a bulk write whose agent is deleted while it runs stops there on `hardened` and says how
  many items it wrote; on the MemClaw profiles it writes on under the deleted agent's id;
- deleting a row withdraws the insights derived from it on `hardened`; on the MemClaw
  profiles the insight (a memory of its own) keeps naming the deleted row and its object.
Each test fails against `hardened` with the profile's switch off (the MemClaw profiles are
that case)."""

from __future__ import annotations

import hashlib
import threading
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from .conftest import Api, ServerPool, ids

FORGETTING = ("hardened",)
MEMCLAW = ("memclaw-2026-05-31",)


def _soon(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat()


def _expiring(tenant: Api, agent: Api, words: str) -> tuple[str, str]:
    """An entity and a team row linked to it that expires in 0.6 s; (row id, entity id)."""
    entity = tenant.http.post("/entities/upsert", json={
        "tenant_id": tenant.tenant_id, "fleet_id": "fleet-a", "entity_type": "service",
        "canonical_name": f"svc {words}"}).json()["id"]
    r = agent.write(words, fleet_id="fleet-a", visibility="scope_team", expires_at=_soon(0.6),
                    entity_links=[{"entity_id": entity, "role": "mentioned"}])
    assert r.status_code == 201, r.text
    return r.json()["id"], entity


def _paths(tenant: Api, agent: Api, memory_id: str, entity: str, words: str) -> dict[str, bool]:
    """Which paths still return the row (as its own writer; the tenant key for the list)."""
    linked = agent.http.get(f"/entities/{entity}", params={"tenant_id": agent.tenant_id})
    recall = agent.http.post("/recall", json={"tenant_id": agent.tenant_id, "query": words})
    return {
        "get": agent.get(memory_id).status_code == 200,
        "list": memory_id in ids(tenant.list(agent_id="ex1", limit=500)),
        "search": memory_id in ids(agent.search(words)),
        "recall": memory_id in {m["id"] for m in recall.json()["memories"]},
        "entity": memory_id in {m["id"] for m in linked.json()["linked_memories"]},
        "duplicate": agent.write(words, fleet_id="fleet-a",
                                 visibility="scope_team").status_code == 409,
    }


@pytest.mark.parametrize("profile", FORGETTING + MEMCLAW)
def test_an_expired_row_is_gone_from_every_path_on_hardened_only(pool: ServerPool,
                                                                 profile: str) -> None:
    tenant = pool.tenant_api(profile)
    agent = tenant.provision("ex1", "fleet-a")
    words = "Quartz lantern harbour ledger expires soon with its own words"
    memory_id, entity = _expiring(tenant, agent, words)
    assert agent.get(memory_id).status_code == 200  # alive before its expires_at
    time.sleep(0.8)
    shown = _paths(tenant, agent, memory_id, entity, words)
    if profile in FORGETTING:
        assert not any(shown.values()), shown
    else:  # MemClaw: expires_at is stored and filtered nowhere
        assert all(shown.values()), shown


@pytest.mark.parametrize("profile", FORGETTING + MEMCLAW)
def test_a_recreated_agent_inherits_nothing_on_hardened(pool: ServerPool, profile: str) -> None:
    tenant = pool.tenant_api(profile)
    first = tenant.provision("reused", "fleet-a")
    r = first.write("Private cobalt meadow journal of the first agent", fleet_id="fleet-a",
                    visibility="scope_agent")
    assert r.status_code == 201, r.text
    private = r.json()["id"]
    deleted = tenant.http.delete("/agents/reused", params={"tenant_id": tenant.tenant_id})
    assert deleted.status_code == 204
    second = tenant.provision("reused", "fleet-a")
    inherited = second.get(private).status_code == 200
    listed = private in ids(second.list(agent_id="reused", limit=500))
    assert tenant.get(private).status_code == 200  # the tenant key still reads the row
    if profile in FORGETTING:
        assert not inherited and not listed
        assert tenant.get(private).json()["agent_id"] != "reused"
    else:  # MemClaw: rows belong to the id
        assert inherited and listed


def _bulk_across_deletion(tenant: Api, agent: Api, agent_id: str) -> tuple[httpx.Response,
                                                                            str, list[str]]:
    """A bulk of 100 items by the agent's key; the agent deleted once its first row is
    stored. Returns the bulk's answer, the deletion's answer time and the rows' created_at."""
    # ~4,000 characters of words of its own per item: the bulk embeds its chunks off the
    # event loop (pipeline/bulk.py), so the deletion can land between two chunks
    items = [{"content": "In flight item " + " ".join(
        hashlib.sha256(f"{i}:{j}".encode()).hexdigest()[:9] for j in range(400))}
        for i in range(100)]
    out: dict[str, httpx.Response] = {}

    def send() -> None:
        out["r"] = agent.http.post("/memories/bulk", headers={"X-Bulk-Attempt-Id": "inflight"},
                                   json={"tenant_id": agent.tenant_id, "agent_id": agent_id,
                                         "fleet_id": "fleet-a", "visibility": "scope_team",
                                         "items": items})

    worker = threading.Thread(target=send)
    worker.start()
    while worker.is_alive() and not ids(tenant.list(agent_id=agent_id, limit=5)):
        time.sleep(0.002)
    r = tenant.http.delete(f"/agents/{agent_id}", params={"tenant_id": tenant.tenant_id})
    acked = datetime.now(UTC).isoformat()
    assert r.status_code == 204
    worker.join()
    rows = tenant.list(limit=500).json()["items"]  # hardened retires the owner id: by content
    return out["r"], acked, [row["created_at"] for row in rows
                             if row["content"].startswith("In flight item")]


@pytest.mark.parametrize("profile", FORGETTING + MEMCLAW)
def test_a_bulk_stops_at_its_agents_deletion_on_hardened(pool: ServerPool, profile: str) -> None:
    tenant = pool.tenant_api(profile)
    agent = tenant.provision("bulker", "fleet-a")
    answer, acked, stamps = _bulk_across_deletion(tenant, agent, "bulker")
    after = [s for s in stamps if s.replace("Z", "+00:00") > acked]
    body = answer.json()
    if profile in FORGETTING:
        assert after == [], f"{len(after)} rows written after the deletion"
        assert body["written"] == len(stamps) < 100
        assert body["stopped"]  # the reason, in words
    else:
        assert after, "the bulk finished before the deletion: nothing in flight was tested"
        assert body["created"] == 100


@pytest.mark.parametrize("profile", FORGETTING + MEMCLAW)
def test_deleting_a_row_withdraws_its_insights_on_hardened(pool: ServerPool,
                                                           profile: str) -> None:
    tenant = pool.tenant_api(profile)
    owner = tenant.provision("writer", "fleet-a")
    analyst = tenant.provision("analyst", "fleet-a", trust=2)
    entity = tenant.http.post("/entities/upsert", json={
        "tenant_id": tenant.tenant_id, "fleet_id": "fleet-a", "entity_type": "project",
        "canonical_name": "Project Heron"}).json()["id"]
    rows = []
    for obj, words in (("march", "Heron ships in march says the plan"),
                       ("june", "Heron slipped and now ships in june")):
        r = owner.write(words, agent_id="writer", fleet_id="fleet-a", visibility="scope_team",
                        subject_entity_id=entity, predicate="deadline", object_value=obj)
        assert r.status_code == 201, r.text
        rows.append(r.json()["id"])
    r = analyst.http.post("/insights/generate", json={
        "tenant_id": tenant.tenant_id, "focus": "contradictions", "scope": "fleet",
        "fleet_id": "fleet-a", "agent_id": "analyst"})
    assert r.status_code == 200, r.text
    insights = [f["insight_memory_id"] for f in r.json()["findings"]
                if rows[1] in f["related_memory_ids"]]
    assert insights, r.json()
    assert all(analyst.get(i).status_code == 200 for i in insights)
    assert tenant.http.delete(f"/memories/{rows[1]}",
                              params={"tenant_id": tenant.tenant_id}).status_code == 204
    served = [analyst.get(i) for i in insights]
    if profile in FORGETTING:
        assert [s.status_code for s in served] == [404] * len(insights)
        assert analyst.get(rows[0]).status_code == 200  # the other source is untouched
    else:  # MemClaw: the insight outlives its source and still names it and its object
        assert all(s.status_code == 200 and "june" in s.json()["content"] for s in served)
