"""`fleetprobe reproduce`: one directory per invocation, failed runs kept apart and retried,
resumed by the next invocation, promoted into a canonical set with gzipped events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fleetprobe.analysis.base.db import connect
from fleetprobe.drive.batch import load_plan
from fleetprobe.harness.experiment import ParamsError
from fleetprobe.reproduction import (
    RECORD,
    find_resumable,
    new_reproduction,
    promote,
    reproduce,
    run_plan,
)

from .traces import REPO, events


def tiny_plan(tmp_path: Path) -> Path:
    plan = tmp_path / "tiny.yaml"
    plan.write_text(yaml.safe_dump({"name": "tiny", "runs": [
        {"experiment": "provenance", "params": str(REPO / "params/smoke/provenance.yaml"),
         "profiles": ["memclaw-2026-05-30", "naive"], "set": ["chains=2", "settle_s=0.1"],
         "notebook": True}]}))
    return plan


def test_failed_runs_stay_apart_and_the_next_invocation_reruns_only_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    plan = load_plan(tiny_plan(tmp_path))
    root = tmp_path / "reproductions"
    directory = new_reproduction(root, plan, fast=False, jobs=2)
    assert directory.name.endswith("-tiny")

    # A machine too busy for any server to start in time: every attempt fails, twice.
    monkeypatch.setenv("FLEETPROBE_SERVER_STARTUP_S", "0.001")
    assert run_plan(directory, plan, fast=False, jobs=2) is False
    record = json.loads((directory / RECORD).read_text())
    assert len(record["runs"]) == 2
    assert all(v["status"] == "failed" and v["attempts"] == 2 for v in record["runs"].values())
    assert not (directory / "runs").exists()
    logs = sorted(p.name for p in (directory / "logs").iterdir())
    assert len(logs) == 4 and all(".attempt" in name for name in logs)
    log_text = next((directory / "logs").iterdir()).read_text()
    assert "did not answer /api/v1/health" in log_text and "its output" in log_text
    assert len(list((directory / "failed").iterdir())) == 4  # each attempt, named, inspectable
    out = capsys.readouterr().out
    assert "FAILED (1)  provenance memclaw-2026-05-30" in out and "(attempt 2)" in out

    # The next invocation resumes this reproduction and reruns only what failed.
    monkeypatch.delenv("FLEETPROBE_SERVER_STARTUP_S")
    assert find_resumable(root, "tiny", fast=False) == directory
    assert find_resumable(root, "tiny", fast=True) is None  # a plan resumes only its own mode
    assert run_plan(directory, plan, fast=False, jobs=2) is True
    record = json.loads((directory / RECORD).read_text())
    assert all(v["status"] == "ok" and v["attempts"] == 3 for v in record["runs"].values())
    runs = sorted(p.name for p in (directory / "runs").iterdir())
    assert runs == sorted(v["run_id"] for v in record["runs"].values())
    assert not (directory / "work").exists()

    # Complete: never resumed again; a rerun with nothing missing runs nothing.
    assert find_resumable(root, "tiny", fast=False) is None
    capsys.readouterr()
    assert run_plan(directory, plan, fast=False, jobs=2) is True
    assert "0 run(s) to do, 2 kept from before" in capsys.readouterr().out

    # Promote: the plan's canonical runs, events gzipped with fixed bytes, readable as before.
    canonical = tmp_path / "traces"
    (canonical / "someone-elses-run").mkdir(parents=True)
    (canonical / "canonical.json").write_text(json.dumps(
        {"plans": {"other": {"runs": ["someone-elses-run"]}}}))
    assert promote(directory, canonical) == 0
    first = {p: p.read_bytes() for p in canonical.glob("*/events.jsonl.gz")}
    assert promote(directory, canonical) == 0
    assert {p: p.read_bytes() for p in canonical.glob("*/events.jsonl.gz")} == first
    assert len(first) == 2 and not list(canonical.glob("*/events.jsonl"))
    assert (canonical / "someone-elses-run").is_dir()  # another plan's runs are not touched
    index = json.loads((canonical / "canonical.json").read_text())
    assert index["plans"]["tiny"]["runs"] == runs
    assert index["plans"]["tiny"]["notebooks"]["provenance"] in runs
    for run in runs:
        assert events(canonical / run) == events(directory / "runs" / run)
    con = connect(canonical)
    assert con.execute("SELECT count(DISTINCT run_id) FROM events").fetchone()[0] == 2


def test_promote_refuses_an_incomplete_or_fast_reproduction(tmp_path: Path) -> None:
    plan = load_plan(tiny_plan(tmp_path))
    directory = new_reproduction(tmp_path / "r", plan, fast=True, jobs=1)
    with pytest.raises(ParamsError, match="not complete"):
        promote(directory, tmp_path / "traces")
    record = json.loads((directory / RECORD).read_text())
    (directory / RECORD).write_text(json.dumps({**record, "complete": True}))
    with pytest.raises(ParamsError, match="rate limits lifted"):
        promote(directory, tmp_path / "traces")


def test_the_committed_plan_reads_in_both_modes() -> None:
    plan = load_plan(REPO / "params/reproduce.yaml")
    fast = load_plan(REPO / "params/reproduce.yaml", fast=True)
    assert plan.name == "reproduce"
    assert {r.experiment for r in plan.runs if r.notebook} == {
        "leakage", "contradiction", "provenance", "propagation"}
    assert all("client.searches_per_s=null" in r.settings(fast=True) for r in fast.runs)
    # fast mode: the paper's runs, not the kit's extensions (separation, memclaw-2.29)
    left_out = {r.key for r in plan.runs} - {r.key for r in fast.runs}
    assert left_out == {r.key for r in plan.runs
                        if r.experiment == "separation" or r.profile == "memclaw-2.29"}
    assert {r.key for r in fast.runs} <= {r.key for r in plan.runs}
    assert {r.experiment for r in fast.runs if r.notebook} == {
        "leakage", "contradiction", "provenance", "propagation"}
    # fast mode starts the plan's `first` experiments first and otherwise keeps its order
    kinds = [r.experiment for r in fast.runs]
    n_con = kinds.count("contradiction")
    assert kinds[:n_con] == ["contradiction"] * n_con
    rest = [r.key for r in plan.runs
            if r.key not in left_out and r.experiment != "contradiction"]
    assert [r.key for r in fast.runs[n_con:]] == rest


def test_a_plan_entry_may_stay_out_of_fast_mode(tmp_path: Path) -> None:
    plan_file = tiny_plan(tmp_path)
    doc = yaml.safe_load(plan_file.read_text())
    doc["runs"][0]["fast"] = False
    plan_file.write_text(yaml.safe_dump(doc))
    assert len(load_plan(plan_file).runs) == 2 and load_plan(plan_file, fast=True).runs == ()
    doc["runs"][0]["fast"] = "no"
    plan_file.write_text(yaml.safe_dump(doc))
    with pytest.raises(ParamsError, match="`fast` must be true or false"):
        load_plan(plan_file)


def test_fast_runs_in_worker_processes_and_a_failure_there_comes_back_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """Fast mode runs each attempt in a worker process: a complete run lands in runs/, and
    one that fails there (a live target nobody configured) comes back as its reason, with
    the worker's traceback in the attempt's log, not as a broken pool."""
    plan_file = tiny_plan(tmp_path)
    doc = yaml.safe_load(plan_file.read_text())
    doc["runs"].append({**doc["runs"][0], "profiles": ["memclaw-2026-05-30"],
                        "set": [*doc["runs"][0]["set"], "target.kind=live"]})
    plan_file.write_text(yaml.safe_dump(doc))
    for name in ("MEMCLAW_BASE_URL", "MEMCLAW_API_KEY", "MEMCLAW_TENANT_ID"):
        monkeypatch.delenv(name, raising=False)
    plan = load_plan(plan_file, fast=True)
    directory = new_reproduction(tmp_path / "r", plan, fast=True, jobs=2)
    assert run_plan(directory, plan, fast=True, jobs=2) is False
    record = json.loads((directory / RECORD).read_text())
    states = sorted((v["status"], v["attempts"]) for v in record["runs"].values())
    assert states == [("failed", 2), ("ok", 1), ("ok", 1)]
    failed = next(v for v in record["runs"].values() if v["status"] == "failed")
    assert failed["error"].startswith("target: ") and "(log: " in failed["error"]
    log = Path(failed["error"].split("(log: ")[1].rstrip(")")).read_text()
    assert "Traceback" in log and "_execute" in log  # raised in the worker, kept as text
    assert len(list((directory / "runs").iterdir())) == 2
    assert "FAILED (1)" in capsys.readouterr().out


@pytest.mark.slow
def test_a_fast_reproduction_builds_its_notebooks_and_report_from_its_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole front door on a tiny plan: the run's notebook is executed while the plan
    goes on (early), the report notebook beside it, and both land in the report directory
    with REPRODUCTION.md, built from this reproduction's one run."""
    monkeypatch.chdir(REPO)  # notebooks/ and params/ are found from the repository root
    plan_file = tiny_plan(tmp_path)
    doc = yaml.safe_load(plan_file.read_text())
    doc["runs"][0]["profiles"] = ["memclaw-2026-05-30"]
    plan_file.write_text(yaml.safe_dump(doc))
    out_dir = tmp_path / "reports"
    assert reproduce(plan_file, fast=True, root=tmp_path / "r", out_dir=out_dir) == 0
    directory = next((tmp_path / "r").iterdir())
    record = json.loads((directory / RECORD).read_text())
    (run_id,) = [v["run_id"] for v in record["runs"].values()]
    assert record["complete"] and record["report"]["out_dir"] == str(out_dir)
    executed = json.loads((out_dir / "provenance.ipynb").read_text())
    assert f"runs/{run_id}" in json.dumps(executed["cells"])  # it shows this run
    assert (out_dir / "report.ipynb").is_file()
    assert run_id in (out_dir / "REPRODUCTION.md").read_text()
    assert (directory / "REPRODUCTION.md").read_text() == (out_dir / "REPRODUCTION.md"
                                                          ).read_text()
