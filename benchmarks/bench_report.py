"""`make report` speed in its three cases (issue 35; targets on an idle 2-core machine):

- nothing changed (the executed notebook and every report file current): <= 3 s;
- after one new run (a copy of a committed propagation run under a later name and run id,
  which becomes its profile's canonical run): <= 10 s;
- from a fresh clone (no kept section, database or stamp): <= 20 s.

Each case runs what `make report` runs (`python -m fleetprobe.analysis.build` on the report
notebook, with the same relative paths) in a scratch copy of the repository's layout: a
data/traces of links to the committed runs (plus the new run), links to the evidence beside
them and a copy of reports/, with a report cache of its own, so the working tree is never
touched and a build's bytes can be compared with the committed ones.
Prints each wall time, the CPU seconds of every process it started (the notebook driver, the
kernel, the section workers: this process adopts orphans as a child subreaper), the 1-minute
load average before each run, and the median, min and max per case. Then checks that two
fresh builds give the same bytes and that the committed reports/ is what a fresh build gives.

    .venv/bin/python benchmarks/bench_report.py [--runs 3]
"""

from __future__ import annotations

import argparse
import ctypes
import filecmp
import gzip
import json
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
TRACES = REPO / "data/traces"
ENV_CACHE = "FLEETPROBE_REPORT_CACHE"  # fleetprobe.analysis.build.store
NEW_RUN_OF = "20261202T073937Z-propagation-seed7"  # copied as the "one new run"


def make_report(root: Path, cache: Path) -> tuple[float, float, float]:
    """(wall s, CPU s of every process started, load average before) of one build in
    `root`, a scratch copy of the repository's layout (`scratch_repo`), run from there with
    the paths `make report` gives, so its bytes can be compared with the committed ones."""
    load = os.getloadavg()[0]
    before = _children_cpu()
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "fleetprobe.analysis.build", "notebooks/report.ipynb",
                    "reports/report.ipynb", "-p", "traces_root", "data/traces", "-p",
                    "out_dir", "reports"], cwd=root, check=True, stdout=subprocess.DEVNULL,
                   env={**os.environ, ENV_CACHE: str(cache), "MPLBACKEND": "Agg"})
    wall = time.perf_counter() - started
    _reap_orphans()
    return wall, _children_cpu() - before, load


def scratch_repo(root: Path) -> Path:
    """`root` laid out as the repository for a build: a copy of reports/, the notebooks
    linked, data/traces of hard links to the committed runs (`linked_traces`)."""
    shutil.copytree(REPO / "reports", root / "reports")
    (root / "notebooks").symlink_to(REPO / "notebooks", target_is_directory=True)
    linked_traces(root / "data" / "traces")
    return root


def linked_traces(root: Path) -> Path:
    """`root` (a `data/traces` under a scratch folder, so the pages' links to the traces
    are the committed ones) holding hard links to the committed runs, with links to the
    evidence the sections read beside the traces (data/scale, data/model-probes)."""
    root.mkdir(parents=True)
    for evidence in sorted(TRACES.parent.iterdir()):
        if evidence.is_dir() and evidence != TRACES:
            (root.parent / evidence.name).symlink_to(evidence, target_is_directory=True)
    # hard links, not symbolic ones: a section resolves a run's path, and the page links it
    # relative to reports/
    for entry in sorted(TRACES.iterdir()):
        if entry.is_dir():
            shutil.copytree(entry, root / entry.name, copy_function=os.link)
        else:
            os.link(entry, root / entry.name)
    return root


def add_run(traces: Path, i: int) -> Path:
    """A copy of NEW_RUN_OF under a later name and its own run id (manifest and events)."""
    source = TRACES / NEW_RUN_OF
    name = f"20991231T{i:06d}Z-propagation-seed7"
    run = traces / name
    run.mkdir()
    manifest = json.loads((source / "manifest.json").read_text())
    old = manifest["run_id"]
    manifest.update(run_id=name, started_at=f"2099-12-31T00:00:{i % 60:02d}Z")
    (run / "manifest.json").write_text(json.dumps(manifest))
    events = gzip.decompress((source / "events.jsonl.gz").read_bytes())
    (run / "events.jsonl.gz").write_bytes(gzip.compress(events.replace(
        old.encode(), name.encode()), mtime=0))
    return run


def cases(runs: int, scratch: Path) -> dict[str, list[tuple[float, float, float]]]:
    adopt_orphans()
    timings: dict[str, list[tuple[float, float, float]]] = {
        "fresh clone": [], "nothing changed": [], "one new run": []}
    for i in range(runs):
        root = scratch_repo(scratch / f"round-{i}")
        cache = scratch / f"cache-{i}"
        steps = [("fresh clone", None), ("nothing changed", None),
                 ("one new run", lambda root=root, i=i: add_run(root / "data" / "traces", i)),
                 ("nothing changed", None)]
        for case, change in steps:
            if change is not None:
                change()
            timings[case].append(make_report(root, cache))
            wall, cpu, load = timings[case][-1]
            print(f"#{i + 1} {case:<16} {wall:6.1f} s {cpu:6.1f} CPU-s (load average before "
                  f"{load:.2f})", flush=True)
    return timings


def deterministic(scratch: Path) -> None:
    """Two builds with nothing kept give the same bytes, and they are the committed ones."""
    outs = []
    for name in ("a", "b"):
        root = scratch_repo(scratch / f"det-{name}")
        make_report(root, scratch / f"det-cache-{name}")
        outs.append(root / "reports")
    diff = filecmp.dircmp(outs[0], outs[1])
    print("two fresh builds: " + ("the same bytes" if not _differs(diff) else "DIFFER"))
    changed = subprocess.run(["git", "diff", "--no-index", "--stat", str(REPO / "reports"),
                              str(outs[0])], capture_output=True, text=True).stdout.strip()
    print("a fresh build gives the committed reports/" if not changed else
          f"a fresh build differs from reports/:\n{changed}")


def _differs(diff: filecmp.dircmp) -> bool:
    _, mismatch, errors = filecmp.cmpfiles(diff.left, diff.right, diff.common_files,
                                           shallow=False)
    return bool(mismatch or errors or diff.left_only or diff.right_only) or any(
        _differs(sub) for sub in diff.subdirs.values())


def adopt_orphans() -> None:
    """This process as the child subreaper (Linux): the section workers a kernel leaves
    become its children, so their CPU time is counted once they are reaped."""
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-report-") as scratch:
        timings = cases(args.runs, Path(scratch))
        for case, rows in timings.items():
            walls, cpus, loads = ([r[j] for r in rows] for j in range(3))
            print(f"{case}: median {statistics.median(walls):.1f} s (min {min(walls):.1f}, "
                  f"max {max(walls):.1f}) over {len(walls)} builds, median "
                  f"{statistics.median(cpus):.1f} CPU-s; load average before "
                  f"{min(loads):.2f}-{max(loads):.2f}; {os.cpu_count()} cores")
        deterministic(Path(scratch))


if __name__ == "__main__":
    main()
