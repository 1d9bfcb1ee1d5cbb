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
