"""The paper's Figures 2-7 redrawn from the traces (seaborn), as png and pdf.

Each figure reads the same metric views as the tables; the p50/p95 marks are the numbers of
the latency views. Every figure carries its title, axis labels with units and a caption that
states n and anything left out (a cut axis, profiles not compared); the caption is drawn in
the figure and kept on `FigureOutput.caption` for the HTML report. A figure whose experiment is
absent from the traces is not drawn: its `FigureOutput` carries a note saying so instead of
paths. Output is deterministic: no dates or software versions in the files' metadata.

Latency is drawn for one run at a time (the paper's state): the profiles' runs are separate
runs on a shared machine under different load, so drawing them side by side would compare the
machine, not the profiles.
"""

from __future__ import annotations

import io
import math
import textwrap
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never open a window (report runs headless)

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
from PIL import Image  # noqa: E402

from fleetprobe.analysis.results import PROFILES, Results  # noqa: E402
from fleetprobe.analysis.stats import rate  # noqa: E402

PAPER_STATE = "memclaw-2026-05-30"
FORMATS = ("png", "pdf")
DPI = 150
# A distribution whose maximum is beyond this many times its p99 is drawn up to the p99 bin
# edge, and the caption says how many values lie beyond (and the largest).
TAIL_CUT_FACTOR = 2.0
CROSS_RUN_LATENCY_NOTE = (
    "Other profiles were measured in separate runs under different machine load, so their "
    "latencies are not compared here (tables/profiles.md lists each run's own numbers).")


@dataclass
class FigureOutput:
    name: str
    title: str
    paths: list[Path] = field(default_factory=list)
    note: str = ""
    caption: str = ""
    views: tuple[str, ...] = ()  # the metric views of metrics.sql the figure draws


def write_figures(results: Results, out_dir: Path) -> dict[str, FigureOutput]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with sns.axes_style("whitegrid"), sns.plotting_context("paper", font_scale=1.15):
        return {name: draw(results, out_dir) for name, draw in FIGURES.items()}


# ------------------------------------------------------------------------------ the figures


def fig2_leakage_envelope(results: Results, out_dir: Path) -> FigureOutput:
    name, title = "fig2_leakage_envelope", "Fig. 2: leakage envelope by path and profile"
    frame = _leakage_rates(results)
    if frame.empty:
        return FigureOutput(name, title, note=_none("leakage", "probes"))
    variants = _search_variants(results)
    panels = [p for p in ("GET-by-id", "search") if p in set(frame.axis)]
    fig, axd = plt.subplot_mosaic([["a", "b"], ["c", "legend"]], figsize=(11, 8.2),
                                  layout="constrained")
    panel_titles = {"GET-by-id": "(a) GET-by-id, tenant key",
                    "search": "(b) search, documented variant\n(secret with fleet_id, probe "
                              "sends fleet_ids)"}
    for key, axis in zip("ab", panels, strict=False):
        ax, part = axd[key], frame[frame.axis == axis]
        order = ["exposure", "miss"] if axis == "GET-by-id" else ["leak", "miss"]
        _bars_with_ci(ax, part, x="signal", x_order=order, hue="profile",
                      hue_order=_profile_order(part.profile))
        ax.set(title=panel_titles[axis], xlabel="", ylabel="rate (95% Wilson CI)",
               ylim=(0, 1.18))
        handles, labels = ax.get_legend_handles_labels()
        ax.get_legend().remove()
    for key in "ab"[len(panels):]:
        axd[key].axis("off")  # a path the runs did not probe
    legend_ax = axd["legend"]
    legend_ax.axis("off")
    legend_ax.add_artist(legend_ax.legend(handles, labels, title="profile (panels a, b)",
                                          loc="upper left", frameon=False,
                                          ncol=2 if len(labels) > 6 else 1))
    if variants.empty:
        axd["c"].axis("off")
    else:
        ax = axd["c"]
        names = list(dict.fromkeys(variants.variant))
        _bars_with_ci(ax, variants, x="signal", x_order=["leak", "miss"], hue="variant",
                      hue_order=names, palette=["0.6", *sns.color_palette("dark", len(names) - 1)])
        ax.set(title=f"(c) search, every variant measured ({PAPER_STATE})", xlabel="",
               ylabel="rate (95% Wilson CI)", ylim=(0, 1.18))
        handles, labels = ax.get_legend_handles_labels()
        ax.get_legend().remove()
        legend_ax.legend(handles, labels, title="secret write x probe search (panel c)",
                         loc="lower left", frameon=False)
    for key in ("a", "b", "c"):
        axd[key].tick_params(axis="x", labelsize=10)
    counts = frame.drop_duplicates(["axis", "signal"]).set_index(["axis", "signal"]).n
    caption = ("Rates over the probes expected to be denied (exposure, leak) or allowed (miss); "
               "k/n above each bar, whiskers are 95% Wilson intervals. Each profile's canonical "
               "leakage run: n = " + ", ".join(f"{a} {s} {int(n)}" for (a, s), n in
                                               counts.items()) + " probes.")
    if not variants.empty:
        caption += (" Panel (c): every write/search variant the paper-state run measured, beside "
                    "the paper's numbers (grey, memclaw.net).")
    return _save(fig, out_dir, name, title, caption,
                 ("leakage_get_exposure", "leakage_get_miss", "leakage_search_leak",
                  "leakage_search_miss"))


def fig3_search_latency(results: Results, out_dir: Path) -> FigureOutput:
    name, title = "fig3_search_latency", "Fig. 3: search latency distribution"
    run = _paper_state_run(results, "leakage")
    if run is None:
        return FigureOutput(name, title, note=_none("leakage", "search probes"))
    write, search = results.headline_variant
    probes = results.view("leakage_probes", [run.run_id])
    values = probes[(probes.axis == "search") & probes.status.notna()
                    & (probes.variant_write == write) & (probes.variant_search == search)]
    return _distribution(name, title, out_dir, values.latency_ms,
                         results.measured_latency("leakage_search_latency", run.run_id),
                         "search latency (ms)", "search probes (count)", run,
                         f"Answered search probes of the documented variant ({write} x {search}).",
                         views=("leakage_probes", "leakage_search_latency"))


def fig4_hop_latency(results: Results, out_dir: Path) -> FigureOutput:
    name, title = "fig4_hop_latency", "Fig. 4: per-hop fetch latency"
    run = _paper_state_run(results, "provenance")
    fetches = (results.view("provenance_walk_fetches", [run.run_id]) if run is not None
               else pd.DataFrame())
    if fetches.empty:
        return FigureOutput(name, title, note=_none("provenance", "walk fetches"))
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
    q = results.measured_latency("provenance_hop_latency", run.run_id) or {}
    caption = (f"Every successful GET of the walks back from the leaf, run {run.run_id}: "
               f"n = {len(fetches)} fetches. Boxes: quartiles and 1.5 IQR whiskers; dots: each "
               f"fetch. All hops p50/p95/p99 = "
               + "/".join(f"{q[k]:,.0f}" for k in ("p50", "p95", "p99") if k in q)
               + f" ms. {CROSS_RUN_LATENCY_NOTE}")
    return _save(fig, out_dir, name, title, caption,
                 ("provenance_walk_fetches", "provenance_hop_latency"))


def fig5_visibility(results: Results, out_dir: Path) -> FigureOutput:
    name, title = "fig5_visibility", "Fig. 5: visibility by reader relation"
    runs = _canonical(results, "propagation")
    counts = results.view("propagation_visibility_by_relation", list(runs.run_id))
    # a total order: drawing order must not depend on how DuckDB returned the rows
    counts = counts[counts.probes > 0].sort_values(["run_id", "reader_relation"])
    if counts.empty:
        return FigureOutput(name, title, note=_none("propagation", "probes"))
    rates = [rate(int(k), int(n)) for k, n in zip(counts.visible, counts.probes, strict=True)]
    frame = counts.assign(profile=counts.run_id.map(runs.set_index("run_id").profile),
                          rate=[r.value for r in rates], low=[r.low for r in rates],
                          high=[r.high for r in rates], k=counts.visible, n=counts.probes)
    fig, ax = plt.subplots(figsize=(9, 5.4), layout="constrained")
    _bars_with_ci(ax, frame, x="reader_relation", x_order=["sibling", "foreign"],
                  hue="profile", hue_order=_profile_order(frame.profile))
    ax.set(xlabel="reader relation to the writer's fleet",
           ylabel="visibility rate (95% Wilson CI)", ylim=(0, 1.25))
    sns.move_legend(ax, "upper center", bbox_to_anchor=(0.5, -0.14), ncol=3, title="profile",
                    frameon=False)
    n = frame.drop_duplicates("reader_relation").set_index("reader_relation").n
    caption = ("Visibility probes of each profile's canonical propagation run: n = "
               + ", ".join(f"{r} {int(v)}" for r, v in n.items())
               + " per profile. Rate = facts the reader found by search over probes. Sibling "
               "readers should see the fact; foreign readers should not (a foreign bar above 0 "
               "is a leak).")
    return _save(fig, out_dir, name, title, caption, ("propagation_visibility_by_relation",))


def fig6_window(results: Results, out_dir: Path) -> FigureOutput:
    name, title = "fig6_window", "Fig. 6: write-to-visible window (tight poll)"
    run = _paper_state_run(results, "propagation")
    facts = results.view("propagation_window_facts", [run.run_id]) if run is not None else None
    if facts is None or facts.empty:
        return FigureOutput(name, title, note=_none("propagation", "window facts"))
    values = np.sort(facts.time_to_visible_ms.to_numpy(dtype=float))
    rank = np.arange(1, len(values) + 1)
    fig, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
    ax.step(values, rank, where="post", color="0.7", linewidth=1)
    ax.plot(values, rank, "o", color=sns.color_palette()[0], markersize=6)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, len(values) + 0.8)
    marks = results.measured_latency("propagation_window_latency", run.run_id)
    _percentile_marks(ax, marks, ("p50", "p95", "max"), loc="lower right")
    ax.set(xlabel="time from write completion to first visible search (ms)",
           ylabel="window facts visible (cumulative)",
           title=f"{run.profile} ({run.target_kind})")
    caption = (f"Each dot is one window fact (n = {len(values)}), sorted by time to visible; "
               f"run {run.run_id}. Lines: p50/p95/max of the window latency view.")
    return _save(fig, out_dir, name, title, caption,
                 ("propagation_window_facts", "propagation_window_latency"))


def fig7_write_latency(results: Results, out_dir: Path) -> FigureOutput:
    name = "fig7_write_latency"
    title = "Fig. 7: contradiction write latency (stacked histogram)"
    run = _paper_state_run(results, "contradiction")
    writes = (results.view("contradiction_write_latencies", [run.run_id])
              if run is not None else None)
    if writes is None or writes.empty:
        return FigureOutput(name, title, note=_none("contradiction", "writes"))
    writes["write"] = writes.triggered.map({True: "triggered a contradiction",
                                            False: "did not trigger"})
    split = writes.write.value_counts()
    return _distribution(name, title, out_dir, writes.latency_ms,
                         results.measured_latency("contradiction_write_latency", run.run_id),
                         "write latency of admitted writes (ms)",
                         "admitted writes (count, stacked)", run,
                         "Bars stack the two kinds of admitted write: "
                         + ", ".join(f"{k} {v}" for k, v in sorted(split.items())) + ".",
                         hue=writes.write,
                         views=("contradiction_write_latencies", "contradiction_write_latency"))


FIGURES: dict[str, Callable[[Results, Path], FigureOutput]] = {
    "fig2_leakage_envelope": fig2_leakage_envelope,
    "fig3_search_latency": fig3_search_latency,
    "fig4_hop_latency": fig4_hop_latency,
    "fig5_visibility": fig5_visibility,
    "fig6_window": fig6_window,
    "fig7_write_latency": fig7_write_latency,
}


# ------------------------------------------------------------------------------ data


def _leakage_rates(results: Results) -> pd.DataFrame:
    """GET-by-id exposure/miss and search leak/miss (documented variant) per canonical run."""
    rows = []
    for run in _canonical(results, "leakage").itertuples():
        for axis, signal, metric in (
                ("GET-by-id", "exposure", "leakage_get_exposure"),
                ("GET-by-id", "miss", "leakage_get_miss"),
                ("search", "leak", "leakage_search_leak"),
                ("search", "miss", "leakage_search_miss")):
            r = results.measured_rate(metric, run.run_id)
            if r is not None and r.n:
                rows.append({"profile": run.profile, "axis": axis, "signal": signal,
                             "rate": r.value, "low": r.low, "high": r.high, "k": r.k, "n": r.n})
    return pd.DataFrame(rows)


def _search_variants(results: Results) -> pd.DataFrame:
    """Search leak and miss for every variant the paper-state leakage run measured, after the
    paper's own numbers; empty when that run measured only one variant."""
    run = _paper_state_run(results, "leakage")
    if run is None:
        return pd.DataFrame()
    rates = results.rates[(results.rates.run_id == run.run_id)
                          & results.rates.metric.isin(["leakage_search_leak",
                                                       "leakage_search_miss"])]
    rates = rates[rates.variant_write.notna() & rates.variant_search.notna()]
    pairs = sorted(set(zip(rates.variant_write, rates.variant_search, strict=True)),
                   key=lambda p: (p != results.headline_variant, p))
    if len(pairs) < 2:
        return pd.DataFrame()
    claims = {c["metric"]: c for c in results.claims}
    rows = []
    for signal, metric in (("leak", "leakage_search_leak"), ("miss", "leakage_search_miss")):
        if metric in claims:
            rows.append(_rate_row("paper (memclaw.net)", signal,
                                  rate(claims[metric]["k"], claims[metric]["n"])))
        for write, search in pairs:
            r = results.measured_rate(metric, run.run_id, (write, search))
            if r is not None and r.n:
                label = f"{write} x {search}"
                if (write, search) == results.headline_variant:
                    label += " (documented)"
                rows.append(_rate_row(label, signal, r))
    return pd.DataFrame(rows)


def _rate_row(variant: str, signal: str, r) -> dict:
    return {"variant": variant, "signal": signal, "rate": r.value, "low": r.low,
            "high": r.high, "k": r.k, "n": r.n}


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


# ------------------------------------------------------------------------------ drawing


def _bars_with_ci(ax, frame: pd.DataFrame, x: str, x_order: list[str], hue: str,
                  hue_order: list[str], palette=None) -> None:
    """Bars per x and hue with Wilson error bars and k/n written above each bar."""
    x_order = [v for v in x_order if v in set(frame[x])]
    sns.barplot(data=frame, x=x, y="rate", hue=hue, order=x_order, hue_order=hue_order,
                errorbar=None, ax=ax, palette=palette)
    indexed = frame.set_index([x, hue])
    crowded = len(hue_order) > 5  # horizontal k/n labels of narrow bars run into each other
    for group, container in zip(hue_order, ax.containers, strict=False):
        for x_value, bar in zip(x_order, container, strict=False):
            if (x_value, group) not in indexed.index:
                continue
            row = indexed.loc[(x_value, group)]
            centre = bar.get_x() + bar.get_width() / 2
            ax.errorbar(centre, row.rate, yerr=[[row.rate - row.low], [row.high - row.rate]],
                        color="black", capsize=3, linewidth=1)
            ax.annotate(f"{int(row.k)}/{int(row.n)}", (centre, row.high), ha="center",
                        va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points",
                        rotation=90 if crowded else 0)


def _distribution(name: str, title: str, out_dir: Path, values: pd.Series,
                  marks: dict[str, float] | None, xlabel: str, ylabel: str, run,
                  what: str, hue: pd.Series | None = None,
                  views: tuple[str, ...] = ()) -> FigureOutput:
    """A histogram with the p50 and p95 of the latency view marked; a long tail (max beyond
    TAIL_CUT_FACTOR x p99) is cut at the p99 and the caption says what was cut."""
    frame = pd.DataFrame({"value": values.to_numpy(dtype=float)})
    if not frame.value.notna().any():  # e.g. a target that answered none of these requests
        return FigureOutput(name, title, note=f"{title}: run {run.run_id} has no answered "
                            f"requests to draw ({what})")
    hue_name = (hue.name or "group") if hue is not None else None
    if hue is not None:
        frame[hue_name] = hue.to_numpy()
    p99 = float(np.percentile(frame.value, 99))
    top = float(frame.value.max())
    cut_at = math.ceil(p99) + 1 if top > TAIL_CUT_FACTOR * max(p99, 1e-9) else None
    shown = frame if cut_at is None else frame[frame.value <= cut_at]
    fig, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
    bins = np.histogram_bin_edges(shown.value, bins="auto")
    if len(bins) > 41:
        bins = np.linspace(bins[0], bins[-1], 41)
    sns.histplot(data=shown, x="value", hue=hue_name, multiple="stack", bins=bins, ax=ax)
    _percentile_marks(ax, marks, ("p50", "p95"))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, ax.get_ylim()[1] * 1.1)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=f"{run.profile} ({run.target_kind})")
    caption = f"{what} Run {run.run_id}: n = {len(frame)}."
    if cut_at is not None:
        beyond = int((frame.value > cut_at).sum())
        caption += (f" Axis cut at {cut_at:,} ms (just above the p99): {beyond} value(s) beyond "
                    f"it are not drawn, the largest {top:,.0f} ms; p50/p95 use all n.")
    return _save(fig, out_dir, name, title, caption, views)


def _percentile_marks(ax, marks: dict[str, float] | None, keys: tuple[str, ...],
                      loc: str = "upper right") -> None:
    """A vertical line per percentile, named with its value in the axes' legend (beside any
    legend the plot already has), so no label sits on the data or on another label."""
    styles = {"p50": "--", "p95": ":", "p99": "-.", "max": "-"}
    old = ax.get_legend()
    handles = list(old.legend_handles) if old is not None else []
    labels = [t.get_text() for t in old.get_texts()] if old is not None else []
    title = old.get_title().get_text() if old is not None else None
    for key in (k for k in keys if marks and k in marks):
        handles.append(ax.axvline(marks[key], color="black", linewidth=1,
                                  linestyle=styles.get(key, "--")))
        labels.append(f"{key} {marks[key]:,.0f} ms")
    if handles:
        ax.legend(handles, labels, title=title or None, loc=loc, frameon=True)


def _save(fig, out_dir: Path, name: str, title: str, caption: str,
          views: tuple[str, ...] = ()) -> FigureOutput:
    fig.suptitle(title, fontweight="bold")
    width_chars = int(fig.get_figwidth() * 15)
    fig.supxlabel("\n".join(textwrap.wrap(caption, width_chars)), x=0.01, ha="left",
                  fontsize=8, color="0.25")
    paths = [Path(out_dir) / f"{name}.{ext}" for ext in FORMATS]
    for path in paths:
        # No creation date or software version in the file: the same traces give the same
        # bytes under the same matplotlib.
        if path.suffix == ".pdf":
            fig.savefig(path, dpi=DPI,
                        metadata={"CreationDate": None, "Producer": None, "Creator": None})
        else:
            _save_png(fig, path)
    plt.close(fig)
    return FigureOutput(name, title, paths, caption=caption, views=views)


def _save_png(fig, path: Path) -> None:
    """A 256-colour PNG: flat charts lose nothing visible and the file shrinks about 2.5x,
    which keeps the executed report notebook (figures embedded) small. No `optimize`: it
    made the save ten times slower (0.18 s a figure) for files 7 % smaller."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    buffer.seek(0)
    with Image.open(buffer) as image:
        image.convert("RGB").quantize(colors=256).save(path, format="PNG")


def _none(experiment: str, what: str) -> str:
    return f"Not drawn: the traces hold no {experiment} run with {what}."
