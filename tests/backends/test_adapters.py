"""Each backend adapter, started by the harness like the reference server, on loopback:
the leakage smoke completes with a manifest naming the backend and its version, nothing
tried the network, and paths without an equivalent answer 501 NOT_SUPPORTED_BY_BACKEND.
Skipped for a backend whose package is not installed (`make backends-smoke` installs all)."""

from __future__ import annotations

import importlib.util
import json
import time
from importlib import metadata
from pathlib import Path

import httpx
import pytest

from fleetprobe.backends import BACKENDS
from fleetprobe.backends.process import BackendServer
from fleetprobe.client import NOT_SUPPORTED_CODE
from fleetprobe.runner import load_params, run_experiment

ROOT = Path(__file__).resolve().parents[2]
MODULE = {"langgraph": "langgraph", "mem0": "mem0", "crewai": "crewai"}
PACKAGE = {"langgraph": "langgraph", "mem0": "mem0ai", "crewai": "crewai"}
pytestmark = pytest.mark.backends


def _need(backend: str) -> None:
    if importlib.util.find_spec(MODULE[backend]) is None:
        pytest.skip(f"{PACKAGE[backend]} is not installed (make backends-smoke)")


@pytest.mark.parametrize("backend", BACKENDS)
def test_leakage_smoke(backend: str, tmp_path: Path) -> None:
    _need(backend)
    params = load_params(ROOT / "params/smoke/leakage.yaml", [
        "target.kind=backend", f"target.backend={backend}", f"traces_root={tmp_path}"])
    started = time.monotonic()
    run_dir = run_experiment("leakage", params)
    elapsed = time.monotonic() - started
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["complete"] is True, manifest["incomplete_reason"]
    target = manifest["target"]
    assert target["kind"] == "backend" and target["backend"] == backend
    assert target["backend_version"] == metadata.version(PACKAGE[backend])
    assert target["server_profile"] == f"backend-{backend}"
    assert target["outbound_refused"] == 0
    assert manifest["executed"] == manifest["planned"]
    probes = [json.loads(line) for line in (run_dir / "events.jsonl").open()
              if '"phase": "probe"' in line]
    assert probes and all(p["leak"] is not None for p in probes)
    print(f"{backend} leakage smoke: {elapsed:.1f} s")
    assert elapsed < 180  # the goal is 60 s; a loaded CI machine gets slack, a hang does not


@pytest.mark.parametrize("backend", BACKENDS)
def test_paths_without_equivalent_answer_not_supported(backend: str) -> None:
    _need(backend)
    with BackendServer(backend) as server:
        tenant_id, key = server.create_tenant()
        headers = {"X-API-Key": key}
        url = server.base_url + "/api/v1"
        r = httpx.post(url + "/memories/redistribute", headers=headers,
                       params={"tenant_id": tenant_id, "agent_id": "a"},
                       json={"memory_ids": [], "target_agent_id": "b"}, timeout=30)
        assert r.status_code == 501 and r.json()["error"]["code"] == NOT_SUPPORTED_CODE
        assert backend in r.json()["error"]["message"]
        bad = httpx.post(url + "/memories", headers=headers, json={"tenant_id": tenant_id},
                         timeout=30)
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "INVALID_ARGUMENTS"
        other = httpx.post(url + "/memories", headers=headers, timeout=30, json={
            "tenant_id": "someone-else", "content": "x", "agent_id": "a"})
        assert other.status_code == 403
        written = httpx.post(url + "/memories", headers=headers, timeout=30, json={
            "tenant_id": tenant_id, "content": "Kestrel audit moves to March", "agent_id": "a",
            "fleet_id": "f", "metadata": {"canary": "c-1"}})
        assert written.status_code == 201, written.text
        got = httpx.get(url + f"/memories/{written.json()['id']}", headers=headers,
                        params={"tenant_id": tenant_id}, timeout=30)
        assert got.status_code == 200 and got.json()["metadata"]["canary"] == "c-1"
        assert got.json()["agent_id"] == "a"
        version = httpx.get(url + "/version", timeout=30).json()
        assert version["network"]["outbound_refused"] == 0
