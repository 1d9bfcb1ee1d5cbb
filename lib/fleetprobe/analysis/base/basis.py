"""What a reproduced claim rests on: the server's mechanism, the workload's construction, or
only overlapping intervals.

The verdict calls a rate `reproduced` whenever the paper's and the measured 95% Wilson
intervals overlap. A referee needs to know more: whether the bundled server reaches the
paper's number through the mechanism the paper describes (`mechanism`), whether the number is
fixed by how the workload is built, whatever the system does (`workload construction`), or
whether the point estimates differ and only the intervals overlap (`interval overlap only`).

The rules, in order (`MemClaw's code`: the run is MemClaw's engine at the commit the claim's
profile stands for, and it gives the paper's count; it outranks every statement about the
bundled server):
1. contradiction claims, when every rejection of the run is a concurrent-pair write (the
   headline workload's concurrent pair repeats its sequential pair's sentences): workload
   construction, with the concurrent-path detection where it is exercised beside it;
2. point estimates that differ: interval overlap only, with why where the kit knows it;
3. the mechanism or construction stated below for the claim, with numbers from the run;
4. MemClaw's code, for the engine of the claim's profile.
A claim that is not reproduced has no basis ("-").

The stated mechanisms describe the bundled server under the profile a claim names. Any other
target (a live endpoint, the engine, a backend, another bundled profile) gets no stated
mechanism: its reason is what that target answered on the claim's path (statuses and counts
from its trace), and it says that no mechanism is known beyond those answers.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from fleetprobe.analysis.base.results import Results
from fleetprobe.analysis.base.stats import Rate, fmt_rate, rate

MECHANISM, WORKLOAD, OVERLAP_ONLY, NO_BASIS = (
    "mechanism", "workload construction", "interval overlap only", "-")
# measured on MemClaw's own code at the commit the claim's profile stands for
# (paper_values.yaml fidelity.pairs): the strongest basis the kit has
REAL_CODE = "MemClaw's code"

# What each claim rests on when the run gives the paper's count: (basis, reason). The reasons
# describe the bundled reference server (reference_server/) and the harness's plans.
STATED: dict[str, tuple[str, str]] = {
    "leakage_probes_executed": (
        WORKLOAD, "a count of the probes the plan makes (4 fleets x 6 agents, 8 secrets) that "
                  "got an answer; it says the harness ran, not how the server governs"),
    "leakage_get_exposure": (
        MECHANISM, "GET-by-id under the tenant key checks the tenant only (profile "
                   "memclaw-2026-05-30), so every cross-scope row is returned"),
    "leakage_get_miss": (
        MECHANISM, "the tenant key reads every row of its tenant by id, so no entitled row "
                   "can be missed"),
    "leakage_search_miss": (
        MECHANISM, "the four misses are the four authors' agent-scoped secrets, which an "
                   "identity-less tenant-key search cannot see"),
    "table3_tenant_key": (MECHANISM, "GET-by-id checks the tenant only"),
    "table3_trust1_cross_fleet": (MECHANISM, "GET-by-id checks the tenant only, not the "
                                             "trust ladder"),
    "table3_trust2_cross_fleet": (MECHANISM, "GET-by-id checks the tenant only"),
    "table3_trust1_same_fleet": (MECHANISM, "GET-by-id checks the tenant only"),
    "reprobe_trust1_cross_fleet": (
        MECHANISM, "the remediated GET-by-id applies the scope predicate and trust ladder "
                   "and answers 404 when denied"),
    "reprobe_trust2_cross_fleet": (MECHANISM, "trust 2 may read across fleets on the trust "
                                              "ladder"),
    "reprobe_same_fleet": (MECHANISM, "a same-fleet read is in scope at any trust"),
    "reprobe_leaks": (MECHANISM, "the remediated GET-by-id denies every expected-deny probe"),
    "provenance_writes_succeeded": (
        WORKLOAD, "writes are paced at 8/s below the 10/s limit, so every planned write is "
                  "admitted; a count of the plan"),
    "provenance_completeness": (
        MECHANISM, "each write stores its parent link and the walk reads it back by id"),
    "provenance_writer_accuracy": (
        MECHANISM, "the server records the authenticated writer on each row"),
    "provenance_depth_fidelity": (MECHANISM, "parent links are stored as written"),
    "propagation_writes_succeeded": (WORKLOAD, "a count of the planned fact writes, paced "
                                               "below the rate limit"),
    "propagation_probes_produced": (WORKLOAD, "a count of the planned visibility probes"),
    "propagation_cross_fleet_leak": (
        MECHANISM, "search applies the fleet predicate to every candidate row"),
    "propagation_window_visible": (
        MECHANISM, "the bundled server commits a row and its embedding before it answers the "
                   "write, so the first poll finds it"),
}

# Why point estimates differ, where the kit knows: appended to "interval overlap only".
DIFFERENCE: dict[str, str] = {
    "propagation_sibling_visibility": (
        "the bundled server cannot miss: it commits the row and its embedding before it "
        "answers the write, in the same SQLite file search reads, and a sibling polls with the "
        "fact's own prose as the query, so the row ranks first on every poll; the paper's "
        "3 misses on memclaw.net have no counterpart here"),
}


def basis_of(results: Results, claim: dict[str, Any], run: pd.Series,
             measured: Rate | None) -> tuple[str, str]:
    """(basis, reason) for a reproduced claim judged against `run` (a canonical run row)."""
    run_id = run.run_id
    own = is_claims_own_target(claim, run)
    if claim["metric"].startswith("contradiction_"):
        found = contradiction_construction(results, run_id)
        if found:
            return WORKLOAD, "; ".join(p for p in (found, _extra(results, claim, run_id)) if p)
    paper = rate(claim["k"], claim["n"]) if "k" in claim and "n" in claim else None
    stated = STATED.get(claim["id"])
    extra = _extra(results, claim, run_id)
    if paper is not None and measured is not None and measured.n and \
            abs(paper.value - measured.value) > 1e-9:
        reason = (f"point estimates differ (paper {paper.value:.3f}, measured "
                  f"{measured.value:.3f})")
        why = DIFFERENCE.get(claim["id"]) if own else answered(results, claim, run)
        return OVERLAP_ONLY, "; ".join(p for p in (reason, why, extra) if p)
    if stated is not None and (own or stated[0] == WORKLOAD):
        basis, reason = stated
        return basis, "; ".join(p for p in (reason, extra) if p)
    commit = claims_engine_commit(results, claim, run)
    if commit is not None and claim["kind"] != "latency":  # loopback latency proves nothing
        return REAL_CODE, "; ".join(p for p in (
            f"the paper's count, measured on MemClaw's own code at {commit} (the engine the "
            f"{claim['profile']} profile stands for)", answered(results, claim, run), extra)
            if p)
    if not own:
        return OVERLAP_ONLY, "; ".join(p for p in (
            "same point estimate as the paper", answered(results, claim, run), extra) if p)
    return OVERLAP_ONLY, "same point estimate as the paper; the kit states no mechanism " \
                         "for it"


def engine_commit_of(results: Results, profile: str) -> str | None:
    """The engine commit a bundled profile stands for (paper_values.yaml fidelity.pairs)."""
    pairs = (results.paper.get("fidelity") or {}).get("pairs") or {}
    return next((commit for commit, name in pairs.items() if name == profile), None)


def claims_engine_commit(results: Results, claim: dict[str, Any],
                         run: pd.Series) -> str | None:
    """The commit, when the run is MemClaw's engine at the commit the claim's profile stands
    for (e2d805e for the state the paper measured, 045039f for the remediation)."""
    commit = engine_commit_of(results, claim["profile"])
    recorded = run.get("engine_commit")
    if (run.get("target_kind") == "engine" and commit and isinstance(recorded, str)
            and recorded.startswith(commit)):
        return commit
    return None


def is_claims_own_target(claim: dict[str, Any], run: pd.Series) -> bool:
    """True when the run is the bundled server under the profile the claim names: the only
    target the stated mechanisms describe."""
    return run.get("target_kind") == "reference" and run.get("profile") == claim["profile"]


# The events a claim's metric counts, by metric prefix: (phase, axis or None).
ANSWER_PHASES: tuple[tuple[str, str, str | None], ...] = (
    ("leakage_get", "probe", "get"), ("leakage_search", "probe", "search"),
    ("leakage_probes", "probe", None), ("leakage_table3", "agent_probe", None),
    ("leakage_agent", "agent_probe", None), ("leakage_reprobe", "reprobe", None),
    ("provenance_writes", "write", None), ("provenance_", "walk", None),
    ("propagation_writes", "write", None), ("propagation_window", "window", None),
    ("propagation_", "probe", None), ("contradiction_", "write", None),
)


def answered(results: Results, claim: dict[str, Any], run: pd.Series) -> str:
    """What the target answered on the claim's path, from its trace: HTTP statuses and
    counts; a claim about another target's mechanism is never borrowed."""
    phase, axis = next(((ph, ax) for prefix, ph, ax in ANSWER_PHASES
                        if claim["metric"].startswith(prefix)), (None, None))
    where = f"{run.profile} ({run.target_kind})"
    if phase is None:
        return f"no mechanism is known for {where} beyond its recorded answers"
    by_status: dict[int | None, int] = {}
    for row_axis, status, n in results.statuses.get((run.run_id, phase), []):
        if axis is None or row_axis == axis:
            by_status[status] = by_status.get(status, 0) + n
    rows = sorted(by_status.items(), key=lambda item: (item[0] is None, item[0] or 0))
    counts = ", ".join(f"{'no answer' if s is None else s} x{n}" for s, n in rows) or "none"
    path = f"{phase} ({axis})" if axis else phase
    return (f"{where} answered HTTP {counts} on the {path} requests of run {run.run_id}; no "
            "mechanism is known for this target beyond these answers")


# ------------------------------------------------------------------------------ the rules


def contradiction_construction(results: Results, run_id: str) -> str:
    """When every rejection of the run is a concurrent-pair write: say so, give the
    concurrent-path detection here and in the runs where the concurrent pair's prose differs
    (the high-diversity ablation), else ""."""
    admission = results.view("contradiction_admission", [run_id])
    rejected = admission[admission.outcome != "admitted"]
    if rejected.empty or set(rejected.scenario) != {"concurrent"}:
        return ""
    reasons = "/".join(sorted(set(rejected.outcome)))
    concurrent = admission[admission.scenario == "concurrent"]
    here = scenario_detection(results, run_id, "concurrent")
    text = (f"every one of the {int(rejected.writes.sum())} rejections ({reasons}) is a "
            f"concurrent-pair write ({int(rejected.writes.sum())} of "
            f"{int(concurrent.writes.sum())} concurrent-pair writes rejected) repeating its "
            "sequential pair's sentences, so the concurrent path is never exercised under the "
            "headline workload (MemClaw's engine rejects exact-content repeats the same way); "
            f"concurrent-path detection here {fmt_rate(here)}")
    elsewhere = _exercised_elsewhere(results, run_id)
    if elsewhere:
        text += "; where it is exercised: " + "; ".join(elsewhere)
    else:
        text += "; no run of this profile exercises the concurrent path (prose_diversity high)"
    return text


def _exercised_elsewhere(results: Results, run_id: str) -> list[str]:
    """Concurrent-path detection in the other runs of the same profile whose concurrent
    pairs were both admitted (e.g. the prose_diversity high ablation)."""
    runs = results.runs.set_index("run_id")
    if run_id not in runs.index:
        return []
    profile = runs.loc[run_id].profile
    others = runs[(runs.experiment == "contradiction") & (runs.profile == profile)
                  & (runs.index != run_id)]
    found = []
    for other in others.index:
        rows = _scenario_rows(results, other, "concurrent")
        if rows.empty or int(rows.both_admitted.sum()) == 0:
            continue
        params = results.run_params(other)
        found.append(f"{fmt_rate(scenario_detection(results, other, 'concurrent'))} in run "
                     f"{other} (prose_diversity {params.get('prose_diversity', 'unrecorded')})")
    return found


def _scenario_rows(results: Results, run_id: str, scenario: str) -> pd.DataFrame:
    rows = results.view("contradiction_detection_by_scenario", [run_id])
    return rows[rows.scenario == scenario]


def scenario_detection(results: Results, run_id: str, scenario: str) -> Rate | None:
    rows = _scenario_rows(results, run_id, scenario)
    if rows.empty:
        return None
    return rate(int(rows.numerator.sum()), int(rows.denominator.sum()))


def _extra(results: Results, claim: dict[str, Any], run_id: str) -> str:
    """Numbers from the run a referee needs beside the claim."""
    if claim["id"] == "reprobe_same_fleet":
        return reprobe_same_fleet_note(results, run_id)
    if claim["id"] == "contradiction_stale_read":
        both = results.measured_rate("contradiction_both_admitted", run_id)
        if both is not None and both.n:
            return (f"only {both.k} of {both.n} fact-runs admitted both writes; the other "
                    f"{both.n - both.k} hold one row and cannot read stale")
    return ""


def reprobe_same_fleet_note(results: Results, run_id: str) -> str:
    """The paper's 12/12 same-fleet controls are the trust-1 half of the same-fleet probes."""
    rows = results.view("leakage_reprobe", [run_id])
    same = rows[rows.relation == "same_fleet"]
    if same.empty:
        return ""
    by_trust = same.groupby("trust")[["returned", "probes"]].sum()
    parts = [f"trust {int(t)} {int(r.returned)}/{int(r.probes)}" for t, r in by_trust.iterrows()]
    return (f"the 12 controls are the trust-1 half of {int(same.probes.sum())} same-fleet "
            f"probes ({', '.join(parts)}); the paper reports the trust-1 half only")
