"""The matrix heatmap: principal x path, colour = gap rate, one panel per target.

Its panels share their path and principal labels: each label strip is drawn once and pasted
beside every panel (`label_strip`). The report's one pixel-level shortcut, kept because drawing
every label as text costs several times the section's CPU (docs/benchmarks.md measures both).
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.cm import ScalarMappable  # noqa: E402
from matplotlib.collections import PatchCollection  # noqa: E402
from matplotlib.colors import Normalize  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from PIL import Image  # noqa: E402

from fleetprobe.analysis.base.figures import encode_png  # noqa: E402
from fleetprobe.analysis.sections.matrix.common import PATH_ORDER, PRINCIPALS, order  # noqa: E402

# Heatmap geometry, in inches: a cell, the margins around a panel (its principals on the
# left, its paths below, its title above) and the colour bar. A fixed layout: no layout pass.
CELL_W, CELL_H = 0.15, 0.13
LEFT, RIGHT, TOP, BOTTOM = 1.35, 0.75, 0.55, 0.15
PANEL_TOP, PANEL_BOTTOM, PANEL_GAP = 0.22, 1.0, 0.15
HEATMAP_DPI = 130
LABEL_SIZE = 5
# PNG only: the cells are an image in any format, and a PDF of the panels took as long to
# draw as the PNG
HEATMAP_FILE = "matrix_heatmap.png"


def heatmap_grids(cells: pd.DataFrame, targets: list[str], whos: list[str], paths: list[str],
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(gap share, misses > 0), each of shape (target, principal, path), from one groupby:
    the share is gaps / judged probes, NaN where nothing was judged."""
    sums = cells.groupby(["target", "principal", "path"])[["n", "gaps", "misses"]].sum()
    sums = sums.reindex(pd.MultiIndex.from_product([targets, whos, paths]), fill_value=0)
    shape = (len(targets), len(whos), len(paths))
    n, gaps, misses = (sums[c].to_numpy(dtype=float).reshape(shape)
                       for c in ("n", "gaps", "misses"))
    share = np.divide(gaps, n, out=np.full(shape, np.nan), where=n > 0)
    return share, misses > 0


def label_strip(labels: list[str], width: float, height: float, vertical: bool) -> Image.Image:
    """A panel's path labels (vertical: one per column, hanging below it) or principal labels
    (one per row, ending left of it), drawn once at HEATMAP_DPI on a transparent strip that is
    pasted beside every panel: the panels share their paths and principals, so 28 panels
    cost 58 labels to draw, not 28 x 58."""
    fig = Figure(figsize=(width, height), dpi=HEATMAP_DPI)
    fig.patch.set_alpha(0)
    for i, label in enumerate(labels):
        if vertical:
            fig.text((i + 0.5) * CELL_W / width, 1 - 0.03 / height, label, rotation=90,
                     ha="center", va="top", fontsize=LABEL_SIZE)
        else:
            fig.text(1 - 0.03 / width, 1 - (i + 0.5) * CELL_H / height, label, ha="right",
                     va="center", fontsize=LABEL_SIZE)
    return _pixels(fig)


def _pixels(fig: Figure) -> Image.Image:
    """The figure drawn by Agg, as an RGBA image over the canvas's buffer (read-only)."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return Image.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba(), "raw",
                            "RGBA", 0, 1)


def heatmap(cells: pd.DataFrame) -> bytes:
    """Principal x path, colour = gap rate; one panel per target, the colour bar at the
    right; a cell with misses is marked `m`, a cell never probed is grey. One axes, in
    inches, holds every panel (an image each, one marker and one frame collection); the
    path and principal labels are pasted in as pixels (`label_strip`)."""
    targets = order(list(cells.target.unique()))
    probed_paths, probed_whos = set(cells.path.tolist()), set(cells.principal.tolist())
    paths = [p for p in PATH_ORDER if p in probed_paths]
    whos = [p for p in PRINCIPALS if p in probed_whos]
    share, missed = heatmap_grids(cells, targets, whos, paths)
    # at most three panels a row, so the figure stays readable at 100 % zoom
    ncols = max(1, min(3, len(targets)))
    nrows = -(-len(targets) // ncols)
    panel_w, panel_h = CELL_W * len(paths), CELL_H * len(whos)
    width = LEFT + ncols * panel_w + (ncols - 1) * PANEL_GAP + RIGHT
    height = TOP + nrows * (PANEL_TOP + panel_h + PANEL_BOTTOM) + BOTTOM
    fig = Figure(figsize=(width, height), dpi=HEATMAP_DPI)
    fig.patch.set_facecolor("white")
    ax = fig.add_axes((0, 0, 1, 1), xlim=(0, width), ylim=(0, height))  # inches
    ax.set_axis_off()
    cmap = matplotlib.colormaps["Reds"].with_extremes(bad="#d9d9d9")  # grey: nothing judged
    frames, marks, pastes = [], [], []
    for i, target in enumerate(targets):
        row, col = divmod(i, ncols)
        x0 = LEFT + col * (panel_w + PANEL_GAP)
        top = TOP + row * (PANEL_TOP + panel_h + PANEL_BOTTOM) + PANEL_TOP  # from the top
        y0 = height - top - panel_h
        ax.imshow(np.ma.masked_invalid(share[i]), cmap=cmap, vmin=0, vmax=1,
                  extent=(x0, x0 + panel_w, y0, y0 + panel_h), aspect="auto",
                  interpolation="nearest")
        ys, xs = np.nonzero(missed[i])
        marks += [(x0 + (x + 0.5) * CELL_W, y0 + panel_h - (y + 0.5) * CELL_H)
                  for x, y in zip(xs, ys, strict=True)]
        frames.append(Rectangle((x0, y0), panel_w, panel_h))
        ax.text(x0 + panel_w / 2, y0 + panel_h + 0.03, target, ha="center", va="bottom",
                fontsize=7)
        pastes.append(("paths", x0, top + panel_h))
        if col == 0:
            pastes.append(("whos", 0.0, top))
    if marks:  # one collection of markers, not a text per cell
        ax.scatter(*zip(*marks, strict=True), marker="$m$", s=12, c="#1f4e9c", linewidths=0)
    ax.add_collection(PatchCollection(frames, facecolor="none", edgecolor="black",
                                      linewidth=0.6))
    cax = fig.add_axes(((width - RIGHT + 0.15) / width, BOTTOM / height + 0.1,
                        0.12 / width, 1 - (TOP + BOTTOM) / height - 0.2))
    bar = fig.colorbar(ScalarMappable(Normalize(0, 1), cmap), cax=cax)
    bar.set_label("gap rate (gaps / judged probes)", fontsize=6)
    bar.ax.tick_params(labelsize=5)
    fig.suptitle("Governance matrix: where each target returns, reveals or changes what the "
                 "policy denies (m = misses, grey = not probed)", fontsize=8,
                 y=1 - 0.15 / height, va="top")
    strips = {"paths": label_strip(paths, panel_w, PANEL_BOTTOM, vertical=True),
              "whos": label_strip(whos, LEFT, panel_h, vertical=False)}
    image = _pixels(fig).copy()  # a copy to paste into
    for kind, left, top in pastes:  # pixel boxes from the top left, as PIL counts
        image.alpha_composite(strips[kind], (round(left * HEATMAP_DPI),
                                             round(top * HEATMAP_DPI)))
    return encode_png(image.convert("RGB"))  # full colour: the palette's were lossy
