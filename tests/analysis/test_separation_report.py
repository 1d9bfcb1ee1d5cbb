"""The separation section of the report: 'no runs yet' without runs; with runs, one figure
(png + pdf) and one table whose numbers are the metric views'."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetprobe import load_params, run_experiment
from fleetprobe.analysis import report
from fleetprobe.analysis.base.results import Results
from fleetprobe.analysis.sections import separation as separation_report

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("separation-traces")
    for profile in ("memclaw-2026-05-31", "naive"):
        run_experiment("separation", load_params(
            REPO / "params/smoke/separation.yaml",
            [f"traces_root={root}", f"target.profile={profile}", "accounts=10"]))
    return root


def test_without_runs_the_section_says_so(tmp_path: Path) -> None:
    (tmp_path / "traces").mkdir()
    built = report.build(tmp_path / "traces", tmp_path / "out")
    section = built["separation"]
    assert section.empty and section.note == separation_report.NO_RUNS
    assert separation_report.NO_RUNS in built["notes"]
    md = (tmp_path / "out/tables/separation.md").read_text()
    assert "No separation runs yet" in md and "without a language model" in md
    assert not (tmp_path / "out/figures/fig_separation_contamination.png").exists()


def test_with_runs_the_figure_and_table_show_each_target(traces: Path, tmp_path: Path) -> None:
    built = report.build(traces, tmp_path / "out")
    section = built["separation"]
    assert list(section.table.target) == ["memclaw-2026-05-31", "naive"]
    assert {p.suffix for p in section.figure.paths} == {".png"}  # an instrument figure
    assert all(p.stat().st_size > 1000 for p in section.figure.paths)
    assert "n = " in section.caption
    row = section.table.set_index("target")
    reserved = "reserved types refused (422 INVALID_ARGUMENTS, route named)"
    assert row.loc["memclaw-2026-05-31", reserved].startswith("9/9")
    absence = "absence: no record in authorized partitions (Vera, hold-only)"
    k, n = row.loc["memclaw-2026-05-31", absence].split(" ")[0].split("/")
    assert k == n and int(n) > 0
    assert row.loc["naive", absence].startswith("0/")
    md = (tmp_path / "out/tables/separation.md").read_text()
    assert "clear across domains" in md and "without a language model" in md
    # the figure's numbers are the view's
    results = Results.load(traces)
    frame = separation_report.contamination_frame(
        results.con, separation_report.pick_runs(results.runs))
    governed = frame[frame.target == "memclaw-2026-05-31"]
    assert (governed.k == 0).all() and (governed.n > 0).all()
    assert frame[frame.target == "naive"].k.sum() > 0
