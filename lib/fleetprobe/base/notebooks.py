"""Execute a parameterized notebook quietly: papermill over an IPC kernel.

    python -m fleetprobe.base.notebooks notebooks/report.ipynb reports/report.ipynb \
        -p traces_root data/traces -p out_dir reports

The kernel talks over local IPC sockets rather than TCP on loopback (no "Kernel is running
over TCP without encryption" warning, nothing listening on a port), papermill shows no
progress bar, and a failing cell ends the command with papermill's one-paragraph error.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import uuid
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from jupyter_client.manager import AsyncKernelManager
from traitlets import Unicode

# jsonschema (under nbformat) imports rfc3987_syntax, if installed, for its "iri" format
# check, and that module compiles a grammar on import: 1.4 s of CPU in every notebook run,
# two thirds of this driver's start-up. nbformat's notebook schema has no iri format, so
# the check is never used here; an unimportable module makes jsonschema skip it.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[assignment]


class IPCKernelManager(AsyncKernelManager):
    """A kernel reached over IPC sockets next to its connection file."""

    transport = Unicode("ipc")

    def _ip_default(self) -> str:
        # a socket path prefix of its own: kernels started side by side never share sockets
        return str(Path(tempfile.gettempdir()) / f"fleetprobe-kernel-{uuid.uuid4().hex[:12]}")


def execute(source: str | Path, output: str | Path, parameters: dict[str, Any] | None = None,
            cwd: str | Path | None = None) -> None:
    import papermill

    logging.getLogger("papermill").setLevel(logging.WARNING)
    logging.getLogger("traitlets").setLevel(logging.ERROR)
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # The notebook is written once, at the end (papermill writes it on a failure too),
        # not before and after every cell; the kernel is stopped, not asked to tear itself
        # down, once the last cell's outputs are in: both were seconds of `make report`.
        papermill.execute_notebook(
            str(source), str(output), parameters=parameters or {}, progress_bar=False,
            log_output=False, cwd=str(cwd) if cwd else None, start_timeout=300,
            kernel_manager_class=IPCKernelManager,
            request_save_on_cell_execute=False, shutdown_kernel="immediate",
        )
    strip_timings(Path(output))


VOLATILE = ("start_time", "end_time", "duration")


def strip_timings(path: Path) -> None:
    """Drop papermill's wall-clock metadata so that the same inputs give the same bytes
    (`make report` on a clean clone leaves `git diff` empty)."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    for holder in [nb.metadata, *(cell.metadata for cell in nb.cells)]:
        timing = holder.get("papermill")
        if isinstance(timing, dict):
            for key in VOLATILE:
                timing.pop(key, None)
        holder.pop("execution", None)
    for cell in nb.cells:  # papermill gives the cell it injects a random id
        if "injected-parameters" in cell.metadata.get("tags", []):
            cell["id"] = "injected-parameters"
    nbformat.write(nb, str(path))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fleetprobe.base.notebooks",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("source")
    parser.add_argument("output")
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[],
                        metavar=("NAME", "VALUE"), help="a parameter (value parsed as YAML)")
    args = parser.parse_args(argv)
    os.environ.setdefault("MPLBACKEND", "Agg")
    params = {name: yaml.safe_load(value) for name, value in args.parameter}
    try:
        execute(args.source, args.output, params)
    except Exception as exc:  # noqa: BLE001 - one readable line, not papermill's traceback
        first = str(exc).strip().splitlines()
        print(f"{args.source}: {type(exc).__name__}: {' '.join(first[:1])}; the executed "
              f"notebook with the failing cell is {args.output}", file=sys.stderr)
        tail = [line for line in first[1:] if line.strip()][-8:]
        for line in tail:
            print(f"    {line}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
