"""Paper versus reproduction: each claim of paper_values.yaml judged against the traces.

Rates: `reproduced` when the paper's and the measured 95% Wilson intervals overlap, else
`differs` with the reason the data shows. Latencies follow `latency_verdict` (the rule is
stated in words by the live-targets section). A
claim whose run or metric is absent from the traces is `not measured`. Runs are grouped by
target label (the `profile` column): the bundled server's profiles, and one label per live
endpoint, each judged on its own rows and never merged with another.
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
    # what a reproduced claim rests on (analysis/basis.py): mechanism, workload construction
    # or interval overlap only; "-" for a claim that is not reproduced
    basis: str = basis.NO_BASIS


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
    return claim["metric"].split("_", 1)[0]


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
    run = results.canonical_run(experiment_of(claim), profile)
    base = Verdict(claim["id"], claim["label"], claim["section"], profile,
                   paper_text(claim), "-", NOT_MEASURED, "", [])
    if run is None:
        base.reason = _no_run_reason(results, experiment_of(claim), profile)
        return base
    base.run_ids = [run.run_id]
    judged = JUDGES[claim["kind"]](results, claim, run, base)
    if judged.status == REPRODUCED:
        measured = (results.measured_rate(claim["metric"], run.run_id)
                    if claim["kind"] in ("rate", "admission") else None)
        judged.basis, why = basis.basis_of(results, claim, run, measured)
        judged.reason = f"{judged.reason}; {judged.basis}: {why}"
    if run.basis != PAPER_SCALE and judged.status != NOT_MEASURED:
        judged.reason = f"{judged.reason}; {run.basis}"
    return judged


def _no_run_reason(results: Results, experiment: str, profile: str) -> str:
    runs = results.runs[(results.runs.experiment == experiment)
                        & (results.runs.profile == profile)]
    reason = f"no {experiment} run for profile {profile}"
    if runs.empty:
        return reason
    return (f"{reason} with the paper's configuration (ablation runs only: "
            f"{', '.join(runs.run_id)}; select one with --run to compare it)")


def paper_text(claim: dict[str, Any]) -> str:
    if claim["kind"] in ("rate", "admission"):
        return fmt_rate(paper_rate(claim))
    if claim["kind"] == "latency":
        return fmt_latency(claim, latency_keys(claim))
    return f"returned={claim['returned']} (HTTP {claim['status']})"


def _judge_rate(results: Results, claim, run, verdict: Verdict) -> Verdict:
    measured = results.measured_rate(claim["metric"], run.run_id)
    if measured is None or measured.n == 0:
        verdict.reason = f"run {run.run_id} has no events for {claim['metric']}"
        return verdict
    verdict.measured = fmt_rate(measured)
    if measured.overlaps(paper_rate(claim)):
        verdict.status, verdict.reason = REPRODUCED, "95% Wilson intervals overlap"
    else:
        verdict.status = DIFFERS
        context = data_context(results, claim, run.run_id)
        verdict.reason = "; ".join(["95% Wilson intervals do not overlap", *context])
    return verdict


def _judge_latency(results: Results, claim, run, verdict: Verdict) -> Verdict:
    measured = results.measured_latency(claim["metric"], run.run_id)
    if not measured:
        verdict.reason = f"run {run.run_id} has no events for {claim['metric']}"
        return verdict
    keys = latency_keys(claim)
    verdict.measured = fmt_latency(measured, keys) + f" (n={int(measured['n'])})"
    verdict.status, verdict.reason = latency_verdict(run, measured, claim, keys)
    return verdict


def latency_verdict(run: pd.Series, measured: dict[str, float], claim: dict[str, Any],
                    keys: Sequence[str]) -> tuple[str, str]:
    """(status, reason) for a latency claim: comparable only against a live target, and
    reproduced there when every percentile is within LIVE_LATENCY_FACTOR of the paper's."""
    if run.target_kind not in ("live", "engine"):  # the engine is judged like a live target
        return NOT_COMPARABLE, (f"target kind {run.target_kind}: the paper measured "
                                "memclaw.net, latency is comparable only against a live target")
    ratios = {k: measured[k] / claim[k] for k in keys if k in measured and claim[k]}
    within = bool(ratios) and all(
        1 / LIVE_LATENCY_FACTOR <= r <= LIVE_LATENCY_FACTOR for r in ratios.values())
    where = f"{run.target_kind} target" + (" (loopback)" * is_loopback(run.get("base_url")))
    return (REPRODUCED if within else DIFFERS), f"{where}; measured/paper " + ", ".join(
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
          "admission": _judge_admission}


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
