"""`fleetprobe judge`: every committed run re-judged from its events alone gives back its
recorded verdicts, field by field; a changed policy (or a changed recorded verdict) gives a
different result, so the equality is not one that cannot fail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fleetprobe.cli import main
from fleetprobe.drive import judge
from fleetprobe.oracle import policy
from fleetprobe.oracle.policy_file import PolicyFileError

from .traces import REPO

TRACES = REPO / "data" / "traces"
RUNS = sorted(p.parent for p in TRACES.glob("*/manifest.json"))
VARIANT = REPO / "params" / "policy" / "own-rows-anywhere.yaml"
# the memclaw-2026-05-30 matrix run (the report's matrix example)
MATRIX = TRACES / "20261202T073936Z-matrix-seed11"
SMALL_MATRIX = TRACES / "20261202T150231Z-matrix-seed11"  # a backend adapter's (crewai)


def test_committed_runs_are_found() -> None:
    experiments = {json.loads((r / "manifest.json").read_text())["experiment"] for r in RUNS}
    assert len(RUNS) >= 90
    assert experiments <= set(judge.JUDGINGS), "an experiment without a judge"


@pytest.mark.parametrize("run", RUNS, ids=[r.name for r in RUNS])
def test_committed_run_rejudged_as_recorded(run: Path) -> None:
    r = judge.rejudge(run)
    assert r.tallies, "nothing was re-judged"
    differ = {name: t.examples for name, t in r.tallies.items() if t.differ}
    assert not differ and not r.unmatched, judge.summary(r)
    # what is not re-judged is named and counted: observations only, never a verdict
    assert set(r.observed) <= set(judge.OBSERVED.get(r.experiment, {}))
    assert not set(r.observed) & set(r.tallies)


def test_another_policy_changes_the_verdicts_it_should() -> None:
    """Own rows changeable anywhere at trust 1: the eight changes of a trust-1/2 agent's own
    row outside its home fleet (patch, patch_content, patch_status, delete), which the
    engine refuses with a 403 that differs from its 404 for an unknown id, are no longer
    existence oracles of a denied probe but refusals of an allowed change."""
    manifest, recorded = judge.read_run(MATRIX)
    r = judge.rejudge_events("matrix", recorded, manifest["params"], policy.load(VARIANT))
    verdict = r.tallies["verdict.verdict"]
    assert verdict.differ == 8 and r.tallies["verdict.expected"].differ == 8
    assert (verdict.recorded["oracle"], verdict.rejudged["oracle"]) == (941, 933)
    assert (verdict.recorded["refused"], verdict.rejudged["refused"]) == (114, 122)
    changed = [new for old, new in zip(recorded, r.events, strict=True)
               if old["phase"] == "verdict" and old["verdict"] != new["verdict"]]
    assert all(e["relation"] == "own" and e["verdict"] == "refused" for e in changed)
    assert {e["path"] for e in changed} == {"patch", "patch_content", "patch_status", "delete"}
    assert all(e["expected"] == "allow" for e in changed)


def test_a_changed_recorded_verdict_is_reported() -> None:
    manifest, events = judge.read_run(MATRIX)
    first = next(e for e in events if e["phase"] == "verdict" and e["verdict"] == "gap")
    first["verdict"] = "ok"
    r = judge.rejudge_events(manifest["experiment"], events, manifest["params"])
    assert r.differences == 1
    assert r.tallies["verdict.verdict"].examples == [
        f"verdict probe_id={first['probe_id']}: ok -> gap"]


def test_leakage_expectation_follows_the_policy(tmp_path: Path) -> None:
    """A policy where a trust-1 agent reads another fleet's team rows turns the Table 3 and
    re-probe denials into expected reads (and their refusals into misses)."""
    raw = yaml.safe_load(policy.DEFAULT_FILE.read_text())
    raw["read"]["other_fleet"]["scope_team"] = 1
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(raw))
    r = judge.rejudge(TRACES / "20261202T073936Z-leakage-seed7",
                      policy.load(tmp_path / "p.yaml"))
    assert r.tallies["reprobe.expected"].differ == 36
    assert r.tallies["agent_probe.expected"].differ == 1
    assert r.tallies["probe.expected"].differ == 0  # the paper's own expectation


def test_default_policy_file_is_the_former_tables() -> None:
    d = policy.DEFAULT
    assert d.read["other_fleet"] == {"scope_agent": None, "scope_team": 2, "scope_org": 0}
    assert d.change == {"own": 1, "same_fleet": 3, "null_fleet": 3, "other_fleet": 3,
                        "homeless": 3}
    assert (d.own_outside_write_scope, d.write) == (3, {"home": 1, "none": 1, "other": 3})
    assert (d.redistribute_any_target, d.redistribute_target_min_trust) == (3, 1)
    assert (d.deleted_agent, d.deleted_tenant, d.deleted_own_reveal) == ("deny", "may", "may")
    assert policy.load(VARIANT).own_outside_write_scope == 1


@pytest.mark.parametrize(("edit", "message"), [
    (lambda raw: raw.pop("change"), "change: Field required"),
    (lambda raw: raw["read"]["own"].pop("scope_team"), "read.own: missing scope_team"),
    (lambda raw: raw["write"].update(home="one"), "write.home: Input should be a valid "
     "integer"),
    (lambda raw: raw["change"].update(own=7), "change.own: 7 is not a trust level"),
    (lambda raw: raw["paths"].pop("get"), "paths: missing get"),
    (lambda raw: raw["paths"]["get"].update(kind="peek"), "paths.get.kind: Input should be"),
    (lambda raw: raw["paper"].update(agent=["anyone"]), "paper.agent: unknown relation anyone"),
    (lambda raw: raw.update(colour="blue"), "colour: Extra inputs are not permitted"),
])
def test_a_wrong_policy_file_names_the_key(tmp_path: Path, edit, message: str) -> None:
    raw = yaml.safe_load(policy.DEFAULT_FILE.read_text())
    edit(raw)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(PolicyFileError, match="bad.yaml is invalid") as info:
        policy.load(path)
    assert message in str(info.value)


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = str(SMALL_MATRIX)
    assert main(["judge", run, "--check"]) == 0
    assert "0 difference(s)" in capsys.readouterr().out
    out = tmp_path / "rejudged.jsonl"
    assert main(["judge", run, "--policy", str(VARIANT), "--check", "--out", str(out)]) == 1
    text = capsys.readouterr().out
    assert "18 difference(s)" in text and "gap -> ok" in text
    assert sum(1 for _ in out.open()) == len(judge.read_run(SMALL_MATRIX)[1])
    (tmp_path / "bad.yaml").write_text("- not a mapping\n")
    assert main(["judge", run, "--policy", str(tmp_path / "bad.yaml")]) == 2
    assert "must hold a mapping" in capsys.readouterr().err
    assert main(["judge", str(tmp_path)]) == 2
    assert "not a run directory" in capsys.readouterr().err
