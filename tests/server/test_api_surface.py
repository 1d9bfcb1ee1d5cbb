"""The rest of the wire contract: idempotency, write gates, provisioning, identity, search
side rules (SEARCH-LEAK.md rule 2, ignored unknown fields), list paging, status, recall,
entities."""

from __future__ import annotations

import uuid

import httpx
import pytest

from .conftest import Api, ServerPool, ids


@pytest.fixture(scope="module")
def api(pool: ServerPool) -> Api:
    return pool.tenant_api("memclaw-2026-05-30")


def test_idempotency_key_replays_and_refuses_a_different_body(api: Api) -> None:
    key = {"Idempotency-Key": uuid.uuid4().hex}
    body = {"tenant_id": api.tenant_id, "agent_id": "idem",
            "content": "Idempotent write about the nightly export job"}
    first = api.http.post("/memories", json=body, headers=key)
    replay = api.http.post("/memories", json=body, headers=key)
    assert (first.status_code, replay.status_code) == (201, 201)
    assert replay.json() == first.json()
    other = api.http.post("/memories", json={**body, "content": body["content"] + " (v2)"},
                          headers=key)
    assert other.status_code == 422
    assert other.json()["detail"] == "Idempotency-Key reused with a different request body"
    assert len([i for i in api.list(agent_id="idem").json()["items"]]) == 1


def test_reserved_types_short_content_and_stm_are_refused(api: Api) -> None:
    for kind in ("outcome", "rule", "insight"):
        r = api.write("A memory claiming a server-reserved type", agent_id="w", memory_type=kind)
        assert r.status_code == 422 and "server-reserved" in r.json()["detail"]
    short = api.write("too short ", agent_id="w")
    assert short.json()["detail"] == "Memory content too short (minimum 10 characters)."
    assert api.write("A short-term note for the pager", agent_id="w",
                     write_mode="stm").status_code == 422


def test_write_mode_resolution_and_semantic_coercion(api: Api) -> None:
    decision = api.write("We decided to freeze deploys during the audit week", agent_id="w",
                         memory_type="decision").json()
    assert decision["metadata"]["write_mode"] == "strong"
    fact = api.write("The audit week starts on the first Monday of the quarter", agent_id="w",
                     memory_type="semantic").json()
    assert (fact["memory_type"], fact["metadata"]["write_mode"]) == ("fact", "fast")
    assert fact["metadata"]["enrichment_pending"] is True


def test_trust_and_fleet_write_gates(pool: ServerPool) -> None:
    api = pool.tenant_api("memclaw-2026-05-30")
    reader = api.provision("reader", "F1", trust=0)
    member = api.provision("member", "F1", trust=1)
    admin = api.provision("admin-agent", "F1", trust=3)
    r = reader.write("A read-only agent tries to write a memory")
    assert r.status_code == 403 and "is not approved" in r.json()["detail"]
    r = member.write("A trust-1 agent writes into a foreign fleet", fleet_id="F2")
    assert r.json()["detail"] == ("fleet-scope policy: fleet 'F2' is not writable by principals "
                                  "of fleet 'F1'.")
    assert admin.write("A trust-3 agent re-homes a note to F2", fleet_id="F2").status_code == 201
    assert member.write("Agent keys write as themselves", agent_id="someone-else"
                        ).status_code == 403


def test_provisioning_identity_and_admin_routes(pool: ServerPool) -> None:
    server = pool["memclaw-2026-05-30"]
    api = pool.tenant_api("memclaw-2026-05-30")
    agent = api.provision("quote-agent", "na-sales", trust=2)
    who = agent.http.get("/whoami").json()
    assert (who["tenant_id"], who["agent_id"]) == (api.tenant_id, "quote-agent")
    assert api.http.get("/agents/quote-agent").json()["fleet_id"] == "na-sales"
    nested = agent.http.post("/admin/agent-keys/provision", json={"agent_id": "x"})
    assert nested.status_code == 403
    assert api.http.post("/admin/tenants", json={}).status_code == 403  # tenant key
    tenant_id, _ = server.create_tenant(f"named-{uuid.uuid4().hex[:6]}")
    dup = httpx.post(server.base_url + "/api/v1/admin/tenants", json={"tenant_id": tenant_id},
                     headers={"X-API-Key": server.admin_key})
    assert dup.status_code == 409


def test_search_fleet_read_check_and_agent_auto_registration(api: Api) -> None:
    api.provision("f1-agent", "F1", trust=1)
    denied = api.search("anything at all", filter_agent_id="f1-agent", fleet_ids=["F2"])
    assert denied.status_code == 403
    assert "not readable by principals of fleet 'F1'" in denied.json()["detail"]
    fresh = f"new-{uuid.uuid4().hex[:6]}"
    assert api.search("anything at all", filter_agent_id=fresh,
                      fleet_ids=["F7"]).status_code == 200
    registered = api.http.get(f"/agents/{fresh}").json()
    assert (registered["fleet_id"], registered["trust_level"]) == ("F7", 1)


def test_singular_fleet_id_on_search_is_ignored(pool: ServerPool) -> None:
    """SEARCH-LEAK.md M2: an unknown field never reaches the engine."""
    api = pool.tenant_api("memclaw-2026-05-30")
    writer = api.provision("writer", "F1")
    row = writer.write("Fleet one secret launch codename is bluebird").json()
    assert row["id"] not in ids(api.search(row["content"], fleet_ids=["F2"]))
    assert row["id"] in ids(api.search(row["content"], fleet_id="F2"))


def test_list_paging_with_cursor_and_offset(pool: ServerPool) -> None:
    api = pool.tenant_api("memclaw-2026-05-30")
    written = [api.write(f"Paging memory number {i} for the cursor test",
                         agent_id="pager").json()["id"] for i in range(7)]
    seen, cursor = [], None
    while True:
        params = {"limit": 3} | ({"cursor": cursor} if cursor else {})
        page = api.list(**params).json()
        seen += [i["id"] for i in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert seen == list(reversed(written))
    assert [i["id"] for i in api.list(limit=2, offset=5).json()["items"]] == written[1::-1]
    assert api.list(cursor=cursor or "bm9wZQ==", sort="weight").status_code == 400


def test_status_patch_hides_from_default_search(api: Api) -> None:
    row = api.write("A memory about the retired staging cluster in Oslo", agent_id="w").json()
    r = api.http.patch(f"/memories/{row['id']}/status", params={"tenant_id": api.tenant_id},
                       json={"status": "conflicted"})
    assert r.json() == {"memory_id": row["id"], "old_status": "active",
                        "new_status": "conflicted"}
    assert row["id"] not in ids(api.search(row["content"]))
    assert row["id"] in ids(api.search(row["content"], status_filter="conflicted"))
    bad = api.http.patch(f"/memories/{row['id']}/status", params={"tenant_id": api.tenant_id},
                         json={"status": "gone"})
    assert bad.status_code == 400 and bad.json()["detail"].startswith("Invalid status.")


@pytest.mark.parametrize("profile", ["memclaw-2026-05-30", "memclaw-2026-05-31"])
def test_delete_by_agent_needs_trust_3(pool: ServerPool, profile: str) -> None:
    """From 045039f (05-31) the agent's own key is the identity a delete is governed by;
    before it (e2d805e, 05-30) only an `agent_id` query was: an agent key naming none
    deleted at trust 1."""
    api = pool.tenant_api(profile)
    member = api.provision("member", "F1", trust=1)
    boss = api.provision("boss", "F1", trust=3)
    row = member.write("A memory the member would like to delete").json()
    named = {"tenant_id": api.tenant_id, "agent_id": "member"}
    assert member.http.delete(f"/memories/{row['id']}", params=named).status_code == 403
    unnamed = member.http.delete(f"/memories/{row['id']}", params={"tenant_id": api.tenant_id})
    assert unnamed.status_code == (204 if profile == "memclaw-2026-05-30" else 403)
    if unnamed.status_code == 403:
        assert boss.http.delete(f"/memories/{row['id']}",
                                params={"tenant_id": api.tenant_id}).status_code == 204


def test_recall_is_an_extractive_summary(api: Api) -> None:
    api.write("The incident commander for payments is Dana. She rotates weekly.",
              agent_id="w")
    r = api.http.post("/recall", json={"tenant_id": api.tenant_id,
                                       "query": "incident commander payments"})
    assert r.status_code == 200
    body = r.json()
    assert body["summarizer"] == "extractive (no LLM)"
    assert "The incident commander for payments is Dana." in body["summary"]
    assert body["memory_count"] == len(body["memories"]) >= 1


def test_entity_upsert_merges_and_scopes_linked_memories(pool: ServerPool) -> None:
    api = pool.tenant_api("memclaw-2026-05-31")
    body = {"tenant_id": api.tenant_id, "entity_type": "service", "canonical_name": "ledger",
            "attributes": {"tier": 1}}
    first = api.http.post("/entities/upsert", json=body).json()
    second = api.http.post("/entities/upsert", json={**body, "attributes": {"owner": "ops"}})
    assert second.status_code == 200 and second.json()["id"] == first["id"]
    assert second.json()["attributes"] == {"tier": 1, "owner": "ops"}
    owner = api.provision("owner", "F1")
    outsider = api.provision("outsider", "F2")
    link = [{"entity_id": first["id"], "role": "subject"}]
    row = owner.write("The ledger service keeps its audit trail in cold storage",
                      entity_links=link).json()
    path, params = f"/entities/{first['id']}", {"tenant_id": api.tenant_id}
    linked = owner.http.get(path, params=params).json()["linked_memories"]
    assert [m["id"] for m in linked] == [row["id"]]
    assert outsider.http.get(path, params=params).json()["linked_memories"] == []
