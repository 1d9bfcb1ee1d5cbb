"""Leakage plan, ground truth and checkers: pure functions, no server."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from fleetprobe.drive.run import get_experiment
from fleetprobe.experiments.leakage import (
    ALL_VARIANTS,
    LeakageParams,
    LeakagePlan,
    expected_agent_get,
    expected_bulk,
    get_returned,
    judge,
    make_plan,
    search_body,
    search_returned,
)
from fleetprobe.harness.experiment import ParamsError, parse_params

PAPER: dict[str, Any] = {"fleets": 4, "agents_per_fleet": 6}


def build_plan(params: dict[str, Any], seed: int) -> LeakagePlan:
    return make_plan(LeakageParams(experiment="leakage", seed=seed, **params))


def test_paper_scale_matrix_is_192_probes_164_deny_28_allow() -> None:
    block = build_plan(PAPER, 7).blocks[0]
    assert len(block.probes) == 192
    assert Counter(p.expected for p in block.probes) == {"deny": 164, "allow": 28}


def test_deny_split_matches_search_leak_arithmetic() -> None:
    """72 cross-fleet probes of fleet secrets, 92 of peers' agent secrets (SEARCH-LEAK.md 1)."""
    block = build_plan(PAPER, 7).blocks[0]
    deny = Counter((p.secret_scope, p.relation) for p in block.probes if p.expected == "deny")
    assert deny[("fleet", "cross_fleet")] == 72
    assert deny[("agent", "cross_fleet")] + deny[("agent", "same_fleet")] == 92
    own_agent = [p for p in block.probes if p.secret_scope == "agent" and p.expected == "allow"]
    assert len(own_agent) == 4 and all(p.relation == "same_agent" for p in own_agent)


def test_same_seed_same_plan() -> None:
    params = {**PAPER, "variants": ALL_VARIANTS}
    assert build_plan(params, 3) == build_plan(params, 3)


def test_different_seed_changes_prose() -> None:
    a, b = build_plan(PAPER, 1), build_plan(PAPER, 2)
    assert [r.content for r in a.blocks[0].rows] != [r.content for r in b.blocks[0].rows]


def test_rows_are_distinct_and_variant_namespaces_disjoint() -> None:
    plan = build_plan({**PAPER, "variants": ALL_VARIANTS}, 5)
    rows = plan.all_rows()
    assert len(rows) == 32 + 12
    assert len({r.content for r in rows}) == len(rows)
    assert len({r.row_id for r in rows}) == len(rows)
    fleets = [{a.fleet_id for a in b.agents} for b in plan.blocks]
    agents = [{a.agent_id for a in b.agents} for b in plan.blocks]
    for sets in (fleets, agents):
        assert all(x.isdisjoint(y) for i, x in enumerate(sets) for y in sets[i + 1 :])
    assert [(b.variant_write, b.variant_search) for b in plan.blocks] == list(ALL_VARIANTS)
    assert all(r.variant_write == b.variant_write for b in plan.blocks for r in b.rows)


def test_variants_param_is_validated() -> None:
    leakage = get_experiment("leakage")
    parsed = parse_params(leakage, {"variants": [["no_fleet", "fleet_id_singular"]]})
    assert parsed.variants == [("no_fleet", "fleet_id_singular")]
    assert parse_params(leakage, {}).variants == [("fleet_id", "fleet_ids")]
    with pytest.raises(ParamsError, match="variants"):
        parse_params(leakage, {"variants": [["fleet", "fleet_ids"]]})
    with pytest.raises(ParamsError, match="more than once"):
        parse_params(leakage, {"variants": [["fleet_id", "fleet_ids"]] * 2})
    with pytest.raises(ParamsError, match="fleets"):
        parse_params(leakage, {"fleets": 1})


def test_planned_counts_at_paper_scale() -> None:
    counts = build_plan({**PAPER, "variants": ALL_VARIANTS}, 1).planned_counts()
    assert counts == {"write": 44, "probe": 4 * 2 * 192, "whoami": 9, "provision": 8,
                      "agent_probe": 4, "reprobe": 96}


def test_search_body_variants() -> None:
    listed = search_body("fl-0", "fleet_ids", "q text", 5, None)
    assert listed == {"query": "q text", "top_k": 5, "fleet_ids": ["fl-0"]}
    singular = search_body("fl-0", "fleet_id_singular", "q text", 5, "ag")
    assert singular == {"query": "q text", "top_k": 5, "fleet_id": "fl-0",
                        "filter_agent_id": "ag"}


def test_reprobe_is_96_with_the_paper_split() -> None:
    ab = build_plan(PAPER, 1).agent_block
    assert ab is not None and len(ab.reprobe) == 96
    split = Counter((p.trust, p.relation, p.expected) for p in ab.reprobe)
    assert split == {
        (1, "cross_fleet", "deny"): 36,
        (2, "cross_fleet", "allow"): 36,
        (1, "same_fleet", "allow"): 12,
        (2, "same_fleet", "allow"): 12,
    }


def test_table3_rows() -> None:
    ab = build_plan(PAPER, 1).agent_block
    assert ab is not None
    rows = [(p.credential, p.trust, p.relation, p.expected) for p in ab.table3]
    assert rows == [
        ("tenant", None, None, "allow"),
        ("agent", 1, "cross_fleet", "deny"),
        ("agent", 2, "cross_fleet", "allow"),
        ("agent", 1, "same_fleet", "allow"),
    ]
    home = ab.keyed_agents[0].fleet_id
    assert all(p.prober_fleet in (None, home) for p in ab.table3)
    assert ab.table3[1].target_fleet != home and ab.table3[3].target_fleet == home


def test_table3_only_needs_fleet0_keys_without_reprobe() -> None:
    ab = build_plan({**PAPER, "reprobe": False}, 1).agent_block
    assert ab is not None and ab.reprobe == () and len(ab.table3) == 4
    assert [(a.trust, a.fleet_id) for a in ab.keyed_agents] == [
        (1, ab.keyed_agents[0].fleet_id), (2, ab.keyed_agents[0].fleet_id)
    ]
    assert build_plan({**PAPER, "reprobe": False, "agent_probe": False}, 1).agent_block is None


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
    assert judge("deny", None) == {"leak": None, "miss": None}


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
