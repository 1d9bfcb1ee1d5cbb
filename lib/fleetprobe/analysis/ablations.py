"""Headline runs beside their ablations, one row per run, and what the rows show.

Two knobs the paper reports on: provenance pacing (paper 8: writes paced below the 10/s
ceiling reconstruct every chain; unthrottled runs lost chains to 429) and the contradiction
prose (paper 9.2: with `pair_prose: value_only` the two writes of a pair are near-identical, so
a near-duplicate gate ahead of the detector rejects the second one). Every number comes from
the metric views through `Results`; the knobs come from the run's manifest params.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from fleetprobe.analysis.basis import scenario_detection
from fleetprobe.analysis.results import ABLATION, PROFILES, Results
from fleetprobe.analysis.stats import Rate, fmt_count, fmt_rate

# Reject reasons in EVENTS.md order; a reason not listed here gets a column after them.
REJECT_REASONS = ("exact_duplicate", "near_duplicate", "rate_limited", "other")
GATED_PROFILE, PROPOSED_PROFILE = "memclaw-2026-05-30", "proposed"


@dataclass
class RunRow:
    """One run of an ablation table: identity and role, the knobs, the measured rates."""

    run_id: str
    profile: str
    role: str
    differs: str
    knobs: dict[str, str]
    rates: dict[str, Rate | None]
    rejections: dict[str, int] = field(default_factory=dict)


# ------------------------------------------------------------------------------ rows


def pacing_rows(results: Results) -> list[RunRow]:
    """Provenance runs: pacing, writes admitted of planned, 429 rejections, chains complete."""
    return [_row(results, run, {"pacing": _pacing(results.run_params(run.run_id))},
                 ("provenance_writes_admitted", "provenance_rate_limited",
                  "provenance_completeness"))
            for run in _runs(results, "provenance").itertuples()]


def contradiction_rows(results: Results) -> list[RunRow]:
    """Contradiction runs: the three prose/writer knobs, admission and detection."""
    rows = []
    for run in _runs(results, "contradiction").itertuples():
        params = results.run_params(run.run_id)
        knobs = {k: str(params.get(k, "unrecorded"))
                 for k in ("prose_diversity", "pair_prose", "writer_assignment")}
        row = _row(results, run, knobs, (
            "contradiction_writes_succeeded", "contradiction_both_admitted",
            "contradiction_detection_all", "contradiction_detection_both_admitted"))
        row.rejections = results.reject_reasons(run.run_id)
        for scenario in ("sequential", "concurrent"):
            row.rates[f"detection_{scenario}"] = scenario_detection(results, run.run_id,
                                                                    scenario)
        rows.append(row)
    return rows


def _runs(results: Results, experiment: str) -> pd.DataFrame:
    """Complete paper-scale runs (else the fallbacks of comparison_runs) plus selected ones,
    in profile order, headline before ablation, oldest first."""
    runs = results.comparison_runs(experiment, keep_unselected=True).copy()
    profile_order = {p: i for i, p in enumerate(PROFILES)}
    runs["profile_order"] = runs.profile.map(lambda p: profile_order.get(p, len(PROFILES)))
    runs["is_ablation"] = runs.role == ABLATION
    runs["order"] = runs.started_at.fillna("") + runs.run_id
    return runs.sort_values(["profile_order", "profile", "is_ablation", "order"])


def _row(results: Results, run, knobs: dict[str, str], metrics: tuple[str, ...]) -> RunRow:
    return RunRow(run.run_id, run.profile, _role(results, run), run.differs, knobs,
                  {m: results.measured_rate(m, run.run_id) for m in metrics})


def _role(results: Results, run) -> str:
    canonical = results.canonical_run(run.experiment, run.profile)
    is_canonical = canonical is not None and canonical.run_id == run.run_id
    if run.role == ABLATION:
        return f"{ABLATION} (selected)" if is_canonical else ABLATION
    return "headline" if is_canonical else "headline config, not canonical"


def _pacing(params: dict) -> str:
    if "pace_writes_per_s" not in params:
        return "unrecorded"
    per_s = params["pace_writes_per_s"]
    return "unthrottled" if per_s is None else f"paced {per_s:g}/s"


# ------------------------------------------------------------------------------ frames


def pacing_frame(rows: list[RunRow]) -> pd.DataFrame:
    columns = ["profile", "role", "pacing", "writes admitted/planned", "429 rejections",
               "chains complete", "run_id"]
    return pd.DataFrame([{
        "profile": r.profile, "role": r.role, "pacing": r.knobs["pacing"],
        "writes admitted/planned": fmt_count(r.rates["provenance_writes_admitted"]),
        "429 rejections": _k(r.rates["provenance_rate_limited"]),
        "chains complete": fmt_rate(r.rates["provenance_completeness"]),
        "run_id": r.run_id} for r in rows], columns=columns)


def contradiction_frame(rows: list[RunRow]) -> pd.DataFrame:
    seen = {reason for r in rows for reason in r.rejections}
    reasons = [r for r in REJECT_REASONS if r in seen] + sorted(seen - set(REJECT_REASONS))
    columns = ["profile", "role", "prose_diversity", "pair_prose", "writer_assignment",
               "writes admitted", *(f"rejected {r}" for r in reasons), "both admitted",
               "detection (all)", "detection (both admitted)", "detection (sequential pair)",
               "detection (concurrent pair)", "run_id"]
    return pd.DataFrame([{
        "profile": r.profile, "role": r.role, **r.knobs,
        "writes admitted": fmt_count(r.rates["contradiction_writes_succeeded"]),
        **{f"rejected {reason}": r.rejections.get(reason, 0) for reason in reasons},
        "both admitted": fmt_count(r.rates["contradiction_both_admitted"]),
        "detection (all)": fmt_rate(r.rates["contradiction_detection_all"]),
        "detection (both admitted)": fmt_rate(r.rates["contradiction_detection_both_admitted"]),
        "detection (sequential pair)": fmt_rate(r.rates.get("detection_sequential")),
        "detection (concurrent pair)": fmt_rate(r.rates.get("detection_concurrent")),
        "run_id": r.run_id} for r in rows], columns=columns)


def _k(measured: Rate | None) -> int | str:
    return "-" if measured is None else measured.k


# ------------------------------------------------------------------------------ REPRODUCTION.md


def pacing_section(rows: list[RunRow]) -> list[str]:
    """Paced versus unthrottled chain completeness, per profile that has an unthrottled run."""
    lines = ["## Pacing (paper 8.2: writes paced below the 10/s ceiling)", ""]
    unthrottled = [r for r in rows if r.knobs["pacing"] == "unthrottled"]
    if not unthrottled:
        return [*lines, "_No unthrottled provenance run (`pace_writes_per_s: null`) in the "
                        "traces; nothing to compare the paced runs with._", ""]
    profiles = {r.profile for r in unthrottled}
    shown = [r for r in rows if r.profile in profiles
             and (r.knobs["pacing"] == "unthrottled" or r.knobs["pacing"].startswith("paced"))]
    lines += [pacing_frame(shown).to_markdown(index=False), ""]
    for run in unthrottled:
        lines.append(f"- {_pacing_finding(run, _paced_counterpart(rows, run.profile))}")
    return [*lines, ""]


def _paced_counterpart(rows: list[RunRow], profile: str) -> RunRow | None:
    """The profile's canonical paced run, else its latest paced run."""
    paced = [r for r in rows if r.profile == profile and r.knobs["pacing"].startswith("paced")]
    canonical = [r for r in paced if r.role == "headline"]
    return (canonical or paced or [None])[-1]


def _pacing_finding(unthrottled: RunRow, paced: RunRow | None) -> str:
    loose = unthrottled.rates["provenance_completeness"]
    rejected = _k(unthrottled.rates["provenance_rate_limited"])
    head = (f"`{unthrottled.profile}` unthrottled ({unthrottled.run_id}): chains complete "
            f"{fmt_rate(loose)}, {rejected} writes rejected 429")
    if paced is None:
        return f"{head}; no paced run of this profile to compare with."
    tight = paced.rates["provenance_completeness"]
    head += (f"; {paced.knobs['pacing']} ({paced.run_id}): {fmt_rate(tight)}, "
             f"{_k(paced.rates['provenance_rate_limited'])} rejected 429")
    if not (loose and tight and loose.n and tight.n):
        return f"{head}; no chain judgements to compare."
    if loose.overlaps(tight):
        return f"{head}: no difference in completeness (95% Wilson intervals overlap)."
    if loose.value < tight.value:
        return (f"{head}: unthrottled writes lose chains to the rate limit, as the paper "
                "reports (95% Wilson intervals do not overlap).")
    return f"{head}: the unthrottled run completes more chains (intervals do not overlap)."


def pipeline_ordering_section(rows: list[RunRow]) -> list[str]:
    """For `pair_prose: value_only`: near-duplicate rejections and detection under the
    measured pipeline order (gate first) versus the proposed one (triple check first)."""
    lines = ["## Pipeline ordering (paper 9.2: the near-duplicate gate before the detector)",
             ""]
    value_only = [r for r in rows if r.knobs["pair_prose"] == "value_only"]
    if not value_only:
        return [*lines, "_No contradiction run with `pair_prose: value_only` in the traces; "
                        "the 9.2 ordering is not tested._", ""]
    lines += [contradiction_frame(value_only).to_markdown(index=False), ""]
    groups: dict[tuple[str, str], dict[str, RunRow]] = {}
    for run in value_only:  # oldest first, so the latest run of a profile wins
        key = (run.knobs["prose_diversity"], run.knobs["writer_assignment"])
        groups.setdefault(key, {})[run.profile] = run
    for (diversity, writers), by_profile in sorted(groups.items()):
        where = f"`prose_diversity: {diversity}`, `writer_assignment: {writers}`"
        lines.append(f"- {where}: {_ordering_finding(by_profile)}")
    return [*lines, ""]


def _ordering_finding(by_profile: dict[str, RunRow]) -> str:
    gated, proposed = by_profile.get(GATED_PROFILE), by_profile.get(PROPOSED_PROFILE)
    if gated is None or proposed is None:
        missing = GATED_PROFILE if gated is None else PROPOSED_PROFILE
        return f"no `{missing}` run to compare with."
    before = gated.rates["contradiction_detection_all"]
    after = proposed.rates["contradiction_detection_all"]
    text = (f"under `{GATED_PROFILE}` {_near_dups(gated)} and detection {fmt_rate(before)}; "
            f"under `{PROPOSED_PROFILE}` {_near_dups(proposed)} and detection "
            f"{fmt_rate(after)}")
    if not (before and after and before.n and after.n):
        return f"{text}; no fact-run judgements to compare."
    if before.overlaps(after):
        return (f"{text}: the proposed ordering does not change detection measurably "
                "(95% Wilson intervals overlap).")
    if after.value > before.value:
        return (f"{text}: yes, checking the triple before the near-duplicate gate lets the "
                "detector see the contradictions (95% Wilson intervals do not overlap).")
    return f"{text}: no, detection is lower under the proposed ordering (intervals do not overlap)."


def _near_dups(run: RunRow) -> str:
    admitted = run.rates["contradiction_writes_succeeded"]
    return (f"{run.rejections.get('near_duplicate', 0)} near-duplicate rejections of "
            f"{admitted.n if admitted else 0} writes")
