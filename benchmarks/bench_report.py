"""`make report` speed: the executed report notebook, every table and figure, REPRODUCTION.md
and index.html from the committed traces. Target: <= 10 s on an idle 2-core machine, <= 15 s
at load 2 (issue 22).

Times `make report` several times and prints each wall time, the CPU seconds it used in
all its processes (the notebook driver, the kernel, the section workers and the forkserver
they fork from: this process adopts the orphans as a child subreaper, so their CPU is
counted), the median and the load average before each run (other work on the machine
inflates wall time; the figure is only comparable with a load written beside it). Then
runs the notebook driver and a kernel on the report notebook's imports alone (the fixed
cost around the build), builds the report once in this process (its wall time) and prints
the CPU seconds of loading the traces and of each section, a figure the machine's other
load inflates far less; and checks that the build left reports/ as committed.

    .venv/bin/python benchmarks/bench_report.py [--runs 5] [--out /tmp/report-bench]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def time_make_report(runs: int) -> list[tuple[float, float, float]]:
    """(wall seconds, CPU seconds of every process it started, 1-minute load average before
    the run) per `make report`."""
    adopt_orphans()
    timings = []
    for _ in range(runs):
        load = os.getloadavg()[0]
        before = _children_cpu()
        started = time.perf_counter()
        subprocess.run(["make", "--no-print-directory", "report"], cwd=REPO, check=True,
                       stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - started
        _reap_orphans()
        timings.append((wall, _children_cpu() - before, load))
        print(f"make report #{len(timings)}: {wall:5.1f} s, {timings[-1][1]:5.1f} CPU-s "
              f"(load average before: {load:.2f})", flush=True)
    return timings


def adopt_orphans() -> None:
    """Make this process the child subreaper (Linux): the processes `make report` leaves
    running as it ends (the forkserver and the workers it forked) become its children, so
    their CPU time is counted once they are reaped. Elsewhere only waited-for children count."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def _reap_orphans(patience_s: float = 10.0) -> None:
    deadline = time.monotonic() + patience_s
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.05)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def notebook_overhead(out_dir: Path) -> None:
    """What `make report` spends around the build: the notebook driver and a kernel running
    the report notebook's imports only (start, imports, shutdown, writing the notebook)."""
    import nbformat

    source = nbformat.read(str(REPO / "notebooks/report.ipynb"), as_version=4)
    source.cells = [c for c in source.cells if "parameters" in c.metadata.get("tags", [])]
    source.cells.append(nbformat.v4.new_code_cell("import fleetprobe.analysis.report"))
    path = out_dir / "imports-only.ipynb"
    nbformat.write(source, str(path))
    before = _children_cpu()
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "fleetprobe.notebooks", str(path),
                    str(out_dir / "imports-only.out.ipynb")], cwd=REPO, check=True)
    _reap_orphans()
    print(f"  notebook driver + kernel, imports only: {time.perf_counter() - started:5.2f} s, "
          f"{_children_cpu() - before:5.2f} CPU-s (load average {os.getloadavg()[0]:.2f})")


def section_cpu(out_dir: Path) -> None:
    from fleetprobe.analysis import report
    from fleetprobe.analysis.base import db

    started = time.process_time()
    wall = time.perf_counter()
    db.write_database(REPO / "data/traces", out_dir / "traces.duckdb")
    print(f"  load the traces (DuckDB): {time.process_time() - started:5.2f} CPU-s, "
          f"{time.perf_counter() - wall:5.2f} s")
    wall = time.perf_counter()
    built = report.build(REPO / "data/traces", out_dir / "reports")
    print(f"  report.build (load, sections in {os.cpu_count()} processes, index.html): "
          f"{time.perf_counter() - wall:5.2f} s wall (load average {os.getloadavg()[0]:.2f})")
    total = 0.0
    for key, section in built["sections"].items():
        total += section.cpu_seconds
        print(f"  section {key:<14} {section.cpu_seconds:5.2f} CPU-s")
    print(f"  sections total          {total:5.2f} CPU-s "
          f"(built in {os.cpu_count()} processes at most)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None,
                        help="scratch directory for the CPU breakdown (default: a temp dir)")
    args = parser.parse_args()
    timings = time_make_report(args.runs)
    walls = [w for w, _, _ in timings]
    cpus = [c for _, c, _ in timings]
    loads = [load for _, _, load in timings]
    print(f"make report: median {statistics.median(walls):.1f} s over {len(walls)} runs "
          f"(min {min(walls):.1f}, max {max(walls):.1f}), median {statistics.median(cpus):.1f} "
          f"CPU-s; load average median {statistics.median(loads):.2f}; {os.cpu_count()} cores")
    changed = subprocess.run(["git", "status", "--porcelain", "--", "reports"], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout.strip()
    print("reports/ as committed" if not changed else f"reports/ changed:\n{changed}")
    with tempfile.TemporaryDirectory(prefix="bench-report-") as scratch:
        notebook_overhead(args.out or Path(scratch))
        section_cpu(args.out or Path(scratch))


if __name__ == "__main__":  # the report's worker processes import this module's parent
    main()
