"""Provenance (paper 8.2): fifty depth-4 chains walked back from the leaf. Per-hop fetch
latency of the paper-state run (Fig. 4), and paced versus unthrottled writes (the pacing
ablation: paper 8, writes paced below the 10/s ceiling reconstruct every chain)."""

from __future__ import annotations

import warnings
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd

from fleetprobe.analysis.base.ablation_rows import RunRow, count_of, run_row, runs_of
from fleetprobe.analysis.base.figures import (
    CROSS_RUN_LATENCY_NOTE,
    FigureOutput,
    canonical_runs,
    latency_comparison,
    none_note,
    paper_latency,
    paper_state_run,
    plt,
    save,
    sns,
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
from fleetprobe.analysis.base.tables import Table, empty_note, markdown

KEY, TITLE = "provenance", "Provenance"
EXPERIMENTS = ("provenance",)


def build(context: Context) -> SectionOutput:
    results = context.results(EXPERIMENTS)
    try:
        rows = pacing_rows(results)
        tables = [ablation_pacing(rows)]
        out = context.out_dir / "figures"
        with style():
            figures = [fig4_hop_latency(results, out)]
        return from_parts(
            KEY, TITLE,
            "Fifty depth-4 chains walked back from the leaf: per-hop fetch latency of the "
            "paper-state run (Fig. 4), and paced versus unthrottled writes.",
            context, tables, figures,
            fragments=[Fragment(REPRODUCTION, 60, "\n".join(pacing_section(rows)))],
            paper="8.2", notebook="provenance.ipynb",
            runs=canonical_runs(results, "provenance").run_id)
    finally:
        results.con.close()


def ablation_pacing(rows: list[RunRow]) -> Table:
    """Provenance runs, headline (paced) and ablation (unthrottled), one row each."""
    frame = pacing_frame(rows)
    return Table("ablation_pacing", "Provenance pacing: headline and ablation runs", frame,
                 empty_note(frame, "no provenance run in the traces") or
                 "Paper 8: pacing writes at 8/s, below the 10/s ceiling, reconstructs 50/50 "
                 "chains; unthrottled runs lost chains to 429. Chains complete k/n = value "
                 "[95% Wilson CI].",
                 ("provenance_writes_admitted", "provenance_rate_limited",
                  "provenance_completeness"))


def pacing_rows(results: Results) -> list[RunRow]:
    """Provenance runs: pacing, writes admitted of planned, 429 rejections, chains complete."""
    return [run_row(results, run, {"pacing": _pacing(results.run_params(run.run_id))},
                 ("provenance_writes_admitted", "provenance_rate_limited",
                  "provenance_completeness"))
            for run in runs_of(results, "provenance").itertuples()]


def _pacing(params: dict) -> str:
    if "pace_writes_per_s" not in params:
        return "unrecorded"
    per_s = params["pace_writes_per_s"]
    return "unthrottled" if per_s is None else f"paced {per_s:g}/s"


def pacing_frame(rows: list[RunRow]) -> pd.DataFrame:
    columns = ["profile", "role", "pacing", "writes admitted/planned", "429 rejections",
               "chains complete", "run_id"]
    return pd.DataFrame([{
        "profile": r.profile, "role": r.role, "pacing": r.knobs["pacing"],
        "writes admitted/planned": fmt_count(r.rates["provenance_writes_admitted"]),
        "429 rejections": count_of(r.rates["provenance_rate_limited"]),
        "chains complete": fmt_rate(r.rates["provenance_completeness"]),
        "run_id": r.run_id} for r in rows], columns=columns)


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
    lines += [markdown(pacing_frame(shown)), ""]
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
    rejected = count_of(unthrottled.rates["provenance_rate_limited"])
    head = (f"`{unthrottled.profile}` unthrottled ({unthrottled.run_id}): chains complete "
            f"{fmt_rate(loose)}, {rejected} writes rejected 429")
    if paced is None:
        return f"{head}; no paced run of this profile to compare with."
    tight = paced.rates["provenance_completeness"]
    head += (f"; {paced.knobs['pacing']} ({paced.run_id}): {fmt_rate(tight)}, "
             f"{count_of(paced.rates['provenance_rate_limited'])} rejected 429")
    if not (loose and tight and loose.n and tight.n):
        return f"{head}; no chain judgements to compare."
    if loose.overlaps(tight):
        return f"{head}: no difference in completeness (95% Wilson intervals overlap)."
    if loose.value < tight.value:
        return (f"{head}: unthrottled writes lose chains to the rate limit, as the paper "
                "reports (95% Wilson intervals do not overlap).")
    return f"{head}: the unthrottled run completes more chains (intervals do not overlap)."


def fig4_hop_latency(results: Results, out_dir: Path) -> FigureOutput:
    name, title = "fig4_hop_latency", "Fig. 4: per-hop fetch latency"
    run = paper_state_run(results, "provenance")
    fetches = (results.view("provenance_walk_fetches", [run.run_id]) if run is not None
               else pd.DataFrame())
    if fetches.empty:
        return FigureOutput(name, title, note=none_note("provenance", "walk fetches"))
    fig, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
    with warnings.catch_warnings():
        # seaborn 0.13 passes matplotlib's deprecated `vert`; nothing for us to change
        warnings.simplefilter("ignore", matplotlib.MatplotlibDeprecationWarning)
        sns.boxplot(data=fetches, x="hop", y="latency_ms", ax=ax, color="0.85", showfliers=False,
                    width=0.5)
    per_hop = fetches.groupby("hop").size()
    # every fetch as a dot, jittered by a fixed-seed generator so the file is reproducible
    position = fetches.hop.map({h: i for i, h in enumerate(per_hop.index)}).to_numpy(float)
    jitter = np.random.default_rng(0).uniform(-0.18, 0.18, len(fetches))
    ax.scatter(position + jitter, fetches.latency_ms, s=6, alpha=0.6,
               color=sns.color_palette()[0], zorder=3)
    ax.set_xticks(range(len(per_hop)),
                  [f"{int(h)}\n(n = {int(n)})" for h, n in per_hop.items()])
    ax.set(xlabel="hop (0 = root)", ylabel="fetch latency (ms)",
           title=f"{run.profile} ({run.target_kind})")
    ax.set_ylim(bottom=0)
    comparison = latency_comparison(ax, run, paper_latency(results, "provenance_hop_latency"),
                                    vertical=False)
    if any(str(line.get_label()).startswith("paper ") for line in ax.get_lines()):
        ax.legend(loc="upper right", frameon=True)
    q = results.measured_latency("provenance_hop_latency", run.run_id) or {}
    caption = (f"Every successful GET of the walks back from the leaf, run {run.run_id}: "
               f"n = {len(fetches)} fetches. Boxes: quartiles and 1.5 IQR whiskers; dots: each "
               f"fetch. All hops p50/p95/p99 = "
               + "/".join(f"{q[k]:,.0f}" for k in ("p50", "p95", "p99") if k in q)
               + f" ms.{comparison} {CROSS_RUN_LATENCY_NOTE}")
    return save(fig, out_dir, name, title, caption,
                 ("provenance_walk_fetches", "provenance_hop_latency"))


