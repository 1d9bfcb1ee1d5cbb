"""The dynamics timelines drawn on one shared figure (their rows, legend and row labels made
and drawn once) are the same files as timelines drawn each on a new figure."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetprobe.analysis.base.results import Results
from fleetprobe.analysis.sections import dynamics

TRACES = Path(__file__).resolve().parents[2] / "data/traces"


@pytest.fixture(scope="module")
def results():
    results = Results.load(TRACES, experiments=["dynamics"])
    yield results
    results.con.close()


def test_a_shared_canvas_draws_the_same_files(results, tmp_path):
    runs = dynamics.canonical_runs(results)
    if len(runs) < 2:
        pytest.skip("the committed traces hold fewer than two dynamics runs")
    # a run with no judged answer between two with answers: the x axis is scaled anew
    targets = [(r.run_id, r.profile, r.target_kind) for r in runs.head(2).itertuples()]
    targets.insert(1, ("no-such-run", "nothing", "reference"))
    targets.append((runs.run_id.iloc[0], "again", "backend"))
    fresh, shared = tmp_path / "fresh", tmp_path / "shared"
    fresh.mkdir()
    shared.mkdir()
    canvas = dynamics.TimelineCanvas()
    for run_id, label, kind in targets:
        one = dynamics.timeline_figure(results, run_id, label, fresh, kind)
        other = dynamics.timeline_figure(results, run_id, label, shared, kind, canvas)
        assert one.caption == other.caption
        assert one.paths[0].read_bytes() == other.paths[0].read_bytes(), label
    assert canvas.series.pasted == len(targets) - 1  # the row labels and legend were stamped
