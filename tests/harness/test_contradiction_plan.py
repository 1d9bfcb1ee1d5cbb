"""Contradiction plan and checkers, no server: determinism, the prose knobs, judgements."""

from __future__ import annotations

from typing import Any

import pytest

from fleetprobe.experiments.contradiction import (
    SCENARIOS,
    TEMPLATES,
    ContradictionParams,
    active_rows_of,
    is_stale,
    judge_fact_run,
    make_plan,
    reject_reason,
    write_body,
)
from fleetprobe.harness.seeding import salted


def params(**overrides: Any) -> ContradictionParams:
    return ContradictionParams(experiment="contradiction", **overrides)


def test_defaults_are_the_papers_sizes() -> None:
    plan = make_plan(params())
    assert len(plan.facts) == 100
    assert len({f.template_id for f in plan.facts}) == 20
    assert plan.planned_counts == {"entity": 100, "write": 400, "check": 200, "stale_read": 200}
    assert len({f.subject for f in plan.facts}) == 100  # one subject entity per fact


def test_same_seed_same_plan_other_seed_other_values() -> None:
    assert make_plan(params(seed=3)) == make_plan(params(seed=3))
    values = [w.object_value for f in make_plan(params(seed=3)).facts for w in f.writes]
    other = [w.object_value for f in make_plan(params(seed=4)).facts for w in f.writes]
    assert values != other


def test_each_pair_asserts_two_values_on_one_single_valued_triple() -> None:
    for fact in make_plan(params()).facts:
        for scenario in SCENARIOS:
            first, second = fact.scenario_writes(scenario)
            assert (first.write_index, second.write_index) == (0, 1)
            assert first.object_value != second.object_value
        # both scenarios assert the same A then B
        assert [w.object_value for w in fact.scenario_writes("sequential")] == \
            [w.object_value for w in fact.scenario_writes("concurrent")]


def test_predicates_are_single_valued_on_the_reference_server() -> None:
    from reference_server.pipeline.contradiction import SINGLE_VALUE_PREDICATES, is_single_valued

    assert all(is_single_valued(t.predicate) for t in TEMPLATES)
    # every template predicate is one of MemClaw's own names (e.g. `owner` is not one: the
    # engine treats it as multi-valued and never supersedes)
    assert {t.predicate for t in TEMPLATES} <= SINGLE_VALUE_PREDICATES
    assert "owner" not in {t.predicate for t in TEMPLATES}


def test_low_diversity_repeats_the_sequential_sentences_high_does_not() -> None:
    low = make_plan(params(prose_diversity="low")).facts[0]
    assert [w.content for w in low.scenario_writes("sequential")] == \
        [w.content for w in low.scenario_writes("concurrent")]
    high = make_plan(params(prose_diversity="high")).facts[0]
    assert len({w.content for w in high.writes}) == 4


def test_per_fact_writer_writes_all_four_per_scenario_splits_them() -> None:
    fact = make_plan(params()).facts[5]
    assert len({w.writer for w in fact.writes}) == 1
    split = make_plan(params(writer_assignment="per_scenario")).facts[5]
    assert {w.writer for w in split.scenario_writes("sequential")} != \
        {w.writer for w in split.scenario_writes("concurrent")}


def _cosine(a: str, b: str) -> float:
    from reference_server.pipeline.embedding import HashingEmbedder

    embedder = HashingEmbedder()
    return float(embedder.embed(a) @ embedder.embed(b))


def test_value_only_pairs_cross_the_near_duplicate_gate_frames_do_not() -> None:
    """Under the server's default embedder: the 9.2 case is >= 0.97, the default is far below."""
    nonce = "3fa2c1b0"
    for fact in make_plan(params(pair_prose="value_only", prose_diversity="high")).facts[:20]:
        for scenario in SCENARIOS:
            a, b = (salted(w.content, nonce) for w in fact.scenario_writes(scenario))
            assert _cosine(a, b) >= 0.97
    for fact in make_plan(params(prose_diversity="high")).facts[:20]:
        contents = [salted(w.content, nonce) for w in fact.writes]
        assert max(_cosine(a, b) for i, a in enumerate(contents) for b in contents[i + 1:]) < 0.85


def test_salt_never_looks_like_an_identifier() -> None:
    """A hex salt would make the server's near-duplicate gate skip every write."""
    from reference_server.pipeline.write import IDENTIFIER

    for nonce in ("3fa2c1b0", "deadbeef", "01234567", "a1b2c3d4"):
        for fact in make_plan(params(pair_prose="value_only")).facts:
            assert not any(IDENTIFIER.search(salted(w.content, nonce)) for w in fact.writes)


def test_write_body_carries_the_triple_and_the_run_scoped_names() -> None:
    fact = make_plan(params()).facts[0]
    body = write_body(fact, fact.writes[1], "ent-1", params(), "n0nce")
    assert body["subject_entity_id"] == "ent-1"
    assert body["predicate"] == fact.predicate
    assert body["object_value"] == fact.writes[1].object_value
    assert body["write_mode"] == "strong"
    assert "n0nce" in body["agent_id"] and "n0nce" in body["fleet_id"]
    assert body["metadata"]["fact_key"] == "n0nce-fact-000"
    assert body["metadata"]["scenario"] == "sequential"


@pytest.mark.parametrize(("status", "error", "reason"), [
    (201, None, None),
    (409, "409 Duplicate memory exists: 6f1c", "exact_duplicate"),
    (409, "409 Near-duplicate memory exists: 6f1c", "near_duplicate"),
    (429, "429 Rate limit exceeded: 10 per 1 second.", "rate_limited"),
    (422, "422 Memory content too short", "other"),
    (409, "409 Idempotency-Key still in progress", "other"),
])
def test_reject_reason_from_status_and_message(status: int, error: str | None,
                                               reason: str | None) -> None:
    assert reject_reason(status, error) == reason


def _write(mid: str | None, admitted: bool) -> dict[str, Any]:
    return {"memory_id": mid, "admitted": admitted}


def _refetch(mid: str, status: str | None, supersedes: str | None,
             http: int = 200) -> dict[str, Any]:
    return {"memory_id": mid, "status": http, "observed_status": status,
            "observed_supersedes_id": supersedes}


def test_both_admitted_and_superseded_is_detected() -> None:
    verdict = judge_fact_run(
        [_write("a", True), _write("b", True)],
        [_refetch("a", "outdated", None), _refetch("b", "active", "a")],
    )
    assert verdict == {"both_admitted": True, "n_admitted": 2, "detected": True,
                       "triggered_memory_id": "b"}


def test_both_active_without_edge_is_not_detected() -> None:
    verdict = judge_fact_run(
        [_write("a", True), _write("b", True)],
        [_refetch("a", "active", None), _refetch("b", "active", None)],
    )
    assert verdict["detected"] is False and verdict["triggered_memory_id"] is None


def test_one_admitted_row_superseded_by_the_other_scenario_counts() -> None:
    verdict = judge_fact_run([_write("a", True), _write(None, False)],
                             [_refetch("a", "outdated", None)])
    assert verdict == {"both_admitted": False, "n_admitted": 1, "detected": True,
                       "triggered_memory_id": "a"}


def test_failed_refetch_is_no_evidence_of_detection() -> None:
    verdict = judge_fact_run([_write("a", True), _write("b", True)],
                             [_refetch("a", None, None, http=404), _refetch("b", None, None,
                                                                            http=503)])
    assert verdict["detected"] is False


def test_nothing_admitted_nothing_detected() -> None:
    verdict = judge_fact_run([_write(None, False), _write(None, False)], [])
    assert verdict == {"both_admitted": False, "n_admitted": 0, "detected": False,
                       "triggered_memory_id": None}


def test_stale_read_counts_only_this_fact_runs_rows() -> None:
    body = {"items": [
        {"metadata": {"fact_key": "n-fact-001", "scenario": "sequential"}},
        {"metadata": {"fact_key": "n-fact-001", "scenario": "concurrent"}},
        {"metadata": {"fact_key": "n-fact-002", "scenario": "sequential"}},
        {"metadata": None},
    ]}
    assert active_rows_of(body, "n-fact-001", "sequential") == 1
    body["items"].append({"metadata": {"fact_key": "n-fact-001", "scenario": "sequential"}})
    assert active_rows_of(body, "n-fact-001", "sequential") == 2
    assert is_stale(2) is True and is_stale(1) is False and is_stale(0) is False
    assert active_rows_of({"unexpected": 1}, "n-fact-001", "sequential") is None
    assert is_stale(None) is None
