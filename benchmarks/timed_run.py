"""One experiment run against the bundled server, timed: wall seconds, the harness's and the
server's CPU seconds, and the load average around it (the benchmarks of whole experiments)."""

from __future__ import annotations

import json
import os
import resource
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass

from fleetprobe import load_params, run_experiment


@dataclass
class TimedRun:
    manifest: dict
    events: bytes  # events.jsonl as written
    wall: float
    harness_cpu: float
    server_cpu: float  # the server's, once it exited (a child process)
    load_before: float
    load_after: float

    def cpu_line(self) -> str:
        both = self.harness_cpu + self.server_cpu
        return (f"CPU: harness {self.harness_cpu:.1f} s, server {self.server_cpu:.1f} s "
                f"(= {both / 2:.1f} s of wall on 2 idle cores)")

    def load_line(self) -> str:
        return (f"load average {self.load_before:.1f} before, {self.load_after:.1f} after "
                f"({os.cpu_count()} CPUs)")


def timed_run(experiment: str, params_file: str, overrides: Sequence[str]) -> TimedRun:
    """`experiment` with `params_file` and `overrides`, its traces in a temporary directory."""
    with tempfile.TemporaryDirectory() as tmp:
        params = load_params(params_file, [f"traces_root={tmp}", *overrides, "progress=false"])
        load_before = os.getloadavg()[0]
        started, (cpu0, child0) = time.perf_counter(), cpu_seconds()
        run_dir = run_experiment(experiment, params)
        wall = time.perf_counter() - started
        cpu1, child1 = cpu_seconds()
        return TimedRun(json.loads((run_dir / "manifest.json").read_text()),
                        (run_dir / "events.jsonl").read_bytes(), wall, cpu1 - cpu0,
                        child1 - child0, load_before, os.getloadavg()[0])


def cpu_seconds() -> tuple[float, float]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, children.ru_utime + children.ru_stime
