"""index.html: a summary first, one verdict row per claim, then every registered section with
its tables and figures, whether they are build outputs or files the section wrote."""

from __future__ import annotations

import re

import pandas as pd

from fleetprobe.analysis import html_report, report, sections
from fleetprobe.analysis.base import html, sql_views
from fleetprobe.analysis.base.tables import Table


def _pages(out_dir) -> str:
    """index.html and every page it links (sections, other labels' verdicts), joined."""
    return "".join(p.read_text() for p in sorted(out_dir.glob("*.html")))


def test_page_has_a_row_per_claim_and_every_figure(fixture_traces, tmp_path):
    built = report.build(fixture_traces[0], tmp_path)
    page = built["index"].read_text()
    pages = _pages(tmp_path)
    assert pages.count("<tr class='claim'") == len(built["verdicts"])
    own = set(built["claim_profiles"])
    assert page.count("<tr class='claim'") == sum(v.profile in own for v in built["verdicts"])
    for label in {v.profile for v in built["verdicts"]} - own:
        assert f"href='{html_report.verdict_page(label)}'" in page, label
    for name, figure in built["figures"].items():
        if not figure.paths:  # e.g. no backend runs in the fixture: the section says so
            assert figure.note and f"id='fig-{name}'" in page
            continue
        assert f"src='figures/{name}.png'" in page
        assert figure.caption and "n = " in figure.caption
        assert figure.views and set(figure.views) <= set(sql_views.view_statements())
    for status in {v.status for v in built["verdicts"]}:
        assert f"class='status {status.replace(' ', '-')}'" in page
    assert "https://" not in pages and "http://" not in pages  # nothing to fetch
    assert re.search(r"href='\.\./[^']*/'", page)  # trace folders, relative to the page
    assert "<details class='sql' id='sql-" in pages
    for key in built["sections"]:  # every view a section links is printed on its page
        section_page = (tmp_path / html_report.section_page(key)).read_text()
        for view in re.findall(r"href='#sql-(\w+)'", section_page):
            assert f"id='sql-{view}'" in section_page, (key, view)


def test_the_page_opens_on_a_summary_and_reaches_every_section(fixture_traces, tmp_path):
    built = report.build(fixture_traces[0], tmp_path)
    page = built["index"].read_text()
    nav = page[page.index("<nav>"):page.index("</nav>")]
    assert nav.index("href='#summary'") < nav.index("href='#verdict-table-heading'")
    for key, section in built["sections"].items():
        assert f"href='#{key}'" in nav and f"<h2 id='{key}'>" in page, key
        own_page = (tmp_path / html_report.section_page(key)).read_text()
        assert section.html and section.html in own_page, key
        assert f"href='{html_report.section_page(key)}'" in page, key
    assert list(built["sections"]) == list(sections.REGISTRY)
    summary = page[page.index("<h2 id='summary'>"):page.index("<h2 id='verdict-table-heading'>")]
    statuses = {v.status for v in built["verdicts"]}
    for status in statuses:
        count = sum(v.status == status for v in built["verdicts"])
        assert f"class='status {status.replace(' ', '-')}'>{count}</td>" in summary
    differing = [v for v in built["verdicts"] if v.status == "differs"]
    assert differing and all(f"href='#claim-{v.claim_id}'" in summary for v in differing
                             if v.profile in built["claim_profiles"])
    for label in set(built["canonical"].profile):
        assert f"<h3>{label}</h3>" in summary


def test_a_section_shows_its_files_and_says_what_is_missing(tmp_path):
    frame = pd.DataFrame({"gap": ["get_by_id"], "count": [3]})
    tables = {"gap_catalogue": Table("gap_catalogue", "gap catalogue", frame, "Gaps by path.",
                                     formats=("csv",))}
    body = html.section_body(
        "Every principal x path x scope.", "9.1", tables, {}, tmp_path, tmp_path / "traces",
        notebook="matrix.ipynb", views=("matrix_summary",), runs=("run-a",),
        table_names=("gap_catalogue", "not_written"), figure_names=("matrix_heatmap",))
    assert "get_by_id" in body and "Gaps by path." in body
    assert "tables/gap_catalogue.csv" in body and "gap_catalogue.md" not in body
    assert "not_written: not produced." in body
    assert "matrix_heatmap: not produced." in body
    assert "<a href='matrix.ipynb'>matrix.ipynb</a>" in body
    assert "href='traces/run-a/'" in body and "href='#sql-matrix_summary'" in body
    assert "CREATE VIEW matrix_summary" in sql_views.appendix_html(["matrix_summary"])
