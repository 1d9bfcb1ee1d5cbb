"""Attribution of backend gaps is a rule over what the trace recorded, one cause per gap (the
rule itself: metrics.sql backend_gap_classes, tests/analysis/test_gap_class_views.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetprobe.analysis.base.results import Results
from fleetprobe.analysis.sections import backends

TRACES = Path(__file__).resolve().parents[2] / "data" / "traces"


@pytest.mark.parametrize(("path", "name"), [
    ("get", "read by id"), ("search_fleets", "search / recall"), ("recall_agent",
    "search / recall"), ("list_deleted", "list"), ("patch_content", "change by id"),
    ("delete", "change by id"), ("bulk_write", "write"), ("dup_near_fleet", "reveal"),
    ("idempotency", "reveal"), ("contradictions", "other"), ("whoami", "other")])
def test_path_families(path: str, name: str) -> None:
    assert backends.family(path) == name


def test_gap_causes_are_checked_against_the_gap_count() -> None:
    """The committed backend matrix runs: each run's causes sum to its gap count, and a
    cause table that lost or gained a gap is refused (the report fails, it never prints it)."""
    results = Results.load(TRACES, experiments=("matrix",))
    try:
        classes, _ = backends.attribution_tables(results, TRACES)
        if classes.empty:
            pytest.skip("no backend matrix runs committed")
        frame = classes.frame.set_index("cause")
        label = frame.columns[0]
        runs = backends._backend_matrix_runs(results)
        label_of = dict(zip(runs.run_id, runs.profile, strict=False))
        counts = frame.drop(index="all gaps")
        backends._check_classes(results, counts, label_of)  # as built: consistent
        counts.loc[counts[label].idxmax(), label] += 1
        with pytest.raises(ValueError, match="gap causes sum to"):
            backends._check_classes(results, counts, label_of)
    finally:
        results.con.close()
