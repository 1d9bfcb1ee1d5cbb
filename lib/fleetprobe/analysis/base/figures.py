"""How the report's figures are drawn and saved (seaborn, png and pdf), shared by the sections
that redraw the paper's Figures 2-7 from the traces.

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

import contextlib
import io
import math
import textwrap
from collections.abc import Iterator
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never open a window (report runs headless)

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
from PIL import Image  # noqa: E402

from fleetprobe.analysis.base.labels import latency_comparable  # noqa: E402
from fleetprobe.analysis.base.results import PROFILES, Results  # noqa: E402
from fleetprobe.analysis.base.section import FigureOutput  # noqa: E402

PAPER_STATE = "memclaw-2026-05-30"
# The paper's figures are saved as PNG (the page and the notebooks show it) and PDF (vector,
# for a manuscript); the kit's own instrument figures as PNG only: nothing reads a PDF of
# them, and a PDF costs as long to draw again. A vector copy of any figure is one
# `fig.savefig("name.pdf")` away in its section's notebook.
FORMATS = ("png", "pdf")
PNG_ONLY = ("png",)
DPI = 150
# A distribution whose maximum is beyond this many times its p99 is drawn up to the p99 bin
# edge, and the caption says how many values lie beyond (and the largest).
TAIL_CUT_FACTOR = 2.0
CROSS_RUN_LATENCY_NOTE = (
    "Other profiles were measured in separate runs under different machine load, so their "
    "latencies are not compared here (tables/profiles.md lists each run's own numbers).")


def n_range(values: pd.Series | list[int]) -> str:
    """The n of a figure's bars as a caption says it: `164`, or `6-164` when they differ."""
    ns = sorted({int(v) for v in values})
    if not ns:
        return "0"
    return str(ns[0]) if len(ns) == 1 else f"{ns[0]}-{ns[-1]}"


def n_by_group(frame: pd.DataFrame, groups: list[str], label: str) -> str:
    """`<group> n = <range>` for each group of a figure's bars (its `n` column), and the
    `label`s whose n is not the group's most common one (smaller runs, said by name)."""
    parts, apart = [], {}
    for key, part in frame.groupby(groups, sort=False):
        name = " ".join(str(k) for k in (key if isinstance(key, tuple) else (key,)))
        parts.append(f"{name} n = {n_range(part.n)}")
        usual = part.n.astype(int).mode().max()
        for row in part[part.n.astype(int) != usual].itertuples():
            apart.setdefault(str(getattr(row, label)), set()).add(int(row.n))
    text = "; ".join(parts)
    if apart:
        text += " (n differs for " + ", ".join(
            f"{k}: {'/'.join(str(n) for n in sorted(v))}" for k, v in sorted(apart.items())
        ) + ")"
    return text


@contextlib.contextmanager
def style() -> Iterator[None]:
    """The look of the paper's figures (seaborn whitegrid, paper context)."""
    with sns.axes_style("whitegrid"), sns.plotting_context("paper", font_scale=1.15):
        yield


# ------------------------------------------------------------------------------ data


def canonical_runs(results: Results, experiment: str) -> pd.DataFrame:
    return results.canonical[results.canonical.experiment == experiment]


def paper_state_run(results: Results, experiment: str):
    """The canonical run of the state the paper measured, else the first profile's."""
    runs = canonical_runs(results, experiment)
    if runs.empty:
        return None
    preferred = runs[runs.profile == PAPER_STATE]
    return (preferred if not preferred.empty else runs).iloc[0]


def profile_order(profiles: pd.Series) -> list[str]:
    present = set(profiles)
    return [p for p in PROFILES if p in present] + sorted(present - set(PROFILES))


# ------------------------------------------------------------------------------ drawing


def bars_with_ci(ax, frame: pd.DataFrame, x: str, x_order: list[str], hue: str,
                  hue_order: list[str], palette=None) -> None:
    """Bars per x and hue with Wilson error bars and k/n written above each bar."""
    x_order = [v for v in x_order if v in set(frame[x])]
    sns.barplot(data=frame, x=x, y="rate", hue=hue, order=x_order, hue_order=hue_order,
                errorbar=None, ax=ax, palette=palette)
    indexed = frame.set_index([x, hue])
    crowded = len(hue_order) > 5  # horizontal k/n labels of narrow bars run into each other
    for group, container in zip(hue_order, ax.containers, strict=False):
        shown = [(bar, indexed.loc[(x_value, group)])
                 for x_value, bar in zip(x_order, container, strict=False)
                 if (x_value, group) in indexed.index]
        if not shown:
            continue
        centres = [bar.get_x() + bar.get_width() / 2 for bar, _ in shown]
        rows = [row for _, row in shown]
        # one errorbar per group (its whiskers as one collection), not one per bar
        ax.errorbar(centres, [r.rate for r in rows],
                    yerr=[[r.rate - r.low for r in rows], [r.high - r.rate for r in rows]],
                    fmt="none", ecolor="black", capsize=3, elinewidth=1, capthick=1)
        for centre, row in zip(centres, rows, strict=True):
            ax.annotate(f"{int(row.k)}/{int(row.n)}", (centre, row.high), ha="center",
                        va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points",
                        rotation=90 if crowded else 0)


def distribution(name: str, title: str, out_dir: Path, values: pd.Series,
                  marks: dict[str, float] | None, xlabel: str, ylabel: str, run,
                  what: str, hue: pd.Series | None = None,
                  views: tuple[str, ...] = (), paper: dict[str, float] | None = None
                  ) -> FigureOutput:
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
    comparison = latency_comparison(ax, run, paper or {})
    percentile_marks(ax, marks, ("p50", "p95"))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, ax.get_ylim()[1] * 1.1)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=f"{run.profile} ({run.target_kind})")
    caption = f"{what} Run {run.run_id}: n = {len(frame)}."
    caption += comparison
    if cut_at is not None:
        beyond = int((frame.value > cut_at).sum())
        caption += (f" Axis cut at {cut_at:,} ms (just above the p99): {beyond} value(s) beyond "
                    f"it are not drawn, the largest {top:,.0f} ms; p50/p95 use all n.")
    return save(fig, out_dir, name, title, caption, views)


def percentile_marks(ax, marks: dict[str, float] | None, keys: tuple[str, ...],
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
    for line in ax.get_lines():  # the paper's percentiles, where comparable
        if str(line.get_label()).startswith("paper "):
            handles.append(line)
            labels.append(str(line.get_label()))
    if handles:
        ax.legend(handles, labels, title=title or None, loc=loc, frameon=True)


NOT_COMPARABLE_MARK = "NOT COMPARABLE"
PAPER_LINE = {"p50": "--", "p95": ":", "p99": "-.", "max": "-"}


def paper_latency(results: Results, metric: str) -> dict[str, float]:
    """The paper's percentiles (ms) of a latency claim of paper_values.yaml, by key."""
    claim = next((c for c in results.claims if c["metric"] == metric), None) or {}
    return {k: float(claim[k]) for k in ("p50", "p95", "p99", "max") if claim.get(k)}


def latency_comparison(ax, run, paper: dict[str, float], vertical: bool = True) -> str:
    """Say on a latency figure whether it compares with the paper's numbers, and return the
    caption's sentence. Comparable (a live service over a network,
    `labels.latency_comparable`): the paper's percentiles drawn as grey lines beside the
    measured ones. Otherwise a NOT COMPARABLE mark in the axes, and the paper's values only
    quoted: loopback on this machine, which the harness shares, is not memclaw.net."""
    quoted = ", ".join(f"{k} {v:,.0f} ms" for k, v in paper.items())
    if latency_comparable(getattr(run, "target_kind", None), getattr(run, "base_url", None)):
        draw = ax.axvline if vertical else ax.axhline
        for key, value in paper.items():
            draw(value, color="0.55", linewidth=1.2, linestyle=PAPER_LINE.get(key, "--"),
                 label=f"paper {key} {value:,.0f} ms")
        return (f" Comparable with the paper: a live target over a network; grey lines: the "
                f"paper's {quoted}.") if paper else ""
    ax.text(0.02, 0.97, f"{NOT_COMPARABLE_MARK}: {run.target_kind} target on this machine",
            transform=ax.transAxes, ha="left", va="top", fontsize=9, fontweight="bold",
            color="#b00020", zorder=5,
            bbox={"facecolor": "white", "edgecolor": "#b00020", "alpha": 0.85, "pad": 2})
    return (f" {NOT_COMPARABLE_MARK} with the paper's latency: this run is a "
            f"{run.target_kind} target on loopback, on a machine the harness shares, the "
            "paper's is memclaw.net, a production service"
            + (f" (the paper: {quoted})" if quoted else "") + ".")


def save(fig, out_dir: Path, name: str, title: str, caption: str,
         views: tuple[str, ...] = (), formats: tuple[str, ...] = FORMATS) -> FigureOutput:
    """The figure with its title and caption, rendered as PNG (256 colours) and the other
    `formats`: bytes on the `FigureOutput`, written by the build's writer under `out_dir`."""
    fig.suptitle(title, fontweight="bold")
    width_chars = int(fig.get_figwidth() * 15)
    fig.supxlabel("\n".join(textwrap.wrap(caption, width_chars)), x=0.01, ha="left",
                  fontsize=8, color="0.25")
    paths = [Path(out_dir) / f"{name}.{ext}" for ext in formats]
    files = {}
    for i, path in enumerate(paths):
        if i == 1 and fig.get_layout_engine() is not None:
            fig.set_layout_engine(None)  # the PDF keeps the PNG's layout: one layout a figure
        # No creation date or software version in the file: the same traces give the same
        # bytes under the same matplotlib.
        if path.suffix == ".pdf":
            buffer = io.BytesIO()
            fig.savefig(buffer, format="pdf", dpi=DPI,
                        metadata={"CreationDate": None, "Producer": None, "Creator": None})
            files[f"figures/{path.name}"] = buffer.getvalue()
        else:
            files[f"figures/{path.name}"] = png_bytes(fig)
    plt.close(fig)
    return FigureOutput(name, title, paths, caption=caption, views=views, files=files)


def png_bytes(fig: Figure, dpi: float = DPI) -> bytes:
    """The figure as a 256-colour PNG (the report's one PNG writer): flat charts lose nothing
    visible and the file shrinks about 2.5x, which keeps the executed notebooks (figures
    embedded) small. Rendered to raw RGBA and quantized by Pillow (octree)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="rgba", dpi=dpi)
    renderer = fig.canvas.renderer  # the one that drew those pixels, at `dpi`
    image = Image.frombuffer("RGBA", (int(renderer.width), int(renderer.height)),
                             buffer.getbuffer(), "raw", "RGBA", 0, 1)
    return encode_png(image.convert("RGB").quantize(colors=256,
                                                    method=Image.Quantize.FASTOCTREE))


def encode_png(image: Image.Image) -> bytes:
    """A Pillow image as PNG bytes, with no metadata (the same bytes every build)."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def none_note(experiment: str, what: str) -> str:
    return f"Not drawn: the traces hold no {experiment} run with {what}."
