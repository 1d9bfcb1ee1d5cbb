"""The processes report sections are built in: a forkserver that imports the plotting and
statistics stack once, then forks one worker per section job (a worker never inherits a
notebook kernel's threads, and the imports are not paid once per worker)."""

from __future__ import annotations

import multiprocessing
from multiprocessing import forkserver
from multiprocessing.context import BaseContext

# What every section process needs, imported once in the forkserver before it forks.
PRELOAD = ["fleetprobe.analysis.base.figures", "fleetprobe.analysis.base.claims",
           "scipy.stats", "matplotlib.backends.backend_pdf", "tabulate"]


def start() -> BaseContext:
    """A forkserver where there is one (POSIX), spawn elsewhere. The forkserver is started
    now: it imports PRELOAD (about 1.5 CPU-s) on the other core while the caller loads the
    traces' database, instead of after it, when the first worker is asked for."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    forkserver.ensure_running()
    return context
