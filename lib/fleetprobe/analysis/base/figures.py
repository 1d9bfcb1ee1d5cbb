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
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never open a window (report runs headless)

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.artist import Artist  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
from PIL import Image  # noqa: E402

from fleetprobe.analysis.base.results import PROFILES, Results  # noqa: E402

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


@dataclass
class FigureOutput:
    name: str
    title: str
    paths: list[Path] = field(default_factory=list)
    note: str = ""
    caption: str = ""
    views: tuple[str, ...] = ()  # the metric views of metrics.sql the figure draws


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
    percentile_marks(ax, marks, ("p50", "p95"))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, ax.get_ylim()[1] * 1.1)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=f"{run.profile} ({run.target_kind})")
    caption = f"{what} Run {run.run_id}: n = {len(frame)}."
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
    if handles:
        ax.legend(handles, labels, title=title or None, loc=loc, frameon=True)


def save(fig, out_dir: Path, name: str, title: str, caption: str,
          views: tuple[str, ...] = (), formats: tuple[str, ...] = FORMATS,
          render: Callable[[Figure], np.ndarray] | None = None) -> FigureOutput:
    """The figure with its title and caption as PNG (256 colours) and the other `formats`;
    `render` draws its PNG's pixels (default `render_rgba`; a `StampedSeries` pastes what
    a series of figures draws alike)."""
    fig.suptitle(title, fontweight="bold")
    width_chars = int(fig.get_figwidth() * 15)
    fig.supxlabel("\n".join(textwrap.wrap(caption, width_chars)), x=0.01, ha="left",
                  fontsize=8, color="0.25")
    paths = [Path(out_dir) / f"{name}.{ext}" for ext in formats]
    for i, path in enumerate(paths):
        if i == 1 and fig.get_layout_engine() is not None:
            # laid out once: the second file keeps the first one's layout instead of running
            # the layout engine (and the dry draw it needs) again, a third of a PDF's cost
            fig.set_layout_engine(None)
        # No creation date or software version in the file: the same traces give the same
        # bytes under the same matplotlib.
        if path.suffix == ".pdf":
            fig.savefig(path, dpi=DPI,
                        metadata={"CreationDate": None, "Producer": None, "Creator": None})
        else:
            write_png((render or render_rgba)(fig), path)
    plt.close(fig)
    return FigureOutput(name, title, paths, caption=caption, views=views)


def save_png(fig, path: Path) -> None:
    write_png(render_rgba(fig), path)


def render_rgba(fig) -> np.ndarray:
    """The figure's pixels at DPI (rows x columns x RGBA). Rendered to raw RGBA, not to a
    PNG decoded again: the same pixels, without compressing and decompressing a full-colour
    image (0.1 s a figure)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="rgba", dpi=DPI)
    renderer = fig.canvas.renderer  # the one that drew those pixels, at DPI
    return np.frombuffer(buffer.getbuffer(), np.uint8).reshape(
        int(renderer.height), int(renderer.width), 4)


def write_png(pixels: np.ndarray, path: Path) -> None:
    """A 256-colour PNG: flat charts lose nothing visible and the file shrinks about 2.5x,
    which keeps the executed report notebook (figures embedded) small. No `optimize`: it
    made the save ten times slower (0.18 s a figure) for files 7 % smaller. The palette is
    chosen by octree, not median cut: five times faster (0.02 s against 0.1 s a figure, 0.6
    s against 0.14 s for the matrix heatmap) and the files come out smaller."""
    image = Image.fromarray(np.ascontiguousarray(pixels), "RGBA")
    image.convert("RGB").quantize(colors=256, method=Image.Quantize.FASTOCTREE).save(
        path, format="PNG")


class StampedSeries:
    """Figures that draw some artists alike (the same text at the same place: e.g. every
    dynamics timeline's row labels and legend) rendered without drawing those again: the
    first figure is rendered whole and its pixels in those artists' boxes kept (the stamp);
    each later one is rendered without them and the stamp pasted in. Text is most of a
    figure's drawing, and glyphs are rendered anew at every draw.

    The pixels are Agg's own: a box must hold background only when the artists are hidden,
    in the first figure and in each later one (so nothing else draws there and the order
    of drawing cannot matter), every pixel the artists change must lie in a box, and
    `layout(fig)` (what places the artists) must be the first figure's; otherwise the
    figure is rendered whole."""

    MARGIN = 3  # pixels around an artist's extent (antialiased glyph edges)

    def __init__(self, static: Callable[[Figure], list[Artist]],
                 layout: Callable[[Figure], Hashable]) -> None:
        self.static, self.layout = static, layout
        self.first: tuple[Hashable, np.ndarray, np.ndarray, list] | None = None
        self.usable = True
        self.pasted = 0  # figures rendered with the stamp (the tests read it)

    def render(self, fig) -> np.ndarray:
        if not self.usable:
            return render_rgba(fig)
        if self.first is None:
            return self._first(fig)
        layout, background, stamp, boxes = self.first
        if self.layout(fig) != layout:
            return render_rgba(fig)
        pixels = self._hidden(fig)
        if pixels.shape != stamp.shape or not all(
                np.array_equal(pixels[box], background[box]) for box in boxes):
            return render_rgba(fig)
        for box in boxes:
            pixels[box] = stamp[box]
        self.pasted += 1
        return pixels

    def _first(self, fig) -> np.ndarray:
        extents: list = []
        hook = fig.canvas.mpl_connect("draw_event", lambda event: extents.extend(
            a.get_window_extent(event.renderer) for a in self.static(fig)))
        try:
            whole = render_rgba(fig)
        finally:
            fig.canvas.mpl_disconnect(hook)
        hidden = self._hidden(fig)
        boxes = [self._box(e, whole.shape) for e in extents]
        covered = np.zeros(whole.shape[:2], dtype=bool)
        for box in boxes:
            covered[box] = True
        changed = (whole != hidden).any(axis=2)
        uniform = all((hidden[box] == hidden[box][0, 0]).all() for box in boxes)
        if extents and uniform and not (changed & ~covered).any():
            self.first = (self.layout(fig), hidden, whole, boxes)
        else:
            self.usable = False
        return whole

    def _hidden(self, fig) -> np.ndarray:
        shown = [a for a in self.static(fig) if a.get_visible()]
        for artist in shown:
            artist.set_visible(False)
        try:
            return render_rgba(fig).copy()
        finally:
            for artist in shown:
                artist.set_visible(True)

    def _box(self, extent, shape) -> tuple[slice, slice]:
        height, width = shape[:2]
        m = self.MARGIN
        return (slice(max(0, height - math.ceil(extent.y1) - m),
                      min(height, height - math.floor(extent.y0) + m)),
                slice(max(0, math.floor(extent.x0) - m), min(width, math.ceil(extent.x1) + m)))


def none_note(experiment: str, what: str) -> str:
    return f"Not drawn: the traces hold no {experiment} run with {what}."
