"""notebooks/leakage.ipynb runs under papermill on the smoke params."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.notebook
def test_leakage_notebook_runs_on_smoke_params(tmp_path: Path) -> None:
    papermill = pytest.importorskip("papermill")
    out = tmp_path / "leakage.ipynb"
    papermill.execute_notebook(
        str(REPO / "notebooks/leakage.ipynb"), str(out), cwd=str(REPO),
        parameters={"params_file": "params/smoke/leakage.yaml",
                    "overrides": [f"traces_root={tmp_path / 'traces'}"]},
        progress_bar=False, kernel_name="python3",
    )
    (run_dir,) = (tmp_path / "traces").iterdir()
    assert json.loads((run_dir / "manifest.json").read_text())["complete"] is True
    executed = json.loads(out.read_text())
    outputs = [o for c in executed["cells"] if c["cell_type"] == "code" for o in c["outputs"]]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = out.read_text()
    assert str(run_dir) in text and "leakage_search_leak" in text and "cross_fleet" in text
    stored = json.loads((REPO / "notebooks/leakage.ipynb").read_text())
    assert all(not c.get("outputs") for c in stored["cells"] if c["cell_type"] == "code")
