"""Paper versus reproduction: each claim of paper_values.yaml judged against the traces.

A verdict is made in three steps. The comparison: a rate is the same as the paper's when the
paper's and the measured 95% Wilson intervals overlap; a latency follows `latency_verdict`; a
rule the paper states without a count (`rule`) holds when none / all / some of the measured
trials obey it; a claim whose run or metric is absent is `not measured`, and a claim the kit
cannot measure (`unmeasured`) says why. The basis (`basis.basis_of`): what the comparison
rests on. The status (`status_of`): only a measurement on a target that can reproduce the
claim, with enough trials (`basis.decides`), is `reproduced` or `differs`; a measurement with
fewer trials is smoke; a number the workload or the simulator's own rule fixes `holds by
design`; and any other target (a backend, another engine or profile) is compared with the
paper's service (`same as paper's service` / `differs from paper's service`), never counted.
Runs are grouped by target label (the `profile` column), each judged on its own rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from fleetprobe.analysis.base import basis, labels
from fleetprobe.analysis.base.labels import LIVE_LATENCY_FACTOR, is_loopback
from fleetprobe.analysis.base.results import PAPER_SCALE, Results
from fleetprobe.analysis.base.stats import Rate, fmt_count, fmt_counts, fmt_rate, rate

REPRODUCED, DIFFERS, NOT_COMPARABLE, NOT_MEASURED = (
    "reproduced", "differs", "not comparable", "not measured")
HOLDS, SMOKE_SAME, SMOKE_DIFFERS = "holds by design", "smoke: same", "smoke: differs"
SAME = "same"  # an outcome: the measured value is the paper's (by the comparison's rule)
SAME_AS_SERVICE, DIFFERS_FROM_SERVICE = "same as paper's service", "differs from paper's service"
SMOKE_SUFFIX = " (smoke)"
# the statuses the reproduction headline counts (with a measured basis, REPRODUCING)
COUNTED = (REPRODUCED, DIFFERS)
STATUSES = (REPRODUCED, DIFFERS, SMOKE_SAME, SMOKE_DIFFERS, HOLDS, NOT_COMPARABLE, NOT_MEASURED)
# every status a verdict may have, reproduction targets' first, then comparisons'
ALL_STATUSES = (*STATUSES, SAME_AS_SERVICE, DIFFERS_FROM_SERVICE,
                SAME_AS_SERVICE + SMOKE_SUFFIX, DIFFERS_FROM_SERVICE + SMOKE_SUFFIX)
REPRODUCTION, COMPARISON = "reproduction", "comparison"
UNMEASURED = "unmeasured"
PAPER_SEARCH_LEAK = ((72, 164), (4, 28))


@dataclass
class Verdict:
    claim_id: str
    label: str
    section: str
    profile: str
    paper: str
    measured: str
    status: str
    reason: str
    run_ids: list[str] = field(default_factory=list)
    # what the verdict rests on (basis.py): a measurement kind, the simulator's rule or the
    # workload's construction; "-" where nothing was compared
    basis: str = basis.NO_BASIS
    target_kind: str = "-"
    n: int | None = None  # the trials the measurement has (the trials rule reads it)
    role: str = REPRODUCTION  # or COMPARISON: a target that cannot reproduce the claim
    separated: bool = False  # the measured interval does not overlap the paper's
    # the comparison alone, before basis, role and trials: same / differs / not comparable /
    # not measured (what a profile and its engine are compared on, sections/fidelity)
    outcome: str = NOT_MEASURED


# ------------------------------------------------------------------------------ formatting


def fmt_latency(values: dict[str, float] | None, keys: tuple[str, ...] = ("p50", "p95", "p99"),
                ) -> str:
    if not values:
        return "-"
    parts = [f"{k} {values[k]:,.0f}" for k in keys if k in values and not math.isnan(values[k])]
    return " / ".join(parts) + " ms"


def paper_rate(claim: dict[str, Any]) -> Rate:
    return rate(claim["k"], claim["n"])


def latency_keys(claim: dict[str, Any]) -> tuple[str, ...]:
    return tuple(k for k in ("p50", "p95", "p99", "max") if k in claim)


def experiment_of(claim: dict[str, Any]) -> str:
    return claim.get("experiment") or claim["metric"].split("_", 1)[0]


def paper_n(claim: dict[str, Any]) -> int | None:
    """The paper's own n for a claim (Table 3 rows are single probes), None when unstated."""
    return 1 if claim["kind"] == "outcome" else claim.get("n")


# ------------------------------------------------------------------------------ judging


def judge_all(results: Results) -> list[Verdict]:
    """Every claim against the bundled profile it names, then every other target label
    (live endpoints; `labels.py`) against every claim its runs measure."""
    bundled = ([] if labels.only_live_selected(results)
               else [judge(results, claim) for claim in results.claims])
    return bundled + [judge(results, claim, label)
                      for label, claim in labels.label_claims(results)]


def judge(results: Results, claim: dict[str, Any], label: str | None = None) -> Verdict:
    """The verdict on one claim, against the canonical run of its experiment and profile
    (or of the given target label)."""
    profile = label or claim["profile"]
    base = Verdict(claim["id"], claim["label"], claim["section"], profile,
                   paper_text(claim), "-", NOT_MEASURED, "", [])
    if claim["kind"] == UNMEASURED:
        base.reason = f"the kit cannot measure it: {claim['reason']}"
        return base
    run = results.canonical_run(experiment_of(claim), profile)
    if run is None:
        base.reason = _no_run_reason(results, experiment_of(claim), profile)
        return base
    base.run_ids, base.target_kind = [run.run_id], str(run.target_kind)
    base.role = REPRODUCTION if basis.reproduces_for(results, claim, run) else COMPARISON
    judged = JUDGES[claim["kind"]](results, claim, run, base)
    judged.outcome = {REPRODUCED: SAME, DIFFERS: DIFFERS}.get(judged.status, judged.status)
    if judged.status in (REPRODUCED, DIFFERS):
        judged.basis, why = basis.basis_of(results, claim, run, claim_rate(results, claim, run))
        judged.reason = f"{judged.reason}; {why}"
        judged.status = status_of(results.paper, claim, judged)
    elif judged.status == NOT_COMPARABLE:
        judged.basis = basis.KIND_BASIS.get(judged.target_kind, basis.PROFILE)
    if run.basis != PAPER_SCALE and judged.status != NOT_MEASURED:
        judged.reason = f"{judged.reason}; {run.basis}"
    return judged


def status_of(paper: dict[str, Any], claim: dict[str, Any], verdict: Verdict) -> str:
    """The status from the comparison (`verdict.status`, reproduced or differs), its basis,
    its role and its trials: the rules of the module docstring."""
    same = verdict.status == REPRODUCED
    comparison = verdict.role == COMPARISON
    if verdict.basis in basis.BY_DESIGN:
        return HOLDS if same else (DIFFERS_FROM_SERVICE if comparison else DIFFERS)
    decided = basis.decides(paper, verdict.n or 0, paper_n(claim), verdict.separated)
    if comparison:
        return (SAME_AS_SERVICE if same else DIFFERS_FROM_SERVICE) + (
            "" if decided else SMOKE_SUFFIX)
    if not decided:
        return SMOKE_SAME if same else SMOKE_DIFFERS
    return REPRODUCED if same else DIFFERS


def is_counted(verdict: Verdict) -> bool:
    """True when the reproduction headline counts the verdict (reproduced or differs)."""
    return (verdict.role == REPRODUCTION and verdict.status in COUNTED
            and verdict.basis in basis.REPRODUCING)


def claim_rate(results: Results, claim: dict[str, Any], run: pd.Series) -> Rate | None:
    """k of n of a rate-like claim in a run: from the long rate table, or, for a metric
    outside it (the matrix claims, added views), from its own view."""
    if claim["kind"] not in ("rate", "admission", "rule"):
        return None
    found = results.measured_rate(claim["metric"], run.run_id)
    if found is not None:
        return found
    rows = results.view(claim["metric"], [run.run_id])
    if rows.empty:
        return None
    return rate(int(rows.numerator.sum()), int(rows.denominator.sum()))


def _no_run_reason(results: Results, experiment: str, profile: str) -> str:
    runs = results.runs[(results.runs.experiment == experiment)
                        & (results.runs.profile == profile)]
    reason = f"no {experiment} run for profile {profile}"
    if runs.empty:
        return reason
    return (f"{reason} with the paper's configuration (ablation runs only: "
            f"{', '.join(runs.run_id)}; select one with --run to compare it)")


RULE_TEXT = {"none": "none", "all": "all", "some": "at least one",
             "even": "about half (1/2 inside the 95% interval)"}


def paper_text(claim: dict[str, Any]) -> str:
    kind = claim["kind"]
    if kind in ("rate", "admission"):
        return fmt_rate(paper_rate(claim))
    if kind == "latency":
        return fmt_latency(claim, latency_keys(claim))
    if kind == "rule":
        return f"{RULE_TEXT[claim['expect']]} (a stated rule, no n)"
    if kind == "tail":
        return f"p99/p50 = {claim['p99'] / claim['p50']:.1f} ({fmt_latency(claim, ('p50', 'p99'))})"
    if kind == UNMEASURED:
        return claim["paper_value"]
    if kind == "ratio":
        return f"{claim['percentile']} ratio {claim['ratio']:.2f} (stated, no percentiles)"
    return f"returned={claim['returned']} (HTTP {claim['status']})"


def _judge_rate(results: Results, claim, run, verdict: Verdict) -> Verdict:
    measured = claim_rate(results, claim, run)
    if measured is None or measured.n == 0:
        verdict.reason = f"run {run.run_id} has no events for {claim['metric']}"
        return verdict
    verdict.measured, verdict.n = fmt_rate(measured), measured.n
    if measured.overlaps(paper_rate(claim)):
        verdict.status, verdict.reason = REPRODUCED, "95% Wilson intervals overlap"
    else:
        verdict.status, verdict.separated = DIFFERS, True
        context = data_context(results, claim, run.run_id)
        verdict.reason = "; ".join(["95% Wilson intervals do not overlap", *context])
    return verdict


def _judge_rule(results: Results, claim, run, verdict: Verdict) -> Verdict:
    """A rule without a count: none, all or at least one of the measured trials obey it."""
    measured = claim_rate(results, claim, run)
    if measured is None or measured.n == 0:
        verdict.reason = f"run {run.run_id} has no trials for {claim['metric']}"
        return verdict
    verdict.measured, verdict.n = fmt_rate(measured), measured.n
    expect = claim["expect"]
    same = {"none": measured.k == 0, "all": measured.k == measured.n,
            "some": measured.k > 0, "even": measured.low <= 1 / 2 <= measured.high}[expect]
    verdict.status = REPRODUCED if same else DIFFERS
    verdict.separated = not same
    verdict.reason = (f"{measured.k} of {measured.n} trials, the paper states "
                      f"{RULE_TEXT[expect]}")
    return verdict


def _judge_latency(results: Results, claim, run, verdict: Verdict) -> Verdict:
    measured = results.measured_latency(claim["metric"], run.run_id)
    if not measured:
        verdict.reason = f"run {run.run_id} has no events for {claim['metric']}"
        return verdict
    keys = latency_keys(claim)
    verdict.n = int(measured["n"])
    verdict.measured = fmt_latency(measured, keys) + f" (n={verdict.n})"
    verdict.status, verdict.reason = latency_verdict(run, measured, claim, keys)
    return verdict


def _judge_tail(results: Results, claim, run, verdict: Verdict) -> Verdict:
    """A tail as p99 / p50 of the claim's latency view, judged by the latency rule."""
    measured = results.measured_latency(claim["metric"], run.run_id)
    if not measured or not measured.get("p50"):
        verdict.reason = f"run {run.run_id} has no events for {claim['metric']}"
        return verdict
    verdict.n = int(measured["n"])
    ratio = measured["p99"] / measured["p50"]
    verdict.measured = (f"p99/p50 = {ratio:.1f} ({fmt_latency(measured, ('p50', 'p99'))}, "
                        f"n={verdict.n})")
    paper_ratio = claim["p99"] / claim["p50"]
    verdict.status, verdict.reason = latency_verdict(
        run, {"ratio": ratio}, {"ratio": paper_ratio}, ("ratio",))
    return verdict


def _judge_ratio(results: Results, claim, run, verdict: Verdict) -> Verdict:
    """One latency view's percentile over another's in the same run (`metric` over `over`,
    at `percentile`), against the paper's `ratio`, judged by the latency rule."""
    key = claim["percentile"]
    top, bottom = (results.measured_latency(m, run.run_id) for m in (claim["metric"],
                                                                      claim["over"]))
    if not top or not bottom or not bottom.get(key) or key not in top:
        verdict.reason = f"run {run.run_id} lacks {claim['metric']} or {claim['over']}"
        return verdict
    verdict.n = int(min(top["n"], bottom["n"]))
    ratio = top[key] / bottom[key]
    verdict.measured = (f"{key} ratio {ratio:.2f} ({top[key]:,.0f} / {bottom[key]:,.0f} ms, "
                        f"n={int(top['n'])} / {int(bottom['n'])})")
    verdict.status, verdict.reason = latency_verdict(
        run, {"ratio": ratio}, {"ratio": claim["ratio"]}, ("ratio",))
    return verdict


def latency_verdict(run: pd.Series, measured: dict[str, float], claim: dict[str, Any],
                    keys: Sequence[str]) -> tuple[str, str]:
    """(status, reason) for a latency claim: comparable only against a live target that is
    not on this machine, and the same there when every percentile is within
    LIVE_LATENCY_FACTOR of the paper's."""
    loopback = is_loopback(run.get("base_url"))
    if run.target_kind != "live" or loopback:
        where = f"target kind {run.target_kind}" + (" (loopback)" * loopback)
        return NOT_COMPARABLE, (f"{where}: the paper measured memclaw.net over the network; "
                                "latency is comparable only against a live target that is "
                                "not on this machine (Limitations)")
    ratios = {k: measured[k] / claim[k] for k in keys if k in measured and claim[k]}
    within = bool(ratios) and all(
        1 / LIVE_LATENCY_FACTOR <= r <= LIVE_LATENCY_FACTOR for r in ratios.values())
    return (REPRODUCED if within else DIFFERS), "live target; measured/paper " + ", ".join(
        f"{k} x{r:.2f}" for k, r in ratios.items())


def _judge_outcome(results: Results, claim, run, verdict: Verdict) -> Verdict:
    rows = results.view("leakage_table3", [run.run_id])
    rows = rows[(rows.credential == claim["credential"]) & _matches(rows.trust, claim["trust"])
                & _matches(rows.relation, claim["relation"])]
    probes = int(rows.probes.sum())
    if probes == 0:
        verdict.reason = f"run {run.run_id} has no such Table 3 probe"
        return verdict
    returned = int(rows.returned.sum())
    statuses = "/".join(sorted(set("/".join(rows.statuses.dropna()).split("/")) - {""}))
    verdict.measured = f"returned {returned}/{probes} (HTTP {statuses or 'none'})"
    verdict.n = probes
    same = returned == probes if claim["returned"] else returned == 0
    verdict.status = REPRODUCED if same else DIFFERS
    verdict.reason = "same outcome" if same else "the probe's outcome differs from the paper's"
    return verdict


def _judge_admission(results: Results, claim, run, verdict: Verdict) -> Verdict:
    """The rejected share by Wilson overlap, and the dominant reject reason by name."""
    verdict = _judge_rate(results, claim, run, verdict)
    if verdict.status == NOT_MEASURED:
        return verdict
    reasons = results.reject_reasons(run.run_id)
    dominant = next(iter(reasons), None)
    if dominant != claim["dominant_reason"]:
        verdict.status = DIFFERS
        verdict.reason += f"; dominant reject reason {dominant}, paper {claim['dominant_reason']}"
    elif verdict.status == REPRODUCED:
        verdict.reason += (f"; dominant reject reason {dominant} as in the paper; "
                           f"rejections {fmt_counts(reasons)}")
    return verdict


JUDGES = {"rate": _judge_rate, "latency": _judge_latency, "outcome": _judge_outcome,
          "admission": _judge_admission, "rule": _judge_rule, "tail": _judge_tail,
          "ratio": _judge_ratio}


def _matches(column: pd.Series, wanted: Any) -> pd.Series:
    return column.isna() if wanted is None else column == wanted


# ------------------------------------------------------------------------------ context


def data_context(results: Results, claim: dict[str, Any], run_id: str) -> list[str]:
    """What the run's data shows beside a differing rate: admission for contradiction
    claims, the other search variants for leakage, failed requests for any run."""
    context = []
    if claim["metric"].startswith("contradiction_"):
        admitted = results.measured_rate("contradiction_writes_succeeded", run_id)
        both = results.measured_rate("contradiction_both_admitted", run_id)
        reasons = results.reject_reasons(run_id)
        context.append(f"admission: {fmt_count(admitted)} writes admitted, "
                       f"{fmt_count(both)} fact-runs with both admitted, "
                       f"rejections {fmt_counts(reasons)}")
    if claim["metric"].startswith("leakage_search"):
        rows = results.rates[(results.rates.run_id == run_id)
                             & (results.rates.metric == claim["metric"])]
        context.append("by variant: " + ", ".join(
            f"{r.variant_write}/{r.variant_search} {r.numerator}/{r.denominator}"
            for r in rows.itertuples()))
    errors = failed_requests(results, run_id)
    if errors:
        failed = ", ".join(f"{k} x{v}" for k, v in errors.items())
        context.append(f"requests failed after retries: {failed}")
    return context


def failed_requests(results: Results, run_id: str, top: int = 3) -> dict[str, int]:
    """The commonest failures the harness could not answer around: transport errors, 5xx and
    429 after retries (other 4xx are measurements, e.g. a 409 at admission)."""
    return dict(results.failures.get(run_id, [])[:top])
