"""Scale runs (params/scale10x): the reference target on the chosen storage, with background
memories seeded into the run's tenant, recorded in the manifest. Background rows are not
secrets: a leakage run over a store full of them judges every probe as the same run over an
empty store does. Runs on SQLite under `make test`, on PostgreSQL under `make test-pg`."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path

import httpx
import pytest

from fleetprobe import load_params, run_experiment
from fleetprobe.harness.targets import TargetParams, reference_target

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "params/smoke/leakage.yaml"
STORAGE = "postgres" if os.environ.get("FLEETPROBE_DB") == "postgres" else "sqlite"
BACKGROUND = 3000


NONCE = re.compile(r"^fp[0-9a-f]+-")  # agent ids carry the run's nonce


def judgements(run_dir: Path) -> Counter:
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return Counter((e["phase"], e.get("axis"), NONCE.sub("", e.get("prober_agent") or ""),
                    e.get("secret_id"), e.get("leak"), e.get("miss"), e.get("status"))
                   for e in map(json.loads, lines) if e["phase"] in ("probe", "agent_probe"))


def test_scale_params_validate() -> None:
    from fleetprobe.drive.run import get_experiment
    from fleetprobe.harness.experiment import parse_params

    for name in ("leakage", "propagation"):
        params = load_params(REPO / f"params/scale10x/{name}.yaml")
        p = parse_params(get_experiment(name), params)
        assert p.target.storage == "postgres" and p.target.background_memories >= 100_000


def test_background_memories_change_no_judgement(tmp_path: Path) -> None:
    runs = {}
    for background in (0, BACKGROUND):
        params = load_params(SMOKE, [f"traces_root={tmp_path / str(background)}",
                                     f"target.storage={STORAGE}",
                                     f"target.background_memories={background}"])
        runs[background] = run_experiment("leakage", params)
    manifests = {b: json.loads((d / "manifest.json").read_text()) for b, d in runs.items()}
    assert all(m["complete"] for m in manifests.values())
    assert manifests[BACKGROUND]["target"]["storage"].startswith(STORAGE)
    assert manifests[BACKGROUND]["target"]["background_memories"] == BACKGROUND
    assert judgements(runs[0]) == judgements(runs[BACKGROUND])
    assert sum(judgements(runs[0]).values()) > 0


def test_background_rows_are_in_the_tenant_and_searchable() -> None:
    with reference_target(TargetParams(storage=STORAGE, background_memories=500,
                                       search_rate="6000/minute")) as target:
        http = httpx.Client(base_url=target.base_url + "/api/v1",
                            headers={"X-API-Key": target.tenant.key}, timeout=30)
        listed = http.get("/memories", params={"tenant_id": target.tenant.tenant_id,
                                               "limit": 100}).json()
        assert len(listed["items"]) == 100 and listed.get("next_cursor")
        sample = listed["items"][0]
        found = http.post("/search", json={"tenant_id": target.tenant.tenant_id,
                                           "query": sample["content"], "top_k": 3}).json()
        assert found["items"][0]["id"] == sample["id"]
        assert target.storage.startswith(STORAGE) and target.background_memories == 500
        http.close()


@pytest.mark.parametrize("name", ["leakage", "propagation"])
def test_headline_params_keep_scale_runs_out_of_table2(name: str) -> None:
    from fleetprobe.analysis.base.results import Results, load_paper_values

    results = Results(con=None, paper=load_paper_values())  # type: ignore[arg-type]
    scale = load_params(REPO / f"params/scale10x/{name}.yaml")
    reference = load_params(REPO / f"params/reference/{name}.yaml")
    assert results.headline_differences(name, json.dumps(scale))
    assert results.headline_differences(name, json.dumps(reference)) == []
