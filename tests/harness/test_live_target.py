"""The live path as an engineer uses it: a base URL, key and tenant in the environment and
`params/live/*.yaml`, pointed here at the bundled server standing in for a live service."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .traces import KEY_LIKE, REPO, events, manifest


def run_live(reference_server, tmp_path: Path, key: str, tenant_id: str
             ) -> subprocess.CompletedProcess:
    env = {**os.environ, "MEMCLAW_API_URL": reference_server.base_url + "/",
           "MEMCLAW_API_KEY": key, "MEMCLAW_TENANT_ID": tenant_id}
    return subprocess.run(
        [sys.executable, "-m", "fleetprobe", "run", "provenance",
         "--params", str(REPO / "params/live/provenance.yaml"),
         "--set", f"traces_root={tmp_path}", "--set", "chains=2", "--set", "settle_s=0.1",
         "--set", "progress=false"],
        env=env, capture_output=True, text=True, timeout=120, check=False)


def test_live_run_records_the_endpoint_and_never_the_key(reference_server, tmp_path: Path
                                                          ) -> None:
    tenant_id, key = reference_server.create_tenant()
    done = run_live(reference_server, tmp_path, key, tenant_id)
    assert done.returncode == 0, done.stderr
    run_dir = Path(done.stdout.strip())
    m = manifest(run_dir)
    assert m["complete"] is True
    assert m["target"]["kind"] == "live"
    assert m["target"]["base_url"] == reference_server.base_url
    assert m["target"]["tenant_id"] == tenant_id
    assert len(events(run_dir, "chain", complete=True)) == 2
    produced = [*run_dir.iterdir()]
    assert [p.name for p in produced if key in p.read_text() or KEY_LIKE.search(p.read_text())
            ] == []
    assert key not in done.stdout + done.stderr


def test_live_run_with_a_wrong_key_says_so_and_keeps_an_incomplete_manifest(
        reference_server, tmp_path: Path) -> None:
    tenant_id, _ = reference_server.create_tenant()
    done = run_live(reference_server, tmp_path, "mc_not_a_real_key", tenant_id)
    assert done.returncode == 1
    assert "rejected the credential" in done.stderr
    assert "mc_not_a_real_key" not in done.stderr
    manifests = [manifest(d) for d in (tmp_path / "_failed").iterdir()]
    assert manifests and all(m["complete"] is False and m["incomplete_reason"]
                             for m in manifests)


# -- credential shapes ------------------------------------------------------------------

import asyncio  # noqa: E402

import pytest  # noqa: E402

from fleetprobe.analysis.base.manifests import run_label  # noqa: E402
from fleetprobe.client import Credential  # noqa: E402
from fleetprobe.harness.experiment import ClientParams, make_client  # noqa: E402
from fleetprobe.harness.targets import TargetError, TargetParams, live_target, preflight  # noqa: E402


def test_the_three_credential_shapes_send_the_headers_memclaw_reads() -> None:
    tenant = Credential(kind="tenant", tenant_id="t", key="mc_k")
    assert tenant.headers() == {"X-API-Key": "mc_k"}
    gate = Credential(kind="gate", tenant_id="t", key="gk").as_agent("a1", 2)
    assert gate.headers() == {"X-API-Key": "gk", "X-Tenant-ID": "t", "X-Agent-ID": "a1"}
    headers = Credential(kind="headers", tenant_id="t").as_agent("a1")
    assert headers.headers() == {"X-Tenant-ID": "t", "X-Agent-ID": "a1"}
    with pytest.raises(ValueError):
        tenant.as_agent("a1")


def _preflight_error(server, auth: str, key: str | None, tenant: str = "t-hint") -> str:
    env = {"MEMCLAW_API_URL": server.base_url, "MEMCLAW_TENANT_ID": tenant}
    if key:
        env["MEMCLAW_API_KEY"] = key
    target = live_target(TargetParams(kind="live", auth=auth), env)  # type: ignore[arg-type]

    async def go() -> str:
        async with make_client(target.base_url, ClientParams(max_attempts=1)) as client:
            try:
                await preflight(client, target)
            except TargetError as exc:
                return str(exc)
        return ""

    return asyncio.run(go())


def test_hints_name_the_shape_a_gate_keyed_engine_wants(start_server) -> None:
    server = start_server("memclaw-2026-05-31", auth="gate")
    no_key = _preflight_error(server, "headers", None)
    assert "Missing API key" in no_key and "target.auth: gate" in no_key
    gate_as_tenant_key = _preflight_error(server, "key", server.gate_key)
    assert "not authorized to read tenant" in gate_as_tenant_key
    assert "target.auth: gate" in gate_as_tenant_key
    assert server.gate_key not in gate_as_tenant_key
    assert _preflight_error(server, "gate", server.gate_key) == ""
    wrong = _preflight_error(server, "gate", "mc_not_the_gate_key")
    assert "Invalid API key" in wrong and "MEMCLAW_API_KEY" in wrong


def test_a_live_target_takes_no_profile_and_gets_a_label() -> None:
    # a params file written for the bundled server, pointed at a live endpoint: its profile
    # never reaches the live target (nor its manifest)
    assert TargetParams(kind="live", profile="memclaw-2026-05-30").profile is None
    assert TargetParams(kind="live").profile is None
    assert TargetParams().profile == "memclaw-2026-05-30"
    assert run_label({"kind": "live", "server_version": "2.29.0",
                      "base_url": "http://127.0.0.1:8000"}) == "live 2.29.0 @ 127.0.0.1:8000"
    assert run_label({"kind": "reference", "server_profile": "naive"}) == "naive"
    assert run_label({"kind": "live", "label": "may-engine", "server_version": "2.0.0"}) == \
        "may-engine"
