"""The matrix heatmap, readable at page width: one row per target, one column per path family
(labels.PATH_FAMILIES), colour = gap rate (gaps / judged probes), each cell written as
`gaps/n` so every colour carries its n. The per-principal, per-path grid of each target is on
its own page (reports/matrix/<target>.md, `pages.target_grid`), as text with n per cell.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from fleetprobe.analysis.base.figures import png_bytes  # noqa: E402
from fleetprobe.analysis.base.labels import path_family  # noqa: E402
from fleetprobe.analysis.sections.matrix.common import FAMILIES, cell_text, order  # noqa: E402

# geometry in inches: a cell, the target labels' margin, the family labels' band, the title
CELL_W, CELL_H = 0.78, 0.2
LEFT, RIGHT, TOP, BOTTOM = 3.3, 0.2, 0.75, 0.55
HEATMAP_DPI = 120
TEXT_SIZE = 6


def heatmap_grids(cells: pd.DataFrame, targets: list[str]
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(gaps, judged probes, misses), each of shape (target, family), summed over the
    principals and paths of each family (matrix_cells' n, gaps, misses)."""
    frame = cells.assign(family=cells.path.map(path_family))
    sums = frame.groupby(["target", "family"])[["n", "gaps", "misses"]].sum()
    sums = sums.reindex(pd.MultiIndex.from_product([targets, FAMILIES]), fill_value=0)
    shape = (len(targets), len(FAMILIES))
    gaps, n, misses = (sums[c].to_numpy(dtype=int).reshape(shape)
                       for c in ("gaps", "n", "misses"))
    return gaps, n, misses


def heatmap(cells: pd.DataFrame) -> bytes:
    """Targets x path families, colour = gap rate, `gaps/n` written in every cell; grey where
    nothing of the family was judged."""
    targets = order(list(cells.target.unique()))
    gaps, n, misses = heatmap_grids(cells, targets)
    share = np.divide(gaps, n, out=np.full(gaps.shape, np.nan), where=n > 0)
    width = LEFT + CELL_W * len(FAMILIES) + RIGHT
    height = TOP + CELL_H * len(targets) + BOTTOM
    fig = Figure(figsize=(width, height), dpi=HEATMAP_DPI)
    FigureCanvasAgg(fig)
    fig.patch.set_facecolor("white")
    ax = fig.add_axes((LEFT / width, BOTTOM / height, CELL_W * len(FAMILIES) / width,
                       CELL_H * len(targets) / height))
    cmap = matplotlib.colormaps["Reds"].with_extremes(bad="#d9d9d9")
    ax.imshow(np.ma.masked_invalid(share), cmap=cmap, vmin=0, vmax=1, aspect="auto",
              interpolation="nearest")
    for (i, j), value in np.ndenumerate(share):
        dark = not np.isnan(value) and value > 0.55
        ax.text(j, i, cell_text(gaps[i, j], n[i, j], misses[i, j]), ha="center",
                va="center", fontsize=TEXT_SIZE, color="white" if dark else "black")
    ax.set_xticks(range(len(FAMILIES)), FAMILIES, fontsize=TEXT_SIZE + 1)
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(targets)), targets, fontsize=TEXT_SIZE + 1)
    ax.tick_params(length=0)
    ax.set_xticks(np.arange(-0.5, len(FAMILIES)), minor=True)
    ax.set_yticks(np.arange(-0.5, len(targets)), minor=True)
    ax.grid(which="minor", color="white", linewidth=0.8)
    ax.tick_params(which="minor", length=0)
    fig.suptitle("Governance matrix: gaps / judged probes per target and path family "
                 "(colour = gap rate; +k m = misses; grey = not judged)",
                 fontsize=TEXT_SIZE + 2, y=1 - 0.12 / height, va="top")
    fig.text(LEFT / width, 0.12 / height,
             f"n = {int(n.sum()):,} judged probes over {len(targets)} targets; each target's "
             "grid by principal and path: reports/matrix/<target>.md", fontsize=TEXT_SIZE,
             va="bottom")
    return png_bytes(fig, HEATMAP_DPI)
