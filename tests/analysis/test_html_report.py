"""index.html: one verdict row per claim, every section's tables and figures, and sections
that report modules register, whether they name build outputs or files they wrote."""

from __future__ import annotations

import re

import pytest

from fleetprobe.analysis import html_report, report
from fleetprobe.analysis.base import sql_views


@pytest.fixture()
def registered():
    saved = list(html_report.SECTIONS)
    yield html_report.register
    html_report.SECTIONS[:] = saved


def test_page_has_a_row_per_claim_and_every_figure(fixture_traces, tmp_path):
    built = report.build(fixture_traces[0], tmp_path)
    page = built["index"].read_text()
    assert page.count("<tr class='claim'") == len(built["verdicts"])
    for name, figure in built["figures"].items():
        assert f"src='figures/{name}.png'" in page
        assert figure.caption and "n = " in figure.caption
        assert figure.views and set(figure.views) <= set(sql_views.view_statements())
    for status in {v.status for v in built["verdicts"]}:
        assert f"class='status {status.replace(' ', '-')}'" in page
    assert "https://" not in page and "http://" not in page  # nothing to fetch
    assert re.search(r"href='\.\./[^']*/'", page)  # trace folders, relative to the page
    assert "<details class='sql'>" in page


def test_a_registered_section_shows_its_files_and_says_what_is_missing(fixture_traces, tmp_path,
                                                                      registered):
    (tmp_path / "tables").mkdir(parents=True)
    (tmp_path / "tables" / "gap_catalogue.csv").write_text("gap,count\nget_by_id,3\n")
    registered(html_report.Section(
        "matrix", "Governance matrix", "Every principal x path x scope.",
        tables=("gap_catalogue", "not_written"), figures=("matrix_heatmap",),
        notes=(("gap_catalogue", "Gaps by path."),)))
    built = report.build(fixture_traces[0], tmp_path)
    page = built["index"].read_text()
    section = page[page.index("<h2 id='matrix'>"):]
    assert "get_by_id" in section and "Gaps by path." in section
    assert "not_written: not produced." in section
    assert "matrix_heatmap: not produced." in section
    assert "href='#matrix'" in page
