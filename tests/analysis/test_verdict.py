"""Verdict logic: one claim reproduces, others differ for reasons the data shows."""

from __future__ import annotations

from fleetprobe.analysis.base import basis
from fleetprobe.analysis.base import claims as verdict
from fleetprobe.analysis.base.results import Results
from fleetprobe.analysis.sections import leakage

from .fixtures import builders


def by_id(results: Results) -> dict[str, verdict.Verdict]:
    return {v.claim_id: v for v in verdict.judge_all(results)}


def test_a_reproducing_and_a_differing_claim(results, fixture_traces):
    ids = fixture_traces[1]
    judged = by_id(results)
    completeness = judged["provenance_completeness"]
    # the bundled server's own rule gives 50/50: it holds by design, it is not reproduced
    assert completeness.status == verdict.HOLDS
    assert completeness.basis == basis.RULE
    assert completeness.run_ids == [ids["provenance_0530"]]
    assert completeness.measured.startswith("50/50")
    detection = judged["contradiction_detection_all"]
    assert detection.status == verdict.DIFFERS and detection.basis == basis.PROFILE
    assert detection.n == 200
    assert detection.measured.startswith("60/200")
    # the reason names what the data shows: the admission counts
    assert "exact_duplicate 70" in detection.reason and "near_duplicate 40" in detection.reason
    assert "90/200 fact-runs with both admitted" in detection.reason


def test_admission_claim_checks_share_and_dominant_reason(results):
    admission = by_id(results)["contradiction_admission"]
    assert admission.status == verdict.DIFFERS
    assert admission.measured.startswith("110/400")


def test_search_leak_differs_under_the_documented_variant_and_names_the_others(results):
    search_leak = by_id(results)["leakage_search_leak"]
    assert search_leak.status == verdict.DIFFERS
    assert "no_fleet/fleet_ids 72/164" in search_leak.reason


def test_search_leak_hypothesis_finds_the_variant(results):
    table = leakage.hypothesis_frame(results)
    exact = table[table["gives 72/164 and 4/28"] == "exactly"]
    assert list(zip(exact.variant_write, exact.variant_search, strict=True)) == [
        ("no_fleet", "fleet_ids")]


def test_table3_and_reprobe_against_their_dates(results):
    judged = by_id(results)
    # the bundled profiles give the paper's outcomes by their own rules
    for claim_id in ("table3_trust1_cross_fleet", "table3_tenant_key",
                     "reprobe_trust1_cross_fleet"):
        assert judged[claim_id].status == verdict.HOLDS, claim_id
        assert judged[claim_id].basis == basis.RULE, claim_id
    assert judged["reprobe_trust1_cross_fleet"].measured.startswith("0/36")
    assert judged["reprobe_trust1_cross_fleet"].profile == "memclaw-2026-05-31"


def test_latency_is_not_comparable_against_the_reference_server(results):
    window = by_id(results)["propagation_window_latency"]
    assert window.status == verdict.NOT_COMPARABLE
    assert "reference" in window.reason


def _remote(run_dir) -> None:
    manifest = run_dir / "manifest.json"
    manifest.write_text(manifest.read_text().replace("http://127.0.0.1:1",
                                                     "https://memory.example.net"))


def test_latency_against_a_live_target(tmp_path):
    for run in (builders.write_run(tmp_path, "20260601T000000Z-propagation-seed1", "propagation",
                                   builders.propagation(), kind="live", planned={"probe": 200}),
                builders.write_run(tmp_path, "20260601T000000Z-contradiction-seed1",
                                   "contradiction", builders.contradiction(facts=10),
                                   kind="live", planned={"write": 400})):
        _remote(run)
    judged = by_id(Results.load(tmp_path))
    # window p50/p95/max 835/1760/1900 ms against the paper's 830/1630/1970: within x2, but
    # 8 facts are below the trials rule (smoke)
    assert judged["propagation_window_latency"].status == verdict.SMOKE_SAME
    # write latency p99 ~3 s against the paper's 19.3 s: more than x2 apart, on fewer writes
    # than the paper's 194 (smoke)
    assert judged["contradiction_write_latency"].status == verdict.SMOKE_DIFFERS
    assert "p99 x0.09" in judged["contradiction_write_latency"].reason
    # a ratio of two latency views of one run, judged by the same latency rule
    ratio = judged["contradiction_detection_adds_no_latency"]
    assert ratio.measured.startswith("p50 ratio ") and "ratio x" in ratio.reason
    assert ratio.status != verdict.NOT_COMPARABLE


def test_explicitly_selected_run_replaces_the_canonical_one(fixture_traces):
    root, ids = fixture_traces
    old = ids["provenance_small_old"]
    selected = Results.load(root, [old])
    completeness = by_id(selected)["provenance_completeness"]
    assert completeness.run_ids == [old]
    assert completeness.status == verdict.DIFFERS
    assert "selected" in completeness.reason
    # experiments without a selected run keep their default canonical run
    detection = by_id(selected)["contradiction_detection_all"]
    assert detection.run_ids == [ids["contradiction_0530"]]


def test_the_older_small_run_is_not_canonical(results, fixture_traces):
    ids = fixture_traces[1]
    run = results.canonical_run("provenance", "memclaw-2026-05-30")
    assert run.run_id == ids["provenance_0530"]
    assert run.basis == "paper scale"


def test_claims_without_runs_are_not_measured(tmp_path):
    judged = verdict.judge_all(Results.load(tmp_path))
    assert {v.status for v in judged} == {verdict.NOT_MEASURED}
    assert all("no " in v.reason or "cannot measure" in v.reason for v in judged)


def test_every_registered_claim_can_be_judged_or_says_why_not(results):
    kinds = set(verdict.JUDGES) | {verdict.UNMEASURED}
    ids = [c["id"] for c in results.claims]
    assert len(set(ids)) == len(ids)
    for claim in results.claims:
        assert claim["kind"] in kinds, claim["id"]
        if claim["kind"] == verdict.UNMEASURED:
            assert claim["reason"] and claim["paper_value"] and claim["experiment"], claim["id"]
            judged = verdict.judge(results, claim)
            assert judged.status == verdict.NOT_MEASURED and claim["reason"] in judged.reason
        elif claim["kind"] == "rule":
            assert claim["expect"] in verdict.RULE_TEXT, claim["id"]
    # the claims issue 36 names are registered
    assert {"redistribute_below_trust3", "redistribute_trust3_moves", "cross_tenant_rejected",
            "propagation_window_first_poll", "contradiction_write_tail"} <= set(ids)


def test_a_rule_claim_holds_only_as_the_paper_states_it(results, fixture_traces):
    claim = {"id": "x", "label": "x", "section": "9.3", "profile": "memclaw-2026-05-30",
             "kind": "rule", "expect": "none", "metric": "propagation_cross_fleet_leak"}
    # the fixture's propagation run: 0 of 80 foreign probes leak
    judged = verdict.judge(results, claim)
    assert judged.outcome == verdict.SAME and judged.n == 80
    assert judged.status == verdict.REPRODUCED and judged.basis == basis.PROFILE
    judged = verdict.judge(results, {**claim, "expect": "some"})
    assert judged.outcome == verdict.DIFFERS and judged.status == verdict.DIFFERS
