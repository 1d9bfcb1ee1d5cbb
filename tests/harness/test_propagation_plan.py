"""Propagation plan and checkers, no server: determinism, sizes, judgements."""

from __future__ import annotations

from typing import Any

from fleetprobe.client import Result
from fleetprobe.experiments.propagation import (
    PropagationParams,
    canary_seen,
    judge_flip,
    judge_probe,
    make_plan,
    moved_count,
    observed_visibility,
    search_body,
    write_body,
)


def params(**overrides: Any) -> PropagationParams:
    return PropagationParams(experiment="propagation", **overrides)


def test_defaults_are_the_papers_sizes() -> None:
    plan = make_plan(params())
    assert len(plan.rate_facts) == 40 and len(plan.window_facts) == 8
    assert len(plan.siblings) == 3 and len(plan.foreign) == 2
    assert plan.planned_counts["probe"] == 200
    assert plan.planned_counts["write"] == 48
    assert len({f.content for f in plan.rate_facts + plan.window_facts}) == 48
    assert len({f.canary for f in plan.rate_facts + plan.window_facts}) == 48


def test_readers_live_where_the_relation_says() -> None:
    plan = make_plan(params())
    assert all(s.fleet_id == plan.writer.fleet_id for s in plan.siblings)
    assert all(f.fleet_id != plan.writer.fleet_id for f in plan.foreign)
    assert len({f.fleet_id for f in plan.foreign}) == len(plan.foreign)


def test_same_seed_same_plan_other_seed_other_subset() -> None:
    assert make_plan(params(seed=5)) == make_plan(params(seed=5))
    subsets = {tuple(r.fact_id for r in make_plan(params(seed=s)).redistributes)
               for s in range(6)}
    assert len(subsets) > 1


def test_redistribute_subset_has_sibling_and_cross_fleet_cases_on_distinct_facts() -> None:
    plan = make_plan(params())
    relations = [r.relation for r in plan.redistributes]
    assert relations.count("sibling") == 2 and relations.count("cross_fleet") == 1
    assert len({r.fact_id for r in plan.redistributes}) == 3
    sibling_ids = {s.agent_id for s in plan.siblings}
    foreign_ids = {f.agent_id for f in plan.foreign}
    for case in plan.redistributes:
        assert case.target_agent in (sibling_ids if case.relation == "sibling" else foreign_ids)
    no_foreign = make_plan(params(n_foreign=0))
    assert {r.relation for r in no_foreign.redistributes} == {"sibling"}


def test_bodies_scope_the_fact_to_the_writer_fleet_and_search_the_reader_fleet() -> None:
    plan = make_plan(params())
    fact = plan.rate_facts[0]
    body = write_body(plan, fact, "strong", "n0nce")
    assert body["visibility"] == "scope_team"
    assert body["fleet_id"].endswith(plan.writer.fleet_id) and "n0nce" in body["fleet_id"]
    assert body["metadata"]["canary"].startswith(fact.canary) and "n0nce" in body["content"]
    query = search_body(plan.foreign[0], fact, 5, "n0nce")
    assert query["query"] == body["content"]
    assert query["fleet_ids"] == [body["fleet_id"].replace(plan.writer.fleet_id,
                                                           plan.foreign[0].fleet_id)]
    assert "filter_agent_id" not in query


def _result(status: int | None, body: Any = None) -> Result:
    return Result("POST /api/v1/search", status, body, 1.0, 1, None)


def test_canary_seen_only_in_metadata_canary() -> None:
    body = {"items": [{"metadata": {"canary": "c-1"}}, {"metadata": None}, {"content": "c-2"}]}
    assert canary_seen(body, "c-1") is True
    assert canary_seen(body, "c-2") is False
    assert canary_seen({"items": []}, "c-1") is False
    assert canary_seen({"nope": []}, "c-1") is None
    assert canary_seen(None, "c-1") is None


def test_observed_visibility_treats_4xx_as_not_shown_and_5xx_as_unknown() -> None:
    hit = {"items": [{"metadata": {"canary": "c"}}]}
    assert observed_visibility(_result(200, hit), "c") is True
    assert observed_visibility(_result(200, {"items": []}), "c") is False
    assert observed_visibility(_result(403, {"detail": "no"}), "c") is False
    assert observed_visibility(_result(503, None), "c") is None
    assert observed_visibility(_result(None, None), "c") is None


def test_only_a_foreign_reader_that_sees_the_canary_leaks() -> None:
    assert judge_probe("foreign", True) == {"visible": True, "leak": True}
    assert judge_probe("foreign", False) == {"visible": False, "leak": False}
    assert judge_probe("sibling", True) == {"visible": True, "leak": False}
    assert judge_probe("foreign", None) == {"visible": None, "leak": None}


def test_redistribute_judgements() -> None:
    assert moved_count({"moved": 1, "promoted": 0}) == 1
    assert moved_count({"detail": "denied"}) is None
    assert judge_flip("agent-b", "agent-b") is True
    assert judge_flip("agent-a", "agent-b") is False
    assert judge_flip(None, "agent-b") is None
