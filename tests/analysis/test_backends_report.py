"""The backends table from hand-built traces (no backend installed, no server): counts known
by construction, not-applicable probes kept out of every rate, and the section says what to
run when there are no backend runs."""

from __future__ import annotations

from pathlib import Path

from fleetprobe.analysis import report
from fleetprobe.analysis.base.results import Results
from fleetprobe.analysis.sections.backends import NO_RUNS, backends_table

from .fixtures.builders import write_run

NA = "not supported by this backend (mem0): POST /memories/redistribute: no re-homing"


def _probe(axis: str, expected: str, returned: bool) -> dict:
    return {"phase": "probe", "axis": axis, "expected": expected, "returned": returned,
            "leak": returned and expected == "deny",
            "miss": (not returned) and expected == "allow", "credential": "tenant",
            "status": 200, "secret_id": "s1",
            "op": "POST /api/v1/search" if axis == "search" else "GET /api/v1/memories/m1",
            "relation": "cross_fleet",
            "variant_search": "fleet_ids", "prober_agent": "a1", "prober_fleet": "f0"}


def _backend_runs(root: Path) -> None:
    write = {"phase": "write", "secret_id": "s1", "secret_scope": "fleet", "status": 201,
             "writer_agent": "a0", "writer_fleet": "f1", "variant_write": "fleet_id"}
    probes = [_probe("search", "deny", True)] * 3 + [_probe("search", "deny", False)] * 7
    probes += [_probe("get", "deny", True)] * 10
    write_run(root, "r-leak", "leakage", [write, *probes], profile="backend-mem0",
              kind="backend")
    redistribute = {"phase": "redistribute", "status": 501, "flipped": None,
                    "not_applicable": NA}
    sibling = {"phase": "probe", "reader_relation": "sibling", "visible": True, "status": 200}
    write_run(root, "r-prop", "propagation", [redistribute] * 3 + [sibling] * 4,
              profile="backend-mem0", kind="backend")


def test_backends_table_rows(tmp_path: Path) -> None:
    _backend_runs(tmp_path)
    results = Results.load(tmp_path)
    try:
        frame = backends_table(results, tmp_path).frame.set_index("metric")
    finally:
        results.con.close()
    leak = frame.loc["search leak (expected-deny probes that returned it; documented variant)"]
    assert leak.applicability == "applicable" and leak.result.startswith("3/10 = 0.300")
    assert frame.loc["GET-by-id exposure, tenant key (expected deny)"].result.startswith("10/10")
    moved = frame.loc["redistribute re-homes the row"]
    assert moved.applicability == "not applicable" and moved.result == "-"
    assert moved.not_applicable.startswith("3: not supported by this backend")
    assert frame.loc["sibling sees the fleet fact"].result.startswith("4/4")


def test_report_without_backend_runs_says_what_to_run(tmp_path: Path) -> None:
    (tmp_path / "traces").mkdir()
    built = report.build(tmp_path / "traces", tmp_path / "out")
    assert NO_RUNS in built["notes"]
    assert NO_RUNS in (tmp_path / "out" / "tables" / "backends.md").read_text()
    assert "make backends" in (tmp_path / "out" / "backends_repro.md").read_text()


def test_report_with_backend_runs_writes_table_figure_and_reproduction(tmp_path: Path) -> None:
    _backend_runs(tmp_path / "traces")
    built = report.build(tmp_path / "traces", tmp_path / "out")
    assert not built["tables"]["backends"].empty
    assert built["sections"]["backends"].runs
    assert (tmp_path / "out" / "figures" / "backends_leakage.png").is_file()
    repro = (tmp_path / "out" / "backends_repro.md").read_text()
    assert "## mem0: search" in repro and "## mem0: get" in repro
    assert "strands-agents/tools#596" in repro
