"""reports/index.html in a real headless Chromium (Debian's `chromium`, driven by Playwright's
Python package; `make test-browser` installs both): the page loads from file:// with no
console errors and no request leaving the file system, every image loads, and the verdict
table has one row per claim. A screenshot is kept in build/browser/ (gitignored).

Skipped when Chromium or Playwright is missing, unless FLEETPROBE_REQUIRE_BROWSER=1 (set by
`make test-browser`), where a missing browser is a failure.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from fleetprobe.analysis import report, sections
from fleetprobe.analysis.base.claims import ALL_STATUSES
from fleetprobe.analysis.base.results import load_paper_values

REPO = Path(__file__).resolve().parents[2]
TRACES = REPO / "data" / "traces"
COMMITTED = REPO / "reports"
ARTEFACTS = REPO / "build" / "browser"
CHROMIUM = Path(os.environ.get("FLEETPROBE_CHROMIUM", "/usr/bin/chromium"))
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = pytest.mark.browser


def _require_browser():
    required = os.environ.get("FLEETPROBE_REQUIRE_BROWSER") == "1"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if required:
            pytest.fail("the playwright package is not installed (make test-browser)")
        pytest.skip("playwright not installed: run make test-browser")
    if not CHROMIUM.is_file():
        if required:
            pytest.fail(f"{CHROMIUM} is missing (make test-browser installs Debian's chromium)")
        pytest.skip(f"{CHROMIUM} missing: run make test-browser")
    return sync_playwright


@pytest.fixture(scope="module")
def browser_page(tmp_path_factory):
    """open(path, shot) -> what the page showed, in a fresh Chromium profile."""
    sync_playwright = _require_browser()
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile), executable_path=str(CHROMIUM), headless=True, args=FLAGS,
            viewport={"width": 1400, "height": 1000})
        try:
            def open_page(path: Path, shot: str) -> dict:
                page = context.new_page()
                errors: list[str] = []
                outside: list[str] = []
                page.on("console", lambda m: errors.append(m.text) if m.type == "error"
                        else None)
                page.on("pageerror", lambda e: errors.append(str(e)))

                def only_files(route):
                    if route.request.url.startswith(("file:", "data:")):
                        route.continue_()
                    else:
                        outside.append(route.request.url)
                        route.abort()

                page.route("**/*", only_files)
                page.goto(path.resolve().as_uri(), wait_until="load")
                images = page.evaluate(
                    "Array.from(document.images).map(i => [i.getAttribute('src'), "
                    "i.complete && i.naturalWidth])")
                shown = {
                    "errors": errors, "outside": outside, "images": images,
                    "claims": page.locator("#verdict-table tbody tr.claim").count(),
                    "statuses": page.locator("#verdict-table td.status").all_inner_texts(),
                    "title": page.title(),
                    # every link of the navigation, and whether its target is on the page
                    "nav": page.evaluate(
                        "Array.from(document.querySelectorAll('nav a')).map(a => "
                        "[a.getAttribute('href').slice(1), "
                        "!!document.getElementById(a.getAttribute('href').slice(1))])"),
                    "notebook_links": page.evaluate(
                        "Array.from(document.querySelectorAll('p.links a'))"
                        ".map(a => a.getAttribute('href')).filter(h => h.endsWith('.ipynb'))"),
                    "cards": page.locator("#summary ~ .cards .card").count(),
                }
                ARTEFACTS.mkdir(parents=True, exist_ok=True)
                # the page's top 16,000 px: Chromium cannot capture a taller one at once
                width, height = page.evaluate(
                    "[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
                page.screenshot(path=str(ARTEFACTS / shot), full_page=True, clip={
                    "x": 0, "y": 0, "width": width, "height": min(height, 16_000)})
                page.close()
                return shown
            yield open_page
        finally:
            context.close()


def _check(shown: dict, claims: int | None = None) -> None:
    assert shown["errors"] == []
    assert shown["outside"] == [], "the page must not reach the network"
    assert all(width for _, width in shown["images"]), \
        [src for src, width in shown["images"] if not width]
    if claims is not None:
        assert shown["claims"] == claims
    assert set(shown["statuses"]) <= set(ALL_STATUSES)


def _linked_pages(browser_page, index: Path) -> dict[str, dict]:
    """Every other page beside index.html (section-*.html, verdicts-*.html), each checked as
    index.html is: it loads from file:// alone, every image it shows loads."""
    shown = {}
    for page in sorted(index.parent.glob("*.html")):
        if page != index:
            shown[page.name] = browser_page(page, f"{page.stem}.png")
            _check(shown[page.name])
    return shown


def _own(verdicts, built_or_claims) -> int:
    own = set(built_or_claims)
    return sum(v.profile in own for v in verdicts)


@pytest.mark.skipif(not any(TRACES.glob("*/manifest.json")), reason="no committed traces")
def test_a_fresh_report_renders_in_chromium(browser_page, tmp_path):
    out = tmp_path / "reports"
    built = report.build(TRACES, out)
    shown = browser_page(built["index"], "index.png")
    own = _own(built["verdicts"], built["claim_profiles"])
    _check(shown, own)
    others = _linked_pages(browser_page, built["index"])
    assert own + sum(p["claims"] for p in others.values()) == len(built["verdicts"])
    assert {f"section-{key}.html" for key in sections.REGISTRY} <= set(others)
    assert len(shown["images"]) == sum(bool(f.paths) for f in built["figures"].values()) > 0
    assert "paper versus reproduction" in shown["title"]
    # the page opens on the summary, and its navigation reaches every section
    assert shown["nav"][0] == ["summary", True]
    assert all(found for _, found in shown["nav"]), shown["nav"]
    assert set(sections.REGISTRY) <= {key for key, _ in shown["nav"]}
    assert shown["cards"] == built["canonical"].profile.nunique() > 0


def test_the_page_of_no_runs_renders_too(browser_page, tmp_path):
    traces = tmp_path / "traces"
    traces.mkdir()
    built = report.build(traces, tmp_path / "reports")
    shown = browser_page(built["index"], "index-no-runs.png")
    _check(shown, len(load_paper_values()["claims"]))
    assert shown["images"] == []


@pytest.mark.skipif(not (COMMITTED / "index.html").is_file(), reason="no committed page")
def test_the_committed_page_renders_in_chromium(browser_page, tmp_path):
    copy = tmp_path / "reports"
    shutil.copytree(COMMITTED, copy, ignore=shutil.ignore_patterns("*.ipynb"))
    shown = browser_page(copy / "index.html", "committed-index.png")
    # one row per claim and target label the committed traces hold, over the pages
    fresh = report.build(TRACES, tmp_path / "fresh")
    others = _linked_pages(browser_page, copy / "index.html")
    _check(shown, _own(fresh["verdicts"], fresh["claim_profiles"]))
    assert shown["claims"] + sum(p["claims"] for p in others.values()) == \
        len(fresh["verdicts"])
    assert shown["images"]
    # each experiment's section page links its executed notebook, committed beside it
    expected = {p.name for p in COMMITTED.glob("*.ipynb")} - {"report.ipynb"}
    linked = {link for p in others.values() for link in p["notebook_links"]}
    assert expected and expected <= linked
