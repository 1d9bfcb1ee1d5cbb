"""The backends table from hand-built traces (no backend installed, no server): counts known
by construction, not-applicable probes kept out of every rate, and the section says what to
run when there are no backend runs."""

from __future__ import annotations

import io
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
    assert "1. `POST /api/v1/memories` as `a0` (fleet `f1`), a fleet-scoped row." in repro
    assert "strands-agents/tools#596" in repro


def _matrix_run(root: Path, run_id: str, deployment: str, gaps: dict[str, int]) -> None:
    """A mem0 matrix run: per path, `gaps` of 4 judged probes returned a denied row (the
    first of them by the other tenant on `get`), the rest withheld it."""
    events: list[dict] = [
        {"phase": "census_agent", "step": "before", "who": "A.f0t1", "tenant": "A",
         "credential": "agent", "trust": 1, "home": "fleet-1", "source": "plan"},
        {"phase": "census_row", "row_key": "r1", "tenant": "A", "fleet": "fleet-10",
         "visibility": "scope_team", "owner": "A.f1t1", "deleted": False, "source": "get"}]
    for path, k in gaps.items():
        for i in range(4):
            pid = f"e-{path}-{i}"
            crossing = path == "get" and i == 0
            events.append({"phase": "probe", "probe_id": pid, "path": path, "who": "A.f0t1",
                           "row_key": "r1", "fleets": "fleet-1" if path != "get" else None,
                           "returned": i < k, "status": 200})
            events.append({"phase": "verdict", "probe_id": pid, "path": path,
                           "principal": "other tenant" if crossing else "t1 other_fleet",
                           "relation": "other_tenant" if crossing else "other_fleet",
                           "visibility": "scope_team", "expected": "deny",
                           "verdict": "gap" if i < k else "ok", "cross_tenant": crossing})
    target = {"kind": "backend", "base_url": "http://127.0.0.1:1", "tenant_id": "t",
              "server_profile": "backend-mem0", "label": f"backend-mem0[{deployment}]",
              "backend": "mem0", "backend_version": "2.2.1", "backend_deployment": deployment,
              "backend_store": "Memory(qdrant local, on disk)",
              "backend_env": {"packages": {"mem0ai": "2.2.1"}}}
    write_run(root, run_id, "matrix", events, profile=f"backend-mem0[{deployment}]",
              kind="backend", manifest_extra={"target": target})


def test_rates_side_by_side_and_causes_checked(tmp_path: Path) -> None:
    """Per backend x store x version and path family, idiomatic beside strict, k/n with
    Wilson intervals; the cross-tenant probes apart; the causes sum to the gaps."""
    from fleetprobe.analysis.sections import backends

    _matrix_run(tmp_path, "r-idiomatic", "idiomatic", {"get": 3, "search_fleet": 1})
    _matrix_run(tmp_path, "r-strict", "strict", {"get": 0, "search_fleet": 0})
    results = Results.load(tmp_path, experiments=("matrix",))
    try:
        judged = backends.judged_probes(results, tmp_path)
        rates = backends.rates_table(judged).frame.set_index("family")
        assert list(rates.store.unique()) == ["qdrant local"]
        assert list(rates.version.unique()) == ["mem0ai 2.2.1"]
        assert rates.loc["all paths", "idiomatic: gaps"].startswith("4/8 = 0.500")
        assert rates.loc["all paths", "strict: gaps"].startswith("0/8 = 0.000")
        assert rates.loc["read by id", "idiomatic: gaps"].startswith("3/4")
        assert rates.loc["search / recall", "idiomatic: gaps"].startswith("1/4")
        crossing = backends.cross_tenant_table(judged).frame
        assert crossing.loc[0, "idiomatic: gaps"].startswith("1/1")
        assert crossing.loc[0, "strict: gaps"].startswith("0/1")
        classes, _ = backends.attribution_tables(results, tmp_path)
        frame = classes.frame.set_index("cause")
        assert frame.loc["all gaps", "backend-mem0[idiomatic]"] == 4
        files, _ = backends.overview_figure(judged, tmp_path / "figures")
        assert [p.suffix for p in files] == [".png"] and all(files.values())
    finally:
        results.con.close()


def test_overview_is_one_png_whose_labels_fit(tmp_path: Path) -> None:
    """The overview's margins are fit to its labels without a layout pass: the longest
    target label must not run off the left edge (nor a path family off the bottom)."""
    import numpy as np
    from PIL import Image

    from fleetprobe.analysis.sections import backends

    _matrix_run(tmp_path, "r-idiomatic", "idiomatic", {"get": 3, "search_fleet": 1})
    results = Results.load(tmp_path, experiments=("matrix",))
    try:
        judged = backends.judged_probes(results, tmp_path)
    finally:
        results.con.close()
    judged["store"] = "a store name long enough to need a wide margin on the left"
    out = tmp_path / "figures"
    out.mkdir()
    files, note = backends.overview_figure(judged, out)
    assert note == "" and list(files) == [out / "backends_overview.png"]
    pixels = np.asarray(Image.open(io.BytesIO(files[out / "backends_overview.png"])).convert("L"))
    edges = {"left": pixels[:, :3], "bottom": pixels[-3:, :], "right": pixels[:, -3:]}
    # blank margins (white, as the 256-colour palette keeps it: 254 or 255)
    assert all(int(edge.min()) >= 254 for edge in edges.values()), edges
    assert pixels[:, :200].min() < 100  # the labels are drawn, near the left edge


def _crewai_run(root: Path, run_id: str, fleets: int) -> None:
    """A CrewAI matrix run (idiomatic) with one gap of each kind the verdicts tell apart: a
    recall of `fleet-1` that returned a `fleet-10` row (#7543, a bug against its own scoping),
    a write into a named fleet (no write gate: a missing feature) and another tenant's row
    read by id (one table for every tenant: the adapter's mapping); plus a withheld probe."""
    events: list[dict] = [
        {"phase": "census_agent", "step": "before", "who": "A.f0t1", "tenant": "A",
         "credential": "agent", "trust": 1, "home": "fleet-1", "source": "plan"},
        {"phase": "census_row", "row_key": "r10", "tenant": "A", "fleet": "fleet-10",
         "visibility": "scope_team", "owner": "A.f1t1", "deleted": False, "source": "get"}]
    probes = [("p-sibling", "search_fleet", "fleet-1", "t1 other_fleet", False, "gap"),
              ("p-write", "write", "fleet-10", "t1 other_fleet", False, "gap"),
              ("p-tenant", "get", None, "other tenant", True, "gap"),
              ("p-ok", "search_fleet", "fleet-1", "t1 other_fleet", False, "ok")]
    for pid, path, named, principal, crossing, verdict in probes:
        events.append({"phase": "probe", "probe_id": pid, "path": path, "who": "A.f0t1",
                       "row_key": "r10", "fleets": named, "returned": verdict == "gap",
                       "status": 200, "op": "POST /api/v1/search"})
        events.append({"phase": "verdict", "probe_id": pid, "path": path,
                       "principal": principal, "visibility": "scope_team", "expected": "deny",
                       "verdict": verdict, "cross_tenant": crossing})
    target = {"kind": "backend", "base_url": "http://127.0.0.1:1", "tenant_id": "t",
              "server_profile": "backend-crewai", "label": "backend-crewai[idiomatic]",
              "backend": "crewai", "backend_version": "1.15.30",
              "backend_deployment": "idiomatic", "backend_store": "LanceDBStorage",
              "backend_env": {"packages": {"crewai": "1.15.30"}}}
    write_run(root, run_id, "matrix", events, profile="backend-crewai[idiomatic]",
              kind="backend", params={"fleets": fleets, "random_probes": 200},
              manifest_extra={"target": target})


def test_verdicts_split_bug_from_missing_feature_and_mapping(tmp_path: Path) -> None:
    """By construction: one bug, one missing feature, one adapter-made gap; the cross-tenant
    success is the mapping's, not a bug; the bug gets a reproduction with its request and
    answer; the world note says the backend's world is not the bundled profile's."""
    from fleetprobe.analysis.sections.backends import promises, world

    _crewai_run(tmp_path, "r-crewai", fleets=2)
    write_run(tmp_path, "r-ref", "matrix", [], params={"fleets": 8, "random_probes": 10000})
    results = Results.load(tmp_path, experiments=("matrix",))
    try:
        table, _, rows = promises.verdict_tables(results, tmp_path)
        line = table.frame.set_index("deployment").loc["idiomatic"]
        assert [int(line[promises.VERDICTS[v]]) for v in promises.ORDER] == [1, 1, 1, 0]
        verdict_of = dict(zip(rows.probe_id, rows.promise_verdict, strict=True))
        assert verdict_of == {"p-sibling": "breaks_promise", "p-write": "lacks_feature",
                              "p-tenant": "adapter_mapping"}
        from fleetprobe.analysis.sections import backends

        crossing = backends.cross_tenant_table(backends.judged_probes(results, tmp_path))
        assert crossing.frame.loc[0, "idiomatic: bug / lacks feature / adapter's mapping"] \
            == "0 / 0 / 1"
        repro = "\n".join(promises.bug_reproductions(results, tmp_path))
        assert "- Request: `POST /api/v1/search` (search_fleet)" in repro
        assert "fleets named `fleet-1`" in repro and "of fleet `fleet-10`" in repro
        assert "crewAIInc/crewAI#7543" in repro
        note = world.world_note(results, "matrix")
        assert note.startswith("Not the same world") and "fleets 2 (profiles: 8)" in note
        assert "random_probes 200 (profiles: 10,000)" in note
    finally:
        results.con.close()


def test_world_note_says_same_footing_when_the_worlds_agree(tmp_path: Path) -> None:
    from fleetprobe.analysis.sections.backends import world

    _crewai_run(tmp_path, "r-crewai", fleets=8)
    write_run(tmp_path, "r-ref", "matrix", [], params={"fleets": 8, "random_probes": 200})
    results = Results.load(tmp_path, experiments=("matrix",))
    try:
        assert world.world_note(results, "matrix").startswith("Same world")
        assert not world.world_rows(results, "matrix").differs.any()
    finally:
        results.con.close()


def _profile_run(root: Path, run_id: str, label: str, minute: int, **world: int) -> None:
    """A bundled-profile matrix run (memclaw-2026-05-30's server) under `label`."""
    target = {"kind": "reference", "base_url": "http://127.0.0.1:1", "tenant_id": "t",
              "server_version": "fixture", "server_profile": "memclaw-2026-05-30",
              "label": label}
    write_run(root, run_id, "matrix", [], started_minute=minute,
              params={**world, "target": {"profile": "memclaw-2026-05-30", "label": label}},
              manifest_extra={"target": target})


def test_profiles_beside_the_backends_are_picked_by_world_not_label(tmp_path: Path) -> None:
    """Beside the backends, each bundled profile is its run whose manifest params equal the
    backends' (but the target): not its canonical full-world run, not a run whose label says
    "backend world" but whose world differs, whatever label the right run carries."""
    from fleetprobe.analysis.sections.backends import world
    from fleetprobe.analysis.sections.backends.targets import matrix_paths_table

    _crewai_run(tmp_path, "r-crewai", fleets=2)
    _profile_run(tmp_path, "r-full", "memclaw-2026-05-30", 1, fleets=8, random_probes=10000)
    _profile_run(tmp_path, "r-decoy", "memclaw-2026-05-30 backend-world", 3, fleets=2,
                 random_probes=300)
    _profile_run(tmp_path, "r-same", "an unrelated label", 2, fleets=2, random_probes=200)
    results = Results.load(tmp_path, experiments=("matrix",))
    try:
        same = world.same_world_profiles(results, "matrix")
        assert list(same.run_id) == ["r-same"]
        assert list(same["server profile"]) == ["memclaw-2026-05-30"]
        assert world.world_note(results, "matrix").startswith("Same world")
        assert not world.world_rows(results, "matrix").differs.any()
        matrix = matrix_paths_table(results).frame
        assert "memclaw-2026-05-30" in matrix.columns
        assert "an unrelated label" not in matrix.columns
        rows = backends_table(results, tmp_path).frame
        beside = rows[rows.kind == "reference"]
        assert set(beside.run) == {"r-same"} and set(beside.target) == {"memclaw-2026-05-30"}
        assert set(beside.world) == {"the backends' (same params)"}
    finally:
        results.con.close()
    # without the same-world run, the canonical run is drawn and the note says they differ
    import shutil

    shutil.rmtree(tmp_path / "r-same")
    results = Results.load(tmp_path, experiments=("matrix",))
    try:
        assert world.same_world_profiles(results, "matrix").empty
        assert world.world_note(results, "matrix").startswith("Not the same world")
    finally:
        results.con.close()


def test_a_param_older_manifests_lack_counts_at_the_value_their_code_ran() -> None:
    """A matrix manifest from before `moved_agents` existed ran no moved agents: it is the
    same world as `moved_agents: false` and not as `true`."""
    from fleetprobe.analysis.sections.backends import world

    old = '{"experiment": "matrix", "fleets": 2, "target": {"kind": "backend"}}'
    assert world.world_key(old) == world.world_key(
        '{"experiment": "matrix", "fleets": 2, "moved_agents": false, "target": {}}')
    assert world.world_key(old) != world.world_key(
        '{"experiment": "matrix", "fleets": 2, "moved_agents": true}')
