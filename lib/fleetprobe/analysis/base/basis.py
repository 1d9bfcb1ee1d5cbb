"""What a verdict rests on (its basis) and how many trials decide it: the rules, once.

Every judged claim names its basis, one of:
- `measured: MemClaw's engine`: MemClaw's own code (target kind `engine`), started by the kit;
- `measured: live endpoint`: a live MemClaw-compatible service (target kind `live`);
- `measured: bundled profile`: the bundled reference server, where the kit states no rule
  that gives the number (it comes out of the simulator's search, embedder and timing);
- `simulator's rule`: the bundled server gives the paper's number because the kit wrote the
  rule that gives it (the stated mechanisms below): true by design, no evidence about MemClaw;
- `workload construction`: the workload fixes the number whatever the system does (a count
  of the plan, or contradiction rejections that are all concurrent-pair repeats);
- `measured: backend`: another memory library behind an adapter (a comparison, never a
  reproduction of the paper's service).

The rules, in order: (1) contradiction claims whose run rejects only concurrent-pair
repeats, and claims stated as workload construction: construction, on any target; (2) the
bundled server under the profile the claim names, for a claim with a stated mechanism: the
simulator's rule; (3) otherwise the kind of target that answered. Only the `measured:` bases
other than backends can reproduce a claim (`REPRODUCING`).

The trials rule (`TRIALS_RULE`, cited on the page): a measurement decides only with enough
trials; fewer is smoke, shown apart and never counted.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from fleetprobe.analysis.base.results import Results
from fleetprobe.analysis.base.stats import Rate, fmt_rate, rate

ENGINE, LIVE, PROFILE, BACKEND = (
    "measured: MemClaw's engine", "measured: live endpoint", "measured: bundled profile",
    "measured: backend")
RULE, WORKLOAD, NO_BASIS = "simulator's rule", "workload construction", "-"
# the bases a reproduction may rest on, and those that hold by design
REPRODUCING = (ENGINE, LIVE, PROFILE)
BY_DESIGN = (RULE, WORKLOAD)
BASES = (ENGINE, LIVE, PROFILE, RULE, WORKLOAD, BACKEND)
KIND_BASIS = {"engine": ENGINE, "live": LIVE, "reference": PROFILE, "backend": BACKEND}


def min_trials(paper: dict[str, Any]) -> int:
    """The smallest n that can decide (paper_values.yaml `deciding_trials`)."""
    return int(paper["deciding_trials"])


def trials_rule(paper: dict[str, Any]) -> str:
    """The rule in words, for the page (one place: `decides` below implements it)."""
    return (f"Trials rule: a measurement decides a claim when it has at least "
            f"{min_trials(paper)} trials and either at least the paper's own n for that claim "
            "(so its 95% Wilson interval is as narrow as the paper's and can tell `same` from "
            "`differs` as well as the paper's number can) or a 95% Wilson interval that does "
            "not overlap the paper's (a difference already separated). A claim the paper "
            f"states with fewer than {min_trials(paper)} trials (Table 3's single probes, the "
            "8 window facts) cannot be decided at the paper's own n. A measurement short of "
            "the rule is `smoke`, shown apart and never counted as reproduced or differing.")


def decides(paper: dict[str, Any], n: int, paper_n: int | None, separated: bool) -> bool:
    """True when n trials are enough to decide (the trials rule; `trials_rule` says it)."""
    if n < min_trials(paper):
        return False
    return separated or paper_n is None or n >= paper_n


# What each claim rests on when the run gives the paper's count: (basis, reason). The reasons
# describe the bundled reference server (reference_server/) and the harness's plans.
STATED: dict[str, tuple[str, str]] = {
    "leakage_probes_executed": (
        WORKLOAD, "a count of the probes the plan makes (4 fleets x 6 agents, 8 secrets) that "
                  "got an answer; it says the harness ran, not how the server governs"),
    "leakage_get_exposure": (
        RULE, "GET-by-id under the tenant key checks the tenant only (profile "
                   "memclaw-2026-05-30), so every cross-scope row is returned"),
    "leakage_get_miss": (
        RULE, "the tenant key reads every row of its tenant by id, so no entitled row "
                   "can be missed"),
    "leakage_search_miss": (
        RULE, "the four misses are the four authors' agent-scoped secrets, which an "
                   "identity-less tenant-key search cannot see"),
    "table3_tenant_key": (RULE, "GET-by-id checks the tenant only"),
    "table3_trust1_cross_fleet": (RULE, "GET-by-id checks the tenant only, not the "
                                             "trust ladder"),
    "table3_trust2_cross_fleet": (RULE, "GET-by-id checks the tenant only"),
    "table3_trust1_same_fleet": (RULE, "GET-by-id checks the tenant only"),
    "reprobe_trust1_cross_fleet": (
        RULE, "the remediated GET-by-id applies the scope predicate and trust ladder "
                   "and answers 404 when denied"),
    "reprobe_trust2_cross_fleet": (RULE, "trust 2 may read across fleets on the trust "
                                              "ladder"),
    "reprobe_same_fleet": (RULE, "a same-fleet read is in scope at any trust"),
    "reprobe_leaks": (RULE, "the remediated GET-by-id denies every expected-deny probe"),
    "provenance_writes_succeeded": (
        WORKLOAD, "writes are paced at 8/s below the 10/s limit, so every planned write is "
                  "admitted; a count of the plan"),
    "provenance_completeness": (
        RULE, "each write stores its parent link and the walk reads it back by id"),
    "provenance_writer_accuracy": (
        RULE, "the server records the authenticated writer on each row"),
    "provenance_depth_fidelity": (RULE, "parent links are stored as written"),
    "propagation_writes_succeeded": (WORKLOAD, "a count of the planned fact writes, paced "
                                               "below the rate limit"),
    "propagation_probes_produced": (WORKLOAD, "a count of the planned visibility probes"),
    "propagation_cross_fleet_leak": (
        RULE, "search applies the fleet predicate to every candidate row"),
    "propagation_window_visible": (
        RULE, "the bundled server commits a row and its embedding before it answers the "
              "write, so the first poll finds it"),
    "propagation_window_first_poll": (
        RULE, "the bundled server commits a row and its embedding before it answers the "
              "write, so the first poll finds it"),
    "provenance_rate_limited": (
        WORKLOAD, "the harness paces writes at 8/s below the 10/s limit, so no write meets "
                  "the limiter; a property of the pacing"),
    "cross_tenant_rejected": (
        RULE, "every read path asks the one scope predicate, whose first term is the tenant"),
    "redistribute_below_trust3": (
        RULE, "the profile's redistribute rule requires trust 3 (paper 9.3)"),
    "redistribute_trust3_moves": (
        RULE, "the profile's redistribute rule lets trust 3 move the row (paper 9.3)"),
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
    """(basis, why) for a claim judged against `run` (a canonical run row), whatever its
    outcome: the rules of the module docstring, with numbers from the run."""
    run_id = run.run_id
    own = is_claims_own_target(claim, run)
    extra = _extra(results, claim, run_id)
    if claim["metric"].startswith("contradiction_"):
        found = contradiction_construction(results, run_id)
        if found:
            return WORKLOAD, "; ".join(p for p in (found, extra) if p)
    stated = STATED.get(claim["id"])
    if stated is not None and stated[0] == WORKLOAD:
        return WORKLOAD, "; ".join(p for p in (stated[1], extra) if p)
    if stated is not None and own:
        return RULE, "; ".join(p for p in (stated[1], extra) if p)
    kind = str(run.get("target_kind") or "reference")
    basis = KIND_BASIS.get(kind, PROFILE)
    paper = rate(claim["k"], claim["n"]) if "k" in claim and claim.get("n") else None
    notes = []
    if paper is not None and measured is not None and measured.n and \
            abs(paper.value - measured.value) > 1e-9 and measured.overlaps(paper):
        notes.append(f"point estimates differ, intervals overlap (paper {paper.value:.3f}, "
                     f"measured {measured.value:.3f})")
        if own and claim["id"] in DIFFERENCE:
            notes.append(DIFFERENCE[claim["id"]])
    commit = claims_engine_commit(results, claim, run)
    if commit is not None:
        notes.append(f"MemClaw's own code at {commit}, the engine the {claim['profile']} "
                     "profile stands for")
    if not own:
        notes.append(answered(results, claim, run))
    elif not notes:
        notes.append("the kit states no rule that gives this number")
    return basis, "; ".join(p for p in (*notes, extra) if p)


def reproduces_for(results: Results, claim: dict[str, Any], run: pd.Series) -> bool:
    """True when the run can reproduce the claim: the bundled profile the claim names, the
    engine at the commit that profile stands for, or a live endpoint. Every other target (a
    backend, another engine or bundled profile) is a comparison with the paper's service."""
    return (is_claims_own_target(claim, run) or run.get("target_kind") == "live"
            or claims_engine_commit(results, claim, run) is not None)


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
