"""Provenance end to end against the real reference server, at smoke scale."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from fleetprobe import load_params, run_experiment
from fleetprobe.harness.experiment import TargetUnavailable
from fleetprobe.harness.targets import Target, target_for_server

from .traces import REPO, events, manifest

SMOKE = REPO / "params/smoke/provenance.yaml"




def smoke(traces_root: Path, *overrides: str) -> dict[str, Any]:
    return load_params(SMOKE, [f"traces_root={traces_root}", *overrides])


def test_paced_smoke_run_reconstructs_every_chain(
    target: Target, traces_root: Path, scan_for_secrets: Any
) -> None:
    run_dir = run_experiment("provenance", smoke(traces_root), target=target)
    chains = events(run_dir, "chain")
    assert len(chains) == 4
    assert all(c["complete"] and c["accurate"] and c["depth_faithful"] for c in chains)
    assert [c["depth_observed"] for c in chains] == [4, 4, 4, 4]
    writes, walks = events(run_dir, "write"), events(run_dir, "walk")
    assert len(writes) == 16 and {w["status"] for w in writes} == {201}
    assert {w["pacing"] for w in writes} == {"paced"}
    assert all(w["latency_ms"] > 0 and w["attempts"] == 1 for w in walks)
    # the walk observed each row's parent as written
    parent_of = {w["memory_id"]: w["parent_id"] for w in writes}
    assert all(parent_of[w["memory_id"]] == w["parent_observed"] for w in walks)
    assert [e["seq"] for e in events(run_dir)] == list(range(16 + 16 + 4))

    m = manifest(run_dir)
    assert m["complete"] is True and m["incomplete_reason"] is None
    assert m["planned"] == m["executed"] == {"write": 16, "walk": 16, "chain": 4}
    assert m["target"]["kind"] == "reference"
    assert m["target"]["server_profile"] == "memclaw-2026-05-30"
    assert m["target"]["tenant_id"] == target.tenant.tenant_id
    assert m["params"]["pace_writes_per_s"] == 8 and len(m["nonce"]) == 8
    assert scan_for_secrets(traces_root, set(target.secrets)) == []


def test_unthrottled_ablation_loses_chains_to_429_as_data(
    start_server: Any, traces_root: Path
) -> None:
    target = target_for_server(start_server(extra_args=("--write-rate", "10/second")))
    params = smoke(traces_root, "pace_writes_per_s=null", "chains=12",
                   "client.max_concurrency=12")
    run_dir = run_experiment("provenance", params, target=target)
    writes = events(run_dir, "write")
    limited = [w for w in writes if w["status"] == 429]
    assert limited, "12 unthrottled chains never exceeded 10 writes/s"
    assert all(w["attempts"] == 1 and w["pacing"] == "unthrottled" for w in writes)
    lost = {w["chain_id"] for w in limited}
    chains = {c["chain_id"]: c for c in events(run_dir, "chain")}
    assert {cid for cid, c in chains.items() if not c["complete"]} == lost
    assert manifest(run_dir)["executed"]["write"] < 48  # later hops of lost chains never sent


def test_server_killed_mid_run_leaves_incomplete_manifest(
    start_server: Any, traces_root: Path
) -> None:
    server = start_server()
    target = target_for_server(server)
    params = smoke(traces_root, "chains=8", "pace_writes_per_s=4",
                   "client.max_attempts=2", "client.backoff_base_s=0.05")
    killer = threading.Timer(1.5, server.kill)
    killer.start()
    try:
        with pytest.raises(TargetUnavailable):
            run_experiment("provenance", params, target=target)
    finally:
        killer.cancel()
    (run_dir,) = traces_root.iterdir()
    m = manifest(run_dir)
    assert m["complete"] is False
    assert "stopped answering" in m["incomplete_reason"]
    kept = events(run_dir, "write")
    assert any(w["status"] == 201 for w in kept) and any(w["status"] is None for w in kept)
    assert m["executed"]["write"] == len(kept) < m["planned"]["write"]


def test_cli_prints_run_dir_and_names_bad_params(reference_server: Any, tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "fleetprobe", "run", "provenance", "--params", str(SMOKE),
           "--set", f"traces_root={tmp_path}", "--set", "chains=1"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    run_dir = Path(done.stdout.strip())
    assert run_dir.parent == tmp_path and manifest(run_dir)["complete"] is True

    bad = subprocess.run(cmd + ["--set", "chainz=2"], capture_output=True, text=True,
                         timeout=60, cwd=REPO)
    assert bad.returncode == 2 and "chainz" in bad.stderr


def test_ctrl_c_keeps_events_and_marks_the_manifest(tmp_path: Path) -> None:
    """SIGINT to a paper-scale CLI run: exit 130, manifest incomplete and why, events kept."""
    cmd = [sys.executable, "-m", "fleetprobe", "run", "provenance", "--params", str(SMOKE),
           "--set", f"traces_root={tmp_path}", "--set", "chains=50"]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    events_file = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        found = list(tmp_path.glob("*/events.jsonl"))
        if found and found[0].stat().st_size > 0:
            events_file = found[0]
            break
        time.sleep(0.1)
    assert events_file is not None, "the run never started writing events"
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    m = manifest(events_file.parent)
    assert m["complete"] is False and m["incomplete_reason"].startswith("interrupted")
    assert 0 < m["executed"]["write"] < m["planned"]["write"] == 200
    assert len(events(events_file.parent)) == sum(m["executed"].values())


def test_same_seed_same_executed_plan_fresh_nonce(target: Target, traces_root: Path) -> None:
    def executed_plan(run_dir: Path) -> list[tuple[str, int, str]]:
        nonce = manifest(run_dir)["nonce"]
        return [(w["chain_id"], w["hop"], w["writer_expected"].replace(nonce, "<nonce>"))
                for w in sorted(events(run_dir, "write"), key=lambda w: (w["chain_id"], w["hop"]))]

    first = run_experiment("provenance", smoke(traces_root, "chains=2"), target=target)
    second = run_experiment("provenance", smoke(traces_root, "chains=2"), target=target)
    assert manifest(first)["nonce"] != manifest(second)["nonce"]
    assert executed_plan(first) == executed_plan(second)
    assert len({w for _, _, w in executed_plan(first)}) > 1  # writers vary within the plan
