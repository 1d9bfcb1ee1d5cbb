"""Attribution of backend gaps is a rule over what the trace recorded (the request's named
fleets, the row's observed fleet and visibility, who asked), one cause per gap."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetprobe.analysis.base.results import Results
from fleetprobe.analysis.sections import backends
from fleetprobe.analysis.sections.backends import GAP_CLASSES, classify_gap

TRACES = Path(__file__).resolve().parents[2] / "data" / "traces"

CASES = [
    # (path, fleets named, row's fleet, visibility, cross-tenant, principal) -> cause
    (("get", None, "fleet-1", "scope_team", True, "other tenant"), 0),
    (("get", None, "fleet-1", "scope_agent", False, "t1 same_fleet"), 1),
    (("delete", None, "fleet-2", "scope_team", False, "t0 other_fleet"), 1),
    (("search_fleet", "fleet-1", "fleet-10", "scope_team", False, "t1 prefix_fleet"), 2),
    (("search_fleet", "fleet-1", "fleet-1", "scope_agent", False, "t1 same_fleet"), 3),
    (("search_fleets", "fleet-2,fleet-3", "fleet-3", "scope_team", False, "t0 other"), 4),
    (("search", None, "fleet-2", "scope_team", False, "tenant key"), 5),
    (("search_singular", None, "fleet-2", "scope_team", False, "t1 other_fleet"), 5),
    (("search", None, "fleet-1", "scope_agent", False, "t1 same_fleet"), 6),
    (("search", None, "fleet-10", "scope_team", False, "t1 prefix", "fleet-1"), 2),
    (("list", None, "fleet-1", "scope_team", False, "t0 same_fleet"), 7),
    (("search_fleet", "fleet-2", "fleet-10", "scope_team", False, "t1 other"), 8),
    (("write", None, "fleet-4", "scope_team", False, "t0 other_fleet"), 9),
    (("after_redistribute", None, "fleet-1", "scope_agent", False, "t1 same_fleet"), 10),
    (("dup_exact", None, "fleet-1", "scope_team", False, "t1 same_fleet"), 11),
]


@pytest.mark.parametrize(("gap", "expected"), CASES)
def test_each_rule(gap: tuple, expected: int) -> None:
    assert classify_gap(*gap) == GAP_CLASSES[expected]


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
