"""Separation end to end against the real reference server, at smoke scale, under every
bundled profile: governed profiles keep each agent's retrieval inside its partitions, the
flat store does not, and the rest of the scenario is judged from what the server returned."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetprobe import load_params, run_experiment
from reference_server.governance.profiles import PROFILES

from .traces import KEY_LIKE, REPO, events, manifest

SMOKE = REPO / "params/smoke/separation.yaml"
GOVERNED = sorted(name for name, p in PROFILES.items() if p.governed)
FLAT = sorted(name for name, p in PROFILES.items() if not p.governed)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One smoke run per profile, each on its own bundled server and tenant."""
    root = tmp_path_factory.mktemp("separation")
    out = {}
    for profile in sorted(PROFILES):
        params = load_params(SMOKE, [f"traces_root={root}", f"target.profile={profile}"])
        out[profile] = run_experiment("separation", params)
    return out


def test_every_profile_completes_its_plan(runs: dict[str, Path]) -> None:
    for profile, run_dir in runs.items():
        m = manifest(run_dir)
        assert m["complete"] is True, (profile, m["incomplete_reason"])
        assert m["target"]["server_profile"] == profile
        for phase, n in m["planned"].items():
            assert m["executed"].get(phase) == n, (profile, phase)
        assert {e["status"] for e in events(run_dir, "write")} == {201}
        assert {e["status"] for e in events(run_dir, "probe")} == {200}
        assert all(e["provisioned"] for e in events(run_dir, "agent"))
        for path in run_dir.iterdir():
            assert not KEY_LIKE.search(path.read_text()), path


@pytest.mark.parametrize("profile", GOVERNED)
def test_governed_profiles_never_contaminate(runs: dict[str, Path], profile: str) -> None:
    judged = events(runs[profile], "contamination")
    assert judged and all(e["contaminated"] is False for e in judged)
    assert {e["top_k"] for e in judged} == {1, 5, 20}
    # the queries did return records: zero contamination is not an empty answer
    assert sum(e["n_returned"] for e in judged) > len(judged)
    absence = events(runs[profile], "absence")
    assert absence and {e["absence_verdict"] for e in absence} == {
        "no record in authorized partitions"}
    graph = events(runs[profile], "graph_reach")
    assert all(e["observable"] is not False for e in graph)
    assert all(e["n_graph_restricted"] == 0 for e in graph)
    if "expand_entity_graph" in PROFILES[profile].search_steps:
        assert sum(e["n_graph"] for e in graph) > 0
        assert any(e["insight_reached"] for e in graph if e["agent"] == "vera")


@pytest.mark.parametrize("profile", FLAT)
def test_the_flat_store_contaminates(runs: dict[str, Path], profile: str) -> None:
    judged = events(runs[profile], "contamination")
    assert sum(e["contaminated"] for e in judged) > 0
    assert any(e["restricted_reached"] for e in events(runs[profile], "graph_reach"))
    assert any(e["hold_returned"] for e in events(runs[profile], "absence"))


@pytest.mark.parametrize("profile", GOVERNED)
def test_reserved_types_are_refused_with_the_wire_envelope(runs: dict[str, Path],
                                                           profile: str) -> None:
    raw = events(runs[profile], "reserved")
    assert len(raw) == 9 and {e["status"] for e in raw} == {422}
    assert {e["error_code"] for e in raw} == {"INVALID_ARGUMENTS"}
    checks = events(runs[profile], "reserved_check")
    assert len(checks) == 9
    assert all(c["refused"] and c["envelope_ok"] and c["names_route"] and not c["stored"]
               for c in checks)
    assert {c["memory_type"] for c in checks} == {"insight", "outcome", "rule"}


@pytest.mark.parametrize("profile", GOVERNED)
def test_insights_are_readable_by_vera_and_lex(runs: dict[str, Path], profile: str) -> None:
    (generated,) = events(runs[profile], "insight_generate")
    conflicts = {e["account"] for e in events(runs[profile], "write")
                 if e["account_kind"] == "conflict"}
    assert generated["status"] == 200 and generated["n_findings"] == len(conflicts)
    access = events(runs[profile], "insight_access", target="insight")
    for reader in ("vera", "lex"):
        for axis in ("get", "search"):
            mine = [a for a in access if a["agent"] == reader and a["axis"] == axis]
            assert len(mine) == len(conflicts) and all(a["readable"] for a in mine)
    assert all(a["in_org_shared"] for a in access if a["axis"] == "get")
    underlying = events(runs[profile], "insight_access", target="underlying")
    assert {u["domain"] for u in underlying if u["agent"] == "vera"} == {"legal"}
    assert {u["domain"] for u in underlying if u["agent"] == "lex"} == {"sales"}
    # by id, the other domain's records stay unreadable once GET-by-id applies the scope
    # predicate; as measured on 2026-05-30 the by-id path checked the tenant only
    if PROFILES[profile].byid_read_scope:
        assert not any(u["readable"] for u in underlying)
    else:
        assert all(u["readable"] for u in underlying)


def test_fanout_attribution_is_judged_per_mode(runs: dict[str, Path]) -> None:
    for profile, run_dir in runs.items():
        judged = events(run_dir, "attribution")
        assert {(e["mode"], e["top_k"]) for e in judged} == {
            (m, k) for m in ("blended", "per_fleet") for k in (2, 5)}
        per_fleet = [e for e in judged if e["mode"] == "per_fleet"]
        blended = [e for e in judged if e["mode"] == "blended"]
        if PROFILES[profile].governed:  # each labelled call has its own top_k budget
            assert all(e["both_named"] for e in per_fleet), profile
        # the extractive summary of one blended recall carries no fleet labels
        assert not any(e["both_named_summary"] for e in blended), profile
        if PROFILES[profile].governed:
            assert all(e["misattributed"] == 0 for e in judged), profile
        else:  # a "per-fleet" call on a flat store returns other fleets' rows, mislabelled
            assert sum(e["misattributed"] for e in per_fleet) > 0


def test_summary_csv_reports_the_separation_metrics(runs: dict[str, Path]) -> None:
    text = (runs[GOVERNED[0]] / "summary.csv").read_text()
    assert "separation_contamination" in text
