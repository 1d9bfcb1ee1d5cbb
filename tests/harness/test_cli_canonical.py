"""`fleetprobe canonical`: one run per (profile, experiment), in parallel processes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from fleetprobe.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_canonical_runs_each_profile_once(tmp_path: Path, capsys) -> None:
    params_dir = tmp_path / "params"
    params_dir.mkdir()
    shutil.copy(REPO / "params/smoke/provenance.yaml", params_dir / "provenance.yaml")
    traces = tmp_path / "traces"

    code = main(["canonical", "--params-dir", str(params_dir), "--jobs", "2",
                 "--profiles", "memclaw-2026-05-30", "naive",
                 "--set", f"traces_root={traces}", "--set", "chains=2"])

    assert code == 0, capsys.readouterr()
    manifests = [json.loads(p.read_text()) for p in traces.glob("*/manifest.json")]
    assert sorted(m["target"]["server_profile"] for m in manifests) == [
        "memclaw-2026-05-30", "naive"]
    assert all(m["complete"] and m["params"]["chains"] == 2 for m in manifests)
    printed = capsys.readouterr().out
    assert printed.count("ok  provenance") == 2


def test_canonical_reports_a_failed_run(tmp_path: Path, capsys) -> None:
    params_dir = tmp_path / "params"
    params_dir.mkdir()
    shutil.copy(REPO / "params/smoke/provenance.yaml", params_dir / "provenance.yaml")

    code = main(["canonical", "--params-dir", str(params_dir), "--jobs", "1",
                 "--profiles", "no-such-profile", "--set", f"traces_root={tmp_path / 't'}"])

    assert code != 0
    assert "FAILED" in capsys.readouterr().out
