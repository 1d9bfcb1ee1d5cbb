"""figures.StampedSeries: a figure rendered with its static artists stamped in has the pixels
of the figure rendered whole, and anything drawn where the stamp goes is rendered whole."""

from __future__ import annotations

import numpy as np

from fleetprobe.analysis.base import figures
from fleetprobe.analysis.base.figures import StampedSeries, plt, render_rgba


def _figure(x: float, y: float):
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.set_position((0.3, 0.2, 0.65, 0.7))
    ax.set_yticks([0, 1], ["first row", "second row"])
    ax.set_ylim(-0.5, 1.5)
    ax.scatter([x], [0.5])
    fig.text(x, y, "moving text")  # figure coordinates
    return fig


def _series() -> StampedSeries:
    return StampedSeries(lambda fig: [t.label1 for t in fig.axes[0].yaxis.get_major_ticks()],
                         lambda fig: fig.axes[0].get_position().bounds)


def test_stamped_pixels_are_the_whole_render():
    series = _series()
    for x in (0.5, 0.7, 0.9):
        fig = _figure(x, 0.05)
        assert np.array_equal(series.render(fig), render_rgba(fig))
        plt.close(fig)
    assert series.pasted == 2


def test_a_figure_drawing_over_the_stamp_is_rendered_whole():
    series = _series()
    first = _figure(0.5, 0.05)
    series.render(first)
    over = _figure(0.02, 0.28)  # the moving text on the first row's label
    assert np.array_equal(series.render(over), render_rgba(over))
    assert series.pasted == 0
    moved = _figure(0.5, 0.05)
    moved.axes[0].set_position((0.35, 0.2, 0.6, 0.7))  # the labels move with the axes
    assert np.array_equal(series.render(moved), render_rgba(moved))
    assert series.pasted == 0
    for fig in (first, over, moved):
        plt.close(fig)


def test_png_of_a_stamped_figure_is_the_same_file(tmp_path):
    series = _series()
    for i, x in enumerate((0.5, 0.8)):
        fig = _figure(x, 0.05)
        figures.write_png(series.render(fig), tmp_path / f"stamped{i}.png")
        figures.save_png(fig, tmp_path / f"whole{i}.png")
        plt.close(fig)
        assert (tmp_path / f"stamped{i}.png").read_bytes() == (
            tmp_path / f"whole{i}.png").read_bytes()
