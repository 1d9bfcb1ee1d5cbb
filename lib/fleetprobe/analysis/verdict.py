"""Paper versus reproduction: each claim of paper_values.yaml beside the reproduced number.

Rates: `reproduced` when the paper's and the measured 95% Wilson intervals overlap, else
`differs` with the reason the data shows. Latencies follow `live_targets.LATENCY_RULE`. A
claim whose run or metric is absent from the traces is `not measured`. Runs are grouped by
target label (the `profile` column): the bundled server's profiles, and one label per live
endpoint, each judged on its own rows and never merged with another.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from fleetprobe.analysis import ablations, embedder_report, live_targets
from fleetprobe.analysis.results import ABLATION, PAPER_SCALE, Results
from fleetprobe.analysis.stats import Rate, fmt_count, fmt_counts, fmt_rate, rate

REPRODUCED, DIFFERS, NOT_COMPARABLE, NOT_MEASURED = (
    "reproduced", "differs", "not comparable", "not measured")
LIVE_LATENCY_FACTOR = 2.0
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
    (live endpoints; `live_targets.py`) against every claim its runs measure."""
    bundled = ([] if live_targets.only_live_selected(results)
               else [judge(results, claim) for claim in results.claims])
    return bundled + [judge(results, claim, label)
                      for label, claim in live_targets.label_claims(results)]


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
    verdict.status, verdict.reason = live_targets.latency_verdict(run, measured, claim, keys)
    return verdict


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
    rows = results.con.execute(
        "SELECT error, count(*) AS n FROM events WHERE run_id = ? AND error IS NOT NULL "
        "AND (status IS NULL OR status >= 500 OR status = 429) "
        "GROUP BY error ORDER BY n DESC, error LIMIT ?", [run_id, top]).fetchall()
    return {str(error): int(n) for error, n in rows}


# ------------------------------------------------------------------------------ hypothesis tests


def search_leak_hypothesis(results: Results) -> pd.DataFrame:
    """Search leak and miss k/n per (run, variant_write, variant_search), and whether it
    gives the paper's 72/164 and 4/28 (exactly, and by Wilson overlap)."""
    rates = results.rates
    runs = results.comparison_runs("leakage")
    rows = []
    for (run_id, write, search), group in rates[rates.run_id.isin(runs.run_id)].groupby(
            ["run_id", "variant_write", "variant_search"], dropna=True):
        by_metric = group.set_index("metric")
        leak = _rate_of(by_metric, "leakage_search_leak")
        miss = _rate_of(by_metric, "leakage_search_miss")
        if leak is None and miss is None:
            continue
        (paper_leak, paper_miss) = (rate(*PAPER_SEARCH_LEAK[0]), rate(*PAPER_SEARCH_LEAK[1]))
        exact = (leak is not None and miss is not None
                 and (leak.k, leak.n) == PAPER_SEARCH_LEAK[0]
                 and (miss.k, miss.n) == PAPER_SEARCH_LEAK[1])
        overlap = bool(leak and miss and leak.overlaps(paper_leak) and miss.overlaps(paper_miss))
        rows.append({"run_id": run_id, "profile": group.profile.iloc[0],
                     "variant_write": write, "variant_search": search,
                     "search_leak": fmt_rate(leak), "search_miss": fmt_rate(miss),
                     "gives 72/164 and 4/28": "exactly" if exact else
                     ("within CI" if overlap else "no")})
    return pd.DataFrame(rows, columns=["run_id", "profile", "variant_write", "variant_search",
                                       "search_leak", "search_miss", "gives 72/164 and 4/28"])


def contradiction_admission(results: Results) -> pd.DataFrame:
    """Writes by outcome (admitted or reject reason) per run and prose diversity."""
    runs = results.comparison_runs("contradiction")
    admission = results.view("contradiction_admission", list(runs.run_id))
    if admission.empty:
        return pd.DataFrame(columns=["run_id", "profile", "prose_diversity", "writes"])
    admission["prose_diversity"] = admission.prose_diversity.fillna("unrecorded")
    table = admission.pivot_table(index=["run_id", "prose_diversity"], columns="outcome",
                                  values="writes", aggfunc="sum", fill_value=0)
    table["writes"] = table.sum(axis=1)
    table = table.reset_index()
    table.columns.name = None
    table.insert(1, "profile", table.run_id.map(runs.set_index("run_id").profile))
    return table


def _rate_of(by_metric: pd.DataFrame, metric: str) -> Rate | None:
    if metric not in by_metric.index:
        return None
    row = by_metric.loc[metric]
    return rate(int(row.numerator), int(row.denominator))


# ------------------------------------------------------------------------------ REPRODUCTION.md


def write_reproduction(results: Results, path: Path,
                       verdicts: list[Verdict] | None = None) -> Path:
    """The one-page paper-versus-reproduction report."""
    verdicts = verdicts if verdicts is not None else judge_all(results)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_reproduction(results, verdicts))
    return path


def render_reproduction(results: Results, verdicts: list[Verdict]) -> str:
    counts = pd.Series([v.status for v in verdicts]).value_counts()
    summary = ", ".join(f"{counts.get(s, 0)} {s}"
                        for s in (REPRODUCED, DIFFERS, NOT_COMPARABLE, NOT_MEASURED))
    claims = pd.DataFrame([asdict(v) for v in verdicts])
    claims["claim"] = claims.label + " (" + claims.section + ")"
    claims["runs"] = claims.run_ids.map(lambda ids: ", ".join(ids) or "-")
    hypothesis = search_leak_hypothesis(results)
    lines = [
        "# Paper versus reproduction",
        "",
        f"Generated from the traces by `fleetprobe.analysis` ({summary}). Rates are "
        "`reproduced` when the paper's and the measured 95% Wilson intervals overlap; "
        "latencies follow the latency rule below. Each claim is "
        "compared with the canonical run for its experiment and profile "
        "(latest complete run at paper scale with the paper's configuration, "
        "paper_values.yaml `headline_params`, unless runs were selected explicitly); every "
        "other target label (a live endpoint, another engine) is judged against each claim "
        "its runs measure, in rows of its own.",
        "",
        claims[["claim", "profile", "paper", "measured", "status", "reason", "runs"]]
        .to_markdown(index=False),
        "",
        "## Search-leak hypothesis (paper 8.1; docs/search-leak.md)",
        "",
        "Which write/search variant yields the paper's 72/164 search leaks and 4/28 misses:",
        "",
        _markdown_or_note(hypothesis, "no leakage run measured search"),
        "",
        _hypothesis_conclusion(hypothesis),
        "",
        "## Contradiction admission (paper 8, 9.2: 206/400 rejected, mostly exact duplicates)",
        "",
        _markdown_or_note(contradiction_admission(results), "no contradiction run in the traces"),
        "",
        *live_targets.section(results, verdicts),
        *embedder_report.section(results),
        *ablations.pacing_section(ablations.pacing_rows(results)),
        *ablations.pipeline_ordering_section(ablations.contradiction_rows(results)),
        "## Runs",
        "",
        *runs_section(results),
    ]
    return "\n".join(lines)


def runs_section(results: Results) -> list[str]:
    """The canonical (headline) runs and every ablation run, with what differs; a count of
    the runs left out (older or smaller runs with the paper's configuration)."""
    columns = ["experiment", "profile", "role", "run_id", "differs", "target_kind", "complete",
               "paper_scale", "basis"]
    canonical = results.canonical.assign(
        role=[f"{ABLATION} (selected)" if r == ABLATION else "headline"
              for r in results.canonical.role])
    others = results.runs[(results.runs.role == ABLATION)
                          & ~results.runs.run_id.isin(canonical.run_id)].assign(basis="-")
    shown = pd.concat([canonical, others], ignore_index=True)
    if shown.empty:
        return ["_no runs in the traces._", ""]
    shown["differs"] = shown.differs.replace("", "-")
    shown = shown.assign(is_ablation=shown.role.str.startswith(ABLATION)).sort_values(
        ["experiment", "profile", "is_ablation", "run_id"])[columns]
    lines = ["Headline runs have the paper's configuration (paper_values.yaml "
             "`headline_params`); ablation runs differ as the `differs` column says.", "",
             shown.to_markdown(index=False), ""]
    left_out = len(results.runs) - len(shown)
    if left_out:
        lines += [f"{left_out} other run(s) under the traces root (older or smaller runs with "
                  "the paper's configuration) are not used.", ""]
    return lines + versions_section(results.runs[results.runs.run_id.isin(shown.run_id)])


def versions_section(runs: pd.DataFrame) -> list[str]:
    """The library versions the shown runs recorded in their manifests (`packages`), one row
    per distinct set, so a reader sees what the evidence was made with."""
    if "packages" not in runs or runs.empty:
        return []
    sets = runs.packages.fillna("{}").value_counts().sort_index()
    rows = [{**json.loads(text), "runs": int(count)} for text, count in sets.items()]
    frame = pd.DataFrame(rows).fillna("-")
    return ["Library versions the runs recorded (manifest `packages`):", "",
            frame.to_markdown(index=False), ""]


def _hypothesis_conclusion(table: pd.DataFrame) -> str:
    if table.empty:
        return "Not tested: no leakage run with search probes."
    exact = table[table["gives 72/164 and 4/28"] == "exactly"]
    if exact.empty:
        return "No measured variant gives exactly 72/164 and 4/28."
    found = sorted({f"`{r.variant_write}` x `{r.variant_search}` ({r.profile})"
                    for r in exact.itertuples()})
    return "Exactly 72/164 and 4/28: " + "; ".join(found) + "."


def _markdown_or_note(frame: pd.DataFrame, note: str) -> str:
    return f"_{note}._" if frame.empty else frame.to_markdown(index=False)
