"""Propagation (paper 8.3, 9.3): visibility to fleet siblings and foreign readers (Fig. 5), the
write-to-visible window of the tight-poll phase (Fig. 6) and redistribute by requester trust."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from fleetprobe.analysis.base.figures import (
    FigureOutput,
    bars_with_ci,
    canonical_runs,
    latency_comparison,
    none_note,
    paper_latency,
    paper_state_run,
    percentile_marks,
    plt,
    profile_order,
    save,
    sns,
    style,
)
from fleetprobe.analysis.base.results import Results
from fleetprobe.analysis.base.section import Context, SectionOutput, from_parts
from fleetprobe.analysis.base.stats import rate
from fleetprobe.analysis.base.tables import (
    Table,
    empty_note,
    k_of_n,
    readable_trust_and_relation,
)

KEY, TITLE = "propagation", "Propagation"
EXPERIMENTS = ("propagation",)


def build(context: Context) -> SectionOutput:
    results = context.results(EXPERIMENTS)
    try:
        tables = [redistribute(results)]
        out = context.out_dir / "figures"
        with style():
            figures = [fig5_visibility(results, out), fig6_window(results, out)]
        return from_parts(
            KEY, TITLE,
            "Visibility to fleet siblings and foreign readers (Fig. 5), the write-to-visible "
            "window of the tight-poll phase (Fig. 6) and redistribute by requester trust.",
            context, tables, figures,
            paper="8.3; 9.3", notebook="propagation.ipynb",
            runs=canonical_runs(results, "propagation").run_id)
    finally:
        results.con.close()


def redistribute(results: Results) -> Table:
    """Redistribute attempts whose row flipped to the target agent, by requester trust and
    relation, per profile (paper 9.3: redistribute needs trust 3; the proposal: siblings at
    fleet-write trust)."""
    runs = results.canonical[results.canonical.experiment == "propagation"]
    frame = results.view("propagation_redistribute", list(runs.run_id))
    if not frame.empty:
        frame.insert(0, "profile", frame.run_id.map(runs.set_index("run_id").profile))
        frame["flipped"] = [k_of_n(k, n) for k, n in zip(frame.flipped, frame.attempts,
                                                          strict=True)]
        frame = readable_trust_and_relation(
            frame.rename(columns={"requester_trust": "trust"})
            .sort_values(["profile", "trust", "relation"]))[
            ["profile", "trust", "relation", "flipped", "statuses", "run_id"]]
        frame = frame.rename(columns={"trust": "requester trust"})
    return Table("redistribute", "Redistribute: rows re-homed, by requester trust and relation",
                 frame, empty_note(frame, "no propagation run with redistribute events") or
                 "Paper 9.3: POST /memories/redistribute requires trust_level >= 3. "
                 + _probed_trusts(frame), ("propagation_redistribute",))


def _probed_trusts(frame: pd.DataFrame) -> str:
    """Which requester trust levels the runs probed, and what that can and cannot show."""
    levels = sorted({int(t) for t in frame["requester trust"] if t != "-"})
    if not levels:
        return ""
    text = f"Probed at requester trust {', '.join(map(str, levels))} only"
    if max(levels) < 3:
        text += (f": a denial below trust 3 is consistent with the paper's threshold but does "
                 f"not locate it (no probe at trust {max(levels) + 1}-3)")
    return text + "."


def fig5_visibility(results: Results, out_dir: Path) -> FigureOutput:
    name, title = "fig5_visibility", "Fig. 5: visibility by reader relation"
    runs = canonical_runs(results, "propagation")
    counts = results.view("propagation_visibility_by_relation", list(runs.run_id))
    # a total order: drawing order must not depend on how DuckDB returned the rows
    counts = counts[counts.probes > 0].sort_values(["run_id", "reader_relation"])
    if counts.empty:
        return FigureOutput(name, title, note=none_note("propagation", "probes"))
    rates = [rate(int(k), int(n)) for k, n in zip(counts.visible, counts.probes, strict=True)]
    frame = counts.assign(profile=counts.run_id.map(runs.set_index("run_id").profile),
                          rate=[r.value for r in rates], low=[r.low for r in rates],
                          high=[r.high for r in rates], k=counts.visible, n=counts.probes)
    fig, ax = plt.subplots(figsize=(9, 5.4), layout="constrained")
    bars_with_ci(ax, frame, x="reader_relation", x_order=["sibling", "foreign"],
                  hue="profile", hue_order=profile_order(frame.profile))
    ax.set(xlabel="reader relation to the writer's fleet",
           ylabel="visibility rate (95% Wilson CI)", ylim=(0, 1.25))
    sns.move_legend(ax, "upper center", bbox_to_anchor=(0.5, -0.14), ncol=3, title="profile",
                    frameon=False)
    # runs at other scales (the engine's) probe fewer readers: give each relation's range
    n = frame.groupby("reader_relation", sort=True).n.agg(["min", "max"])
    caption = ("Visibility probes of each profile's canonical propagation run: n = "
               + ", ".join(f"{r} {int(lo)}" if lo == hi else f"{r} {int(lo)}-{int(hi)}"
                           for r, (lo, hi) in n.iterrows())
               + " per profile (k/n above each bar). Rate = facts the reader found by search "
               "over probes. Sibling readers should see the fact; foreign readers should not "
               "(a foreign bar above 0 is a leak).")
    return save(fig, out_dir, name, title, caption, ("propagation_visibility_by_relation",))


def fig6_window(results: Results, out_dir: Path) -> FigureOutput:
    name, title = "fig6_window", "Fig. 6: write-to-visible window (tight poll)"
    run = paper_state_run(results, "propagation")
    facts = results.view("propagation_window_facts", [run.run_id]) if run is not None else None
    if facts is None or facts.empty:
        return FigureOutput(name, title, note=none_note("propagation", "window facts"))
    values = np.sort(facts.time_to_visible_ms.to_numpy(dtype=float))
    rank = np.arange(1, len(values) + 1)
    fig, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
    ax.step(values, rank, where="post", color="0.7", linewidth=1)
    ax.plot(values, rank, "o", color=sns.color_palette()[0], markersize=6)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, len(values) + 0.8)
    marks = results.measured_latency("propagation_window_latency", run.run_id)
    comparison = latency_comparison(ax, run, paper_latency(results,
                                                           "propagation_window_latency"))
    percentile_marks(ax, marks, ("p50", "p95", "max"), loc="lower right")
    ax.set(xlabel="time from write completion to first visible search (ms)",
           ylabel="window facts visible (cumulative)",
           title=f"{run.profile} ({run.target_kind})")
    caption = (f"Each dot is one window fact (n = {len(values)}), sorted by time to visible; "
               f"run {run.run_id}. Lines: p50/p95/max of the window latency view."
               + comparison)
    return save(fig, out_dir, name, title, caption,
                 ("propagation_window_facts", "propagation_window_latency"))


