"""The four experiments, Table 3 and the re-probe against an endpoint that demands a shared
gate key + X-Tenant-ID + a client-asserted X-Agent-ID (a self-hosted MemClaw), here the
reference server started with `--auth gate`; the report judges that label on its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetprobe import load_params, run_experiment
from fleetprobe.analysis.base import claims as verdict
from fleetprobe.analysis.base.results import Results
from fleetprobe.harness.targets import TargetParams, live_target
from reference_server.launch.process import ReferenceServer

from .traces import KEY_LIKE, REPO, events, manifest

LABEL = "selfhosted-gate 05-31"
RAISED = ("--write-rate", "1000/second", "--search-rate", "100000/minute",
          "--bulk-rate", "1000/second", "--detection-delay", "0.05")
EXPERIMENTS = ("leakage", "contradiction", "provenance", "propagation")
SMALL = {"contradiction": ["n_facts=4"], "provenance": ["chains=2"],
         "leakage": [], "propagation": []}


@pytest.fixture(scope="module")
def gate_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict, set]]:
    root = tmp_path_factory.mktemp("gate-traces")
    with ReferenceServer(profile="memclaw-2026-05-31", extra_args=RAISED, auth="gate") as srv:
        env = {"MEMCLAW_API_URL": srv.base_url, "MEMCLAW_API_KEY": srv.gate_key or "",
               "MEMCLAW_TENANT_ID": "selfhosted-tenant"}
        runs = {}
        for name in EXPERIMENTS:
            overrides = [f"traces_root={root}", "target.kind=live", "target.profile=null",
                         "target.auth=gate", f"target.label={LABEL}", *SMALL[name]]
            params = load_params(REPO / f"params/smoke/{name}.yaml", overrides)
            target = live_target(TargetParams.model_validate(params["target"]), env)
            runs[name] = run_experiment(name, params, target=target)
        yield root, runs, {srv.gate_key or "", srv.admin_key}


def test_every_experiment_completes_through_the_gate(gate_runs) -> None:
    _, runs, secrets = gate_runs
    for name, run_dir in runs.items():
        m = manifest(run_dir)
        assert m["complete"] is True, (name, m["incomplete_reason"])
        t = m["target"]
        assert (t["kind"], t["label"], t["auth"], t["identity_mechanism"]) == (
            "live", LABEL, "gate", "asserted")
        assert m["params"]["target"]["profile"] is None  # never the bundled default
        for path in run_dir.iterdir():
            text = path.read_text()
            assert not any(s in text for s in secrets) and not KEY_LIKE.search(text), path


def test_table3_and_the_reprobe_run_with_asserted_identities(gate_runs) -> None:
    _, runs, _ = gate_runs
    run_dir = runs["leakage"]
    assert manifest(run_dir)["skipped"] == []
    provision = events(run_dir, "provision")
    assert provision and all(e["identity"] == "asserted" and e["provisioned"]
                             and e["op"].startswith("PATCH /api/v1/agents/")
                             for e in provision)
    assert len(events(run_dir, "register")) == len(provision)
    whoami = [e for e in events(run_dir, "whoami") if e["credential"] == "agent"]
    assert whoami and all(e["whoami_agent_id"] == e["prober_agent"] for e in whoami)
    table3 = events(run_dir, "agent_probe", credential="agent")
    assert table3 and all(e["identity"] == "asserted" for e in table3)
    # 05-31 scope on GET by id: trust 1 cross-fleet is denied (404), trust 2 reads
    t1_cross = [e for e in table3 if e["trust"] == 1 and e["relation"] == "cross_fleet"]
    t2_cross = [e for e in table3 if e["trust"] == 2 and e["relation"] == "cross_fleet"]
    assert t1_cross and {e["status"] for e in t1_cross} == {404}
    assert t2_cross and all(e["returned"] for e in t2_cross)
    reprobe = events(run_dir, "reprobe")
    assert reprobe and all(e["identity"] == "asserted" for e in reprobe)
    assert not any(e["leak"] for e in reprobe)


def test_propagation_readers_read_under_their_own_identity(gate_runs) -> None:
    _, runs, _ = gate_runs
    readers = events(runs["propagation"], "reader")
    assert readers and {(e["credential"], e["identity"]) for e in readers} == {
        ("agent", "asserted")}
    foreign = [p for p in events(runs["propagation"], "probe")
               if p["reader_relation"] == "foreign"]
    assert foreign and not any(p["leak"] for p in foreign)


def test_the_report_gives_the_label_its_own_verdicts(gate_runs) -> None:
    root, runs, _ = gate_runs
    results = Results.load(root)
    try:
        judged = verdict.judge_all(results)
    finally:
        results.con.close()
    mine = [v for v in judged if v.profile == LABEL]
    run_ids = {Path(p).name for p in runs.values()}
    assert {run for v in mine for run in v.run_ids} == run_ids  # all four experiments
    # Table 3 and the re-probe claims are judged on this label's leakage run
    leakage = Path(runs["leakage"]).name
    for prefix in ("table3_", "reprobe_"):
        rows = [v for v in mine if v.claim_id.startswith(prefix)]
        assert rows and all(v.run_ids == [leakage] and v.status != verdict.NOT_MEASURED
                            for v in rows), prefix
    # no bundled profile's verdict is computed from the label's runs
    assert all(not set(v.run_ids) & run_ids for v in judged if v.profile != LABEL)
