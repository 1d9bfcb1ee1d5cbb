"""The faults experiment end to end: the smoke workloads under injected faults and a kill -9
of a real reference server, judged by the history checkers, on every governed profile; and
the same checkers catching what an ungoverned store without idempotency keys does."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from fleetprobe import load_params, run_experiment
from fleetprobe.harness.targets import target_for_server
from reference_server.governance.profiles import PROFILES

from .traces import REPO, events, manifest

SMOKE = REPO / "params/smoke/faults.yaml"
GOVERNED = sorted(p.name for p in PROFILES.values() if p.governed)
# `make test` runs the as-measured profile and the hardened one; the rest in `make test-slow`.
QUICK = ("memclaw-2026-05-30", "hardened")


def smoke(traces_root: Path, *overrides: str) -> dict[str, Any]:
    return load_params(SMOKE, [f"traces_root={traces_root}", *overrides])


@pytest.mark.parametrize("profile", [
    p if p in QUICK else pytest.param(p, marks=pytest.mark.slow) for p in GOVERNED])
def test_faults_smoke_run_is_green_on_every_governed_profile(
        profile: str, start_server: Any, traces_root: Path, scan_for_secrets: Any) -> None:
    server = start_server(profile)
    target = target_for_server(server, profile)
    run_dir = run_experiment("faults", smoke(traces_root, f"target.profile={profile}"),
                             target=target)
    m = manifest(run_dir)
    assert m["complete"] is True and m["target"]["server_profile"] == profile
    faults = Counter(e["fault_kind"] for e in events(run_dir, "fault"))
    assert faults["kill"] == faults["restart"] == 1  # the server really died and came back
    assert sum(faults[k] for k in ("error_5xx", "reset", "error_429")) >= 5
    writes = events(run_dir, "write")
    assert len(writes) == 4 * 3 + 3 * 3 and all(w["acknowledged"] for w in writes)
    assert any(w["attempts"] > 1 for w in writes)  # retries happened
    checks = {c["checker"]: c for c in events(run_dir, "check")}
    assert len(checks) == 7
    failed = {name: c["examples"] for name, c in checks.items() if not c["ok"]}
    assert not failed, failed
    assert checks["no_lost_writes"]["checked"] == len(writes)
    assert checks["provenance_intact"]["checked"] == 3 * 2  # hops 1 and 2 of 3 chains
    assert checks["one_active_head"]["checked"] == 4
    assert checks["failures_accounted"]["checked"] > 0
    assert checks["bounded_staleness"]["checked"] > 0
    assert not scan_for_secrets(run_dir, set(target.secrets))
    # the report's faults table shows the run, from the traces alone
    frame = _faults_frame(traces_root)
    row = frame.set_index("profile").loc[profile]
    assert row["checkers green"] == "7/7" and row["violations"] == "none"
    assert row["faults injected"] == sum(v for k, v in faults.items() if k != "restart")
    assert row["run"] == run_dir.name and row["kill -9 (down ms)"].startswith("1 (")


def _faults_frame(traces_root: Path) -> Any:
    from fleetprobe.analysis.base.results import Results
    from fleetprobe.analysis.sections.faults import faults_frame

    results = Results.load(traces_root)
    try:
        return faults_frame(results)
    finally:
        results.con.close()


def test_faults_table_says_when_there_are_no_runs(tmp_path: Path) -> None:
    from fleetprobe.analysis.base.results import Results
    from fleetprobe.analysis.sections.faults import NO_RUNS, faults_table, markdown_section

    (tmp_path / "traces").mkdir()
    results = Results.load(tmp_path / "traces")
    try:
        table = faults_table(results)
        assert table.empty and table.note == NO_RUNS
        assert "No faults runs yet" in markdown_section(faults_table(results))
    finally:
        results.con.close()


def test_checkers_catch_duplicates_and_missing_supersession_on_a_flat_store(
        start_server: Any, traces_root: Path) -> None:
    """`naive` has no supersession and, without idempotency keys, a retry after a lost
    answer stores the write again: the checkers must say so."""
    server = start_server("naive")
    params = smoke(traces_root, "target.profile=naive", "idempotency_keys=false",
                   "kill_at_s=[]", "faults.reset_after=0.5", "faults.error_5xx_after=0.3",
                   "faults.error_5xx_before=0", "faults.reset_before=0", "faults.error_429=0",
                   "faults.latency=0")
    run_dir = run_experiment("faults", params, target=target_for_server(server, "naive"))
    checks = {c["checker"]: c for c in events(run_dir, "check")}
    assert not checks["no_duplicate_rows"]["ok"]
    assert re.search(r"is stored [2-9] times", checks["no_duplicate_rows"]["examples"][0])
    assert not checks["one_active_head"]["ok"]
    assert checks["no_lost_writes"]["ok"] and checks["failures_accounted"]["ok"]
    row = _faults_frame(traces_root).set_index("profile").loc["naive"]
    assert row["checkers green"] == "5/7"
    assert "no_duplicate_rows" in row["violations"] and "one_active_head" in row["violations"]
