"""Governance matrix speed: the enumerated matrix plus N random probes against the bundled
server, end to end (world, census, probes, checker). Target: <= 120 s on 2 cores for the
enumerated matrix plus 10,000 random probes (params/reference/matrix.yaml without the paper
option).

Prints wall time, the CPU seconds the harness and the server used (a figure the machine's
other load does not inflate), the load average while it ran, and the trace's size.

    .venv/bin/python benchmarks/bench_matrix.py [--random 10000] [--profile hardened]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import tempfile
import time
from collections import Counter
from pathlib import Path

from fleetprobe import load_params, run_experiment

REPO = Path(__file__).resolve().parents[1]


def cpu_seconds() -> tuple[float, float]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)  # the server, once it exited
    return me.ru_utime + me.ru_stime, children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random", type=int, default=10_000)
    parser.add_argument("--profile", default="hardened")
    parser.add_argument("--params", default=str(REPO / "params/reference/matrix.yaml"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        params = load_params(args.params, [f"traces_root={tmp}", f"random_probes={args.random}",
                                           f"target.profile={args.profile}", "paper_fleets=0",
                                           "progress=false"])
        load_before = os.getloadavg()[0]
        started, (cpu0, child0) = time.perf_counter(), cpu_seconds()
        run_dir = run_experiment("matrix", params)
        wall = time.perf_counter() - started
        cpu1, child1 = cpu_seconds()
        load_after = os.getloadavg()[0]
        manifest = json.loads((run_dir / "manifest.json").read_text())
        raw = (run_dir / "events.jsonl").read_bytes()
        verdicts = Counter(json.loads(line)["verdict"] for line in raw.splitlines()
                           if b'"phase": "verdict"' in line)
    probes = manifest["executed"].get("probe", 0)
    print(f"matrix bench ({args.profile}, enumerated + {args.random} random): "
          f"{probes} probes, complete={manifest['complete']}")
    print(f"  wall {wall:.1f} s ({probes / wall:.0f} probes/s); CPU: harness "
          f"{cpu1 - cpu0:.1f} s, server {child1 - child0:.1f} s "
          f"(= {(cpu1 - cpu0 + child1 - child0) / 2:.1f} s of wall on 2 idle cores)")
    print(f"  load average {load_before:.1f} before, {load_after:.1f} after "
          f"({os.cpu_count()} CPUs)")
    print(f"  verdicts: {dict(sorted(verdicts.items()))}")
    print(f"  events.jsonl {len(raw) / 1e6:.1f} MB, gzipped {len(gzip.compress(raw)) / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
