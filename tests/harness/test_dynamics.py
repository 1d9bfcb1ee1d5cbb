"""Dynamics: the timed policy on hand-made histories, and smoke runs of the experiment against
the real bundled server, asserting what each profile is known to do over time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fleetprobe import load_params, run_experiment
from fleetprobe.analysis.base.results import Results
from fleetprobe.analysis.sections import dynamics
from fleetprobe.experiments.dynamics import check
from fleetprobe.oracle import policy
from fleetprobe.oracle.policy import ALLOW, DENY, MAY, Change, Principal, Row, Timeline

from .traces import REPO, events, manifest

SMOKE = REPO / "params/smoke/dynamics.yaml"
# the changes whose outcome differs between MemClaw's profiles and hardened, plus a trust
# change (same on both), trimmed for time
CHANGES = ("[recreate_agent, trust_2_0, expire, inflight_delete, supersede_rdf, "
           "soft_delete_derived]")

ME = Principal("A", "agent", "A.d0", 2, "fleet-1")
TEAM = Row("A", "fleet-1", "scope_team", "A.f0t1")
T0, T1, T2, T3 = (f"2026-01-01T00:00:0{i}.000000Z" for i in range(4))


def timeline(*changes: Change, rows: dict[str, Row] | None = None) -> Timeline:
    return Timeline({"A.d0": ME}, rows or {"r": TEAM}, changes)


def test_a_revoked_credential_speaks_for_nobody_from_its_acknowledgement() -> None:
    t = timeline(Change(T1, T2, credential="A.d0#0"))
    assert policy.decide_at(t, T0, T0, "A.d0", "A.d0#0", "r", "get") == ALLOW
    assert policy.decide_at(t, T2, T3, "A.d0", "A.d0#0", "r", "get") == DENY
    assert policy.decide_at(t, T2, T3, "A.d0", "A.d0#1", "r", "get") == ALLOW  # a new key
    # sent before the acknowledgement, answered after: either world may have answered
    assert policy.decide_at(t, T0, T3, "A.d0", "A.d0#0", "r", "get") == MAY


def test_a_lowered_trust_and_an_expired_row() -> None:
    other = Row("A", "fleet-10", "scope_team", "A.f1t1", expires_at=T2)
    t = timeline(Change(T0, T1, principal="A.d0", state=Principal("A", "agent", "A.d0", 0,
                                                                  "fleet-1")),
                 rows={"r": TEAM, "x": other})
    assert policy.decide_at(t, T1, T1, "A.d0", "A.d0#0", "x", "get") == DENY  # trust 0 now
    assert policy.decide_at(t, T1, T1, "A.d0", "A.d0#0", "r", "write", "fleet-1") == DENY
    tenant = Timeline({"A.tk": Principal("A", "tenant")}, {"x": other}, [])
    assert policy.decide_at(tenant, T1, T1, "A.tk", "A.tk#0", "x", "get") == ALLOW
    assert policy.decide_at(tenant, T3, T3, "A.tk", "A.tk#0", "x", "search") == MAY  # deleted
    assert policy.decide_at(timeline(rows={"x": other}), T3, T3, "A.d0", "A.d0#0", "x",
                            "get") == DENY


def test_the_checker_judges_a_recreated_id_as_a_new_owner() -> None:
    base: dict[str, Any] = {"run_id": "r", "experiment": "dynamics", "status": None}
    history = [
        {**base, "phase": "census_agent", "who": "A.d2", "tenant": "A", "credential": "agent",
         "trust": 1, "home": "fleet-1", "registered": True},
        {**base, "phase": "census_row", "row_key": "A.x0", "tenant": "A", "fleet": "fleet-1",
         "visibility": "scope_agent", "owner": "A.d2", "row_status": "active"},
        {**base, "phase": "change", "change_id": "c0", "change": "recreate_agent", "step":
         "delete", "who": "A.d2", "credential": "A.d2#0", "sent_at": T0, "answered_at": T0,
         "applied": True},
        {**base, "phase": "change", "change_id": "c0", "change": "recreate_agent", "step":
         "recreate", "who": "A.d2", "credential": "A.d2#0", "trust": 1, "home": "fleet-1",
         "sent_at": T1, "answered_at": T1, "applied": True},
        {**base, "phase": "probe", "status": 200, "change_id": "c0", "probe_id": "c0.0.3",
         "who": "A.d2", "credential": "A.d2#1", "path": "get", "row_key": "A.x0",
         "family": "by id", "returned": True, "sent_at": T2, "answered_at": T2},
    ]
    [verdict] = check.judge(history)
    assert (verdict["verdict"], verdict["when"], verdict["expected"]) == ("leak", "after", DENY)


def test_a_superseded_or_lapsed_row_is_stale_on_search_only() -> None:
    lapsing = Row("A", "fleet-1", "scope_team", "A.f0t1", valid_end=T2)
    t = timeline(Change(T0, T1, row="r", row_state=Row("A", "fleet-1", "scope_team", "A.f0t1",
                                                       status="outdated")),
                 rows={"r": TEAM, "v": lapsing})
    assert policy.decide_at(t, T1, T1, "A.d0", "A.d0#0", "r", "get") == ALLOW  # readable
    assert policy.stale(t.at(T1).rows["r"], "search")
    assert not policy.stale(t.at(T1).rows["r"], "get")
    assert not policy.stale(t.at(T0).rows["r"], "search")  # before the acknowledgement
    assert not policy.stale(t.at(T1).rows["v"], "recall")
    assert policy.stale(t.at(T3).rows["v"], "recall")  # past its ts_valid_end


def test_the_checker_judges_a_superseded_row_stale_and_a_derived_insight_forgotten() -> None:
    base: dict[str, Any] = {"run_id": "r", "experiment": "dynamics", "status": 200}
    agent = {**base, "phase": "census_agent", "who": "A.d0", "tenant": "A",
             "credential": "agent", "trust": 2, "home": "fleet-1", "registered": True}
    row = {**base, "phase": "census_row", "tenant": "A", "fleet": "fleet-1",
           "visibility": "scope_team", "owner": "A.d0", "row_status": "active"}
    probe = {**base, "phase": "probe", "who": "A.d0", "credential": "A.d0#0", "returned": True,
             "sent_at": T2, "answered_at": T2, "family": "search"}
    history = [
        agent, {**row, "row_key": "A.x0"}, {**row, "row_key": "A.x1"},
        {**base, "phase": "change", "change_id": "c0", "change": "supersede_rdf",
         "step": "supersede", "row_key": "A.x0", "row_status": "outdated", "sent_at": T0,
         "answered_at": T1, "applied": True},
        {**base, "phase": "change", "change_id": "c1", "change": "soft_delete_derived",
         "step": "delete", "row_key": "A.x1", "sent_at": T0, "answered_at": T1,
         "applied": True},
        {**probe, "change_id": "c0", "probe_id": "c0.0.3", "path": "search", "row_key": "A.x0"},
        {**probe, "change_id": "c0", "probe_id": "c0.1.3", "path": "get", "row_key": "A.x0"},
        {**probe, "change_id": "c1", "probe_id": "c1.0.3", "path": "insight",
         "row_key": "A.x1"},
    ]
    stale, read, insight = check.judge(history)
    assert (stale["verdict"], stale["expected"]) == ("stale", ALLOW)
    assert read["verdict"] == "ok"
    assert (insight["verdict"], insight["forget"]) == ("leak", True)


def _run(tmp_path: Path, profile: str) -> tuple[Path, Results]:
    raw = load_params(SMOKE, [f"traces_root={tmp_path}", f"target.profile={profile}",
                              f"changes={CHANGES}", "rounds_after=2"])
    run_dir = run_experiment("dynamics", raw)
    assert manifest(run_dir)["complete"], manifest(run_dir)["incomplete_reason"]
    return run_dir, Results.load(run_dir)


def _verdicts(run_dir: Path) -> list[dict[str, Any]]:
    return [e for e in events(run_dir) if e["phase"] == "verdict"]


@pytest.mark.timeout(120)
def test_memclaw_keeps_writing_after_deletion_serves_expired_rows_and_reuses_ids(
        tmp_path: Path) -> None:
    run_dir, results = _run(tmp_path, "memclaw-2026-05-31")
    inflight = results.view("dynamics_inflight")
    assert int(inflight.written_after.iloc[0]) > 0  # the known bulk-after-deletion write
    forget = results.view("dynamics_forget_failures")
    assert set(forget[forget.numerator > 0].path) >= {"get", "search", "list", "entity"}
    reuse = results.view("dynamics_identity_reuse")
    assert int(reuse.numerator.sum()) > 0
    trust = [v for v in _verdicts(run_dir) if v["change"] == "trust_2_0"
             and v["when"] == "after"]
    # trust drops apply at once, except on /recall: its identity is filter_agent_id alone at
    # 045039f (recall_identity_filter_only), so the key's agent and its trust never govern it
    assert trust and all(v["verdict"] == "ok" for v in trust if v["path"] != "recall")
    assert {v["verdict"] for v in trust if v["path"] == "recall"} == {"leak"}
    assert "insight" in set(forget[forget.numerator > 0].path)  # it outlives its source
    stale = results.view("dynamics_stale")
    rdf = stale[stale.change == "supersede_rdf"]
    # search served the superseded row until the detector marked it, then hid it
    assert bool(rdf.target_marked.all()) and int(rdf.never_current.sum()) == 0
    # the section's figure keeps a row per change; on a backend it says why rows are empty
    run_id = manifest(run_dir)["run_id"]
    (tmp_path / "fig").mkdir()
    figure = dynamics.timeline_figure(results, run_id, "x", tmp_path / "fig", "backend")
    assert "n/a for this backend" in figure.caption
    figure = dynamics.timeline_figure(results, run_id, "x", tmp_path / "fig")
    assert "revoke_key" in figure.caption  # not in this run's plan: an empty row, named
    results.con.close()


@pytest.mark.timeout(120)
def test_hardened_closes_them(tmp_path: Path) -> None:
    run_dir, results = _run(tmp_path, "hardened")
    leaks = [v for v in _verdicts(run_dir) if v["verdict"] == "leak"]
    assert leaks == []
    parts = results.view("dynamics_mgs_parts").iloc[0]
    assert parts.forget_n > 0 and parts.forget_k == 0 and parts.leak_n > 0
    inflight = results.view("dynamics_inflight").iloc[0]
    assert inflight.written_after == 0 and 0 < inflight.written_count < 100
    insight = [v for v in _verdicts(run_dir) if v["path"] == "insight" and v["when"] == "after"
               and v["expected"] == DENY]
    assert insight and not any(v["returned"] for v in insight)  # withdrawn with its source
    results.con.close()
