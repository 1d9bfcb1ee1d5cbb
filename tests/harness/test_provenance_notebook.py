"""notebooks/provenance.ipynb runs under papermill on the smoke params."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RAW_KEY = re.compile(r"mc_[A-Za-z0-9_-]{40,}")  # reference_server.auth.new_raw_key's shape


@pytest.mark.notebook
def test_provenance_notebook_runs_on_smoke_params(tmp_path: Path) -> None:
    papermill = pytest.importorskip("papermill")
    out = tmp_path / "provenance.ipynb"
    papermill.execute_notebook(
        str(REPO / "notebooks/provenance.ipynb"), str(out), cwd=str(REPO),
        parameters={"params_file": "params/smoke/provenance.yaml",
                    "overrides": [f"traces_root={tmp_path / 'traces'}"]},
        progress_bar=False, kernel_name="python3",
    )
    (run_dir,) = (tmp_path / "traces").iterdir()
    assert json.loads((run_dir / "manifest.json").read_text())["complete"] is True
    executed = json.loads(out.read_text())
    outputs = [o for c in executed["cells"] if c["cell_type"] == "code" for o in c["outputs"]]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert str(run_dir) in out.read_text()
    produced = [out, *run_dir.iterdir()]
    assert [p.name for p in produced if RAW_KEY.search(p.read_text())] == []
