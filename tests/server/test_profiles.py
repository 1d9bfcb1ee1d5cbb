"""Each profile's documented behaviour, observed over HTTP: by-id scope, the near-duplicate
gate versus the contradiction detector (paper 9.2), supersession, the naive store."""

from __future__ import annotations

import time
import uuid

import pytest

from .conftest import Api, ServerPool, ids

# 24 words; changing the one object word keeps the hashing embedder's cosine at ~0.975,
# above MemClaw's 0.97 auto-reject threshold: "X is A" vs "X is B" is near-identical text.
FACT = ("The primary database for the payments service of the {team} platform team is hosted "
        "in the {city} region according to the latest infrastructure review")


def wait_for(predicate, timeout: float = 5.0, every: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every)
    return False


def word_salt() -> str:
    """Letters only: a hex salt would look like an identifier and skip MemClaw's gate."""
    return "".join(chr(ord("g") + int(c, 16)) for c in uuid.uuid4().hex[:8])


def entity(api: Api, name: str) -> str:
    r = api.http.post("/entities/upsert", json={"tenant_id": api.tenant_id,
                                                "entity_type": "service",
                                                "canonical_name": name})
    assert r.status_code == 200, r.text
    return r.json()["id"]


def contradicting_pair(api: Api, mode: str) -> tuple:
    """Write "X is Frankfurt" then "X is Dublin" with an RDF triple on `region`."""
    writer = api.provision(f"w-{uuid.uuid4().hex[:6]}", "ops")
    team = word_salt()
    subject = entity(api, f"payments-db-{team}")
    responses = []
    for city in ("Frankfurt", "Dublin"):
        responses.append(writer.write(FACT.format(team=team, city=city), write_mode=mode,
                                      subject_entity_id=subject, predicate="region",
                                      object_value=city))
    return writer, responses


@pytest.mark.parametrize("profile,status", [("memclaw-2026-05-30", 200),
                                            ("memclaw-2026-05-31", 404), ("proposed", 404),
                                            ("naive", 200)])
def test_trust1_agent_key_get_of_cross_fleet_row(pool: ServerPool, profile: str,
                                                 status: int) -> None:
    tenant = pool.tenant_api(profile)
    owner = tenant.provision("owner", "fleet-a")
    prober = tenant.provision("prober", "fleet-b", trust=1)
    row = owner.write("Fleet A keeps its deploy credentials rotation schedule here").json()
    r = prober.get(row["id"])
    assert r.status_code == status, r.text
    if status == 404:
        assert r.json() == {"detail": "Memory not found",
                            "error": {"code": "NOT_FOUND", "message": "Memory not found"}}


def test_trust_change_opens_cross_fleet_get_under_remediated_profile(pool: ServerPool) -> None:
    tenant = pool.tenant_api("memclaw-2026-05-31")
    owner = tenant.provision("owner", "fleet-a")
    prober = tenant.provision("prober", "fleet-b", trust=1)
    row = owner.write("Fleet A quarterly capacity plan for the storage cluster").json()
    assert prober.get(row["id"]).status_code == 404
    r = tenant.http.patch("/agents/prober/trust", json={"trust_level": 2})
    assert r.status_code == 200 and r.json()["trust_level"] == 2
    assert prober.get(row["id"]).status_code == 200
    denied = prober.http.patch("/agents/prober/trust", json={"trust_level": 3})
    assert denied.status_code == 403  # agent keys cannot change trust


@pytest.mark.parametrize("profile", ["memclaw-2026-05-30", "memclaw-2026-05-31"])
def test_near_duplicate_gate_starves_the_detector(pool: ServerPool, profile: str) -> None:
    """Paper 9.2: the contradicting write is 409'd before the async detector sees it."""
    api = pool.tenant_api(profile)
    _, (first, second) = contradicting_pair(api, "strong")
    assert first.status_code == 201, first.text
    assert second.status_code == 409, second.text
    assert second.json()["detail"] == f"Near-duplicate memory exists: {first.json()['id']}"
    time.sleep(0.3)
    assert api.get(first.json()["id"]).json()["status"] == "active"


@pytest.mark.parametrize("profile,mode", [("proposed", "strong"), ("memclaw-2026-05-30", "fast")])
def test_admitted_contradiction_is_superseded(pool: ServerPool, profile: str, mode: str) -> None:
    """Proposed admits the RDF write past the gate; under 05-30 fast writes are admitted too.
    Either way the detector marks the older row outdated and links the newer one."""
    api = pool.tenant_api(profile)
    _, (first, second) = contradicting_pair(api, mode)
    assert (first.status_code, second.status_code) == (201, 201), second.text
    old_id, new_id = first.json()["id"], second.json()["id"]
    assert second.json()["supersedes_id"] is None  # detection is asynchronous
    assert wait_for(lambda: api.get(old_id).json()["status"] == "outdated")
    assert api.get(new_id).json()["supersedes_id"] == old_id
    c = api.contradictions(old_id).json()
    assert c["detection_status"] == "completed"
    assert c["superseded_by"]["id"] == new_id
    assert c["contradictions"][0]["reason"] == "rdf_conflict"
    # Default search hides the outdated row; asking for it appends its successor.
    query = first.json()["content"]
    assert old_id not in ids(api.search(query, top_k=20))
    found = api.search(query, top_k=20, status_filter="outdated").json()["items"]
    assert [i["id"] for i in found] == [old_id, new_id]
    assert found[1]["similarity"] is None


def test_proposed_still_gates_near_duplicates_without_a_triple(pool: ServerPool) -> None:
    api = pool.tenant_api("proposed")
    writer = api.provision("w", "ops")
    first = writer.write(FACT.format(team="blue", city="Oslo"), write_mode="strong")
    second = writer.write(FACT.format(team="blue", city="Lima"), write_mode="strong")
    assert (first.status_code, second.status_code) == (201, 409)


def test_multi_valued_predicate_is_not_superseded(pool: ServerPool) -> None:
    api = pool.tenant_api("memclaw-2026-05-30")
    writer = api.provision("w", "ops")
    subject = entity(api, "team-falcon")
    a = writer.write("Team falcon member list includes Ana from the platform group",
                     subject_entity_id=subject, predicate="has_member", object_value="Ana")
    b = writer.write("Team falcon member list includes Bo from the platform group",
                     subject_entity_id=subject, predicate="has_member", object_value="Bo")
    assert (a.status_code, b.status_code) == (201, 201)
    time.sleep(0.3)
    assert api.get(a.json()["id"]).json()["status"] == "active"
    assert api.get(b.json()["id"]).json()["supersedes_id"] is None


def test_naive_store_has_no_dedup_and_no_supersession(pool: ServerPool) -> None:
    api = pool.tenant_api("naive")
    writer, (first, second) = contradicting_pair(api, "strong")
    assert (first.status_code, second.status_code) == (201, 201)
    again = writer.write(first.json()["content"])
    assert again.status_code == 201  # exact duplicate admitted
    time.sleep(0.3)
    assert api.get(first.json()["id"]).json()["status"] == "active"


@pytest.mark.parametrize("profile", ["memclaw-2026-05-30", "memclaw-2026-05-31", "proposed"])
def test_exact_duplicate_is_per_agent(pool: ServerPool, profile: str) -> None:
    api = pool.tenant_api(profile)
    a, b = api.provision("a", "ops"), api.provision("b", "ops")
    text = "Exact duplicate probe sentence for the ops fleet handbook"
    first = a.write(text)
    dup = a.write(text)
    assert dup.status_code == 409
    assert dup.json()["error"] == {"code": "CONFLICT",
                                   "message": f"Duplicate memory exists: {first.json()['id']}"}
    assert b.write(text).status_code == 201  # another agent: not an exact duplicate


def test_proposed_sibling_redistribute_cannot_take_a_peers_private_row(pool: ServerPool) -> None:
    api = pool.tenant_api("proposed")
    mover = api.provision("mover", "F1", trust=1)
    peer = api.provision("peer", "F1", trust=1)
    api.provision("sibling", "F1", trust=1)
    own = mover.write("Mover's shared rota notes for the F1 fleet this week").json()
    private = peer.write("Peer's private scratchpad for the F1 incident",
                         visibility="scope_agent").json()
    r = mover.redistribute("mover", [own["id"], private["id"]], "sibling")
    assert r.status_code == 200, r.text
    assert (r.json()["moved"], r.json()["errors"]) == (1, [private["id"]])
    assert api.get(private["id"]).json()["agent_id"] == "peer"
