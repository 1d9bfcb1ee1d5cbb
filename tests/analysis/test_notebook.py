"""notebooks/report.ipynb executes under papermill on the hand-built traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "report.ipynb"


def test_notebook_is_stored_without_outputs_and_has_parameters():
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code)
    assert any("parameters" in c.get("metadata", {}).get("tags", []) for c in code)


@pytest.mark.notebook
def test_report_notebook_runs_on_fixture_traces(fixture_traces, tmp_path):
    papermill = pytest.importorskip("papermill")
    out_dir = tmp_path / "reports"
    executed = papermill.execute_notebook(
        str(NOTEBOOK), str(tmp_path / "report.ipynb"),
        parameters={"traces_root": str(fixture_traces[0]), "out_dir": str(out_dir)},
        progress_bar=False, kernel_name="python3")
    errors = [o for c in executed.cells for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert errors == []
    assert (out_dir / "REPRODUCTION.md").is_file()
    assert (out_dir / "figures" / "fig4_hop_latency.png").is_file()
