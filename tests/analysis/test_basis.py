"""The verdict says what each reproduced claim rests on (analysis/basis.py)."""

from __future__ import annotations

from fleetprobe.analysis.base import basis
from fleetprobe.analysis.base import claims as verdict


def test_every_reproduced_claim_has_a_basis_and_no_other_claim_has_one(results):
    judged = verdict.judge_all(results)
    assert any(v.status == verdict.REPRODUCED for v in judged)
    for v in judged:
        if v.status == verdict.REPRODUCED:
            assert v.basis in (basis.MECHANISM, basis.WORKLOAD, basis.OVERLAP_ONLY), v.claim_id
            assert f"{v.basis}: " in v.reason
        else:
            assert v.basis == basis.NO_BASIS, v.claim_id


def test_differing_point_estimates_are_interval_overlap_only(results):
    for v in verdict.judge_all(results):
        claim = next(c for c in results.claims if c["id"] == v.claim_id)
        if v.status != verdict.REPRODUCED or "k" not in claim or \
                claim["metric"].startswith("contradiction_"):
            continue
        measured = results.measured_rate(claim["metric"], v.run_ids[0])
        same = abs(measured.value - claim["k"] / claim["n"]) < 1e-9
        assert (v.basis != basis.OVERLAP_ONLY or not same) or "no mechanism" in v.reason
        if not same:
            assert v.basis == basis.OVERLAP_ONLY and "point estimates differ" in v.reason


def test_contradiction_rule_needs_every_rejection_to_be_a_concurrent_write(results):
    for run in results.runs[results.runs.experiment == "contradiction"].itertuples():
        admission = results.view("contradiction_admission", [run.run_id])
        rejected = admission[admission.outcome != "admitted"]
        found = basis.contradiction_construction(results, run.run_id)
        only_concurrent = not rejected.empty and set(rejected.scenario) == {"concurrent"}
        assert bool(found) == only_concurrent, run.run_id
        if found:
            assert "concurrent-path detection here" in found


def test_on_the_committed_traces_the_referee_notes_are_there():
    from pathlib import Path

    import pytest

    from fleetprobe.analysis.base.results import Results

    traces = Path(__file__).resolve().parents[2] / "data" / "traces"
    if not any(traces.glob("*contradiction*/manifest.json")):
        pytest.skip("no committed traces")
    committed = Results.load(traces)
    try:
        judged: dict = {}
        for v in verdict.judge_all(committed):  # the bundled profile a claim names comes first
            judged.setdefault(v.claim_id, v)
    finally:
        committed.con.close()
    detection = judged["contradiction_detection_all"]
    assert detection.basis == basis.WORKLOAD
    assert "concurrent-path detection here 0/" in detection.reason
    assert "prose_diversity high" in detection.reason
    sibling = judged["propagation_sibling_visibility"]
    assert sibling.basis == basis.OVERLAP_ONLY and "cannot miss" in sibling.reason
    assert "trust-1 half" in judged["reprobe_same_fleet"].reason
