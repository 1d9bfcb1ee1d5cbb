"""`memclaw-2.29` (MemClaw's open engine v2.29.0) against `memclaw-2026-05-31`: the
behaviours seen on the engine where the remediated profile answers otherwise, each pinned
on both profiles. (Where the two agree, e.g. the duplicate gate, the test pins that too.)
Choices 045039f already had (bulk writes, /recall, DELETE's order, homing on a write) are
fitted into `memclaw-2026-05-31` too; `proposed` keeps the kit's earlier answer to each."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from reference_server.launch.process import ReferenceServer

from .conftest import FAST_ARGS

PROFILES = ("memclaw-2026-05-31", "memclaw-2.29")
# the choices read from 045039f as well as b65ecbe: pinned on the two fitted profiles and on
# `proposed`, which keeps the unfitted answer (profiles.UNFITTED_REMEDIATION_CHOICES)
SHARED = ("memclaw-2026-05-31", "memclaw-2.29", "proposed")
FITTED = ("memclaw-2026-05-31", "memclaw-2.29")


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, ReferenceServer]]:
    started = {p: ReferenceServer(profile=p, extra_args=FAST_ARGS).start() for p in SHARED}
    try:
        yield started
    finally:
        for server in started.values():
            server.close()


class Tenant:
    def __init__(self, server: ReferenceServer) -> None:
        self.server = server
        self.tenant_id, self.key = server.create_tenant()

    def call(self, method: str, path: str, agent: str | None = None, key: str | None = None,
             **kw: Any) -> httpx.Response:
        headers = {"X-API-Key": key or self.key, **kw.pop("headers", {})}
        if agent:
            headers["X-Agent-ID"] = agent
        params = {"tenant_id": self.tenant_id, **kw.pop("params", {})}
        return httpx.request(method, self.server.base_url + "/api/v1" + path, headers=headers,
                             params=params, timeout=10.0, **kw)

    def write(self, agent: str, fleet: str, content: str, **fields: Any) -> httpx.Response:
        return self.call("POST", "/memories", json={"tenant_id": self.tenant_id,
                                                    "agent_id": agent, "fleet_id": fleet,
                                                    "content": content, **fields})

    def trust(self, agent: str, level: int, fleet: str | None = None) -> None:
        body = {"trust_level": level, **({"fleet_id": fleet} if fleet else {})}
        assert self.call("PATCH", f"/agents/{agent}/trust", json=body).status_code == 200


@pytest.mark.parametrize("profile", PROFILES)
def test_filter_agent_id_naming_another_agent(servers, profile: str) -> None:
    t = Tenant(servers[profile])
    t.write("a1", "fleet-a", "agent a1 writes a fleet fact")
    prov = t.call("POST", "/admin/agent-keys/provision",
                  json={"agent_id": "a1", "initial_trust": 1, "initial_fleet": "fleet-a"})
    agent_key = prov.json()["raw_key"]
    r = t.call("POST", "/search", key=agent_key,
               json={"tenant_id": t.tenant_id, "query": "fleet fact", "filter_agent_id": "b1"})
    if profile == "memclaw-2.29":
        assert r.status_code == 403
        assert r.json()["error"]["message"] == \
            "filter_agent_id 'b1' does not match the authenticated agent identity 'a1'."
    else:
        assert r.status_code == 200  # searches as b1
    same = t.call("POST", "/search", key=agent_key,
                  json={"tenant_id": t.tenant_id, "query": "fleet fact",
                        "filter_agent_id": "a1"})
    assert same.status_code == 200


@pytest.mark.parametrize("profile", PROFILES)
def test_trust0_status_patch_across_fleets(servers, profile: str) -> None:
    t = Tenant(servers[profile])
    team = t.write("b-writer", "fleet-b", "fleet b keeps this team fact").json()["id"]
    org = t.write("b-writer", "fleet-b", "fleet b shares this org fact",
                  visibility="scope_org").json()["id"]
    t.write("a0", "fleet-a", "agent a0 registers in fleet a")
    t.trust("a0", 0)
    on_team = t.call("PATCH", f"/memories/{team}/status", agent="a0",
                     json={"status": "archived"})
    on_org = t.call("PATCH", f"/memories/{org}/status", agent="a0", json={"status": "archived"})
    assert on_org.status_code == 200  # scope_org: any agent of the tenant, even trust 0
    if profile == "memclaw-2.29":
        assert on_team.status_code == 403
        assert on_team.json()["error"]["message"] == \
            "Agent 'a0' cannot modify memory in fleet 'fleet-b'."
    else:
        # behind a managed gateway a tenant key's X-Agent-ID is not an identity: tenant-wide
        assert on_team.status_code == 200


@pytest.mark.parametrize("profile", PROFILES)
def test_identical_content_into_another_fleet(servers, profile: str) -> None:
    t = Tenant(servers[profile])
    t.write("a3", "fleet-a", "agent a3 registers in fleet a")
    t.trust("a3", 3)
    content = "The quarterly capacity review moved to the second Tuesday."
    first = t.write("a3", "fleet-a", content)
    assert first.status_code == 201
    other_fleet = t.write("a3", "fleet-b", content)
    assert other_fleet.status_code == 201
    same_fleet = t.write("a3", "fleet-a", content)
    assert same_fleet.status_code == 409
    assert same_fleet.json()["error"]["message"] == \
        f"Duplicate memory exists: {first.json()['id']}"


def test_the_engines_shape_through_the_gate() -> None:
    """The same trust-0 refusal with the engine's own credential shape (gate key)."""
    with ReferenceServer(profile="memclaw-2.29", extra_args=FAST_ARGS, auth="gate") as srv:
        base = {"X-API-Key": srv.gate_key or "", "X-Tenant-ID": "t-gate"}

        def call(method: str, path: str, agent: str | None = None, **kw: Any) -> httpx.Response:
            hdrs = {**base, **({"X-Agent-ID": agent} if agent else {})}
            return httpx.request(method, srv.base_url + "/api/v1" + path, headers=hdrs,
                                 params={"tenant_id": "t-gate"}, timeout=10.0, **kw)

        row = call("POST", "/memories", "b-writer", json={
            "tenant_id": "t-gate", "agent_id": "b-writer", "fleet_id": "fleet-b",
            "content": "fleet b team fact"})
        call("POST", "/memories", "a0", json={"tenant_id": "t-gate", "agent_id": "a0",
                                              "fleet_id": "fleet-a",
                                              "content": "agent a0 registers"})
        assert call("PATCH", "/agents/a0/trust", json={"trust_level": 0}).status_code == 200
        r = call("PATCH", f"/memories/{row.json()['id']}/status", "a0",
                 json={"status": "archived"})
        assert r.status_code == 403
        r = call("POST", "/search", "a1", json={"tenant_id": "t-gate", "query": "fact",
                                                "filter_agent_id": "b1"})
        assert r.status_code == 403


# -- what the engine answered where the profile answered otherwise (reports/FIDELITY.md) ----


@pytest.mark.parametrize("profile", PROFILES)
def test_entity_link_without_role(servers, profile: str) -> None:
    """The engine's request models require `role` on every entity link (422 Field required);
    the remediated profile defaults it to "mentioned"."""
    t = Tenant(servers[profile])
    entity = t.call("POST", "/entities/upsert", json={
        "tenant_id": t.tenant_id, "fleet_id": "fleet-a", "entity_type": "service",
        "canonical_name": "billing"}).json()["id"]
    links = [{"entity_id": entity}]
    single = t.write("a1", "fleet-a", "billing runs nightly", entity_links=links)
    bulk = t.call("POST", "/memories/bulk", headers={"X-Bulk-Attempt-Id": "att-role"},
                  json={"tenant_id": t.tenant_id, "agent_id": "a1", "fleet_id": "fleet-a",
                        "items": [{"content": "billing bulk row", "entity_links": links}]})
    with_role = t.write("a1", "fleet-a", "billing runs hourly",
                        entity_links=[{"entity_id": entity, "role": "subject"}])
    assert with_role.status_code == 201
    if profile == "memclaw-2.29":
        for r, loc in ((single, ["body", "entity_links", 0, "role"]),
                       (bulk, ["body", "items", 0, "entity_links", 0, "role"])):
            assert r.status_code == 422
            assert r.json()["error"]["message"] == "Field required"
            assert r.json()["detail"][0]["loc"] == loc
        patch = t.call("PATCH", f"/memories/{with_role.json()['id']}",
                       json={"entity_links": links})
        assert patch.status_code == 422
    else:
        assert single.status_code == 201 and bulk.status_code == 200


@pytest.mark.parametrize("profile", SHARED)
def test_trust0_bulk_write_skips_the_approval_gate(servers, profile: str) -> None:
    """The engine refuses a trust-0 agent's single write (403 not approved) but accepts its
    bulk write (the bulk route passes no approval gate); the fleet write rule still holds."""
    t = Tenant(servers[profile])
    t.write("z0", "fleet-a", "agent z0 registers in fleet a")
    t.trust("z0", 0)
    single = t.write("z0", "fleet-a", "z0 single write at trust zero")
    assert single.status_code == 403
    assert "is not approved" in single.json()["error"]["message"]

    def bulk(fleet: str, attempt: str) -> httpx.Response:
        return t.call("POST", "/memories/bulk", headers={"X-Bulk-Attempt-Id": attempt},
                      json={"tenant_id": t.tenant_id, "agent_id": "z0", "fleet_id": fleet,
                            "items": [{"content": f"z0 bulk write into {fleet}"}]})

    home, away = bulk("fleet-a", "att-z0-home"), bulk("fleet-b", "att-z0-away")
    assert away.status_code == 403  # enforce_fleet_write on both profiles
    if profile in FITTED:
        assert home.status_code == 200 and home.json()["created"] == 1
    else:
        assert home.status_code == 403


@pytest.mark.parametrize("profile", PROFILES)
def test_asserted_writer_must_be_named_in_the_body(profile: str) -> None:
    """With asserted identity (X-Agent-ID), the engine still wants `agent_id` in a write's
    body outside standalone mode: 422 'agent_id is required', single and bulk alike."""
    with ReferenceServer(profile=profile, extra_args=FAST_ARGS, auth="headers") as srv:
        hdrs = {"X-Tenant-ID": "t-h", "X-Agent-ID": "a1"}

        def post(path: str, body: dict, **extra: str) -> httpx.Response:
            return httpx.post(srv.base_url + "/api/v1" + path, headers={**hdrs, **extra},
                              json={"tenant_id": "t-h", "fleet_id": "fleet-a", **body},
                              timeout=10.0)

        named = post("/memories", {"agent_id": "a1", "content": "a1 names itself"})
        assert named.status_code == 201
        single = post("/memories", {"content": "a1 leaves agent_id out"})
        bulk = post("/memories/bulk", {"items": [{"content": "a1 bulk without agent_id"}]},
                    **{"X-Bulk-Attempt-Id": "att-h"})
        if profile == "memclaw-2.29":
            for r in (single, bulk):
                assert r.status_code == 422
                assert r.json()["error"]["message"].startswith("agent_id is required")
        else:
            assert single.status_code == 201 and single.json()["agent_id"] == "a1"
            assert bulk.status_code == 200


@pytest.mark.parametrize("profile", SHARED)
def test_bulk_attempt_ids_are_unique_per_fleet(servers, profile: str) -> None:
    """The engine's attempt index is (tenant, fleet, id): another fleet's replay of an attempt
    id writes new rows; a replay from the attempt's own fleet answers with its row ids."""
    t = Tenant(servers[profile])
    for agent, fleet in (("a1", "fleet-a"), ("c1", "fleet-a"), ("b1", "fleet-b")):
        t.write(agent, fleet, f"agent {agent} registers in {fleet}")

    def bulk(agent: str, content: str) -> dict:
        r = t.call("POST", "/memories/bulk", headers={"X-Bulk-Attempt-Id": "att-shared"},
                   json={"tenant_id": t.tenant_id, "agent_id": agent,
                         "visibility": "scope_agent", "items": [{"content": content}]})
        assert r.status_code == 200
        return r.json()["results"][0]

    first = bulk("a1", "a1 keeps this private bulk row")
    assert first["status"] == "created"
    same_fleet = bulk("c1", "c1 filler row for the replay")
    other_fleet = bulk("b1", "b1 filler row for the replay")
    assert same_fleet["status"] == "duplicate_attempt" and same_fleet["id"] == first["id"]
    if profile in FITTED:
        assert other_fleet["status"] == "created" and other_fleet["id"] != first["id"]
    else:
        assert other_fleet["status"] == "duplicate_attempt" and other_fleet["id"] == first["id"]


@pytest.mark.parametrize("profile", SHARED)
def test_bulk_items_keep_no_entity_links(servers, profile: str) -> None:
    """The engine's bulk insert stores no entity links (a single write does)."""
    t = Tenant(servers[profile])
    entity = t.call("POST", "/entities/upsert", json={
        "tenant_id": t.tenant_id, "fleet_id": "fleet-a", "entity_type": "service",
        "canonical_name": "ledger"}).json()["id"]
    links = [{"entity_id": entity, "role": "subject"}]
    single = t.write("a1", "fleet-a", "ledger closes at noon", entity_links=links)
    bulk = t.call("POST", "/memories/bulk", headers={"X-Bulk-Attempt-Id": "att-links"},
                  json={"tenant_id": t.tenant_id, "agent_id": "a1", "fleet_id": "fleet-a",
                        "items": [{"content": "ledger reopens at one", "entity_links": links}]})
    ids = {"single": single.json()["id"], "bulk": bulk.json()["results"][0]["id"]}
    kept = {name: t.call("GET", f"/memories/{mid}").json()["entity_links"]
            for name, mid in ids.items()}
    assert [link["entity_id"] for link in kept["single"]] == [entity]
    assert (kept["bulk"] == []) == (profile in FITTED)


@pytest.mark.parametrize("profile", SHARED)
def test_recall_identity_is_filter_agent_id_alone(servers, profile: str) -> None:
    """The engine's /recall reads the caller identity from filter_agent_id only: an agent key
    without it recalls as no one (private rows hidden, no fleet check), and naming another
    agent is not refused as search refuses it."""
    t = Tenant(servers[profile])
    t.write("a1", "fleet-a", "a1 private note on the lighthouse", visibility="scope_agent")
    t.write("b1", "fleet-b", "b1 team note on the lighthouse")
    key = t.call("POST", "/admin/agent-keys/provision",
                 json={"agent_id": "a1", "initial_trust": 1,
                       "initial_fleet": "fleet-a"}).json()["raw_key"]

    def recall(**body: Any) -> httpx.Response:
        return t.call("POST", "/recall", key=key,
                      json={"tenant_id": t.tenant_id, "query": "lighthouse note", **body})

    own = recall()
    contents = {m["content"] for m in own.json()["memories"]}
    other_fleet = recall(fleet_ids=["fleet-b"])
    as_b1 = recall(filter_agent_id="b1")
    if profile in FITTED:
        assert "a1 private note on the lighthouse" not in contents
        assert other_fleet.status_code == 200
        assert as_b1.status_code == 200
    else:
        assert "a1 private note on the lighthouse" in contents
        assert other_fleet.status_code == 403
        assert as_b1.status_code == 200  # 05-31 recalls as the named agent


@pytest.mark.parametrize("profile", PROFILES)
def test_conflicted_row_named_by_the_query(servers, profile: str) -> None:
    """The engine keeps a `conflicted` row in search results when the query matches it word
    for word (its exact-lexical-match carve-out); other conflicted rows stay hidden."""
    t = Tenant(servers[profile])
    named = t.write("a1", "fleet-a", "The tram depot opens at six every weekday").json()["id"]
    other = t.write("a1", "fleet-a", "The ferry pier closes at nine on Sundays").json()["id"]
    for mid in (named, other):
        assert t.call("PATCH", f"/memories/{mid}/status",
                      json={"status": "conflicted"}).status_code == 200

    def found(query: str) -> set[str]:
        r = t.call("POST", "/search", json={"tenant_id": t.tenant_id, "query": query,
                                            "filter_agent_id": "a1"})
        return {item["id"] for item in r.json()["items"]}

    exact = found("The tram depot opens at six every weekday")
    assert other not in exact
    assert (named in exact) == (profile == "memclaw-2.29")
    assert named not in found("tram depot hours")


@pytest.mark.parametrize("profile", SHARED)
def test_delete_checks_the_caller_before_the_row(servers, profile: str) -> None:
    """The engine's DELETE runs enforce_delete (trust 3) before it looks the row up: an agent
    below trust 3 gets the same 403 for an id that does not exist as for a real row."""
    t = Tenant(servers[profile])
    row = t.write("a2", "fleet-a", "a2 writes a row it may not delete").json()["id"]
    t.trust("a2", 2)
    absent = "0b3c1e9a-6a51-4c2e-9a8e-2f1d2f6a7b10"
    real = t.call("DELETE", f"/memories/{row}", params={"agent_id": "a2"})
    missing = t.call("DELETE", f"/memories/{absent}", params={"agent_id": "a2"})
    assert real.status_code == 403
    assert "not permitted to delete" in real.json()["error"]["message"]
    if profile in FITTED:
        assert missing.status_code == 403
        assert missing.json()["error"]["message"] == real.json()["error"]["message"]
    else:
        assert missing.status_code == 404


@pytest.mark.parametrize("profile", PROFILES)
def test_fast_write_names_its_near_duplicate(servers, profile: str) -> None:
    """The engine's fast-mode write path flags (never refuses) a near duplicate: the new row's
    metadata names the nearest row of its fleet and visibility, another agent's private row
    included; strong mode's 409 is unchanged."""
    t = Tenant(servers[profile])
    first = t.write("a1", "fleet-a", "The night shift hands over at the east gate",
                    visibility="scope_agent").json()["id"]
    t.write("c1", "fleet-a", "agent c1 registers in fleet a")
    again = t.write("c1", "fleet-a", "The night shift hands over at the east gate",
                    visibility="scope_agent", write_mode="fast")
    assert again.status_code == 201
    named = again.json()["metadata"].get("near_duplicate_of")
    assert (named == first) == (profile == "memclaw-2.29")
    if profile != "memclaw-2.29":
        assert named is None


@pytest.mark.parametrize("profile", SHARED)
def test_a_refused_write_still_homes_a_homeless_agent(servers, profile: str) -> None:
    """The engine backfills a home-less agent's fleet from a write's fleet_id before its
    checks: a trust-0 agent's refused write (403 not approved) still gives it that home."""
    t = Tenant(servers[profile])
    t.write("h0", None, "agent h0 registers with no fleet")  # type: ignore[arg-type]
    t.trust("h0", 0)
    refused = t.write("h0", "fleet-x", "h0 tries to write into fleet x")
    assert refused.status_code == 403
    home = t.call("GET", "/agents/h0").json()["fleet_id"]
    assert home == ("fleet-x" if profile in FITTED else None)
