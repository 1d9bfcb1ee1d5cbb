"""Contradiction (paper 8.4, 9.2): which gate rejected each write, detection per pair
(sequential and concurrent) under the headline prose and its ablations, the pipeline-ordering
comparison of paper 9.2 and the write latency (Fig. 7)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from fleetprobe.analysis.base.ablation_rows import RunRow, run_row, runs_of
from fleetprobe.analysis.base.basis import scenario_detection
from fleetprobe.analysis.base.figures import (
    FigureOutput,
    canonical_runs,
    distribution,
    none_note,
    paper_latency,
    paper_state_run,
    style,
)
from fleetprobe.analysis.base.results import Results
from fleetprobe.analysis.base.section import (
    REPRODUCTION,
    Context,
    Fragment,
    SectionOutput,
    from_parts,
)
from fleetprobe.analysis.base.stats import fmt_count, fmt_rate
from fleetprobe.analysis.base.tables import (
    Table,
    empty_note,
    markdown,
    markdown_or_note,
)

KEY, TITLE = "contradiction", "Contradiction"
EXPERIMENTS = ("contradiction",)
# Reject reasons in EVENTS.md order; a reason not listed here gets a column after them.
REJECT_REASONS = ("exact_duplicate", "near_duplicate", "rate_limited", "other")
GATED_PROFILE, PROPOSED_PROFILE = "memclaw-2026-05-30", "proposed"


def build(context: Context) -> SectionOutput:
    results = context.results(EXPERIMENTS)
    try:
        rows = contradiction_rows(results)
        tables = [contradiction_admission(results), ablation_contradiction(rows)]
        out = context.out_dir / "figures"
        with style():
            figures = [fig7_write_latency(results, out)]
        admission = "\n".join([
            "## Contradiction admission (paper 8, 9.2: 206/400 rejected, mostly exact "
            "duplicates)", "",
            markdown_or_note(tables[0].frame, "no contradiction run in the traces")])
        return from_parts(
            KEY, TITLE,
            "Which gate rejected each write, detection per pair (sequential and concurrent) "
            "under the headline prose and its ablations, and the write latency (Fig. 7).",
            context, tables, figures,
            fragments=[Fragment(REPRODUCTION, 30, admission),
                       Fragment(REPRODUCTION, 70, "\n".join(pipeline_ordering_section(rows)))],
            paper="8.4; 9.2", notebook="contradiction.ipynb",
            runs=canonical_runs(results, "contradiction").run_id)
    finally:
        results.con.close()


def contradiction_admission(results: Results) -> Table:
    frame = admission_frame(results)
    return Table("contradiction_admission",
                 "Contradiction write admission: outcome by prose diversity", frame,
                 empty_note(frame, "no contradiction run in the traces") or
                 "Paper 8: 206/400 rejected 409, dominated by exact-content duplicates.",
                 ("contradiction_admission",))


def ablation_contradiction(rows: list[RunRow]) -> Table:
    """Contradiction runs by prose and writer knobs: admission, rejections and detection."""
    frame = contradiction_frame(rows)
    return Table("ablation_contradiction",
                 "Contradiction knobs: headline and ablation runs", frame,
                 empty_note(frame, "no contradiction run in the traces") or
                 "Headline: prose_diversity low, pair_prose frames, writer_assignment per_fact. "
                 "Paper 9.2: with value_only prose the near-duplicate gate rejects the second "
                 "write before the detector sees it. Detection k/n = value [95% Wilson CI]. "
                 "Under the headline prose the concurrent pair repeats the sequential pair's "
                 "sentences and is rejected as exact duplicates, so its detection path is "
                 "exercised only where prose_diversity is high.",
                 ("contradiction_admission", "contradiction_writes_succeeded",
                  "contradiction_both_admitted", "contradiction_detection_all",
                  "contradiction_detection_both_admitted", "contradiction_detection_by_scenario"))


def admission_frame(results: Results) -> pd.DataFrame:
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


def contradiction_rows(results: Results) -> list[RunRow]:
    """Contradiction runs: the three prose/writer knobs, admission and detection."""
    rows = []
    for run in runs_of(results, "contradiction").itertuples():
        params = results.run_params(run.run_id)
        knobs = {k: str(params.get(k, "unrecorded"))
                 for k in ("prose_diversity", "pair_prose", "writer_assignment")}
        row = run_row(results, run, knobs, (
            "contradiction_writes_succeeded", "contradiction_both_admitted",
            "contradiction_detection_all", "contradiction_detection_both_admitted"))
        row.rejections = results.reject_reasons(run.run_id)
        for scenario in ("sequential", "concurrent"):
            row.rates[f"detection_{scenario}"] = scenario_detection(results, run.run_id,
                                                                    scenario)
        rows.append(row)
    return rows


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


def pipeline_ordering_section(rows: list[RunRow]) -> list[str]:
    """For `pair_prose: value_only`: near-duplicate rejections and detection under the
    measured pipeline order (gate first) versus the proposed one (triple check first)."""
    lines = ["## Pipeline ordering (paper 9.2: the near-duplicate gate before the detector)",
             ""]
    value_only = [r for r in rows if r.knobs["pair_prose"] == "value_only"]
    if not value_only:
        return [*lines, "_No contradiction run with `pair_prose: value_only` in the traces; "
                        "the 9.2 ordering is not tested._", ""]
    lines += [markdown(contradiction_frame(value_only)), ""]
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


def fig7_write_latency(results: Results, out_dir: Path) -> FigureOutput:
    name = "fig7_write_latency"
    title = "Fig. 7: contradiction write latency (stacked histogram)"
    run = paper_state_run(results, "contradiction")
    writes = (results.view("contradiction_write_latencies", [run.run_id])
              if run is not None else None)
    if writes is None or writes.empty:
        return FigureOutput(name, title, note=none_note("contradiction", "writes"))
    writes["write"] = writes.triggered.map({True: "triggered a contradiction",
                                            False: "did not trigger"})
    split = writes.write.value_counts()
    return distribution(name, title, out_dir, writes.latency_ms,
                         results.measured_latency("contradiction_write_latency", run.run_id),
                         "write latency of admitted writes (ms)",
                         "admitted writes (count, stacked)", run,
                         "Bars stack the two kinds of admitted write: "
                         + ", ".join(f"{k} {v}" for k, v in sorted(split.items())) + ".",
                         hue=writes.write,
                         views=("contradiction_write_latencies", "contradiction_write_latency"),
                         paper=paper_latency(results, "contradiction_write_latency"))


