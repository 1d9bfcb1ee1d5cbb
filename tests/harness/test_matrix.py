"""Governance matrix: the policy tables, the checker on hand-made events, and smoke runs of
the whole experiment against the real reference server under every profile."""

from __future__ import annotations

import gzip
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleetprobe import cli, load_params, run_experiment
from fleetprobe.analysis.base import db
from fleetprobe.analysis.sections import matrix as matrix_report
from fleetprobe.experiments.matrix import check as matrix_check
from fleetprobe.harness.targets import TargetParams, live_target, target_for_server
from fleetprobe.oracle import policy
from fleetprobe.oracle.policy import ALLOW, DENY, MAY, Principal, Row
from fleetprobe.world import target

from .traces import KEY_LIKE, REPO, events, manifest

# The smoke runs under five profiles are one module fixture: a few minutes on 2 idle cores,
# more under load, so the per-test timeout (300 s) would cut the fixture off.
pytestmark = pytest.mark.timeout(1800)

SMOKE = REPO / "params/smoke/matrix.yaml"
TRIM = ["fleets=2", "random_probes=150", "sweeps=false", "enumerate_trusts=[1, 2]"]
LIFTED = ("--write-rate", "1000000/minute", "--search-rate", "1000000/minute",
          "--bulk-rate", "1000000/minute")
PROFILES = ("memclaw-2026-05-30", "memclaw-2026-05-31", "proposed", "naive", "hardened")

A1 = Principal("A", "agent", "A.f0t1", 1, "fleet-1")


def agent(trust: int, home: str | None = "fleet-1", key: str = "me") -> Principal:
    return Principal("A", "agent", key, trust, home)


def row(vis: str = "scope_team", fleet: str | None = "fleet-1", owner: str = "other",
        **kw: Any) -> Row:
    return Row("A", fleet, vis, owner, **kw)


# -- the policy tables ---------------------------------------------------------------------


@pytest.mark.parametrize(("trust", "fleet", "vis", "owner", "want"), [
    (1, "fleet-1", "scope_team", "other", ALLOW),     # same fleet
    (0, "fleet-1", "scope_team", "other", ALLOW),     # trust 0 still reads its fleet
    (1, "fleet-10", "scope_team", "other", DENY),     # a prefix is another fleet
    (2, "fleet-10", "scope_team", "other", ALLOW),    # cross-fleet read rung
    (3, "fleet-1", "scope_agent", "other", DENY),     # nobody reads another's private row
    (0, "fleet-10", "scope_agent", "me", ALLOW),      # own row, wherever it is
    (1, "fleet-10", "scope_org", "other", ALLOW),     # org-wide
    (1, None, "scope_team", "other", ALLOW),          # fleet-less rows are tenant-wide
])
def test_read_table(trust: int, fleet: str | None, vis: str, owner: str, want: str) -> None:
    assert policy.read(agent(trust), row(vis, fleet, owner)) == want


def test_homeless_agents_need_the_cross_fleet_rung_for_fleet_rows() -> None:
    assert policy.relation(agent(1, None), row()) == "homeless"
    assert policy.read(agent(1, None), row()) == DENY
    assert policy.read(agent(2, None), row()) == ALLOW
    assert policy.read(agent(1, None), row(fleet=None)) == ALLOW


def test_tenant_key_and_other_tenant() -> None:
    tenant, other = Principal("A", "tenant"), Principal("B", "tenant")
    private = row("scope_agent")
    assert policy.read(tenant, private, "get") == ALLOW
    assert policy.read(tenant, private, "search") == MAY  # discovery paths may drop it
    assert policy.read(tenant, row(deleted=True), "list_deleted") == MAY
    assert policy.read(agent(3), row(owner="me", deleted=True), "list_deleted") == DENY
    assert policy.read(agent(1), row(owner="me", deleted=True), "bulk_attempt") == MAY
    assert policy.read(agent(1), row(deleted=True), "bulk_attempt") == DENY
    for check in (policy.read(other, row()), policy.change(other, row()),
                  policy.write(other, "A", "fleet-1"),
                  policy.read(Principal("B", "agent", "x", 3, "fleet-1"), row("scope_org"))):
        assert check == DENY


@pytest.mark.parametrize(("trust", "owner", "fleet", "want"), [
    (1, "me", "fleet-1", ALLOW),      # own row in its write scope
    (0, "me", "fleet-1", DENY),       # trust 0 is read-only
    (1, "me", "fleet-10", DENY),      # own row outside its write scope
    (2, "other", "fleet-1", DENY),    # a sibling's row needs trust 3
    (3, "other", "fleet-10", ALLOW),  # trust 3 changes what it may read
])
def test_change_table(trust: int, owner: str, fleet: str, want: str) -> None:
    assert policy.change(agent(trust), row(owner=owner, fleet=fleet)) == want
    assert policy.change(agent(3), row("scope_agent")) == DENY  # cannot read it: cannot change


def test_write_and_redistribute_tables() -> None:
    assert policy.write(agent(1), "A", "fleet-1") == ALLOW
    assert policy.write(agent(1), "A", None) == ALLOW
    assert policy.write(agent(1), "A", "fleet-10") == DENY
    assert policy.write(agent(0), "A", "fleet-1") == DENY
    assert policy.write(agent(3), "A", "fleet-10") == ALLOW
    sibling, foreign = agent(1, key="sib"), agent(1, "fleet-10", "far")
    mine = row(owner="me")
    assert policy.redistribute(agent(1), mine, sibling) == ALLOW
    assert policy.redistribute(agent(1), mine, foreign) == DENY
    assert policy.redistribute(agent(1), row(owner="sib"), agent(1, key="x")) == DENY
    assert policy.redistribute(agent(3), row("scope_agent"), foreign) == DENY
    assert policy.redistribute(agent(3), row(), foreign) == ALLOW
    assert policy.redistribute(agent(3), row(), agent(0, key="ro")) == DENY


def test_must_return_follows_path_semantics() -> None:
    assert policy.must_return("search", row(), ALLOW)
    assert not policy.must_return("search", row(status="outdated"), ALLOW)
    assert policy.must_return("get", row(status="outdated"), ALLOW)
    assert not policy.must_return("search", row(), MAY)
    assert not policy.must_return("dup_near", row(), ALLOW)  # reveals are never required
    assert not policy.must_return("list_fleet", row(fleet=None), ALLOW, ("fleet-1",))
    assert policy.must_return("list_fleet", row(), ALLOW, ("fleet-1",))
    # filter_agent_id naming someone else may be refused (2.29: 403); naming oneself may not
    assert not policy.must_return("search_agent", row(owner="sib"), ALLOW, caller="me")
    assert policy.must_return("search_agent", row(owner="me"), ALLOW, caller="me")


# -- the checker on hand-made events ---------------------------------------------------------


def census(*rows: tuple[str, Row], agents: tuple[Principal, ...] = ()) -> list[dict]:
    out = [{"phase": "census_agent", "step": "before", "who": "A.tk", "tenant": "A",
            "credential": "tenant"},
           {"phase": "census_agent", "step": "before", "who": "B.tk", "tenant": "B",
            "credential": "tenant"}]
    for p in (A1, *agents):
        out.append({"phase": "census_agent", "step": "before", "who": p.agent_id,
                    "tenant": p.tenant, "credential": "agent", "trust": p.trust,
                    "home": p.home})
    for key, r in rows:
        out.append({"phase": "census_row", "row_key": key, "tenant": r.tenant,
                    "fleet": r.fleet, "visibility": r.visibility, "owner": r.owner,
                    "row_status": r.status, "deleted": r.deleted})
    return out


def probe(path: str, row_key: str, returned: bool, who: str = "A.f0t1", status: int = 200,
          **kw: Any) -> dict:
    return {"phase": "probe", "probe_id": f"x{path}{row_key}{who}", "who": who, "path": path,
            "row_key": row_key, "returned": returned, "status": status,
            "error": None if status < 400 else kw.pop("error", f"{status} denied"), **kw}


def verdicts(world: list[dict], *probes: dict) -> list[tuple[str, str, str | None]]:
    return [(v["path"], v["verdict"], v["what"]) for v in matrix_check.judge(world + list(probes))]


def test_checker_gap_miss_ok_and_refused() -> None:
    world = census(("far", row(fleet="fleet-10", owner="B.x")),
                   ("mine", row("scope_agent", owner="A.f0t1")),
                   ("sib", row(owner="A.f0t2")))
    assert verdicts(world, probe("get", "far", True)) == [("get", "gap", "returns the row")]
    assert verdicts(world, probe("get", "far", False, status=404)) == [("get", "ok", None)]
    assert verdicts(world, probe("search", "mine", False)) == [
        ("search", "miss", "withholds the row")]
    assert verdicts(world, probe("patch", "sib", True)) == [("patch", "gap", "changes the row")]
    assert verdicts(world, probe("delete", "mine", False, status=403)) == [
        ("delete", "refused", "refuses an allowed change")]
    # naming a fleet the caller may not read makes withholding legitimate
    assert verdicts(world, probe("search_fleet", "mine", False, fleets="fleet-10")) == [
        ("search_fleet", "ok", None)]


def test_checker_not_applicable_cross_tenant_and_collateral() -> None:
    world = census(("far", row(fleet="fleet-10", owner="B.x")), ("sib", row(owner="A.f0t2")),
                   ("b", Row("B", "fleet-1", "scope_org", "B.y")))
    [na] = matrix_check.judge(world + [probe("entity", "sib", False, status=404,
                                             error="404 Not Found")])
    assert (na["verdict"], na["what"]) == ("n/a", "404 Not Found")
    [memory_404] = matrix_check.judge(world + [probe("get", "sib", False, status=404,
                                                     error="404 Memory not found")])
    assert memory_404["verdict"] == "miss"  # a denial, not an absent endpoint
    [cross] = matrix_check.judge(world + [probe("get", "b", True)])
    assert cross["cross_tenant"] and cross["verdict"] == "gap"
    assert cross["principal"] == "other tenant"
    assert verdicts(world, probe("contradictions", "sib", True, got="far")) == [
        ("contradictions", "gap", "reveals a neighbour row")]
    assert verdicts(world, probe("entity", "sib", True, got="entity")) == [("entity", "ok", None)]


def test_checker_after_redistribute_judges_the_new_owner() -> None:
    world = census(("mine", row(owner="A.f0t1")), agents=(agent(1, key="A.f0t2"),))
    moved = probe("redistribute", "mine", True, target="A.f0t2")
    after = probe("after_redistribute", "mine", True, after="A.f0t2 scope_team")
    assert verdicts(world, moved, after) == [
        ("redistribute", "ok", None), ("after_redistribute", "gap", "changes the row")]


def test_checker_paper_probes_use_the_papers_expectation() -> None:
    base = {"phase": "paper", "probe_id": "p1", "status": 200, "visibility": "scope_team"}
    [v] = matrix_check.judge([{**base, "axis": "get", "relation": "cross_fleet",
                               "returned": True}])
    assert (v["path"], v["expected"], v["verdict"]) == ("paper_get", "deny", "gap")
    [v] = matrix_check.judge([{**base, "axis": "search", "relation": "same_fleet",
                               "returned": False}])
    assert v["verdict"] == "miss"


# -- the experiment under every profile (smoke world) ------------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    from reference_server.launch.process import ReferenceServer

    root = tmp_path_factory.mktemp("matrix-traces")
    out: dict[str, Path] = {}
    for profile in PROFILES:
        with ReferenceServer(profile=profile, extra_args=LIFTED) as server:
            params = load_params(SMOKE, [f"traces_root={root}", f"target.profile={profile}",
                                         *TRIM])
            out[profile] = run_experiment("matrix", params,
                                          target=target_for_server(server, profile))
    yield out


def verdicts_of(run_dir: Path) -> list[dict]:
    return events(run_dir, "verdict")


def tally(run_dir: Path) -> Counter:
    return Counter(v["verdict"] for v in verdicts_of(run_dir))


def test_hardened_has_no_gap_no_miss_no_cross_tenant_success(runs: dict[str, Path]) -> None:
    run = runs["hardened"]
    counts = tally(run)
    bad = [v for v in verdicts_of(run) if v["verdict"] in ("gap", "miss", "error", "side_effect")
           or (v["verdict"] == "n/a" and v["what"] != target.NA_GHOST)]
    assert bad == [], bad[:5]
    assert counts["ok"] > 1000
    assert sum(v["cross_tenant"] for v in verdicts_of(run)) > 50
    m = manifest(run)
    assert m["complete"] and m["planned"]["probe"] == m["executed"]["probe"]


def test_naive_gaps_wherever_the_policy_denies(runs: dict[str, Path]) -> None:
    """A flat store: every within-tenant denial on the core read and change paths is a gap."""
    core = {"get", "contradictions", "list", "list_deleted", "search", "search_agent", "patch",
            "patch_status", "delete", "agent_read", "entity"}
    run = runs["naive"]
    rows = {e["row_key"]: e for e in events(run, "census_row")}
    subject = {e["probe_id"]: rows.get(e["row_key"], {}) for e in events(run, "probe")}

    def hidden_by_path(v: dict) -> bool:  # deleted rows, and stale rows on search: not scope
        r = subject[v["probe_id"]]
        return bool(r.get("deleted") and v["path"] != "list_deleted") or (
            v["path"].startswith("search") and r.get("row_status") in policy.STALE_STATUSES)

    denied = [v for v in verdicts_of(run) if v["path"] in core and v["expected"] == "deny"
              and not v["cross_tenant"] and not hidden_by_path(v)]
    assert len(denied) > 100
    assert {v["verdict"] for v in denied} == {"gap"}
    cross = [v for v in verdicts_of(runs["naive"]) if v["cross_tenant"]]
    assert cross and {v["verdict"] for v in cross} == {"ok"}  # tenants stay apart


def test_memclaw_2026_05_30_shows_the_get_by_id_gap(runs: dict[str, Path]) -> None:
    gets = [v for v in verdicts_of(runs["memclaw-2026-05-30"]) if v["path"] == "get"]
    gaps = {(v["principal"], v["visibility"]) for v in gets if v["verdict"] == "gap"}
    assert ("t1 other_fleet", "scope_team") in gaps
    assert ("t1 same_fleet", "scope_agent") in gaps
    remediated = [v for v in verdicts_of(runs["memclaw-2026-05-31"]) if v["path"] == "get"
                  and v["principal"] == "t1 other_fleet" and v["visibility"] == "scope_team"]
    assert remediated and {v["verdict"] for v in remediated} == {"ok"}


def test_proposed_keeps_gaps_the_hardened_profile_closes(runs: dict[str, Path]) -> None:
    gaps = {v["path"] for v in verdicts_of(runs["proposed"]) if v["verdict"] == "gap"}
    assert {"search_agent", "patch_status", "entity_upsert"} <= gaps
    # a reused Idempotency-Key answers "reused": it tells that the key exists, not the row
    oracles = {v["path"] for v in verdicts_of(runs["proposed"]) if v["verdict"] == "oracle"}
    assert "idempotency" in oracles
    assert not any(v["cross_tenant"] and v["verdict"] == "gap"
                   for p in PROFILES for v in verdicts_of(runs[p]))


def test_traces_are_lean_and_keyless(runs: dict[str, Path]) -> None:
    for run in runs.values():
        raw = (run / "events.jsonl").read_bytes()
        assert not KEY_LIKE.search(raw.decode()), "a key reached the trace"
        assert len(gzip.compress(raw)) < 400_000
        assert b'"content"' not in raw  # no response bodies


def test_report_section(runs: dict[str, Path], tmp_path: Path) -> None:
    root = next(iter(runs.values())).parent
    con = db.connect(root)
    try:
        section = matrix_report.write(con)
    finally:
        con.close()
    text = section.document
    assert "hardened" in text and "memclaw-2026-05-30" in text
    assert len(section.heatmap) > 10_000
    cat = section.catalogue
    assert not cat[cat.target == "memclaw-2026-05-30"].empty
    assert cat[cat.target == "hardened"].empty
    assert all(r.startswith("as ") for r in cat.reproduction)
    hardened = section.summary.set_index("target").loc["hardened"]
    assert (hardened.gaps, hardened.misses, hardened.cross_tenant_successes) == (0, 0, 0)


def test_report_without_matrix_runs(tmp_path: Path) -> None:
    empty = tmp_path / "traces"
    empty.mkdir()
    con = db.connect(empty)
    try:
        section = matrix_report.write(con)
    finally:
        con.close()
    assert "No matrix runs yet" in section.document
    assert section.notes


# -- what an answer reveals, existence oracles, side effects, malformed probes ----------------


def control(path: str, status: int, error: str | None, who: str = "A.f0t1") -> dict:
    return {"phase": "control", "who": who, "path": path, "variant": None, "status": status,
            "error": error}


def test_existence_oracles_are_their_own_category() -> None:
    world = census(("sib", row("scope_agent", owner="A.f0t2")))
    denied = probe("patch", "sib", False, status=403, error="403 may only update its own rows")
    # the same refusal for an id that does not exist: nothing learnt
    same = control("patch", 403, "403 may only update its own rows")
    assert verdicts(world, same, denied) == [("patch", "ok", None)]
    [(path, verdict, what)] = verdicts(world, control("patch", 404, "404 Memory not found"),
                                       denied)
    assert (path, verdict) == ("patch", "oracle") and "404 Memory not found" in what
    # an idempotency answer that says only "the key exists" is an oracle, not an id reveal
    key = probe("idempotency", "sib", False, status=422, got="exists",
                error="422 Idempotency-Key reused with a different request body")
    assert verdicts(world, key) == [("idempotency", "oracle", "reveals that the key exists")]


def test_a_probe_is_judged_by_the_agent_as_the_target_held_it_when_it_answered() -> None:
    homeless = agent(1, None, "A.ht1")
    world = census(("team", row(owner="A.f0t2")), agents=(homeless,))
    found = probe("search_fleet", "team", True, who="A.ht1", fleets="fleet-1")
    rehomed = {"phase": "observe", "step": "agent", "probe_id": found["probe_id"],
               "who": "A.ht1", "tenant": "A", "credential": "agent", "trust": 1,
               "home": "fleet-1", "registered": True, "status": 200}
    # before the search the home-less trust-1 agent may not read fleet-1's team row; the
    # search homed it there first, so the answer is in scope and the re-homing is reported
    assert verdicts(world, found) == [("search_fleet", "gap", "returns the row")]
    assert verdicts(world, found, rehomed) == [
        ("search_fleet", "ok", None),
        ("search_fleet", "side_effect", "re-homes the agent from none to fleet-1")]
    later = probe("get", "team", True, who="A.ht1")
    assert verdicts(world, found, rehomed, later)[-1] == ("get", "ok", None)


def test_unregistered_ids_and_malformed_probes() -> None:
    world = census(("team", row(owner="A.f0t2")), ("open", row(fleet=None)))
    world.append({"phase": "census_agent", "step": "before", "who": "A.g0", "tenant": "A",
                  "credential": "agent", "trust": None, "home": None, "registered": False})
    [v] = matrix_check.judge(world + [probe("get", "team", True, who="A.g0")])
    assert (v["principal"], v["verdict"]) == ("unregistered homeless", "gap")
    assert verdicts(world, probe("get", "open", True, who="A.g0")) == [("get", "ok", None)]
    assert verdicts(world, probe("write", "team", True, who="A.g0", status=201,
                                 got="fleet-1")) == [("write", "gap", "writes into the fleet")]
    [bad] = matrix_check.judge(world + [probe("write", "team", False, status=422,
                                              error="422 agent_id is required")])
    assert bad["verdict"] == "error" and "malformed" in bad["what"]


# -- asserted identity (MemClaw's engine shape), and honest completeness -----------------------


@pytest.fixture(scope="module")
def headers_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `memclaw-2.29` profile demanding header identity, spoken to as a live target."""
    from reference_server.launch.process import ReferenceServer

    root = tmp_path_factory.mktemp("matrix-headers")
    with ReferenceServer(profile="memclaw-2.29", extra_args=LIFTED, auth="headers") as srv:
        env = {"MEMCLAW_API_URL": srv.base_url, "MEMCLAW_TENANT_ID": "selfhosted-tenant"}
        params = load_params(SMOKE, [f"traces_root={root}", "target.kind=live",
                                     "target.auth=headers", "target.label=headers 2.29", *TRIM,
                                     "client.writes_per_s=null", "client.bulk_per_s=null",
                                     "client.searches_per_s=null"])
        target = live_target(TargetParams.model_validate(params["target"]), env)
        return run_experiment("matrix", params, target=target)


def test_asserted_identity_builds_every_principal_and_crosses_no_tenant(
        headers_run: Path) -> None:
    m = manifest(headers_run)
    assert m["complete"], m["incomplete_reason"]
    assert m["shortfalls"] == [] and m["executed"]["probe"] == m["planned"]["probe"]
    steps = Counter(e["step"] for e in events(headers_run, "setup"))
    assert steps["register"] > 0 and steps["provision"] == 0  # agents made by a write
    assert all(e["status"] == 201 for e in events(headers_run, "setup", step="register"))
    judged = verdicts_of(headers_run)
    na = Counter(v["what"] for v in judged if v["verdict"] == "n/a")
    # memclaw-2.29 keeps no entity links of bulk-written rows, as the engine (FIDELITY.md):
    # their entity probes are n/a with the census's reason
    unlinked = {w for w in na if w.startswith("the target kept no entity link for this row")}
    assert set(na) - unlinked == {target.NA_NAMED, target.NA_WHOAMI}, na
    cross = [v for v in judged if v["cross_tenant"] and v["verdict"] not in ("n/a", "error")]
    assert cross and not [v for v in cross if v["verdict"] == "gap"]
    assert not [v for v in judged if v["verdict"] == "error"]
    # misses only where memclaw-2.29 follows the engine's /recall (identity = filter_agent_id),
    # and an agent that moved reading its own team row in the fleet it left below trust 2
    # (MemClaw's predicate wants trust 2 of every reader outside the row's fleet, its author
    # too; moved.py)
    misses = [v for v in judged if v["verdict"] == "miss"]
    assert {v["path"] for v in misses if not v["probe_id"].startswith("m")} <= {
        "recall", "recall_fleet", "recall_fleets", "recall_agent"}
    moved = [v for v in misses if v["probe_id"].startswith("m")]
    assert moved and {(v["path"], v["trust"]) for v in moved} <= {("get", 0), ("get", 1)}


def test_side_effects_on_asserted_identities_are_findings(headers_run: Path) -> None:
    """MemClaw registers an unknown agent id on its first search and homes a home-less agent
    in the one fleet its search names: each is a side effect, and the probe is judged as the
    agent the target then held (never a gap from the state before)."""
    effects = [v for v in verdicts_of(headers_run) if v["verdict"] == "side_effect"]
    whats = {v["what"].split(" at ")[0].split(" from ")[0] for v in effects}
    assert {"registers the unknown agent id", "re-homes the agent"} <= whats
    observed = events(headers_run, "observe", step="agent")
    assert observed and all(e["status"] in (200, 404) for e in observed)


def test_a_run_missing_principals_is_incomplete_and_the_cli_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """A managed gateway gives one key per tenant: without the second tenant's key its
    principals are missing, the run is incomplete with the reason, and `run` exits 3."""
    from reference_server.launch.process import ReferenceServer

    with ReferenceServer(profile="hardened", extra_args=LIFTED) as srv:
        tenant_id, key = srv.create_tenant()
        for name, value in (("MEMCLAW_API_URL", srv.base_url), ("MEMCLAW_API_KEY", key),
                            ("MEMCLAW_TENANT_ID", tenant_id)):
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("MEMCLAW_OTHER_TENANT_ID", raising=False)
        code = cli.main(["run", "matrix", "--params", str(SMOKE), "--set",
                         f"traces_root={tmp_path}", "--set", "target.kind=live", "--set",
                         "enumerated=false", "--set", "fleets=2", "--set", "random_probes=60",
                         "--set", "cross_tenant_share=0.5"])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_INCOMPLETE
    m = manifest(Path(out.strip()))
    assert not m["complete"] and "principal B." in m["incomplete_reason"]
    assert "incomplete" in err and m["executed"]["probe"] < m["planned"]["probe"]
