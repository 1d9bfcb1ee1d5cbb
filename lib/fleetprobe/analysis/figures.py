"""The paper's Figures 2-7 redrawn from the traces (seaborn), as png and pdf.

Each figure reads the same metric views as the tables; the p50/p95 marks are the numbers of
the latency views. A figure whose experiment is absent from the traces is not drawn: its
`FigureOutput` carries a note saying so instead of paths.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never open a window (report runs headless)

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from fleetprobe.analysis.results import PROFILES, Results  # noqa: E402
from fleetprobe.analysis.stats import rate  # noqa: E402

PAPER_STATE = "memclaw-2026-05-30"
FORMATS = ("png", "pdf")


@dataclass
class FigureOutput:
    name: str
    title: str
    paths: list[Path] = field(default_factory=list)
    note: str = ""


def write_figures(results: Results, out_dir: Path) -> dict[str, FigureOutput]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    sns.set_theme(style="whitegrid", context="paper")
    return {name: draw(results, out_dir) for name, draw in FIGURES.items()}


# ------------------------------------------------------------------------------ the figures


def fig2_leakage_envelope(results: Results, out_dir: Path) -> FigureOutput:
    title = "Fig. 2: leakage envelope by axis (leak over expected-deny, miss over expected-allow)"
    rows = []
    for run in _canonical(results, "leakage").itertuples():
        for axis, signal, metric in (
                ("GET-by-id", "leak", "leakage_get_exposure"),
                ("GET-by-id", "miss", "leakage_get_miss"),
                ("search", "leak", "leakage_search_leak"),
                ("search", "miss", "leakage_search_miss")):
            r = results.measured_rate(metric, run.run_id)
            if r is not None and r.n:
                rows.append({"profile": run.profile, "axis": axis, "signal": signal,
                             "rate": r.value, "low": r.low, "high": r.high, "k": r.k, "n": r.n})
    frame = pd.DataFrame(rows)
    if frame.empty:
        return FigureOutput("fig2_leakage_envelope", title, note=_none("leakage", "probes"))
    axes_present = [a for a in ("GET-by-id", "search") if a in set(frame.axis)]
    fig, axes = plt.subplots(1, len(axes_present), figsize=(5 * len(axes_present), 3.8),
                             sharey=True, squeeze=False)
    for ax, axis in zip(axes[0], axes_present, strict=True):
        _bars_with_ci(ax, frame[frame.axis == axis], x="signal", x_order=["leak", "miss"])
        ax.set(title=axis, xlabel="", ylabel="rate (95% Wilson CI)", ylim=(0, 1.12))
    return _save(fig, out_dir, "fig2_leakage_envelope", title)


def fig3_search_latency(results: Results, out_dir: Path) -> FigureOutput:
    title = "Fig. 3: search latency distribution"
    run = _paper_state_run(results, "leakage")
    if run is None:
        return FigureOutput("fig3_search_latency", title, note=_none("leakage", "search probes"))
    write, search = results.headline_variant
    probes = results.view("leakage_probes", [run.run_id])
    values = probes[(probes.axis == "search") & probes.status.notna()
                    & (probes.variant_write == write) & (probes.variant_search == search)]
    return _distribution("fig3_search_latency", title, out_dir, values.latency_ms,
                         results.measured_latency("leakage_search_latency", run.run_id),
                         "search latency (ms)", run)


def fig4_hop_latency(results: Results, out_dir: Path) -> FigureOutput:
    title = "Fig. 4: per-hop fetch latency of the provenance walks"
    runs = _canonical(results, "provenance")
    fetches = results.view("provenance_walk_fetches", list(runs.run_id))
    if fetches.empty:
        return FigureOutput("fig4_hop_latency", title, note=_none("provenance", "walk fetches"))
    fetches["profile"] = fetches.run_id.map(runs.set_index("run_id").profile)
    fig, ax = plt.subplots(figsize=(7, 4))
    with warnings.catch_warnings():
        # seaborn 0.13 passes matplotlib's deprecated `vert`; nothing for us to change
        warnings.simplefilter("ignore", matplotlib.MatplotlibDeprecationWarning)
        sns.boxplot(data=fetches, x="hop", y="latency_ms", hue="profile",
                    hue_order=_profile_order(fetches.profile), ax=ax, fliersize=2)
    marks = []
    for run in runs.itertuples():
        q = results.measured_latency("provenance_hop_latency", run.run_id)
        if q:
            marks.append(f"{run.profile} p50/p95/p99 {q['p50']:,.0f}/{q['p95']:,.0f}/"
                         f"{q['p99']:,.0f} ms")
    ax.set(xlabel="hop (0 = root)", ylabel="fetch latency (ms)",
           title="\n".join([title, *marks]))
    return _save(fig, out_dir, "fig4_hop_latency", title)


def fig5_visibility(results: Results, out_dir: Path) -> FigureOutput:
    title = "Fig. 5: visibility by reader relation (visible / probes)"
    runs = _canonical(results, "propagation")
    counts = results.view("propagation_visibility_by_relation", list(runs.run_id))
    counts = counts[counts.probes > 0]
    if counts.empty:
        return FigureOutput("fig5_visibility", title, note=_none("propagation", "probes"))
    rates = [rate(int(k), int(n)) for k, n in zip(counts.visible, counts.probes, strict=True)]
    frame = counts.assign(profile=counts.run_id.map(runs.set_index("run_id").profile),
                          rate=[r.value for r in rates], low=[r.low for r in rates],
                          high=[r.high for r in rates], k=counts.visible, n=counts.probes)
    fig, ax = plt.subplots(figsize=(6, 4))
    _bars_with_ci(ax, frame, x="reader_relation", x_order=["sibling", "foreign"])
    ax.set(xlabel="reader relation", ylabel="visibility rate (95% Wilson CI)", ylim=(0, 1.12),
           title=title)
    return _save(fig, out_dir, "fig5_visibility", title)


def fig6_window(results: Results, out_dir: Path) -> FigureOutput:
    title = "Fig. 6: write-to-visible window (tight poll)"
    run = _paper_state_run(results, "propagation")
    facts = results.view("propagation_window_facts", [run.run_id]) if run is not None else None
    if facts is None or facts.empty:
        return FigureOutput("fig6_window", title, note=_none("propagation", "window facts"))
    return _distribution("fig6_window", title, out_dir, facts.time_to_visible_ms,
                         results.measured_latency("propagation_window_latency", run.run_id),
                         "time to visible (ms)", run)


def fig7_write_latency(results: Results, out_dir: Path) -> FigureOutput:
    title = "Fig. 7: contradiction write latency (admitted writes)"
    run = _paper_state_run(results, "contradiction")
    writes = (results.view("contradiction_write_latencies", [run.run_id])
              if run is not None else None)
    if writes is None or writes.empty:
        return FigureOutput("fig7_write_latency", title, note=_none("contradiction", "writes"))
    writes["write"] = writes.triggered.map({True: "triggered a contradiction",
                                            False: "did not trigger"})
    return _distribution("fig7_write_latency", title, out_dir, writes.latency_ms,
                         results.measured_latency("contradiction_write_latency", run.run_id),
                         "write latency (ms)", run, hue=writes.write)


FIGURES: dict[str, Callable[[Results, Path], FigureOutput]] = {
    "fig2_leakage_envelope": fig2_leakage_envelope,
    "fig3_search_latency": fig3_search_latency,
    "fig4_hop_latency": fig4_hop_latency,
    "fig5_visibility": fig5_visibility,
    "fig6_window": fig6_window,
    "fig7_write_latency": fig7_write_latency,
}


# ------------------------------------------------------------------------------ helpers


def _canonical(results: Results, experiment: str) -> pd.DataFrame:
    return results.canonical[results.canonical.experiment == experiment]


def _paper_state_run(results: Results, experiment: str):
    """The canonical run of the state the paper measured, else the first profile's."""
    runs = _canonical(results, experiment)
    if runs.empty:
        return None
    preferred = runs[runs.profile == PAPER_STATE]
    return (preferred if not preferred.empty else runs).iloc[0]


def _profile_order(profiles: pd.Series) -> list[str]:
    present = set(profiles)
    return [p for p in PROFILES if p in present] + sorted(present - set(PROFILES))


def _bars_with_ci(ax, frame: pd.DataFrame, x: str, x_order: list[str]) -> None:
    """Bars per x and profile with Wilson error bars and k/n written above each bar."""
    x_order = [v for v in x_order if v in set(frame[x])]
    hue_order = _profile_order(frame.profile)
    sns.barplot(data=frame, x=x, y="rate", hue="profile", order=x_order, hue_order=hue_order,
                errorbar=None, ax=ax)
    indexed = frame.set_index([x, "profile"])
    for profile, container in zip(hue_order, ax.containers, strict=False):
        for x_value, bar in zip(x_order, container, strict=False):
            if (x_value, profile) not in indexed.index:
                continue
            row = indexed.loc[(x_value, profile)]
            centre = bar.get_x() + bar.get_width() / 2
            ax.errorbar(centre, row.rate, yerr=[[row.rate - row.low], [row.high - row.rate]],
                        color="black", capsize=3, linewidth=1)
            ax.annotate(f"{int(row.k)}/{int(row.n)}", (centre, row.high), ha="center",
                        va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points")


def _distribution(name: str, title: str, out_dir: Path, values: pd.Series,
                  marks: dict[str, float] | None, xlabel: str, run,
                  hue: pd.Series | None = None) -> FigureOutput:
    """A histogram with the p50 (dashed) and p95 (dotted) of the latency view marked."""
    frame = pd.DataFrame({"value": values.to_numpy()})
    if hue is not None:
        frame[hue.name or "group"] = hue.to_numpy()
    fig, ax = plt.subplots(figsize=(7, 4))
    sns.histplot(data=frame, x="value", hue=(hue.name or "group") if hue is not None else None,
                 multiple="stack", bins=min(40, max(5, len(frame) // 5)), ax=ax)
    for pct, style in (("p50", "--"), ("p95", ":")):
        if marks and pct in marks:
            ax.axvline(marks[pct], color="black", linestyle=style)
            ax.annotate(f"{pct} {marks[pct]:,.0f} ms", (marks[pct], 1), rotation=90,
                        xycoords=("data", "axes fraction"), ha="right", va="top", fontsize=8,
                        backgroundcolor="white")
    ax.set(xlabel=xlabel, ylabel="count",
           title=f"{title}\n{run.profile} ({run.target_kind}), n = {len(frame)}")
    return _save(fig, out_dir, name, title)


def _save(fig, out_dir: Path, name: str, title: str) -> FigureOutput:
    fig.tight_layout()
    paths = [Path(out_dir) / f"{name}.{ext}" for ext in FORMATS]
    for path in paths:
        # No creation date in the file: the same traces give byte-identical figures.
        metadata = {"CreationDate": None} if path.suffix == ".pdf" else {"Software": None}
        fig.savefig(path, dpi=150, metadata=metadata)
    plt.close(fig)
    return FigureOutput(name, title, paths)


def _none(experiment: str, what: str) -> str:
    return f"Not drawn: the traces hold no {experiment} run with {what}."
