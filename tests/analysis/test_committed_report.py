"""The committed report is exactly what the committed traces produce (`make report`), and the
committed traces hold the paper-scale run set `make reproduce` makes. A reviewer can trust
reports/ without rerunning anything, and this test is what says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetprobe.analysis.report import build

REPO = Path(__file__).resolve().parents[2]
TRACES = REPO / "data" / "traces"
COMMITTED = REPO / "reports"

pytestmark = pytest.mark.skipif(not any(TRACES.glob("*/manifest.json")),
                                reason="no committed traces under data/traces")


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reports")
    build(TRACES, out)
    return out


def test_reproduction_page_matches_the_traces(regenerated: Path) -> None:
    assert (regenerated / "REPRODUCTION.md").read_text() == \
        (COMMITTED / "REPRODUCTION.md").read_text()


def test_every_committed_table_matches_the_traces(regenerated: Path) -> None:
    # long tables are written in parts under tables/<name>/, so every file below tables/
    def files(root: Path) -> list[str]:
        return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())

    committed = files(COMMITTED / "tables")
    assert committed == files(regenerated / "tables")
    for name in committed:
        assert (regenerated / "tables" / name).read_text() == \
            (COMMITTED / "tables" / name).read_text(), name


def test_committed_runs_cover_every_profile_and_experiment() -> None:
    manifests = [json.loads(p.read_text()) for p in TRACES.glob("*/manifest.json")]
    covered = {(m["experiment"], m["target"]["server_profile"]) for m in manifests
               if m["complete"]}
    experiments = ("leakage", "contradiction", "provenance", "propagation")
    profiles = ("memclaw-2026-05-30", "memclaw-2026-05-31", "proposed", "naive")
    assert {(e, p) for e in experiments for p in profiles} <= covered


def test_every_committed_figure_is_regenerated(regenerated: Path) -> None:
    # Names only: pixels depend on the installed matplotlib and fonts, numbers do not.
    assert sorted(p.name for p in (COMMITTED / "figures").iterdir()) == \
        sorted(p.name for p in (regenerated / "figures").iterdir())


def test_committed_page_has_the_verdicts_the_traces_give(regenerated: Path) -> None:
    """index.html's verdict table is the one the traces give (links to the trace folders are
    relative to the page, so they are compared as seen from reports/)."""
    import os

    def verdicts(page: Path, traces_link: str) -> str:
        text = page.read_text().replace(traces_link, "../data/traces")
        start = text.index("<h2 id='verdict'>")
        return text[start:text.index("<h2", start + 1)]

    fresh = Path(os.path.relpath(TRACES.resolve(), regenerated.resolve())).as_posix()
    assert verdicts(regenerated / "index.html", fresh) == \
        verdicts(COMMITTED / "index.html", "../data/traces")
