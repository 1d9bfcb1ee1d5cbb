"""The registered sections' outputs for one build: kept ones where their inputs are
unchanged, the others made now (in worker processes when there are several) and kept."""

from __future__ import annotations

import importlib
import os
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from types import ModuleType

from fleetprobe.analysis import sections
from fleetprobe.analysis.base.section import Context, SectionOutput
from fleetprobe.analysis.build import database_cache, inputs, store, workers


def module(key: str) -> ModuleType:
    return importlib.import_module(f"{inputs.PACKAGE}.{sections.REGISTRY[key].module}")


def keys_of(context: Context, keys: Sequence[str]) -> dict[str, str]:
    """Each section's cache key (`inputs.section_key`)."""
    runs = inputs.Runs(context.traces_root)
    parameters = repr((str(context.traces_root), str(context.out_dir), context.run_ids))
    return {key: inputs.section_key(sections.REGISTRY[key], runs, context.traces_root,
                                    parameters) for key in keys}


def build_section(key: str, context: Context) -> SectionOutput:
    """One registered section, made from the traces (in whichever process runs it)."""
    started = time.process_time()
    output = module(key).build(context)
    output.data["unreadable"] = list(context.unreadable)
    output.cpu_seconds = time.process_time() - started
    return output


def outputs(context: Context, keys: Sequence[str], jobs: int | None = None,
            ) -> dict[str, SectionOutput]:
    """{key: output} in `keys` order. A section whose inputs are unchanged since a build
    kept it is read back; the others are made in `jobs` processes (default: one per core,
    never more than there are sections to make; 1: in this process), from the traces'
    database (`database_cache`), and kept."""
    cache_keys = keys_of(context, keys)
    found: dict[str, SectionOutput] = {}
    for key in keys:
        kept = store.load(cache_keys[key])
        if kept is not None:
            found[key] = kept
    stale = [k for k in keys if k not in found]
    if stale:
        made = _make(context, stale, jobs)
        for key in stale:
            store.save(cache_keys[key], made[key])
        found.update(made)
    return {key: found[key] for key in keys}


def _make(context: Context, keys: list[str], jobs: int | None) -> dict[str, SectionOutput]:
    jobs = min(jobs or os.cpu_count() or 1, len(keys))
    processes = workers.start() if jobs > 1 else None
    with tempfile.TemporaryDirectory(prefix="fleetprobe-report-") as scratch:
        database = database_cache.database(context.traces_root, Path(scratch))
        context = replace(context, database=database)
        if jobs <= 1:
            return {key: build_section(key, context) for key in keys}
        rank = {k: i for i, k in enumerate(LONGEST_FIRST)}
        order = sorted(keys, key=lambda k: rank.get(k, len(rank)))
        with ProcessPoolExecutor(max_workers=jobs, mp_context=processes) as pool:
            futures = {key: pool.submit(build_section, key, context) for key in order}
            return {key: futures[key].result() for key in keys}


# The order stale sections are handed to the workers in: the longest first (CPU seconds as
# benchmarks/bench_report.py prints them), so the cores finish together. Never the output's.
LONGEST_FIRST = ("dynamics", "matrix", "backends", "leakage", "fidelity", "propagation",
                 "verdict", "live_targets", "contradiction", "separation", "scale",
                 "provenance", "faults", "embedder")
