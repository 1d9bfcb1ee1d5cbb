"""mem0 with `infer=True` and CrewAI Memory with its analysis and consolidation, each against
the scripted model on loopback (docs/scripted-model.md): the model-mediated paths run, every
prompt reaches the model's trace, and what crosses a scope there is what the committed
probes report (`fleetprobe.backends.model_probes`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleetprobe.backends.process import BackendServer
from fleetprobe.drive.run import run_experiment
from fleetprobe.harness.experiment import load_params

from .conftest import ROOT, need

pytestmark = pytest.mark.backends

NEAR = ("The billing database password for the eu cluster rotates every Monday at {t} and "
        "the new value is kept in the team vault next to the runbook.")


class Tenant:
    def __init__(self, server: BackendServer) -> None:
        self.server = server
        self.tenant_id, key = server.create_tenant()
        self.http = httpx.Client(base_url=server.base_url + "/api/v1", timeout=300,
                                 headers={"X-API-Key": key})

    def write(self, content: str, agent: str | None, fleet: str,
              visibility: str = "scope_team") -> httpx.Response:
        body = {"tenant_id": self.tenant_id, "fleet_id": fleet, "content": content,
                "visibility": visibility} | ({"agent_id": agent} if agent else {})
        return self.http.post("/memories", json=body)

    def rows(self, fleet: str) -> list[dict[str, Any]]:
        r = self.http.get("/memories", params={"tenant_id": self.tenant_id, "fleet_id": fleet})
        assert r.status_code == 200, r.text
        return r.json()["items"]

    def model_calls(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.server.model_trace.read_text().splitlines()]


def test_mem0_infer_extracts_through_the_scripted_model(
        backend_server: Callable[..., BackendServer]) -> None:
    t = Tenant(backend_server("mem0", "infer"))
    version = t.http.get("/version").json()
    assert version["backend_deployment"] == "infer"
    assert version["network"]["outbound_refused"] == 0  # the model is on loopback
    r = t.write("The payments cluster uses the blue pool. Alice owns the billing runbook.",
                "a1", "f1")
    assert r.status_code == 201, r.text
    assert r.json()["content"] == "The payments cluster uses the blue pool."
    stored = sorted(m["content"] for m in t.rows("f1"))
    assert stored == ["Alice owns the billing runbook.",
                      "The payments cluster uses the blue pool."]  # one row per fact
    calls = t.model_calls()
    extraction = [c for c in calls if c["kind"] == "mem0.additive_extraction"
                  and "Alice owns" in c["messages"][1]["content"]]
    assert len(extraction) == 1 and extraction[0]["response_format"] == "json_object"
    assert any(c["endpoint"] == "embeddings" and "Alice owns the billing runbook." in
               c["inputs"] for c in calls)  # mem0's openai embedder, on the same server


def test_mem0_infer_shows_the_model_the_writers_rows_of_every_fleet(
        backend_server: Callable[..., BackendServer]) -> None:
    """mem0 retrieves the memories it puts in the prompt by user_id/agent_id: the fleet (a
    metadata key in the adapter's mapping) and the visibility do not narrow it."""
    t = Tenant(backend_server("mem0", "infer"))
    assert t.write("Agent one keeps the bridge code 4471 in private notes.", "a1", "f1",
                   "scope_agent").status_code == 201
    assert t.write("The eu deploy freeze starts on Friday evening.", "a1", "f2"
                   ).status_code == 201
    prompt = next(c for c in reversed(t.model_calls())
                  if c["kind"] == "mem0.additive_extraction")["messages"][1]["content"]
    existing = prompt.split("## Existing Memories\n", 1)[1].split("\n## ", 1)[0]
    assert "4471" in existing


def test_mem0_1x_update_decision_rescopes_another_agents_row(
        backend_server: Callable[..., BackendServer]) -> None:
    """mem0 1.0.11: a write naming no agent retrieves every agent's rows of the owner; the
    model's UPDATE rewrites agent a1's private row of fleet f1 with the writer's metadata."""
    t = Tenant(backend_server("mem0", "infer", env="mem0-1.0.11"))
    first = t.write("The staging database runs on host db-7 in rack four.", "a1", "f1",
                    "scope_agent").json()
    second = t.write("The staging database runs on host db-9 in rack four.", None, "f2")
    assert second.status_code == 501 and "UPDATE" in second.text
    row = t.http.get(f"/memories/{first['id']}").json()
    assert row["content"] == "The staging database runs on host db-9 in rack four."
    assert (row["agent_id"], row["fleet_id"], row["visibility"]) == ("a1", "f2", "scope_team")
    kinds = [c["kind"] for c in t.model_calls() if c["endpoint"] == "chat.completions"]
    assert "mem0.fact_extraction" in kinds and "mem0.update_decision" in kinds


def test_crewai_consolidation_merges_into_another_agents_private_record(
        backend_server: Callable[..., BackendServer]) -> None:
    t = Tenant(backend_server("crewai", "strict-analysis"))
    first = t.write(NEAR.format(t="noon"), "a1", "f1", "scope_agent").json()
    assert first["metadata"]["crewai_private"] is True
    second = t.write(NEAR.format(t="dawn"), "a2", "f1").json()
    assert second["id"] == first["id"]  # remember() answered with a1's record
    rows = t.rows("f1")
    assert len(rows) == 1 and "dawn" in rows[0]["content"] and "noon" in rows[0]["content"]
    assert rows[0]["metadata"]["crewai_private"] is False  # the update dropped privacy
    assert rows[0]["metadata"]["crewai_source"] is None
    kinds = [c["kind"] for c in t.model_calls()]
    assert "crewai.save_analysis" in kinds and "crewai.consolidation" in kinds


def test_a_run_keeps_the_models_prompts_beside_its_events(tmp_path: Path) -> None:
    """A run that starts its own mem0[infer] adapter (and so its scripted model) leaves
    model.jsonl in its run directory: one extraction prompt per write."""
    need("mem0")
    params = load_params(ROOT / "params/smoke/leakage.yaml", [
        "target.kind=backend", "target.backend=mem0", "target.backend_deployment=infer",
        f"traces_root={tmp_path}"])
    run_dir = run_experiment("leakage", params)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["complete"] is True, manifest["incomplete_reason"]
    assert manifest["target"]["backend_deployment"] == "infer"
    calls = [json.loads(line) for line in (run_dir / "model.jsonl").read_text().splitlines()]
    extractions = [c for c in calls if c["kind"] == "mem0.additive_extraction"]
    assert len(extractions) == manifest["executed"]["write"]
    assert not [c for c in calls if c["kind"] == "unmatched"]
