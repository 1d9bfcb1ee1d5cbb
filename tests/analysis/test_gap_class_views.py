"""Gap classes are SQL views (metrics.sql `backend_gap_classes`, `backend_gap_class_counts`):
each gap of a matrix run gets the first cause whose rule holds over what its trace recorded
(the request's named fleets, the row's observed fleet and visibility, who asked and its home
fleet). The views' own text runs here over hand-built events whose causes are known."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from fleetprobe.analysis.base import sql_views
from fleetprobe.analysis.base.results import Results

TRACES = Path(__file__).resolve().parents[2] / "data" / "traces"
VIEWS = ("backend_matrix_attribution", "backend_gap_classes", "backend_gap_class_counts")

# (path, fleets named, row's fleet, visibility, cross-tenant, principal, home) -> cause rank
CASES = [
    (("get", None, "fleet-1", "scope_team", True, "other tenant", None), 1),
    (("get", None, "fleet-1", "scope_agent", False, "t1 same_fleet", None), 2),
    (("delete", None, "fleet-2", "scope_team", False, "t0 other_fleet", None), 2),
    (("search_fleet", "fleet-1", "fleet-10", "scope_team", False, "t1 prefix_fleet", None), 3),
    (("search_fleet", "fleet-1", "fleet-1", "scope_agent", False, "t1 same_fleet", None), 4),
    (("search_fleets", "fleet-2,fleet-3", "fleet-3", "scope_team", False, "t0 other", None), 5),
    (("search", None, "fleet-2", "scope_team", False, "tenant key", None), 6),
    (("search_singular", None, "fleet-2", "scope_team", False, "t1 other_fleet", None), 6),
    (("search", None, "fleet-1", "scope_agent", False, "t1 same_fleet", None), 7),
    (("search", None, "fleet-10", "scope_team", False, "t1 prefix", "fleet-1"), 3),
    (("list", None, "fleet-1", "scope_team", False, "t0 same_fleet", None), 8),
    (("search_fleet", "fleet-2", "fleet-10", "scope_team", False, "t1 other", None), 9),
    (("write", None, "fleet-4", "scope_team", False, "t0 other_fleet", None), 10),
    (("after_redistribute", None, "fleet-1", "scope_agent", False, "t1 same_fleet", None), 11),
    (("dup_exact", None, "fleet-1", "scope_team", False, "t1 same_fleet", None), 12),
]


def _events(cases: list[tuple[tuple, int]], verdict: str = "gap") -> duckdb.DuckDBPyConnection:
    """A connection with `events` and `runs` holding one matrix run whose probes are `cases`
    (a verdict, its probe, the row's census and the asker's census each), and the views."""
    con = duckdb.connect(":memory:")
    con.execute("""CREATE TABLE events (run_id VARCHAR, experiment VARCHAR, phase VARCHAR,
        probe_id VARCHAR, path VARCHAR, principal VARCHAR, visibility VARCHAR,
        expected VARCHAR, verdict VARCHAR, cross_tenant BOOLEAN, fleets VARCHAR,
        returned BOOLEAN, row_key VARCHAR, fleet VARCHAR, who VARCHAR, home VARCHAR,
        step VARCHAR)""")
    con.execute("CREATE TABLE runs AS SELECT 'run-1' AS run_id, 'backend-x' AS profile")
    for i, ((path, fleets, row_fleet, visibility, crossing, principal, home), _) in enumerate(
            cases):
        probe, row, who = f"p{i:02d}", f"row-{i}", f"agent-{i}"
        for values in (
                ("verdict", probe, path, principal, visibility, "deny", verdict, crossing,
                 None, None, None, None, None, None, None),
                ("probe", probe, path, None, None, None, None, None, fleets, True, row, None,
                 who, None, None),
                ("census_row", None, None, None, None, None, None, None, None, None, row,
                 row_fleet, None, None, None),
                ("census_agent", None, None, None, None, None, None, None, None, None, None,
                 None, who, home, "before")):
            con.execute("INSERT INTO events VALUES ('run-1', 'matrix', "
                        + ", ".join(["?"] * len(values)) + ")", list(values))
    statements = sql_views.view_statements()
    for view in VIEWS:
        con.execute(statements[view])
    return con


def test_each_rule_gives_its_cause() -> None:
    con = _events(CASES)
    got = con.execute("SELECT cause_rank FROM backend_gap_classes ORDER BY probe_id").fetchall()
    assert [r for (r,) in got] == [rank for _, rank in CASES]
    causes = dict(con.execute("SELECT DISTINCT cause_rank, cause FROM backend_gap_classes")
                  .fetchall())
    assert causes[3].startswith("prefix sibling") and causes[12] == "other"


def test_only_gaps_are_classed_and_the_counts_sum_to_them() -> None:
    con = _events(CASES[:3], verdict="miss")
    assert con.execute("SELECT count(*) FROM backend_gap_classes").fetchone() == (0,)
    con = _events(CASES)
    counts = con.execute("SELECT cause_rank, gaps FROM backend_gap_class_counts "
                         "ORDER BY cause_rank").fetchall()
    assert sum(g for _, g in counts) == len(CASES)
    assert dict(counts)[2] == 2 and dict(counts)[6] == 2 and dict(counts)[3] == 2


def test_committed_runs_causes_sum_to_each_runs_gaps() -> None:
    """Every committed matrix run (bundled profiles and backends): its causes sum to the
    matrix gaps metrics.sql counts for it, and no gap is left without a cause."""
    results = Results.load(TRACES, experiments=("matrix",))
    try:
        con = results.con
        by_run = dict(con.execute("SELECT run_id, sum(gaps) FROM backend_gap_class_counts "
                                  "GROUP BY run_id").fetchall())
        if not by_run:
            pytest.skip("no matrix runs committed")
        gaps = dict(con.execute("SELECT run_id, count(*) FROM backend_matrix_attribution "
                                "WHERE verdict = 'gap' GROUP BY run_id").fetchall())
        assert by_run == gaps
        assert con.execute("SELECT count(*) FROM backend_gap_classes WHERE cause IS NULL"
                           ).fetchone() == (0,)
    finally:
        results.con.close()
