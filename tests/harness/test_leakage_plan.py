"""Leakage plan and checkers: pure functions, no server."""

from __future__ import annotations

from collections import Counter

import pytest
from fleetprobe.experiments.leakage import (
    build_plan,
    expected_agent_get,
    expected_bulk,
    get_returned,
    judge,
    normalise_variants,
    search_returned,
    tally,
)

PAPER = {"fleets": 4, "agents_per_fleet": 6}


def test_paper_scale_matrix_is_192_probes_164_deny_28_allow() -> None:
    block = build_plan(PAPER, seed=7, nonce="n1").blocks[0]
    expected = Counter(p.expected for p in block.probes)
    assert len(block.probes) == 192
    assert expected == {"deny": 164, "allow": 28}


def test_deny_split_matches_search_leak_arithmetic() -> None:
    """72 cross-fleet probes of fleet secrets, 92 of peers' agent secrets (SEARCH-LEAK.md 1)."""
    block = build_plan(PAPER, seed=7, nonce="n1").blocks[0]
    deny = Counter((p.secret_scope, p.relation) for p in block.probes if p.expected == "deny")
    assert deny[("fleet", "cross_fleet")] == 72
    assert deny[("agent", "cross_fleet")] + deny[("agent", "same_fleet")] == 92
    own_agent = [p for p in block.probes if p.secret_scope == "agent" and p.expected == "allow"]
    assert len(own_agent) == 4 and all(p.relation == "same_agent" for p in own_agent)


def test_same_seed_same_plan_and_nonce_only_salts() -> None:
    params = {**PAPER, "variants": "all"}
    assert build_plan(params, 3, "aa") == build_plan(params, 3, "aa")
    a, b = build_plan(params, 3, "aa"), build_plan(params, 3, "bb")
    strip = lambda s: s.content.split(" Ref ")[0]  # noqa: E731
    assert [strip(s) for s in a.blocks[0].secrets] == [strip(s) for s in b.blocks[0].secrets]
    assert {s.canary for s in a.blocks[0].secrets}.isdisjoint(s.canary for s in b.blocks[0].secrets)
    assert [p.expected for p in a.blocks[0].probes] == [p.expected for p in b.blocks[0].probes]


def test_different_seed_changes_prose() -> None:
    a, b = build_plan(PAPER, 1, "x"), build_plan(PAPER, 2, "x")
    assert [s.content for s in a.blocks[0].secrets] != [s.content for s in b.blocks[0].secrets]


def test_secrets_are_distinct_and_canaries_unique_across_variants() -> None:
    plan = build_plan({**PAPER, "variants": "all"}, 5, "n")
    secrets = [s for b in plan.blocks for s in b.secrets]
    assert len(secrets) == 32
    assert len({s.content for s in secrets}) == 32
    assert len({s.canary for s in secrets}) == 32
    namespaces = {b.namespace for b in plan.blocks}
    assert len(namespaces) == 4
    fleets = [{a.fleet_id for a in b.agents} for b in plan.blocks]
    assert all(x.isdisjoint(y) for i, x in enumerate(fleets) for y in fleets[i + 1 :])


def test_variants_param() -> None:
    assert normalise_variants(None) == [("fleet_id", "fleet_ids")]
    assert len(normalise_variants("all")) == 4
    assert normalise_variants([["no_fleet", "fleet_id_singular"]]) == [
        ("no_fleet", "fleet_id_singular")
    ]
    with pytest.raises(ValueError, match="variant_write"):
        normalise_variants([["fleet", "fleet_ids"]])
    with pytest.raises(ValueError, match="twice"):
        normalise_variants([["fleet_id", "fleet_ids"], ["fleet_id", "fleet_ids"]])


def test_reprobe_is_96_with_the_paper_split() -> None:
    ab = build_plan(PAPER, 1, "n").agent_block
    assert ab is not None and len(ab.reprobe) == 96
    split = Counter((p.trust, p.relation, p.expected) for p in ab.reprobe)
    assert split == {
        (1, "cross_fleet", "deny"): 36,
        (2, "cross_fleet", "allow"): 36,
        (1, "same_fleet", "allow"): 12,
        (2, "same_fleet", "allow"): 12,
    }


def test_table3_rows() -> None:
    ab = build_plan(PAPER, 1, "n").agent_block
    rows = [(p.credential, p.trust, p.relation, p.expected) for p in ab.table3]
    assert rows == [
        ("tenant", None, None, "allow"),
        ("agent", 1, "cross_fleet", "deny"),
        ("agent", 2, "cross_fleet", "allow"),
        ("agent", 1, "same_fleet", "allow"),
    ]
    assert all(p.prober_fleet in (None, ab.keyed_agents[0].fleet_id) for p in ab.table3)


def test_ground_truth_rules() -> None:
    assert expected_bulk("fleet", "same_fleet") == "allow"
    assert expected_bulk("fleet", "cross_fleet") == "deny"
    assert expected_bulk("agent", "same_fleet") == "deny"
    assert expected_bulk("agent", "same_agent") == "allow"
    assert expected_agent_get("cross_fleet", 1) == "deny"
    assert expected_agent_get("cross_fleet", 2) == "allow"
    assert expected_agent_get("same_fleet", 1) == "allow"


def test_judge() -> None:
    assert judge("deny", True) == {"leak": True, "miss": False}
    assert judge("deny", False) == {"leak": False, "miss": False}
    assert judge("allow", False) == {"leak": False, "miss": True}
    assert judge("allow", True) == {"leak": False, "miss": False}


def test_search_returned_matches_id_or_canary_only() -> None:
    body = {"items": [{"id": "m1", "metadata": {"canary": "c1"}}, {"id": "m2", "metadata": None}]}
    assert search_returned(body, "m1", "zz")
    assert search_returned(body, None, "c1")
    assert not search_returned(body, "m3", "c3")
    assert not search_returned({"items": "oops"}, "m1", "c1")
    assert not search_returned(None, "m1", "c1")


def test_get_returned_needs_200_and_the_row() -> None:
    row = {"id": "m1", "metadata": {"canary": "c1"}}
    assert get_returned(200, row, "m1", "c1")
    assert not get_returned(404, {"detail": "Memory not found"}, "m1", "c1")
    assert not get_returned(200, {"id": "other", "metadata": {}}, "m1", "c1")
    assert not get_returned(None, None, "m1", "c1")


def test_tally_counts_only_matching_events() -> None:
    events = [
        {"phase": "probe", "axis": "search", "expected": "deny", "returned": True, "leak": True,
         "miss": False},
        {"phase": "probe", "axis": "search", "expected": "allow", "returned": False,
         "leak": False, "miss": True},
        {"phase": "probe", "axis": "get", "expected": "deny", "returned": True, "leak": True,
         "miss": False},
        {"phase": "write"},
    ]
    assert tally(events, "probe", axis="search") == {
        "probes": 2, "deny": 1, "allow": 1, "leaks": 1, "misses": 1, "returned": 1
    }
    assert tally(events, "probe")["leaks"] == 2
