"""The processes report sections are built in: a forkserver that imports the plotting and
statistics stack once, then forks one worker per section job.

Those imports (matplotlib, seaborn and scipy.stats under it) take about 2 s on one core, and
the workers can start nothing before they end. `start()` sets them going at once; the report
notebook calls it in its first cell, so they run while the kernel imports the report's own
modules. This module imports nothing of the kit, so calling it first costs nothing.

Run as a module it is a notebook kernel that calls `start()` before its own start-up (half a
second of ipykernel imports), so the workers' imports overlap that too: the report notebook
names it in its metadata (`fleetprobe.kernel_module`) and `python -m fleetprobe.notebooks`
starts its kernel with it.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import sys
from multiprocessing.context import BaseContext, ForkServerContext
from pathlib import Path

# The heavy imports every section process needs, done once in the forkserver before it forks
# (the PDF backend and tabulate, which the sections import on their first figure or table,
# are imported once there instead of once per worker).
PRELOAD = ["fleetprobe.analysis.base.figures", "fleetprobe.analysis.base.claims",
           "scipy.stats", "matplotlib.backends.backend_pdf", "tabulate"]


def context() -> BaseContext:
    """A forkserver where there is one (POSIX): the heavy imports happen once, and a worker
    never inherits a notebook kernel's threads; spawn elsewhere."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        forkserver = multiprocessing.get_context("forkserver")
        forkserver.set_forkserver_preload(PRELOAD)
        return forkserver
    return multiprocessing.get_context("spawn")


def start() -> BaseContext:
    """The workers' context, its forkserver started now (it returns at once; the imports run
    in the forkserver); idempotent."""
    workers = context()
    if isinstance(workers, ForkServerContext):
        multiprocessing.forkserver.ensure_running()
    return workers


def launch_kernel() -> None:
    """ipykernel_launcher's start-up, with the workers' forkserver started first."""
    if sys.path[0] == "" or Path(sys.path[0]) == Path.cwd():
        del sys.path[0]  # as ipykernel_launcher: the kernel adds the cwd back itself
    start()
    from ipykernel import kernelapp

    kernelapp.launch_new_instance()


if __name__ == "__main__":  # the forkserver's children run this module as __mp_main__
    launch_kernel()
