"""Every experiment notebook runs under papermill on its smoke params, against the real
reference server the notebook starts, and leaves no key in its output or its trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .traces import KEY_LIKE, REPO

# What each executed notebook must show beyond the run directory: names of the metric views
# it queries, so a notebook that silently stops reporting fails here.
MUST_SHOW = {
    "provenance": ("provenance_completeness", "provenance_writer_accuracy"),
    "leakage": ("leakage_search_leak", "leakage_get_exposure"),
    "contradiction": ("contradiction_detection_both_admitted", "prose_diversity"),
    "propagation": ("propagation_sibling_visibility", "reader_relation"),
    "faults": ("faults_checks", "failures_accounted"),
    "separation": ("separation_contamination", "no record in authorized partitions"),
    "matrix": ("cross_tenant_successes", "rate_limits_lifted"),
}


# Smaller worlds where the smoke params are bigger than a notebook check needs (the matrix's
# own tests judge its cells at this size too).
TRIM = {"matrix": ["fleets=2", "random_probes=150", "sweeps=false", "enumerate_trusts=[1, 2]"]}


def code_cells(notebook: Path) -> list[dict]:
    return [c for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "code"]


@pytest.mark.parametrize("experiment", sorted(MUST_SHOW))
def test_notebook_is_stored_clean_with_a_parameters_cell(experiment: str) -> None:
    cells = code_cells(REPO / f"notebooks/{experiment}.ipynb")
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in cells)
    assert any("parameters" in c.get("metadata", {}).get("tags", []) for c in cells)


# One notebook in `make test` (the others share its code path: a parameters cell, a run, the
# metric views); every notebook in `make test-slow`, and `make nbval` checks the committed ones.
QUICK_NOTEBOOK = "leakage"


@pytest.mark.notebook
@pytest.mark.parametrize("experiment", [
    e if e == QUICK_NOTEBOOK else pytest.param(e, marks=pytest.mark.slow)
    for e in sorted(MUST_SHOW)])
def test_notebook_runs_on_smoke_params(experiment: str, tmp_path: Path) -> None:
    papermill = pytest.importorskip("papermill")
    out = tmp_path / f"{experiment}.ipynb"
    papermill.execute_notebook(
        str(REPO / f"notebooks/{experiment}.ipynb"), str(out), cwd=str(REPO),
        parameters={"params_file": f"params/smoke/{experiment}.yaml",
                    "overrides": [f"traces_root={tmp_path / 'traces'}",
                                  *TRIM.get(experiment, [])]},
        progress_bar=False, kernel_name="python3",
    )
    (run_dir,) = (tmp_path / "traces").iterdir()
    assert json.loads((run_dir / "manifest.json").read_text())["complete"] is True
    outputs = [o for c in code_cells(out) for o in c["outputs"]]
    assert outputs and not [o for o in outputs if o.get("output_type") == "error"]
    text = out.read_text()
    assert str(run_dir) in text
    assert all(marker in text for marker in MUST_SHOW[experiment])
    produced = [out, *run_dir.iterdir()]
    assert [p.name for p in produced if KEY_LIKE.search(p.read_text())] == []
