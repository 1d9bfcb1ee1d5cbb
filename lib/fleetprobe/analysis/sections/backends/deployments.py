"""Backend gap rates per deployment (idiomatic beside strict), store, version and path
family, and the at-a-glance overview figure."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.font_manager import FontProperties  # noqa: E402

from fleetprobe.analysis.base.labels import PATH_FAMILIES, path_family  # noqa: E402
from fleetprobe.analysis.base.results import Results  # noqa: E402
from fleetprobe.analysis.base.stats import fmt_rate, rate  # noqa: E402
from fleetprobe.analysis.base.tables import Table  # noqa: E402
from fleetprobe.analysis.sections.backends.common import (  # noqa: E402
    NO_MATRIX,
    _backend_matrix_runs,
    _matrix_probes,
    _save_png,
    target_info,
)
from fleetprobe.analysis.sections.backends.world import footnote  # noqa: E402

# ---- rates per backend x deployment x store x version and path family ------------------

# the matrix's paths in families a reader compares across backends (labels.PATH_FAMILIES)
FAMILIES = PATH_FAMILIES
ALL_PATHS = "all paths"
family = path_family


def judged_probes(results: Results, traces_root: Path | None,
                  probes: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every judged probe of the backends' canonical matrix runs, with its run's backend,
    deployment, store and version and its path family (`probes`: those runs' rows of
    backend_matrix_attribution, if already read)."""
    runs = _backend_matrix_runs(results)
    probes = _matrix_probes(results, list(runs.run_id)) if probes is None else probes
    if probes.empty:
        return probes
    info = pd.DataFrame([{"run_id": r, **target_info(traces_root, r)} for r in runs.run_id])
    probes = probes.merge(info, on="run_id")
    probes["family"] = probes.path.map(family)
    probes["gap"] = probes.verdict == "gap"
    verdicts = results.con.execute(
        "SELECT run_id, probe_id, promise_verdict FROM backend_promise_verdicts "
        "WHERE list_contains(?::VARCHAR[], run_id)", [list(runs.run_id)]).df()
    return probes.merge(verdicts, on=["run_id", "probe_id"], how="left")


SIDE = ("idiomatic", "strict")
# the three verdicts a cross-tenant success is split into (backend_promise_verdicts)
VERDICT_SPLIT = ("breaks_promise", "lacks_feature", "adapter_mapping")


def _side_by_side(judged: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """gaps/judged [95% Wilson CI] per `keys`, idiomatic and strict in columns of their own."""
    tallies = _tallies(judged, [*keys, "deployment"])
    rows = []
    for key in judged.groupby(keys, sort=True).size().index:
        key = key if isinstance(key, tuple) else (key,)
        line = dict(zip(keys, key, strict=True))
        for side in SIDE:
            k, n = tallies.get((*key, side), (0, 0))
            line[f"{side}: gaps"] = fmt_rate(rate(k, n)) if n else "-"
        rows.append(line)
    return pd.DataFrame(rows)


def _tallies(judged: pd.DataFrame, keys: list[str]) -> dict[tuple, tuple[int, int]]:
    """(gaps, judged probes) per value of `keys`, from one groupby."""
    sums = judged.groupby(keys, sort=False).gap.agg(["sum", "size"])
    return {key: (int(k), int(n)) for key, k, n in zip(sums.index, sums["sum"], sums["size"],
                                                        strict=True)}


def rates_table(judged: pd.DataFrame) -> Table:
    """Gap rates per backend x store x version x path family, idiomatic beside strict."""
    name, title = "backends_rates", ("Backends: gap rates per store, version and path family, "
                                     "idiomatic beside strict")
    if judged.empty:
        return Table(name, title, pd.DataFrame(), NO_MATRIX)
    every = judged.assign(family=ALL_PATHS)
    frame = _side_by_side(pd.concat([every, judged], ignore_index=True),
                          ["backend", "store", "version", "family"])
    order = {f: i for i, f in enumerate([ALL_PATHS, *(n for n, _ in FAMILIES), "other"])}
    frame = frame.sort_values(["backend", "store", "version", "family"],
                              key=lambda c: c.map(order) if c.name == "family" else c,
                              kind="stable").reset_index(drop=True)
    return Table(name, title, frame,
                 "From each backend target's canonical governance-matrix run: gaps (the path "
                 "returned, revealed or changed what the written policy denies) over judged "
                 "probes, 95% Wilson intervals; `idiomatic` = the layout the backend's own docs "
                 "and framework use, `strict` = the strictest scoping its native API expresses "
                 "(docs/backends.md). A gap under `strict` is the backend's; one only under "
                 "`idiomatic` is the usual deployment's. `-`: not run under that deployment. "
                 "version = the package that decides the store's behaviour.")


def cross_tenant_table(judged: pd.DataFrame, world: str = "") -> Table:
    """Probes of another tenant's rows, per backend x store x version, side by side, and the
    successes split by verdict (`promise_verdict`, if `judged` carries it): a bug against
    the backend's promise, a missing feature or the adapter's mapping."""
    name, title = "backends_cross_tenant", "Backends: cross-tenant probes that succeeded"
    crossing = judged[judged.cross_tenant] if not judged.empty else judged
    if crossing.empty:
        return Table(name, title, pd.DataFrame(), NO_MATRIX)
    frame = _side_by_side(crossing, ["backend", "store", "version"])
    if "promise_verdict" in crossing.columns:
        split = crossing[crossing.gap].groupby(
            ["backend", "store", "version", "deployment", "promise_verdict"]).size()
        for side in SIDE:
            frame[f"{side}: bug / lacks feature / adapter's mapping"] = [
                " / ".join(str(int(split.get((b, st, v, side, verdict), 0)))
                           for verdict in VERDICT_SPLIT)
                if f"{side}: gaps" in frame.columns and frame.loc[i, f"{side}: gaps"] != "-"
                else "-"
                for i, (b, st, v) in enumerate(zip(frame.backend, frame.store, frame.version,
                                                   strict=True))]
    return Table(name, title, frame,
                 ("Probes by a principal of the other tenant (same fleet names) of a row it "
                  "must never see or change: k/n returned or changed it, 95% Wilson intervals; "
                  "the successes split into breaks the backend's own promise / lacks the "
                  "feature / follows from the adapter's mapping (backend_promise_verdicts). "
                  "`idiomatic` keeps every tenant in one collection, table or store (the "
                  "adapter's mapping of MemClaw's tenants), `strict` one per tenant "
                  f"(docs/backends.md). {world}").strip())


def overview_figure(judged: pd.DataFrame, out_dir: Path, world: str = ""
                    ) -> tuple[dict[Path, bytes], str]:
    """At a glance: one heat map per deployment, a row per backend x store x version and a
    column per path family, coloured by gap rate and labelled k/n."""
    if judged.empty:
        return {}, NO_MATRIX
    families = [ALL_PATHS, *(n for n, _ in FAMILIES)]
    targets = sorted(set(zip(judged.backend.tolist(), judged.store.tolist(),
                             judged.version.tolist(), strict=True)))
    keys = ["backend", "store", "version", "deployment"]
    grid = {((b, st, v), side, ALL_PATHS): tally
            for (b, st, v, side), tally in _tallies(judged, keys).items()}
    grid |= {((b, st, v), side, f): tally
             for (b, st, v, side, f), tally in _tallies(judged, [*keys, "family"]).items()}
    labels = [f"{b} · {st} · {v.replace('langgraph-checkpoint-', 'ckpt-')}"
              for b, st, v in targets]
    fig, axes = plt.subplots(1, 2, figsize=(11, 1.2 + 0.42 * len(targets)), sharey=True,
                             dpi=150)  # the dpi it is saved at, which its margins are fit to
    for ax, side in zip(axes, SIDE, strict=True):
        values = [[(grid[(t, side, f)][0] / grid[(t, side, f)][1])
                   if grid.get((t, side, f), (0, 0))[1] else float("nan") for f in families]
                  for t in targets]
        cmap = plt.get_cmap("Reds").with_extremes(bad="0.9")  # grey: not run like this
        ax.imshow(values, cmap=cmap, vmin=0, vmax=1, aspect="auto")
        for i, t in enumerate(targets):
            for j, f in enumerate(families):
                k, n = grid.get((t, side, f), (0, 0))
                if n:  # a cell without probes is grey, and says so in the title
                    ax.text(j, i, f"{k}/{n}", ha="center", va="center", fontsize=6,
                            color="white" if k / n > 0.6 else "black")
        ax.set_xticks(range(len(families)))
        ax.set_xticklabels(families, rotation=30, ha="right", fontsize=7)
        ax.set_title(f"{side}", fontsize=9)
    axes[0].set_yticks(range(len(targets)))
    axes[0].set_yticklabels(labels, fontsize=7)
    fig.suptitle("Governance-matrix gaps (returned or changed what the policy denies): "
                 "k/n per path family, darker = more, grey = not run", fontsize=9)
    _fit_margins(fig, labels, families, rotation=30, size=7)
    footnote(fig, world)
    return _save_png(fig, out_dir, "backends_overview", dpi=150), ""


def _fit_margins(fig: Figure, ylabels: list[str], xlabels: list[str], rotation: float,
                 size: float) -> None:
    """Margins that hold the tick labels (measured by the renderer at the figure's dpi,
    without drawing), the axes titles and the suptitle: what tight_layout gives, without the
    dry draw of the whole figure it needs."""
    prop, renderer, dpi = FontProperties(size=size), fig.canvas.get_renderer(), fig.dpi
    extents = {s: renderer.get_text_width_height_descent(s, prop, ismath=False)
               for s in {*ylabels, *xlabels}}  # pixels
    angle = math.radians(rotation)
    tick = (plt.rcParams["ytick.major.size"] + plt.rcParams["ytick.major.pad"]) / 72
    left = max(extents[s][0] for s in ylabels) / dpi + tick + 0.1
    bottom = max(extents[s][0] * math.sin(angle) + extents[s][1] * math.cos(angle)
                 for s in xlabels) / dpi + tick + 0.1
    top, right, gap = 0.62, 0.1, 0.2  # suptitle and axes titles (9 pt each); beside
    width, height = fig.get_size_inches()
    axes_width = (width - left - right - gap) / 2
    fig.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height,
                        top=1 - top / height, wspace=gap / axes_width)

