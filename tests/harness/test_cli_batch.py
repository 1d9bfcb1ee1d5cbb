"""`fleetprobe batch PLAN`: one run per (entry, profile), in parallel processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fleetprobe.cli import main
from fleetprobe.drive.batch import read_plan
from fleetprobe.harness.experiment import ParamsError

from .traces import REPO

SMOKE_PROVENANCE = str(REPO / "params/smoke/provenance.yaml")


def write_plan(tmp_path: Path, runs: list[dict]) -> Path:
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"runs": runs}))
    return plan


def test_batch_runs_each_entry_under_each_profile(tmp_path: Path, capsys) -> None:
    traces = tmp_path / "traces"
    plan = write_plan(tmp_path, [
        {"experiment": "provenance", "params": SMOKE_PROVENANCE,
         "profiles": ["memclaw-2026-05-30", "naive"]},
        {"experiment": "provenance", "params": SMOKE_PROVENANCE,
         "profiles": ["memclaw-2026-05-30"], "set": ["pace_writes_per_s=null"]},
    ])

    code = main(["batch", str(plan), "--jobs", "3",
                 "--set", f"traces_root={traces}", "--set", "chains=2"])

    assert code == 0, capsys.readouterr()
    manifests = [json.loads(p.read_text()) for p in traces.glob("*/manifest.json")]
    runs = sorted((m["target"]["server_profile"], str(m["params"]["pace_writes_per_s"]))
                  for m in manifests)
    assert runs == [("memclaw-2026-05-30", "8.0"), ("memclaw-2026-05-30", "None"),
                    ("naive", "8.0")]
    assert all(m["params"]["chains"] == 2 for m in manifests)
    assert capsys.readouterr().out.count("ok  provenance") == 3


def test_batch_reports_a_failed_run_with_its_own_output_after_one_retry(
        tmp_path: Path, capsys, monkeypatch) -> None:
    for name in ("MEMCLAW_API_URL", "MEMCLAW_API_KEY", "MEMCLAW_TENANT_ID"):
        monkeypatch.delenv(name, raising=False)
    plan = write_plan(tmp_path, [{"experiment": "provenance", "params": SMOKE_PROVENANCE,
                                  "profiles": ["naive"], "set": ["target.kind=live"]}])
    code = main(["batch", str(plan), "--set", f"traces_root={tmp_path / 't'}"])
    assert code != 0
    out = capsys.readouterr().out
    assert "FAILED (1)  provenance naive [target.kind=live] (attempt 2)" in out
    assert "needs the environment variable(s) MEMCLAW_API_URL" in out
    # failed before its first phase: set aside, never among the real runs
    assert [p.name for p in (tmp_path / "t").iterdir()] == ["_failed"]


def test_a_bad_profile_is_one_line_before_any_run(tmp_path: Path, capsys) -> None:
    plan = write_plan(tmp_path, [{"experiment": "provenance", "params": SMOKE_PROVENANCE,
                                  "profiles": ["no-such-profile"]}])
    code = main(["batch", str(plan), "--set", f"traces_root={tmp_path / 't'}"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown profile 'no-such-profile'" in err[0]
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize(("entry", "problem"), [
    ({"experiment": "nope", "profiles": ["naive"]}, "unknown experiment 'nope'"),
    ({"experiment": "provenance", "profiles": []}, "non-empty list"),
    ({"experiment": "provenance", "profiles": ["naive"], "params": "missing.yaml"},
     "cannot read params file"),
    ({"experiment": "provenance", "profiles": ["naive"], "set": ["no_such_key=1"]},
     "no_such_key"),
])
def test_a_bad_plan_is_refused_before_anything_runs(tmp_path: Path, entry: dict,
                                                     problem: str) -> None:
    with pytest.raises(ParamsError, match=problem):
        read_plan(write_plan(tmp_path, [entry]))


def test_the_reproduce_plan_is_valid() -> None:
    runs = read_plan(REPO / "params/reproduce.yaml")
    labels = {run.label for run in runs}
    assert "leakage memclaw-2026-05-31 [variants=[[fleet_id, fleet_ids]]]" in labels
    assert "contradiction proposed [pair_prose=value_only]" in labels
