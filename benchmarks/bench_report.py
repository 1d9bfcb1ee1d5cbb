"""`make report` speed: the executed report notebook, every table and figure, REPRODUCTION.md
and index.html from the committed traces. Target: <= 10 s on an idle 2-core machine, <= 15 s
at load 2 (issue 22).

Times `make report` several times, alternating a build with an empty database cache
(cold: the traces are loaded, as on a fresh clone or after a new run) and one whose cache
holds these traces' database (warm: the traces unchanged since the last build;
`fleetprobe.analysis.base.database_cache`), and prints each wall time, the CPU seconds it used in
all its processes (the notebook driver, the kernel, the section workers and the forkserver
they fork from: this process adopts the orphans as a child subreaper, so their CPU is
counted), the median and the load average before each run (other work on the machine
inflates wall time; the figure is only comparable with a load written beside it). Then
runs the notebook driver and a kernel on the report notebook's imports alone (the fixed
cost around the build), builds the report once in this process (its wall time) and prints
the CPU seconds of loading the traces and of each section, a figure the machine's other
load inflates far less; and checks that the build left reports/ as committed.

    .venv/bin/python benchmarks/bench_report.py [--runs 3] [--out /tmp/report-bench]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENV_CACHE = "FLEETPROBE_REPORT_CACHE"  # fleetprobe.analysis.base.database_cache


def time_make_report(runs: int, cache_root: Path) -> dict[str, list[tuple[float, float, float]]]:
    """{"cold": [...], "warm": [...]}: (wall seconds, CPU seconds of every process it
    started, 1-minute load average before the run) per `make report`, alternating a build
    with an empty database cache (the traces loaded, as on a fresh clone or after a new run)
    and one with the cache the cold builds filled (the traces unchanged since the last
    build)."""
    adopt_orphans()
    timings: dict[str, list[tuple[float, float, float]]] = {"cold": [], "warm": []}
    warm_cache = cache_root / "warm"
    for i in range(runs):
        for kind in ("cold", "warm"):
            cache = cache_root / f"cold-{i}" if kind == "cold" else warm_cache
            load = os.getloadavg()[0]
            before = _children_cpu()
            started = time.perf_counter()
            subprocess.run(["make", "--no-print-directory", "report"], cwd=REPO, check=True,
                           stdout=subprocess.DEVNULL,
                           env={**os.environ, ENV_CACHE: str(cache)})
            wall = time.perf_counter() - started
            _reap_orphans()
            if kind == "cold" and not warm_cache.exists():
                shutil.copytree(cache, warm_cache)
            timings[kind].append((wall, _children_cpu() - before, load))
            print(f"make report #{i + 1} {kind}: {wall:5.1f} s, {timings[kind][-1][1]:5.1f} "
                  f"CPU-s (load average before: {load:.2f})", flush=True)
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
    source.metadata.pop("fleetprobe", None)  # ipykernel's own launcher: no section workers
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
    os.environ[ENV_CACHE] = "off"  # the whole build, the traces' load included
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
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None,
                        help="scratch directory for the CPU breakdown (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-report-cache-") as cache_root:
        timings = time_make_report(args.runs, Path(cache_root))
    for kind, runs in timings.items():
        walls = [w for w, _, _ in runs]
        cpus = [c for _, c, _ in runs]
        loads = [load for _, _, load in runs]
        print(f"make report, {kind} database cache: median {statistics.median(walls):.1f} s "
              f"over {len(walls)} runs (min {min(walls):.1f}, max {max(walls):.1f}), median "
              f"{statistics.median(cpus):.1f} CPU-s; load average median "
              f"{statistics.median(loads):.2f}; {os.cpu_count()} cores")
    changed = subprocess.run(["git", "status", "--porcelain", "--", "reports"], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout.strip()
    print("reports/ as committed" if not changed else f"reports/ changed:\n{changed}")
    with tempfile.TemporaryDirectory(prefix="bench-report-") as scratch:
        notebook_overhead(args.out or Path(scratch))
        section_cpu(args.out or Path(scratch))


if __name__ == "__main__":  # the report's worker processes import this module's parent
    main()
