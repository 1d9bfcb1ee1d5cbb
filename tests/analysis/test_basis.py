"""Every verdict names its basis, and only measurements with enough trials on a target that
can reproduce a claim are counted (analysis/base/basis.py, analysis/base/claims.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetprobe.analysis.base import basis
from fleetprobe.analysis.base import claims as verdict
from fleetprobe.analysis.base.results import Results

from .fixtures import builders

PAPER = {"deciding_trials": 20}


def test_every_compared_claim_names_its_basis(results):
    for v in verdict.judge_all(results):
        if v.status == verdict.NOT_MEASURED:
            assert v.basis == basis.NO_BASIS, v.claim_id
        else:
            assert v.basis in basis.BASES, v.claim_id


def test_nothing_counted_rests_on_design_on_a_comparison_or_on_too_few_trials(results):
    claims = {c["id"]: c for c in results.claims}
    judged = verdict.judge_all(results)
    for v in judged:
        if v.status in verdict.COUNTED:
            assert v.basis in basis.REPRODUCING, v
            assert v.role == verdict.REPRODUCTION, v
            assert basis.decides(results.paper, v.n or 0, verdict.paper_n(claims[v.claim_id]),
                                 v.separated), v
        if v.basis in basis.BY_DESIGN:
            assert v.status not in (verdict.REPRODUCED, verdict.SMOKE_SAME), v
    assert not any(verdict.is_counted(v) and v.basis in basis.BY_DESIGN for v in judged)


def test_the_trials_rule():
    assert not basis.decides(PAPER, 19, None, separated=True)  # never below the minimum
    assert basis.decides(PAPER, 20, None, separated=False)  # no paper n: the minimum
    assert not basis.decides(PAPER, 100, 164, separated=False)  # same needs the paper's n
    assert basis.decides(PAPER, 164, 164, separated=False)
    assert basis.decides(PAPER, 100, 164, separated=True)  # a separated difference decides
    assert not basis.decides(PAPER, 1, 1, separated=False)  # Table 3: never at paper's n
    assert "20 trials" in basis.trials_rule(PAPER)


def _verdict(**fields) -> verdict.Verdict:
    base = dict(claim_id="c", label="l", section="s", profile="p", paper="-", measured="-",
                status=verdict.REPRODUCED, reason="")
    return verdict.Verdict(**{**base, **fields})


@pytest.mark.parametrize(("fields", "expected"), [
    ({"basis": basis.ENGINE, "n": 164}, verdict.REPRODUCED),
    ({"basis": basis.PROFILE, "n": 50}, verdict.SMOKE_SAME),
    ({"basis": basis.RULE, "n": 164}, verdict.HOLDS),
    ({"basis": basis.WORKLOAD, "n": 164}, verdict.HOLDS),
    ({"basis": basis.BACKEND, "n": 164, "role": verdict.COMPARISON}, verdict.SAME_AS_SERVICE),
    ({"basis": basis.BACKEND, "n": 6, "role": verdict.COMPARISON},
     verdict.SAME_AS_SERVICE + verdict.SMOKE_SUFFIX),
    ({"basis": basis.ENGINE, "n": 164, "status": verdict.DIFFERS, "role": verdict.COMPARISON},
     verdict.DIFFERS_FROM_SERVICE),
])
def test_status_of(fields, expected):
    claim = {"kind": "rate", "k": 72, "n": 164}
    assert verdict.status_of(PAPER, claim, _verdict(**fields)) == expected


def test_a_backend_is_never_reproduced_only_compared(tmp_path):
    builders.write_run(tmp_path, "20260601T000000Z-provenance-seed7", "provenance",
                       builders.provenance(50, 0), kind="backend", profile="backend-mem0",
                       planned={"write": 200})
    results = Results.load(tmp_path)
    try:
        judged = [v for v in verdict.judge_all(results) if v.profile == "backend-mem0"]
    finally:
        results.con.close()
    assert judged and all(v.role == verdict.COMPARISON for v in judged)
    assert not any(v.status in verdict.COUNTED or verdict.is_counted(v) for v in judged)
    completeness = next(v for v in judged if v.claim_id == "provenance_completeness")
    assert completeness.status == verdict.SAME_AS_SERVICE
    assert completeness.basis == basis.BACKEND


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
    assert detection.basis == basis.WORKLOAD and detection.status == verdict.HOLDS
    assert "concurrent-path detection here 0/" in detection.reason
    assert "prose_diversity high" in detection.reason
    sibling = judged["propagation_sibling_visibility"]
    assert sibling.basis == basis.PROFILE and "cannot miss" in sibling.reason
    assert "trust-1 half" in judged["reprobe_same_fleet"].reason
    # the claims issue 36 names are registered and judged
    for claim_id in ("redistribute_below_trust3", "cross_tenant_rejected",
                     "propagation_window_first_poll", "contradiction_write_tail"):
        assert judged[claim_id].status != verdict.NOT_MEASURED, claim_id
