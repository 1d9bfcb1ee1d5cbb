"""Sweeps in the plan language (`seeds`, `sweep`): expansion, stable run names, validation,
resuming a swept reproduction, and no promotion from an incomplete sweep."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetprobe.drive import sweeps
from fleetprobe.drive.batch import PlannedRun, load_plan
from fleetprobe.harness.experiment import ParamsError, apply_override, load_params
from fleetprobe.reproduction import RECORD, LocalRuns, new_reproduction, promote, run_plan

from .traces import REPO

SMOKE = str(REPO / "params/smoke/provenance.yaml")


def write_plan(tmp_path: Path, **entry: Any) -> Path:
    plan = tmp_path / "swept.yaml"
    top = {k: entry.pop(k) for k in ("plan_seeds", "plan_sweep") if k in entry}
    doc: dict[str, Any] = {"name": "swept", "runs": [{
        "experiment": "provenance", "params": SMOKE, "profiles": ["memclaw-2026-05-30"],
        "set": ["chains=2", "settle_s=0.1"], **entry}]}
    if "plan_seeds" in top:
        doc["seeds"] = top["plan_seeds"]
    if "plan_sweep" in top:
        doc["sweep"] = top["plan_sweep"]
    plan.write_text(yaml.safe_dump(doc))
    return plan


@pytest.mark.parametrize(("value", "seeds"), [
    ([3, 1, 2], [3, 1, 2]), ("1..4", [1, 2, 3, 4]), ({"start": 7, "count": 3}, [7, 8, 9]),
    (5, [5]), (" -1 .. 1 ", [-1, 0, 1])])
def test_seeds_take_a_list_a_range_or_a_start_and_count(value: Any, seeds: list[int]) -> None:
    assert sweeps.seeds_of(value) == seeds


@pytest.mark.parametrize("value", [[], "4..1", [1, 1], ["1"], True, {"start": 1},
                                   {"start": 1, "count": 0}, "1-4", 2.5])
def test_a_malformed_seed_list_is_refused(value: Any) -> None:
    with pytest.raises(sweeps.SweepError):
        sweeps.seeds_of(value)


def test_a_sweep_is_the_product_of_its_axes_in_the_order_written() -> None:
    combos = sweeps.expand("1..2", {"chains": [10, 50], "target.profile": ["naive"]})
    assert combos == [
        (("seed", "1"), ("chains", "10"), ("target.profile", "naive")),
        (("seed", "1"), ("chains", "50"), ("target.profile", "naive")),
        (("seed", "2"), ("chains", "10"), ("target.profile", "naive")),
        (("seed", "2"), ("chains", "50"), ("target.profile", "naive"))]
    assert sweeps.expand() == [()]  # nothing swept: one run, as before sweeps


def test_swept_values_read_back_as_the_same_params() -> None:
    values = ["plain", "1", "null", "a: b", [1, 2], None, 2.5, "x/y.tar.gz", True]
    (axis,) = sweeps.axes(None, {"v": values})
    params: dict[str, Any] = {}
    for value, text in zip(values, axis[1], strict=True):
        apply_override(params, f"v={text}")
        assert params["v"] == value


def test_run_names_are_stable_readable_and_distinct() -> None:
    assert sweeps.name_part("seed", "3") == "seed3"
    assert sweeps.name_part("target.backend_env", "langgraph-0.4") == "backend_env_langgraph-0.4"
    a = sweeps.name_part("target.engine_src", "../shared/engines/caura-e2d805e.tar.gz")
    b = sweeps.name_part("target.engine_src", "/other/engines/caura-e2d805e.tar.gz")
    assert a.startswith("engine_src_caura-e2d805e.tar.gz-") and a != b
    # no `=` anywhere: DuckDB would read it as a hive partition of the trace's path
    assert "=" not in a + sweeps.name_part("v", "a=b")
    assert a == sweeps.name_part("target.engine_src", "../shared/engines/caura-e2d805e.tar.gz")


@pytest.mark.parametrize("sweep", [[1, 2], {"chains": []}, {"chains": 3}, {"a=b": [1]},
                                   {"chains": [1, 1]}, {"seed": [1]}])
def test_a_malformed_sweep_is_refused(sweep: Any) -> None:
    with pytest.raises(sweeps.SweepError):
        sweeps.expand([1], sweep)


def test_a_plan_entry_expands_to_one_named_run_per_profile_seed_and_value(
        tmp_path: Path) -> None:
    plan = load_plan(write_plan(tmp_path, profiles=["memclaw-2026-05-30", "naive"],
                                seeds="1..3", sweep={"chains": [2, 3]}))
    assert len(plan.runs) == 2 * 3 * 2
    keys = [run.key for run in plan.runs]
    assert len(set(keys)) == len(keys)
    base = PlannedRun("provenance", Path(SMOKE), "naive", ("chains=2", "settle_s=0.1")).key
    assert f"{base}-seed3-chains3" in keys
    run = next(r for r in plan.runs if r.key == f"{base}-seed3-chains3")
    params = load_params(run.params_file, run.settings())
    assert (params["seed"], params["chains"], params["target"]["profile"]) == (3, 3, "naive")
    assert "seed=3" in run.label and "chains=3" in run.label
    # an unswept entry keeps the name it had before sweeps (resuming older records)
    plain = load_plan(write_plan(tmp_path))
    assert [r.key for r in plain.runs] == [
        PlannedRun("provenance", Path(SMOKE), "memclaw-2026-05-30",
                   ("chains=2", "settle_s=0.1")).key]


def test_plan_wide_seeds_apply_where_an_entry_names_none(tmp_path: Path) -> None:
    plan = load_plan(write_plan(tmp_path, plan_seeds=[1, 2]))
    assert [dict(r.sweep)["seed"] for r in plan.runs] == ["1", "2"]
    own = load_plan(write_plan(tmp_path, plan_seeds=[1, 2], seeds=[9]))
    assert [dict(r.sweep)["seed"] for r in own.runs] == ["9"]


def test_a_swept_value_the_experiment_rejects_fails_the_plan_before_any_run(
        tmp_path: Path) -> None:
    with pytest.raises(ParamsError, match="run 1: seeds"):
        load_plan(write_plan(tmp_path, seeds="5..1"))
    with pytest.raises(ParamsError):  # validated like any override, before a run starts
        load_plan(write_plan(tmp_path, sweep={"chains": ["many"]}))


class FailingSeed(LocalRuns):
    """The default executor, except that one seed's attempts fail (a worker lost)."""

    def __init__(self, seed: str) -> None:
        super().__init__(fast=False, jobs=2)
        self.seed = seed
        self.seen: list[str] = []

    def attempt(self, directory: Path, run: PlannedRun, n: int, fast: bool
                ) -> tuple[int, str, str]:
        self.seen.append(run.key)
        if dict(run.sweep).get("seed") == self.seed:
            return 1, "worker lost (test)", ""
        return super().attempt(directory, run, n, fast)


def test_a_swept_reproduction_resumes_where_it_stopped_and_promotes_only_when_complete(
        tmp_path: Path) -> None:
    plan = load_plan(write_plan(tmp_path, seeds=[1, 2, 3], set=["chains=2", "settle_s=0.05"]))
    directory = new_reproduction(tmp_path / "r", plan, fast=False, jobs=3)
    failing = FailingSeed("2")
    assert run_plan(directory, plan, fast=False, jobs=3, executor=failing) is False
    record = json.loads((directory / RECORD).read_text())
    assert record["planned"] == [run.key for run in plan.runs]
    states = {k: (v["status"], v["attempts"]) for k, v in record["runs"].items()}
    assert sorted(states.values()) == [("failed", 2), ("ok", 1), ("ok", 1)]
    with pytest.raises(ParamsError, match="not complete"):
        promote(directory, tmp_path / "traces")

    # the next invocation runs only the failed seed, and the sweep is then complete
    resumed = FailingSeed("none")
    assert run_plan(directory, plan, fast=False, jobs=3, executor=resumed) is True
    assert resumed.seen == [r.key for r in plan.runs if dict(r.sweep)["seed"] == "2"]
    record = json.loads((directory / RECORD).read_text())
    assert record["runs"][resumed.seen[0]]["attempts"] == 3 and record["complete"]

    # a record that says complete but lacks a planned run's directory is not promoted
    missing = record["runs"][resumed.seen[0]]["run_id"]
    (directory / "runs" / missing).rename(tmp_path / "moved")
    with pytest.raises(ParamsError, match="incomplete sweep"):
        promote(directory, tmp_path / "traces", allow_fast=True)
    (tmp_path / "moved").rename(directory / "runs" / missing)
    assert promote(directory, tmp_path / "traces") == 0
    index = json.loads((tmp_path / "traces" / "canonical.json").read_text())
    assert len(index["plans"]["swept"]["runs"]) == 3


def test_a_swept_notebook_run_executes_its_notebook_once_for_the_run_the_report_shows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fleetprobe.reproduction import outputs

    monkeypatch.chdir(REPO)  # notebooks/ is found from the repository root
    executed: list[list[str]] = []
    monkeypatch.setattr(outputs, "run_process", lambda command: executed.append(command)
                        or (0, "", ""))
    plan = load_plan(write_plan(tmp_path, seeds="1..4", notebook=True))
    early = outputs.EarlyNotebooks(tmp_path, plan)
    for n, run in enumerate(plan.runs):  # complete in any order
        early.submit(run, f"run-{n}")
    assert early.executed() and len(executed) == 1
    assert early.shows("provenance", "run-3") and not early.shows("provenance", "run-0")
    assert str(tmp_path / "runs" / "run-3") in executed[0]


def test_the_committed_seed_plan_and_the_documented_example_expand_as_documented(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # the plans name params/ relative to the repository root
    seeds = load_plan(REPO / "params/seed-sweep.yaml")
    assert len(seeds.runs) == 20 and len({r.key for r in seeds.runs}) == 20
    assert "provenance-memclaw-2026-05-30-seed5" in {r.key for r in seeds.runs}
    text = (REPO / "docs/sweeps.md").read_text()
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "example.yaml").write_text(block)
    example = load_plan(tmp_path / "example.yaml")
    assert len(example.runs) == 3 * 5 + 2 * 3 + 5 * 3
    assert any(r.key.endswith("-seed3-backend_env_langgraph-ckpt-3.1.1") for r in example.runs)
