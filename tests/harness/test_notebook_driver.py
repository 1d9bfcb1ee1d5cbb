"""python -m fleetprobe.notebooks: a notebook's declared kernel module is what its kernel runs
(the report's starts its section workers' forkserver before the kernel's own start-up)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from fleetprobe import notebooks

from .traces import REPO

WORKERS = "fleetprobe.analysis.base.workers"
# the first cell: whether the kernel already has a forkserver child (Linux /proc)
HAS_FORKSERVER = """
import os
from pathlib import Path
children = []
for stat in Path("/proc").glob("[0-9]*/stat"):
    try:
        parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        cmdline = (stat.parent / "cmdline").read_bytes()
    except (OSError, IndexError, ValueError):
        continue
    if parent == os.getpid():
        children.append(cmdline)
print("forkserver child:", any(b"forkserver" in c for c in children))
"""


def notebook(path: Path, kernel_module: str | None) -> Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(HAS_FORKSERVER)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    if kernel_module:
        nb.metadata["fleetprobe"] = {"kernel_module": kernel_module}
    nbformat.write(nb, str(path))
    return path


def test_a_notebook_without_a_declaration_runs_ipykernels_launcher(tmp_path: Path) -> None:
    assert notebooks.declared_kernel_module(notebook(tmp_path / "a.ipynb", None)) == \
        "ipykernel_launcher"
    assert notebooks.kernel_manager("ipykernel_launcher") is notebooks.IPCKernelManager


def test_the_report_notebook_declares_the_workers_kernel() -> None:
    assert notebooks.declared_kernel_module(REPO / "notebooks/report.ipynb") == WORKERS


@pytest.mark.notebook
@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads /proc (Linux)")
def test_the_declared_module_starts_the_forkserver_before_the_first_cell(
        tmp_path: Path) -> None:
    out = tmp_path / "out.ipynb"
    notebooks.execute(notebook(tmp_path / "in.ipynb", WORKERS), out, cwd=REPO)
    executed = nbformat.read(str(out), as_version=4)
    printed = "".join(o.get("text", "") for c in executed.cells for o in c.get("outputs", []))
    assert printed.strip() == "forkserver child: True"
