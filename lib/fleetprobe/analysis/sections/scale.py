"""The Scale table: leakage and propagation at 10x the paper's population (params/scale10x:
PostgreSQL + pgvector storage, 100k background memories per tenant) beside the paper-scale
canonical runs of the same profile. Same metric views, same Wilson intervals; scale runs are
ablations by headline_params (a larger population than the paper's), so they never enter
Table 2. `make scale10x` makes the runs.

Beside it, governed-retrieval completeness vs store size: the misses of each store's scoped
similarity search (1 - recall@10 against exact ranking over the rows the caller may read) per
store and index setting, from the committed benchmark evidence `data/scale/recall.json`
(`benchmarks/bench_recall.py --json`): whether a store that filters by scope around an
approximate index loses rows its callers may read, and how that grows with the store.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from fleetprobe.analysis.base.results import Results
from fleetprobe.analysis.base.section import REPRODUCTION, Context, Fragment, SectionOutput, finish
from fleetprobe.analysis.base.tables import Table

if TYPE_CHECKING:  # matplotlib loads only when the figure is drawn
    from fleetprobe.analysis.base.section import FigureOutput

KEY, TITLE = "scale", "Scale (10x)"

# (experiment, metric view, kind, label)
METRICS: tuple[tuple[str, str, str, str], ...] = (
    ("leakage", "leakage_get_exposure", "rate", "tenant-key GET exposure (cross-scope)"),
    ("leakage", "leakage_search_leak", "rate", "search leak rate (expected deny)"),
    ("leakage", "leakage_search_miss", "rate", "search miss rate (expected allow)"),
    ("leakage", "leakage_access_latency", "latency", "GET-by-id latency"),
    ("leakage", "leakage_search_latency", "latency", "search latency"),
    ("propagation", "propagation_sibling_visibility", "rate", "sibling visibility"),
    ("propagation", "propagation_cross_fleet_leak", "rate", "cross-fleet leak"),
    ("propagation", "propagation_window_latency", "latency", "write-to-visible window"),
)
EXPERIMENTS = ("leakage", "propagation")
POPULATION = {"leakage": ("fleets", "agents_per_fleet"),
              "propagation": ("n_siblings", "n_foreign")}
NO_RUNS = ("No 10x scale runs under the traces yet: run `make scale10x` (leakage and "
           "propagation at 10x the paper's population on PostgreSQL + pgvector, 100k "
           "background memories per tenant).")


def is_scale_run(params: dict[str, Any]) -> bool:
    """A run against a production-sized store: background memories or PostgreSQL storage."""
    target = params.get("target") or {}
    return bool(target.get("background_memories")) or target.get("storage") == "postgres"


def scale_runs(results: Results) -> pd.DataFrame:
    runs = results.runs[results.runs.experiment.isin(EXPERIMENTS)
                        & results.runs.complete.fillna(False).astype(bool)]
    keep = [is_scale_run(json.loads(p) if isinstance(p, str) else {}) for p in runs.params]
    return runs[pd.Series(keep, index=runs.index, dtype=bool)]


def _cell(results: Results, metric: str, kind: str, run_id: str) -> str:
    if kind == "rate":
        r = results.measured_rate(metric, run_id)
        return "" if r is None else f"{r.k}/{r.n} = {r.value:.3f} [{r.low:.3f}, {r.high:.3f}]"
    lat = results.measured_latency(metric, run_id)
    if not lat or "p50" not in lat:
        return ""
    return f"p50 {lat['p50']:.1f} / p99 {lat.get('p99', float('nan')):.1f} ms (n {lat['n']:.0f})"


def _describe(params: dict[str, Any], experiment: str) -> str:
    target = params.get("target") or {}
    population = " x ".join(str(params.get(k, "?")) for k in POPULATION[experiment])
    storage = target.get("storage") or "sqlite"
    if storage == "postgres":
        storage += f" ({target.get('vector_search', 'hnsw')} search)"  # runs before: hnsw
    return f"{population}; {storage}; {target.get('background_memories') or 0} background"


def scale_table(results: Results) -> Table:
    scale = scale_runs(results)
    rows = []
    for _, run in scale.sort_values(["experiment", "run_id"]).iterrows():
        params = json.loads(run.params)
        base = results.canonical_run(run.experiment, run.profile)
        base_params = json.loads(base.params) if base is not None and base.params else {}
        for experiment, metric, kind, label in METRICS:
            if experiment != run.experiment:
                continue
            rows.append({
                "experiment": experiment, "profile": run.profile, "metric": label,
                "paper scale": "" if base is None else _cell(results, metric, kind,
                                                             base.run_id),
                "10x scale": _cell(results, metric, kind, run.run_id),
                "paper-scale run": "" if base is None else
                f"{base.run_id} ({_describe(base_params, experiment)})",
                "scale run": f"{run.run_id} ({_describe(params, experiment)})",
            })
    note = ("Population: leakage fleets x agents per fleet, propagation siblings x foreign "
            "readers. Rates k/n = value [95% Wilson CI]; latencies as the harness measured "
            "them (client side, loopback). Scale runs have raised rate limits and no pacing, "
            "with 8 requests in flight on one server process, so their latencies include "
            "queueing; paper-scale runs are paced. The paper-scale column is the canonical "
            "run of the same profile.")
    if not rows:
        return Table("scale", "Scale: 10x the paper's population", pd.DataFrame(), NO_RUNS)
    return Table("scale", "Scale: 10x the paper's population", pd.DataFrame(rows), note)


RECALL_EVIDENCE = Path("scale") / "recall.json"  # under the traces root's parent (data/)
NO_RECALL = ("No recall evidence: run `benchmarks/bench_recall.py --json "
             "data/scale/recall.json` (PostgreSQL needs the `pg` extra).")


def recall_rows(path: Path) -> pd.DataFrame:
    """bench_recall.py's rows, one per (store, size, setting), with the misses (1 - recall@10
    over readable rows at or above the cosine gate); empty when the file is absent."""
    if not path.is_file():
        return pd.DataFrame()
    frame = pd.DataFrame(json.loads(path.read_text()))
    frame["setting"] = [_setting(r) for r in frame.itertuples()]
    frame["misses_at_10"] = 1.0 - frame.recall_gated_at_10
    order = frame.assign(ef=frame.ef_search.fillna(0))
    return frame.loc[order.sort_values(["store", "mode", "ef", "n"], kind="stable").index
                     ].reset_index(drop=True)


def _setting(row: Any) -> str:
    label = f"{row.store} {row.mode}"
    if row.mode == "hnsw" and not getattr(row, "index_walk", True):
        label += " store (fleet-scoped: exact)"  # what `--vector-search hnsw` serves
    elif row.mode == "hnsw":
        label += f" ef_search {int(row.ef_search)}"
    return label + (" (default)" if row.server_default else "")


def recall_table(frame: pd.DataFrame) -> Table:
    title = "Governed retrieval: misses of scoped search vs store size"
    if frame.empty:
        return Table("scale_recall", title, pd.DataFrame(), NO_RECALL)
    shown = pd.DataFrame({
        "setting": frame.setting, "stored memories": frame.n,
        "recall@10": frame.recall_gated_at_10.map("{:.4f}".format),
        "recall@40": frame.recall_gated_at_40.map("{:.4f}".format),
        "misses@10": frame.misses_at_10.map("{:.4f}".format),
        "search p50 (ms)": frame.p50_ms.map("{:.2f}".format),
        "load average": frame.load.map("{:.1f}".format)})
    note = ("Fleet-scoped queries (six words of a stored row, one of 8 fleets in scope: 1/8 "
            "of the rows readable); recall@k of the store's scoped search against exact "
            "ranking over the readable rows at or above the profile's cosine gate, summed "
            "over the sampled queries; misses = 1 - recall. HNSW: pgvector, m 16, "
            "ef_construction 64, iterative scan. p50: the store call alone, on a shared "
            "2-core machine at the load average shown (benchmarks/bench_recall.py).")
    return Table("scale_recall", title, shown, note)


def recall_figure(frame: pd.DataFrame, out_dir: Path) -> FigureOutput | None:
    """Misses@10 vs store size, one line per store and setting (log x)."""
    if frame.empty:
        return None
    from fleetprobe.analysis.base.figures import plt, save, style

    with style():
        fig, ax = plt.subplots(figsize=(7.5, 5.2))
        for setting in dict.fromkeys(frame.setting):  # the frame's order: store, mode, ef
            rows = frame[frame.setting == setting]
            ax.plot(rows.n, rows.misses_at_10, marker="o",
                    linestyle="-" if "hnsw" in setting else "--", label=setting)
        ax.set_xscale("log")
        ax.set(xlabel="stored memories (one tenant, 8 fleets)",
               ylabel="misses@10 (1 - recall over readable rows)")
        ax.set_ylim(bottom=-0.005)
        ax.legend(fontsize=7, loc="upper left", frameon=True)
        fig.subplots_adjust(bottom=0.27)
        caption = (f"{len(frame)} measurements (data/scale/recall.json, "
                   "benchmarks/bench_recall.py): recall@10 of each store's fleet-scoped search "
                   "against exact ranking over the readable rows at or above the cosine gate; "
                   "misses = 1 - recall. HNSW: pgvector, m 16, ef_construction 64, iterative "
                   "scan. Exact ranking (both stores' default) misses none.")
        return save(fig, out_dir, "scale_recall", "Governed-retrieval misses vs store size",
                    caption)


def markdown_section(table: Table) -> str:
    """The Scale table as a section of REPRODUCTION.md."""
    body = f"_{table.note}_" if table.empty else (
        table.markdown + f"\n\n{table.note}")
    return f"## {table.title}\n\n{body}"


def build(context: Context) -> SectionOutput:
    results = context.results(EXPERIMENTS)
    try:
        table = replace(scale_table(results),
                        views=tuple(dict.fromkeys(m for _, m, _, _ in METRICS)))
        runs = tuple(scale_runs(results).run_id)
    finally:
        results.con.close()
    frame = recall_rows(context.traces_root.parent / RECALL_EVIDENCE)
    recall = recall_table(frame)
    figure = recall_figure(frame, context.out_dir / "figures")
    output = SectionOutput(
        KEY, TITLE,
        "Leakage and propagation at 10x the paper's population (PostgreSQL + pgvector, 100k "
        "background memories per tenant) beside the paper-scale canonical runs, and the "
        "misses of scoped search vs store size per store and index setting.",
        # the recall table is benchmark evidence, not a metric view over the traces, so it
        # stays out of `tables` (each of which cites its metrics.sql views): its files, its
        # fragment and its figure's caption name data/scale/recall.json instead
        tables={table.name: table},
        figures={figure.name: figure} if figure else {},
        fragments=[Fragment(REPRODUCTION, 90, markdown_section(table)),
                   Fragment(REPRODUCTION, 91, markdown_section(recall))],
        notes=[t.note for t in (table, recall) if t.empty],
        views=tuple(dict.fromkeys(m for _, m, _, _ in METRICS)), runs=runs,
        files=recall.files())
    return finish(output, context)

