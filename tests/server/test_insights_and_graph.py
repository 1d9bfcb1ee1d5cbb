"""The insights route (focus contradictions, deterministic) and the search's entity-graph
expansion, both under the scope predicate of `reference_server/governance/scope.py`."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Api, ServerPool


def scenario(pool: ServerPool, profile: str) -> dict[str, Any]:
    """Vera (sales), Lex (legal), Axis (admin, org-shared, trust 2) and one account in
    conflict: the deal proceeds, the legal hold halts it."""
    api = pool.tenant_api(profile)
    vera, lex = api.provision("vera", "sales"), api.provision("lex", "legal")
    axis = api.provision("axis", "org", trust=2)
    acme = api.http.post("/entities/upsert", json={
        "tenant_id": api.tenant_id, "entity_type": "organization",
        "canonical_name": "Acme Corp"}).json()["id"]
    gdpr = api.http.post("/entities/upsert", json={
        "tenant_id": api.tenant_id, "entity_type": "regulation",
        "canonical_name": "GDPR"}).json()["id"]
    triple = {"subject_entity_id": acme, "predicate": "commercial_progression"}
    deal = vera.write("Acme Corp deal at $50k, late stage, closing next week.", fleet_id="sales",
                      entity_links=[{"entity_id": acme}], object_value="proceed", **triple)
    hold = lex.write("Active GDPR hold: the DPA expired 2026-05-01; no commercial progression.",
                     fleet_id="legal", entity_links=[{"entity_id": acme}, {"entity_id": gdpr}],
                     object_value="halt", **triple)
    other_hold = lex.write("Zenith Corp GDPR hold pending a DPA review by counsel.",
                           fleet_id="legal", entity_links=[{"entity_id": gdpr}])
    note = axis.write("Enterprise account with a three-year relationship.", fleet_id="org",
                      entity_links=[{"entity_id": acme}])
    for r in (deal, hold, other_hold, note):
        assert r.status_code == 201, r.text
    return {"api": api, "vera": vera, "lex": lex, "axis": axis, "deal": deal.json()["id"],
            "hold": hold.json()["id"], "other_hold": other_hold.json()["id"],
            "note": note.json()["id"]}


def generate(caller: Api, **body: Any) -> Any:
    return caller.http.post("/insights/generate", json={"tenant_id": caller.tenant_id,
                                                        "focus": "contradictions", **body})


@pytest.mark.parametrize("profile", ["memclaw-2026-05-31", "proposed"])
def test_axis_insight_is_attributed_and_readable_by_both_sides(pool: ServerPool,
                                                               profile: str) -> None:
    s = scenario(pool, profile)
    r = generate(s["axis"], scope="all", fleet_id="org")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["memories_analyzed"] == 2 and len(body["findings"]) == 1
    (finding,) = body["findings"]
    assert set(finding["related_memory_ids"]) == {s["deal"], s["hold"]}
    assert "[sales] vera asserts proceed" in finding["description"]
    assert "[legal] lex asserts halt" in finding["description"]
    insight_id = finding["insight_memory_id"]
    assert body["insight_memory_ids"] == [insight_id]
    for reader in (s["vera"], s["lex"]):
        got = reader.get(insight_id)
        assert got.status_code == 200
        assert (got.json()["memory_type"], got.json()["fleet_id"]) == ("insight", "org")
    assert s["vera"].get(s["hold"]).status_code == 404
    assert s["lex"].get(s["deal"]).status_code == 404
    # a rerun outdates the earlier insight instead of piling up
    again = generate(s["axis"], scope="all", fleet_id="org").json()
    assert s["api"].get(insight_id).json()["status"] == "outdated"
    assert s["api"].get(again["insight_memory_ids"][0]).json()["status"] == "active"


def test_insights_see_only_what_the_caller_may_read(pool: ServerPool) -> None:
    s = scenario(pool, "memclaw-2026-05-31")
    # Vera (trust 1) may not run a tenant-wide analysis; on her own rows there is no conflict
    assert generate(s["vera"], scope="all", fleet_id="sales").status_code == 403
    mine = generate(s["vera"], scope="agent", fleet_id="sales")
    assert mine.status_code == 200 and mine.json()["findings"] == []
    assert generate(s["axis"], scope="all", fleet_id="legal").status_code == 403  # not its fleet
    assert generate(s["axis"], scope="all", focus="patterns").status_code == 501
    bad = generate(s["axis"], scope="all", focus="everything")
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "INVALID_ARGUMENTS"
    assert generate(s["axis"], scope="fleet").status_code == 422  # fleet scope needs fleet_id


@pytest.mark.parametrize("profile", ["memclaw-2026-05-30", "memclaw-2026-05-31", "proposed"])
def test_reserved_types_name_the_server_side_route(pool: ServerPool, profile: str) -> None:
    api = pool.tenant_api(profile)
    for kind, route in (("insight", "memclaw_insights"), ("outcome", "memclaw_evolve"),
                        ("rule", "memclaw_evolve")):
        r = api.write("An agent claiming a server-reserved type", agent_id="w", memory_type=kind)
        assert r.status_code == 422
        assert r.json()["error"]["code"] == "INVALID_ARGUMENTS"
        assert r.json()["error"]["message"].startswith(f"memory_type='{kind}' is server-reserved")
        assert route in r.json()["error"]["message"]


def graph_rows(caller: Api, query: str, fleets: list[str]) -> dict[str, dict]:
    r = caller.search(query, fleet_ids=fleets, top_k=20, diagnostic=True)
    assert r.status_code == 200, r.text
    return {i["id"]: i for i in r.json()["items"] if i["retrieval"]["path"] == "graph"}


def test_graph_expansion_stays_inside_the_callers_partitions(pool: ServerPool) -> None:
    s = scenario(pool, "memclaw-2026-05-31")
    insight = generate(s["axis"], scope="all", fleet_id="org").json()["insight_memory_ids"][0]
    reached = graph_rows(s["vera"], "Acme Corp compliance", ["sales", "org"])
    assert {s["deal"], s["note"], insight} <= set(reached)
    assert reached[insight]["retrieval"]["graph_hop"] == 0
    # the hold links Acme to GDPR, but Vera cannot walk through it: no legal row, ever
    assert all(row["fleet_id"] in ("sales", "org") for row in reached.values())
    assert s["hold"] not in reached and s["other_hold"] not in reached
    # Lex walks Acme -> hold -> GDPR -> the other hold (two hops over entity links)
    lex = graph_rows(s["lex"], "Acme Corp compliance", ["legal", "org"])
    assert lex[s["hold"]]["retrieval"]["graph_hop"] == 0
    assert lex[s["other_hold"]]["retrieval"]["graph_hop"] == 1
    assert s["deal"] not in lex


def test_on_a_flat_store_the_graph_crosses_partitions(pool: ServerPool) -> None:
    s = scenario(pool, "naive")
    reached = graph_rows(s["vera"], "Acme Corp compliance", ["sales", "org"])
    assert s["hold"] in reached and s["other_hold"] in reached
