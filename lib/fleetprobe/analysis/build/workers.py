"""The processes report sections are built in: a forkserver that imports the plotting and
statistics stack once, then forks one worker per section job (a worker never inherits a
notebook kernel's threads, and the imports are not paid once per worker)."""

from __future__ import annotations

import multiprocessing
from multiprocessing.context import BaseContext

# What every section process needs, imported once in the forkserver before it forks.
PRELOAD = ["fleetprobe.analysis.base.figures", "fleetprobe.analysis.base.claims",
           "scipy.stats", "matplotlib.backends.backend_pdf", "tabulate"]


def context() -> BaseContext:
    """A forkserver where there is one (POSIX), spawn elsewhere."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        forkserver = multiprocessing.get_context("forkserver")
        forkserver.set_forkserver_preload(PRELOAD)
        return forkserver
    return multiprocessing.get_context("spawn")
