"""Pages a person reads (issue 36): no report file but figures and notebooks over
tables.PAGE_LIMIT, every page a long table is cut from names the CSV holding every row, each
figure's caption gives the n of the bars it draws, and latency figures say whether they
compare with the paper."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from fleetprobe.analysis import report  # noqa: E402
from fleetprobe.analysis.base import figures, tables  # noqa: E402
from fleetprobe.analysis.base.results import Results  # noqa: E402
from fleetprobe.analysis.sections import leakage  # noqa: E402

TRACES = Path(__file__).resolve().parents[2] / "data" / "traces"
NOT_PAGES = (".png", ".pdf", ".ipynb")

committed = pytest.mark.skipif(not any(TRACES.glob("*/manifest.json")),
                               reason="no committed traces")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("reports")
    return report.build(TRACES, out)


def _pages(out: Path) -> list[Path]:
    return sorted(p for p in out.rglob("*") if p.is_file() and p.suffix not in NOT_PAGES
                  and not p.name.startswith("."))


@committed
def test_no_page_is_over_the_limit(built: dict) -> None:
    out = Path(built["out_dir"])
    over = {p.relative_to(out).as_posix(): p.stat().st_size for p in _pages(out)
            if p.stat().st_size > tables.PAGE_LIMIT}
    assert not over, over


@committed
def test_every_file_a_page_names_exists(built: dict) -> None:
    """Every `tables/...csv` a Markdown page names, and every page it links, is written."""
    out = Path(built["out_dir"])
    for page in out.rglob("*.md"):
        text = page.read_text()
        for name in re.findall(r"`((?:\.\./)?tables/[\w./-]+\.csv)`", text):
            assert (page.parent / name).resolve().is_file(), (page.name, name)
        for name in re.findall(r"\]\(([\w./-]+\.md)\)", text):
            assert (page.parent / name).resolve().is_file(), (page.name, name)


@committed
def test_matrix_is_a_summary_with_a_page_per_target(built: dict) -> None:
    out = Path(built["out_dir"])
    summary = built["matrix"].summary
    text = (out / "MATRIX.md").read_text()
    for target in summary.target:
        assert f"({report_page(target)})" in text, target
    assert len(list((out / "matrix").glob("*.md"))) == len(summary)


def report_page(target: str) -> str:
    from fleetprobe.analysis.sections.matrix import pages

    return pages.page_name(target)


@committed
def test_fig2_caption_gives_the_n_of_the_bars_it_draws(tmp_path: Path) -> None:
    results = Results.load(TRACES, experiments=("leakage",))
    try:
        figure = leakage.fig2_leakage_envelope(results, tmp_path)
        frame = leakage._leakage_rates(results)
    finally:
        results.con.close()
    for (axis, signal), part in frame.groupby(["axis", "signal"]):
        said = re.search(rf"{re.escape(axis)} {signal} n = (\d+)(?:-(\d+))?", figure.caption)
        assert said, (axis, signal, figure.caption)
        low, high = int(said[1]), int(said[2] or said[1])
        assert (low, high) == (int(part.n.min()), int(part.n.max())), (axis, signal)


def test_n_range_and_the_runs_whose_n_differs() -> None:
    import pandas as pd

    frame = pd.DataFrame({"axis": ["a"] * 3, "signal": ["x"] * 3, "profile": ["p", "q", "r"],
                          "n": [164, 164, 10]})
    text = figures.n_by_group(frame, ["axis", "signal"], "profile")
    assert text == "a x n = 10-164 (n differs for r: 10)"
    assert figures.n_range([5, 5]) == "5"


@pytest.mark.parametrize(("kind", "url", "comparable"), [
    ("reference", "http://127.0.0.1:8765", False), ("engine", "http://127.0.0.1:9000", False),
    ("live", "http://localhost:8000", False), ("live", "https://memclaw.net", True)])
def test_a_latency_figure_says_whether_it_compares(kind: str, url: str,
                                                   comparable: bool) -> None:
    fig, ax = plt.subplots()
    run = SimpleNamespace(target_kind=kind, base_url=url, run_id="r", profile="p")
    sentence = figures.latency_comparison(ax, run, {"p50": 296.0, "p95": 491.0})
    paper_lines = [line for line in ax.get_lines()
                   if str(line.get_label()).startswith("paper ")]
    marked = any(figures.NOT_COMPARABLE_MARK in t.get_text() for t in ax.texts)
    plt.close(fig)
    assert marked is not comparable and (figures.NOT_COMPARABLE_MARK in sentence) is not \
        comparable
    assert len(paper_lines) == (2 if comparable else 0)
    assert "p50 296 ms" in sentence


@committed
def test_latency_figures_of_loopback_runs_are_marked(built: dict) -> None:
    for name in ("fig3_search_latency", "fig4_hop_latency", "fig6_window",
                 "fig7_write_latency"):
        figure = built["figures"][name]
        if figure.paths:
            assert figures.NOT_COMPARABLE_MARK in figure.caption, name
