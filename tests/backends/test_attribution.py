"""Attribution of backend gaps is a rule over what the trace recorded (the request's named
fleets, the row's observed fleet and visibility, who asked), one cause per gap."""

from __future__ import annotations

import pytest

from fleetprobe.analysis.sections.backends import GAP_CLASSES, classify_gap

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
